#!/usr/bin/env bash
# Checks that no #include runs upward (DESIGN.md's dependency rule):
#   - between top-level folders: app -> ui -> engine -> shaders; tests and
#     tools may include anything, nothing includes them;
#   - between engine layers: each layer includes only itself and the layers
#     its CMake target depends on, transitively (engine/CMakeLists.txt:
#     server -> runtime -> backend -> {kv, gpu, model} -> {gguf, tokenizer} ->
#     core, tokenizer -> jinja -> core, gpu -> {gguf, shaders}).
# The linker enforces the layers for code; this catches header-only reach.
# Prints each offending include; exit 1 when there is one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# What each engine layer may include besides itself (the transitive closure).
declare -A allowed=(
  [core]=""
  [gguf]="core"
  [jinja]="core"
  [kv]="core"
  [tokenizer]="core gguf jinja"
  [model]="core gguf jinja tokenizer"
  [gpu]="core gguf shaders"
  [backend]="core gguf jinja tokenizer model kv gpu shaders"
  [runtime]="core gguf jinja tokenizer model kv gpu shaders backend"
  [server]="core gguf jinja tokenizer model kv gpu shaders backend runtime"
)
engine_layers=" ${!allowed[*]} "

bad=0
report() {
  echo "$1: includes \"$2\" ($3)"
  bad=1
}

# The first path component of every quoted include in a file.
includes() {
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)\/.*".*/\1/p' "$1" | sort -u
}

while IFS= read -r -d '' file; do
  layer=$(echo "$file" | cut -d/ -f2)
  for target in $(includes "$file"); do
    [[ $target == "$layer" ]] && continue
    case $target in
      app | ui | tests | tools) report "$file" "$target/..." "the engine is below $target" ;;
      *)
        if [[ $engine_layers == *" $target "* || $target == shaders ]] &&
          [[ " ${allowed[$layer]} " != *" $target "* ]]; then
          report "$file" "$target/..." "engine/$layer may not depend on $target"
        fi
        ;;
    esac
  done
done < <(find engine \( -name '*.h' -o -name '*.cpp' \) -print0)

# Every source file of folder $1 that includes one of the folders in $2.
check_folder() {
  local folder=$1 above=" $2 "
  while IFS= read -r -d '' file; do
    for target in $(includes "$file"); do
      if [[ $above == *" $target "* ]]; then report "$file" "$target/..." "$folder is below $target"; fi
    done
  done < <(find "$folder" \( -name '*.h' -o -name '*.cpp' -o -name '*.glsl' -o -name '*.comp' \) -print0)
}
check_folder ui "app tests tools"
check_folder shaders "app ui engine tests tools"

if [[ $bad -eq 0 ]]; then
  echo "no include runs upward ($(find engine ui shaders \( -name '*.h' -o -name '*.cpp' -o -name '*.glsl' -o -name '*.comp' \) | wc -l) files)"
fi
exit $bad
