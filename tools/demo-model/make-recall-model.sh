#!/usr/bin/env bash
# The recipe of the long-context test model (issue 30): a 3.4M-parameter Llama
# trained to 4096 tokens that can copy a span from anywhere in its context, for
# the probe, the indexer tables and the 4K fidelity tables. It samples a corpus
# from stories260K with kvscope-cli (as the demo model's recipe does) and trains
# with train.py's copy tasks and auxiliary attention losses (heads 0-1 of layer
# 2 pointed at the copy, head 0 of layer 0 at the previous token; layer 2
# because the indexer keeps layers 0-1 dense), then converts to GGUF.
#
# resources/models/kvscope-recall-4k.md is its model card. Phases 1-10 below
# ran on 2026-11-29 over three sessions (their results are in the comments
# above each; phase 5 is prose only, a dead end). What phases 1-2 showed:
# - After phase 1 the heads attend to the right row (0.8 of their weight), yet
#   the model predicts the copied token at the uniform 5.5 nats: attending to
#   a copy is learnt quickly, carrying the token read there is not.
# - Random halves repeated (--repeat-halves alone) make the copy appear within
#   50 steps, but every copy is the same distance back and the heads learn the
#   offset: the miniature probe copied 0.61 at that distance and 0 elsewhere.
# - Spans at any distance in random normal tokens left the loss at 5.5 for
#   240 steps (140 with a head on the token two back, --prev2, then stopped):
#   a token recurs by chance there, so it alone does not point at the copy.
# - In random byte tokens (--random-copies now: no normal token recurs but in a
#   copy) the heads attend sharply within 100 steps and the copy comes slowly:
#   the miniature probe 0.03 / 0.04 / 0.06 at depths 0.1 / 0.5 / 0.9 after
#   200 steps, 0.12 / 0.19 / 0.23 after 500, 0.23 / 0.32 / 0.50 after 700,
#   0.49 / 0.57 / 0.77 after 950 and 0.36 / 0.47 / 0.73 after 1000 (noisy: 4
#   spans a depth), still rising; the held-out story loss meanwhile ruined
#   (8.9 nats after 200 steps, 11.9 after 1000), which phase 3 must restore.
# - Random copies alone before any story (a phase 0) left a model that then
#   did not learn the language (held-out loss 5.0 after 120 steps, 2.7 from
#   scratch). From scratch with half the windows byte-background copies and
#   half stories (--prev2): no copy by step 500 (held-out loss 3.74). From
#   scratch on byte-background copies alone, the heads did not even find the
#   copy in 240 steps (attention loss 3.4, against ~0.1 within 100 steps from
#   phase 1's model). The only quick phase changes came from windows made
#   wholly of copies, on heads that already attended to them.
# The probe itself needs more than one matching token: its filler cycles a
# 243-token paragraph holding 86 of the 253 normal tokens, so a third of a
# span's tokens occur 16 times or more in 4K besides the copy, and only the
# token before tells the copy apart (a one-token copier tops out near 0.66).
#
# Needs: a built kvscope-cli (KVSCOPE_CLI, default build/app/kvscope-cli),
# Debian's python3-torch and libopenblas0-pthread, the shared fixtures
# (KVSCOPE_SHARED, default ../shared). Work files go to $1 (default build/recall-model).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/recipe_paths.sh"
work="${1:-$root/build/recall-model}"
mkdir -p "$work"

[ -s "$work/corpus.jsonl" ] ||
  "$python" "$here/make_corpus.py" --cli "$cli" --teacher "$teacher" --out "$work/corpus.jsonl" \
    --calls 2500 --tokens 490 --chat-fraction 0.2 --seed 11
train=("$python" "$here/train.py" --corpus "$work/corpus.jsonl" --dim 256 --layers 4 --heads 4
       --kv-heads 2 --hidden 768 --induction-aux 1 --induction-layer 2 --induction-heads 2
       --prev-aux 0.3)
# Phase 1: the stories at 512 tokens, with windows that hold copies: random
# halves repeated, windows tiled from a piece of themselves, planted spans.
# The auxiliary losses point the heads at the right rows, but the model does
# not yet carry the token it reads (its copies stay at the uniform 5.5 nats).
nice -n 10 "${train[@]}" --out "$work/phase1" --context 512 --batch 8 --steps 700 --lr 2e-3 \
  --warmup 20 --repeat-halves 0.4 --tiled 0.3 --planted-copies 0.6 \
  --eval-every 100 --eval-windows 32 --copy-eval 4
