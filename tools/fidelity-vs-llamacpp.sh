#!/usr/bin/env bash
# KV cache fidelity of kvscope's schemes and llama.cpp's KV types on the same
# model and text, side by side by bits per value: each engine teacher-forces
# the text with an f16 cache and with the cache under test, and the table
# gives the per-token KL(P_f16 || P_test) (mean, median, p99, p99.9) and
# top-1 agreement against that engine's own f16 run. Not run by CI.
#
#   LLAMA_CPP_DIR=/path/to/llama.cpp tools/fidelity-vs-llamacpp.sh [MODEL.gguf [TEXT]]
#
# LLAMA_CPP_DIR is a llama.cpp source tree (outside this repository) built
# with its README's CMake steps into LLAMA_CPP_DIR/build (CPU, shared
# libraries); tools/llamacpp_fidelity.cpp, llama.cpp's side, is compiled
# against it here. Defaults: the demo model and the first BYTES (1050) bytes
# of ../shared/fixtures/story-a.txt. Environment: PREFILL (16), THREADS (2),
# BYTES (0: the whole text), KVSCOPE_KV (kvscope policies), LLAMA_KV
# (llama.cpp K/V type pairs).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=${KVSCOPE_BUILD_DIR:-$root/build}/app/kvscope-cli
llama=${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to a llama.cpp tree built in LLAMA_CPP_DIR/build}
model=${1:-$root/resources/models/kvscope-demo.gguf}
text=${2:-$root/../shared/fixtures/story-a.txt}
prefill=${PREFILL:-16}
threads=${THREADS:-2}
bytes=${BYTES-1050}
# Defaults: the rows of docs/RESULTS.md's table (kvscope's best at each budget).
read -r -a kvscope_kv <<<"${KVSCOPE_KV:-auto:4.5 auto auto:6.5 auto:8.5 kv=turbo4b kv=turbo5b kv=turbo6b kv=q8_0r kv=q8_0 kv=q4_0 k=q8_0r,v=turbo6b}"
read -r -a llama_kv <<<"${LLAMA_KV:-q8_0/q8_0 q8_0/q4_0 q5_1/q5_1 q5_0/q5_0 iq4_nl/iq4_nl q4_0/q4_0}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libs=$(dirname "$(find "$llama/build" -name 'libllama.so' | head -1)")
[[ -n $libs ]] || { echo "no libllama.so under $llama/build" >&2; exit 1; }
${CXX:-g++} -std=c++17 -O2 -I"$llama/include" -I"$llama/ggml/include" \
  "$root/tools/llamacpp_fidelity.cpp" -L"$libs" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$libs" -o "$work/llamacpp_fidelity"
if [[ $bytes -gt 0 ]]; then head -c "$bytes" "$text" >"$work/text.txt"; else cp "$text" "$work/text.txt"; fi

for policy in "${kvscope_kv[@]}"; do
  "$cli" eval --json -m "$model" -f "$work/text.txt" --prefill "$prefill" --threads "$threads" \
    --kv-policy "$policy" >"$work/kvscope-$policy.json"
done
for pair in "${llama_kv[@]}"; do
  # A type llama.cpp cannot cache at this head_dim (its blocks must tile the
  # row) gets a row saying so.
  if ! "$work/llamacpp_fidelity" "$model" "$work/text.txt" "$prefill" "${pair%/*}" "${pair#*/}" \
    "$threads" >"$work/llama-${pair/\//-}.json" 2>"$work/err"; then
    printf '{"type_k": "%s", "type_v": "%s", "error": "%s"}\n' "${pair%/*}" "${pair#*/}" \
      "$(tr -d '"\n' <"$work/err")" >"$work/llama-${pair/\//-}.json"
  fi
done

python3 - "$work" "$model" <<'PY'
import glob, json, os, sys
work, model = sys.argv[1], sys.argv[2]
rows = []
for path in glob.glob(os.path.join(work, "kvscope-*.json")):
    j = json.load(open(path))
    bits = (j["bits_per_value_k"] + j["bits_per_value_v"]) / 2
    rows.append(("kvscope", j["kv_policy"], bits, j, j["steps"]))
refused = []
for path in glob.glob(os.path.join(work, "llama-*.json")):
    j = json.load(open(path))
    name = j["type_k"] if j["type_k"] == j["type_v"] else f"k={j['type_k']},v={j['type_v']}"
    if "error" in j:
        refused.append(f"llama.cpp {name}: {j['error']}")
        continue
    rows.append(("llama.cpp", name, j["bits_per_value"], j, j["steps"]))
steps = {r[4] for r in rows}
ppl = {}
for engine, _, _, j, _ in rows:
    ppl.setdefault(engine, j["ppl_f16"])
print(f"model {os.path.basename(model)}, {', '.join(map(str, sorted(steps)))} forced steps "
      "(KLD in nats against each engine's own f16 cache); f16 perplexity of the forced tokens: "
      + ", ".join(f"{e} {v:.4f}" for e, v in sorted(ppl.items())))
print("| bits/value | engine | cache | KLD mean | median | p99 | p99.9 | top-1 |")
print("|---|---|---|---|---|---|---|---|")
for engine, name, bits, j, _ in sorted(rows, key=lambda r: (r[2], r[1])):
    print(f"| {bits:.2f} | {engine} | {name} | {j['kld_mean']:.2e} | {j['kld_median']:.2e} | "
          f"{j['kld_p99']:.2e} | {j['kld_p999']:.2e} | {100 * j['top1']:.1f}% |")
for line in refused:
    print(line)
if len(steps) != 1:
    print("warning: the engines forced different numbers of steps (tokenizations differ)")
PY
