#!/usr/bin/env bash
# Prints the KV-cache fidelity table of docs/RESULTS.md: `kvscope-cli eval` of
# every listed K/V policy against a live f16 cache, on one model and text.
#   tools/fidelity-table.sh MODEL [TEXT] [POLICY ...]
# POLICY is K/V (e.g. q8_0/turbo4) or a --kv-policy text (e.g. auto:5.5); the
# default list covers every shipped scheme symmetrically, the K-safe asymmetric
# pairs and the auto policy at three budgets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cli="${KVSCOPE_CLI:-$root/build/app/kvscope-cli}"
model="$1"
text="${2:-$root/../shared/fixtures/story-a.txt}"
shift $(($# < 2 ? $# : 2))
policies=("$@")
if [ ${#policies[@]} -eq 0 ]; then
  policies=(f16/f16 q8_0/q8_0 fp8/fp8 affine4/affine4 q4_0/q4_0 turbo4/turbo4 turbo4g/turbo4g
            turbo4b/turbo4b turbo3/turbo3 turbo3g/turbo3g turbo3b/turbo3b turbo2/turbo2
            turbo2g/turbo2g turbo2b/turbo2b q8_0/turbo4 q8_0/turbo4b q8_0/turbo3 q8_0/turbo3b
            q8_0/turbo2 fp8/turbo3 f16/turbo3 turbo4/f16 turbo4b/f16 q4_0/f16 f16/turbo4b f16/q4_0
            auto auto:5 auto:6)
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for p in "${policies[@]}"; do
  out="$tmp/$(echo "$p" | tr /: __).json"
  if [[ $p == */* ]]; then
    "$cli" eval -m "$model" -f "$text" --ctk "${p%/*}" --ctv "${p#*/}" --json > "$out"
  else
    "$cli" eval -m "$model" -f "$text" --kv-policy "$p" --json > "$out"
  fi
done
python3 - "$tmp" "${policies[@]}" <<'PY'
import json, sys
tmp, policies = sys.argv[1], sys.argv[2:]
print("| K | V | bits/value K | bits/value V | KLD mean | KLD p99 | top-1 | ppl (f16 → this) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for p in policies:
    j = json.load(open(f"{tmp}/{p.replace('/', '_').replace(':', '_')}.json"))
    k, v = p.split("/") if "/" in p else (p, j["kv_policy_used"])
    print(f"| {k} | {v} | {j['bits_per_value_k']:.2f} | {j['bits_per_value_v']:.2f} | "
          f"{j['kld_mean']:.2e} | {j['kld_p99']:.2e} | {100 * j['top1']:.1f}% | "
          f"{j['ppl_f16']:.3f} → {j['ppl']:.3f} |")
PY
