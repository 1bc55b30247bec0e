#!/usr/bin/env bash
# kvscope against llama.cpp on the same GGUF files, same threads, same run:
# each measurement runs llama-bench and then kvscope-cli bench back to back,
# and the table gives both rates and their ratio. Not run by CI.
#
#   LLAMA_BENCH=/path/to/llama-bench tools/bench-vs-llamacpp.sh [MODEL.gguf ...]
#
# llama-bench is not built here: build llama.cpp from its own source tree
# (outside this repository) with its README's CMake steps (CPU backend,
# Release) and point LLAMA_BENCH at the binary. Default models: the 41.5M
# model of docs/RESULTS.md and a random-weight model of Qwen2.5-0.5B's shape,
# both Q8_0, made by kvscope-cli make-model into KVSCOPE_RESULTS_MODELS.
# Environment: THREADS (2), DEPTHS ("0 4096 16384", decode depths; "" for
# none), PROMPT
# (4096, prefill length), GEN (32, decoded tokens), KV (kvscope caches to
# bench, default "f16 k=q8_0,v=turbo4 q8_0 q4_0 turbo4 turbo3"), REPS (2,
# llama-bench repetitions). Run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=${KVSCOPE_BUILD_DIR:-$root/build}/app/kvscope-cli
llama=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary built from llama.cpp}
models_dir=${KVSCOPE_RESULTS_MODELS:-/tmp/kvscope-results-models}
threads=${THREADS:-2}
depths=${DEPTHS-0 4096 16384}
prompt=${PROMPT:-4096}
gen=${GEN:-32}
reps=${REPS:-2}
read -r -a kvs <<<"${KV:-f16 k=q8_0,v=turbo4 q8_0 q4_0 turbo4 turbo3}"

models=("$@")
if [[ ${#models[@]} -eq 0 ]]; then
  mkdir -p "$models_dir"
  m40=$models_dir/synth-40m-q8_0.gguf
  m05=$models_dir/synth-qwen2-0.5b-q8_0.gguf
  [[ -f $m40 ]] || "$cli" make-model -o "$m40" --layers 8 --dim 512 --ffn 1536 --heads 8 \
    --kv-heads 4 --head-dim 64 --vocab 16000 --type Q8_0 >/dev/null
  [[ -f $m05 ]] || "$cli" make-model -o "$m05" --arch qwen2 --layers 24 --dim 896 --ffn 4864 \
    --heads 14 --kv-heads 2 --head-dim 64 --vocab 151936 --ctx 32768 --type Q8_0 >/dev/null
  models=("$m40" "$m05")
fi

kv_args=()
for kv in "${kvs[@]}"; do kv_args+=(--kv "$kv"); done

echo "# kvscope $(git -C "$root" rev-parse --short HEAD) vs $("$llama" --version 2>&1 | grep -m1 -o 'version: .*' || echo 'llama.cpp (version unknown)')"
echo "# $(date -u +%F) · $(nproc) cores · $threads threads · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

# One measurement: $1 = prefill tokens, $2 = decoded tokens, $3 = depth.
measure() {
  local p=$1 n=$2 d=$3 model=$4
  "$llama" -m "$model" -p "$p" -n "$n" -d "$d" -t "$threads" -r "$reps" -o json 2>/dev/null >"$tmp/llama.json"
  "$cli" bench -m "$model" -p "$p" -n "$n" -d "$d" --threads "$threads" --backend cpu \
    "${kv_args[@]}" --json 2>/dev/null >"$tmp/kvscope.json"
  python3 - "$tmp/llama.json" "$tmp/kvscope.json" "$p" "$n" "$d" <<'EOF'
import json, sys
llama = json.load(open(sys.argv[1]))[0]["avg_ts"]
rows = json.load(open(sys.argv[2]))
p, n, d = map(int, sys.argv[3:6])
what = f"decode at depth {d}" if n else f"prefill {p} tokens" + (f" at depth {d}" if d else "")
for r in rows:
    mine = r["decode_tps"] if n else r["prefill_tps"]
    print(f"| {what} | {r['kv']} | {mine:.1f} | {llama:.1f} | {mine / llama:.2f}x |")
EOF
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for model in "${models[@]}"; do
  echo
  echo "## $(basename "$model")  (llama.cpp: f16 cache)"
  echo "| measurement | kvscope KV cache | kvscope t/s | llama.cpp t/s | ratio |"
  echo "|---|---|---|---|---|"
  measure "$prompt" 0 0 "$model"
  for d in $depths; do measure 0 "$gen" "$d" "$model"; done
done
