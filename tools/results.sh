#!/usr/bin/env bash
# Re-measures every figure of docs/RESULTS.md with one build and prints them,
# section by section, with the commit they come from. Run it on a quiet machine
# (no build, no other benchmark): the speed sections are side-by-side ratios,
# but both cores are shared with everything else.
#   tools/results.sh [SECTION ...] > /tmp/results.txt
# Sections: startup parity fidelity kvspeed throughput kernels soak restore (default: all).
# KVSCOPE_BUILD_DIR: the build (default build/). Takes ~25 minutes in all.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KVSCOPE_BUILD_DIR:-$root/build}
cli=$build/app/kvscope-cli
shared=${KVSCOPE_SHARED:-$root/../shared}
models=${KVSCOPE_RESULTS_MODELS:-/tmp/kvscope-results-models}
sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(startup parity fidelity kvspeed throughput kernels soak restore)

mkdir -p "$models"
m40=$models/synth-40m-q8_0.gguf
[[ -f $m40 ]] || "$cli" make-model -o "$m40" --layers 8 --dim 512 --ffn 1536 --heads 8 \
  --kv-heads 4 --head-dim 64 --vocab 16000 --type Q8_0 >/dev/null

echo "# kvscope results at commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (+ uncommitted changes)')"
echo "# $(date -u +%F) · $(nproc) cores · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

# Start-up: 7 pairs of cold (empty cache folder) and warm runs of devices --check.
startup() {
  echo; echo "## startup: devices --check, 7 interleaved cold/warm pairs (medians)"
  local dir t0 t1 kind
  dir=$(mktemp -d)
  for _ in 1 2 3 4 5 6 7; do
    for kind in cold warm; do
      [[ $kind == cold ]] && rm -rf "$dir" && mkdir -p "$dir"
      t0=$(date +%s%N)
      XDG_CACHE_HOME=$dir "$cli" devices --check --json >"$dir/out.json"
      t1=$(date +%s%N)
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], (int(sys.argv[4])-int(sys.argv[3]))/1e6, j['first_step_ms'], j['step_ms'], j['max_abs_error'], j['pipelines'])" \
        "$dir/out.json" "$kind" "$t0" "$t1"
    done
  done | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin]
for kind in ("cold", "warm"):
    r = [list(map(float, x[1:])) for x in rows if x[0] == kind]
    print(f"{kind}: wall {st.median(x[0] for x in r):.0f} ms, first step {st.median(x[1] for x in r):.1f} ms, "
          f"second step {st.median(x[2] for x in r):.2f} ms, max |error| {max(x[3] for x in r):.1e}, pipelines {int(r[0][4])}")'
  rm -rf "$dir"
}

# Parity: the tests that print their measured distances.
parity() {
  echo; echo "## parity (test output)"
  "$build/tests/test_backend" --gtest_filter='LlamaCppParity.*:GoldenLogits*:VulkanParity.*:*SyntheticParity*' |
    grep -v -E '^\[|^Running main|^Note:|^$'
  "$build/tests/test_gpu" --gtest_filter='VulkanKvParity.*' | grep -v -E '^\[|^Running main|^Note:|^$'
}

fidelity() {
  echo; echo "## fidelity"
  head -c 1050 "$shared/fixtures/story-a.txt" >"$models/story-a-1050.txt"
  echo "### kvscope-demo (story-a.txt, first 1050 bytes)"
  "$root/tools/fidelity-table.sh" "$root/resources/models/kvscope-demo.gguf" "$models/story-a-1050.txt"
  echo "### stories260K"
  "$root/tools/fidelity-table.sh" "$shared/models/stories260K.gguf"
  echo "### tinystories-656k"
  "$root/tools/fidelity-table.sh" "$shared/models/tinystories-656k"
}

kvspeed() {
  echo; echo "## KV policies side by side (41.5M Q8_0, 2 threads)"
  "$cli" bench -m "$m40" -p 64 -n 32 --ctx 0,1024 --threads 2 --backend cpu,vulkan \
    --kv f16 --kv q8_0 --kv k=q8_0,v=turbo4 --kv turbo3
  echo; echo "## decode attention micro-benchmark (lavapipe)"
  "$cli" bench-attention --contexts 512,2048,8192 --kv f16,q8_0,turbo4,turbo3
}

throughput() {
  echo; echo "## throughput (f16 cache, 2 threads)"
  "$cli" bench -m "$shared/models/stories260K.gguf" -p 128 -n 128 --ctx 0,512 --threads 2 --backend cpu,vulkan
  "$cli" bench -m "$m40" -p 128 -n 64 --ctx 0,512 --threads 2 --backend cpu,vulkan
  echo "### one thread"
  "$cli" bench -m "$m40" -p 128 -n 64 --ctx 0 --threads 1 --backend cpu
}

kernels() {
  echo; echo "## where a Vulkan decode step goes (41.5M Q8_0)"
  "$cli" bench -m "$m40" -p 16 -n 16 --ctx 0,512 --backend vulkan --kernels
}

# Soak: memory at turns 10, 50 and 100 of the soak test (tests/runtime/soak_test.cpp).
soak() {
  echo; echo "## soak (resident and device memory, 100 turns)"
  "$build/tests/test_runtime" --gtest_filter='Soak.*' | grep -E '^soak |OK|FAILED'
}

# Reopening a long conversation: saved KV cache restored vs history re-prefilled.
restore() {
  echo; echo "## restore (time to first token reopening a 4096-token conversation)"
  local m8k=$models/synth-40m-q8_0-ctx8k.gguf
  [[ -f $m8k ]] || "$cli" make-model -o "$m8k" --layers 8 --dim 512 --ffn 1536 --heads 8 \
    --kv-heads 4 --head-dim 64 --vocab 16000 --type Q8_0 --ctx 8192 >/dev/null
  local kv
  for kv in k=q8_0,v=turbo4 kv=f16; do
    "$cli" bench-restore -m "$m8k" --tokens 4096 --kv "$kv" --backend cpu --threads 2 --runs 3
  done
  "$cli" bench-restore -m "$m8k" --tokens 4096 --kv k=q8_0,v=turbo4 --backend vulkan --runs 1
}

for s in "${sections[@]}"; do
  case $s in
    startup | parity | fidelity | kvspeed | throughput | kernels | soak | restore) "$s" ;;
    *) echo "error: unknown section '$s'" >&2; exit 2 ;;
  esac
done
