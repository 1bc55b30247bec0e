#!/usr/bin/env bash
# Mean KV-cache KLD of each policy over several texts, for differences too
# small to read from one text: the first 1050 bytes of story-a.txt plus six
# texts the model writes itself (`generate -p "Once upon a time" -n 460
# --temp 1 --seed S`, S = 1..6), each run through `kvscope-cli eval`.
#   tools/fidelity-texts.sh MODEL POLICY ...
# POLICY is K/V (e.g. q4_0/q4_0) or a --kv-policy text (e.g. auto:5.5).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cli="${KVSCOPE_CLI:-$root/build/app/kvscope-cli}"
model="$1"
shift
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
head -c 1050 "$root/../shared/fixtures/story-a.txt" > "$tmp/text0.txt"
for s in 1 2 3 4 5 6; do
  "$cli" generate -m "$model" -p "Once upon a time" -n 460 --temp 1.0 --seed "$s" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["text"], end="")' > "$tmp/text$s.txt"
done
echo "| policy | bits/value (K+V)/2 | KLD story-a | KLD mean of 7 texts | min | max |"
echo "|---|---:|---:|---:|---:|---:|"
for p in "$@"; do
  for s in 0 1 2 3 4 5 6; do
    if [[ $p == */* ]]; then
      "$cli" eval -m "$model" -f "$tmp/text$s.txt" --ctk "${p%/*}" --ctv "${p#*/}" --json
    else
      "$cli" eval -m "$model" -f "$tmp/text$s.txt" --kv-policy "$p" --json
    fi | python3 -c 'import json, sys; j = json.load(sys.stdin); print(j["kld_mean"], (j["bits_per_value_k"] + j["bits_per_value_v"]) / 2)'
  done | python3 -c '
import sys
rows = [list(map(float, line.split())) for line in sys.stdin]
kld = [r[0] for r in rows]
print(f"| {sys.argv[1]} | {sum(r[1] for r in rows) / len(rows):.2f} | {kld[0]:.2e} | "
      f"{sum(kld) / len(kld):.2e} | {min(kld):.2e} | {max(kld):.2e} |")' "$p"
done
