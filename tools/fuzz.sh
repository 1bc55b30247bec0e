#!/usr/bin/env bash
# Long fuzz runs of kvscope's file readers, chat templates and server request
# parser under AddressSanitizer and UndefinedBehaviorSanitizer (tests/fuzz/):
#
#   tools/fuzz.sh [INPUTS] [TARGET ...]
#
# INPUTS per target (default 1000000); targets gguf, hf-config, safetensors,
# kv-cache, conversation, jinja and openai-request by default. Builds kvscope-fuzz in build-asan/ (configured with
# -DKVSCOPE_SANITIZE=ON) and prints one line per target; a crash, a hang or a
# sanitizer report stops it with the failing input saved in build-asan/fuzz/.
# KVSCOPE_FUZZ_SEED picks another sequence of mutations (default 1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-asan
inputs=${1:-1000000}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(gguf hf-config safetensors kv-cache conversation jinja openai-request)

cmake -S "$root" -B "$build" -G Ninja -DKVSCOPE_SANITIZE=ON >/dev/null
cmake --build "$build" -j2 --target kvscope-fuzz
mkdir -p "$build/fuzz"
echo "# kvscope-fuzz at commit $(git -C "$root" rev-parse --short HEAD), $(c++ --version | head -1), -fsanitize=address,undefined"
for t in "${targets[@]}"; do
  "$build/tests/fuzz/kvscope-fuzz" "$t" --inputs "$inputs" --seed "${KVSCOPE_FUZZ_SEED:-1}" \
    --crash-dir "$build/fuzz"
done