# Phase 2: spans planted twice at any distance in random byte tokens, alone, at
# a constant learning rate (so --resume continues the same schedule), until the
# model carries the token it reads.
phase2=("${train[@]}" --out "$work/phase2" --init "$work/phase1/training.pt" --context 512
        --batch 8 --warmup 10 --lr 1e-3 --min-lr 1e-3 --random-copies 1 --eval-every 50
        --eval-windows 8 --copy-eval 4)
nice -n 10 "${phase2[@]}" --steps 200
nice -n 10 "${phase2[@]}" --steps 400 --resume
nice -n 10 "${phase2[@]}" --steps 1000 --resume  # run in two resumes, to 500 and 1000
# Phase 3: the stories back, with copies that a single matching token does
# not find: windows tiled from a piece of a story (every token recurs with
# several successors) with spans planted twice in them, a quarter still
# byte-background copies, and a head of layer 0 on the token two back
# (--prev2). Run 2026-11-29: the held-out story loss came back from 11.9 to
# 2.77 and the miniature probe rose to 0.74 / 0.69 / 0.62 (the real probe at
# 512 tokens 0.68 / 0.68 / 0.52: past what one matching token can do on its
# filler), but at 4096 tokens it copies nothing (0.0 at every depth): RoPE
# positions past 512 were never seen.
nice -n 10 "${train[@]}" --prev2 --out "$work/phase3" --init "$work/phase2/training.pt" \
  --context 512 --batch 8 --steps 600 --lr 1e-3 --min-lr 3e-4 --warmup 10 --random-copies 0.25 \
  --tiled 0.5 --planted-copies 0.8 --eval-every 50 --eval-windows 16 --copy-eval 4
# Phase 4: more of the same, fewer byte-background windows. Held-out loss
# 2.37, miniature probe 0.75 / 0.74 / 0.74; the real probe at 512 tokens
# 0.61 / 0.55 / 0.58 (seed 1): it still matches on one token, not on two.
nice -n 10 "${train[@]}" --prev2 --out "$work/phase4" --init "$work/phase3/training.pt" \
  --context 512 --batch 8 --steps 400 --lr 6e-4 --min-lr 3e-4 --warmup 10 --random-copies 0.15 \
  --tiled 0.6 --planted-copies 0.9 --eval-every 100 --eval-windows 16 --copy-eval 4
# Phase 5, a dead end not run here: the phase-4 mix at 4096 tokens with plain
# RoPE (--context 4096 --batch 1 --steps 300 --lr 5e-4 --min-lr 2e-4 --spans 8,
# 10.7 s a step on 2 cores with the auxiliary losses). The phase-4 model copied
# nothing at 4K, not even at depth 0.9 where the copy is ~400 rows back, inside
# the distances it was trained on: its heads are lost at absolute positions it
# never saw. After 50 / 100 / 150 steps held-out loss 3.32 / 2.88 / 2.65 and
# copies (miniature probe at 4K) 0.00 / 0.02 / 0.08 at best; stopped at 160:
# it learns the language at 4K far faster than the copy. YaRN does better with
# no 4K training at all: the phase-4 model's config.json given
# "max_position_embeddings": 4096 and "rope_scaling": {"type": "yarn",
# "factor": 8.0, "original_max_position_embeddings": 512}, converted, copies
# 0.29 / 0.48 / 0.48 at depths 0.1 / 0.5 / 0.9 at 4096 (real probe, seed 1),
# near what it copies at 512. So the 4K phase, once the copy at 512 is good
# enough, is to run with train.py --yarn 8 (it matches the engine's YaRN to
# the f16 cache's rounding).
# Phase 6 (back at 512, from phase 4): spans drawn from the window's own
# tokens (--ambiguous-spans 0.7), so a matching token recurs with other
# successors and only the token before it finds the copy; tiled windows 0.8,
# every window planted. 600 steps: held-out loss 2.14, miniature probe
# 0.81 / 0.79 / 0.79, and the real probe at 512 (depths 0.1 / 0.5 / 0.9,
# seeds 1-3) 0.84 / 0.77 / 0.81, 0.81 / 0.84 / 0.81, 0.65 / 0.65 / 0.65: past
# the one-token ceiling (~0.66), a two-token copy. With YaRN 8 and no 4K
# training it copies 0.58 / 0.61 / 0.61 at 4096 (seed 1; phase 4: 0.29 /
# 0.48 / 0.48).
# Phases 6-10 share this mix (phase 10 at 4096 tokens, the rest at 512).
mix=("${train[@]}" --prev2 --random-copies 0.1 --tiled 0.8 --planted-copies 1.0 --copy-eval 4)
at512=(--context 512 --batch 8 --warmup 10 --eval-every 100 --eval-windows 16)
nice -n 10 "${mix[@]}" "${at512[@]}" --out "$work/phase6" --init "$work/phase4/training.pt" \
  --steps 600 --lr 6e-4 --min-lr 3e-4 --ambiguous-spans 0.7
