#!/usr/bin/env bash
# Rebuilds resources/models/kvscope-demo.gguf from scratch: samples the corpus
# from stories260K with kvscope-cli, trains (PyTorch on the CPU, ~1 h on 2
# cores), converts to GGUF. See resources/models/README.md.
# Needs: a built kvscope-cli (KVSCOPE_CLI, default build/app/kvscope-cli),
# Debian's python3-torch and libopenblas0-pthread, the shared fixtures
# (KVSCOPE_SHARED, default ../shared). Work files go to $1 (default build/demo-model).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/recipe_paths.sh"
work="${1:-$root/build/demo-model}"
mkdir -p "$work"

"$python" "$here/make_corpus.py" --cli "$cli" --teacher "$teacher" --out "$work/corpus.jsonl" \
  --calls 1471 --tokens 490 --seed 7
train=("$python" "$here/train.py" --corpus "$work/corpus.jsonl" --out "$work/hf" --layers 4
       --batch 4 --warmup 20 --eval-every 40 --eval-windows 32)
# Trained as a 360-step cosine run continued to 600, 900 and 1800 steps (warm
# restarts of the cosine schedule), because the machine it was trained on was busy.
nice -n 10 "${train[@]}" --steps 360
nice -n 10 "${train[@]}" --steps 600 --resume
nice -n 10 "${train[@]}" --steps 900 --resume
nice -n 10 "${train[@]}" --steps 1800 --resume
"$cli" convert "$work/hf" -o "$root/resources/models/kvscope-demo.gguf" --type F16 \
  --tokenizer "$teacher" --chat-template "$here/chat_template.jinja" --name kvscope-demo