# Phase 7: more of it, 90% of the spans ambiguous, 600 steps at a constant
# 4e-4: held-out loss 1.99, miniature probe 0.82 / 0.82 / 0.82, real probe at
# 512 (seeds 1-3) 0.90 / 0.77 / 0.81, 0.84 / 0.81 / 0.81, 0.84 / 0.81 / 0.81;
# with YaRN 8 and no 4K training 0.61 / 0.74 / 0.65 at 4096 (seed 1).
nice -n 10 "${mix[@]}" "${at512[@]}" --out "$work/phase7" --init "$work/phase6/training.pt" \
  --steps 600 --lr 4e-4 --min-lr 4e-4 --ambiguous-spans 0.9
# Phase 8: 500 more steps of phase 7's mix: held-out loss 1.87, miniature
# probe 0.88 / 0.86 / 0.86, real probe at 512 (seeds 1-3) 0.84 / 0.84 / 0.77,
# 0.84 / 0.84 / 0.84, 0.94 / 0.84 / 0.84; with YaRN 8 and no 4K training
# 0.77 / 0.74 / 0.71 at 4096 (seed 1). Still rising.
nice -n 10 "${mix[@]}" "${at512[@]}" --out "$work/phase8" --init "$work/phase7/training.pt" \
  --steps 500 --lr 4e-4 --min-lr 4e-4 --ambiguous-spans 0.9
# Phase 9: 600 more steps of the mix, the learning rate falling from 4e-4 to
# 1e-4: held-out loss 1.73, miniature probe 0.94 / 0.94 / 0.94, real probe at
# 512 (seeds 1-3) 0.94 / 0.94 / 0.90, 0.90 / 0.90 / 0.90, 0.97 / 0.94 / 0.94;
# with YaRN 8 and no 4K training 0.84 / 0.84 / 0.81, 0.81 / 0.87 / 0.87,
# 0.84 / 0.90 / 0.94 at 4096.
nice -n 10 "${mix[@]}" "${at512[@]}" --out "$work/phase9" --init "$work/phase8/training.pt" \
  --steps 600 --lr 4e-4 --min-lr 1e-4 --ambiguous-spans 0.9
# Phase 10: the same mix at 4096 tokens with the engine's YaRN (x8 from 512),
# batch 1, 80 steps, 16.7 s a step: held-out loss 1.83 (4096-token windows);
# real probe at 4096 (depths 0.1 / 0.3 / 0.5 / 0.7 / 0.9) seed 1 0.90 / 0.90
# / 0.94 / 0.94 / 0.94, seed 2 0.81 / 0.90 / 0.90 / 0.87 / 0.87, seed 3
# 0.81 / 0.87 / 0.84 / 0.84 / 0.87 (after 40 steps much the same).
nice -n 10 "${mix[@]}" --out "$work/phase10" --init "$work/phase9/training.pt" \
  --context 4096 --yarn 8 --batch 1 --steps 80 --lr 2e-4 --min-lr 1e-4 --warmup 5 \
  --ambiguous-spans 0.9 --spans 8 --eval-every 40 --eval-windows 4
"$cli" convert "$work/phase10" -o "$root/resources/models/kvscope-recall-4k.gguf" --type F16 \
  --tokenizer "$teacher" --name kvscope-recall-4k
# Not kept (2026-11-29, a later session): 60 more steps of phase 10's mix at
# 4096 from phase 10's weights, lr 1.5e-4 constant, warm-up 1 (about 45 s a
# step beside builds): held-out loss 1.83, real probe at 4096 over seeds 1-3
# 0.849 / 0.860 / 0.849 / 0.828 / 0.860 (mean 0.849, phase 10 0.88). Then
# 200 steps from phase 10's weights, lr 1e-4 falling to 2e-5, warm-up 5
# (14 s a step on the idle machine): held-out loss 1.83, probe 0.839 / 0.871
# / 0.903 / 0.882 / 0.892 (mean 0.877). Batch-1 runs at 4096 move the probe
# by a few points either way and do not lift it past phase 10's; 0.9 there
# needs another recipe (larger batches at 4K, or a longer 4K phase from an
# earlier phase) than a session's spare cores give.
