#!/usr/bin/env bash
# Retrain the bundled model tiankong-mini-zh from ../shared/corpus with the exact recipe and seeds.
#
#   bash scripts/train_bundled.sh [CORPUS_DIR] [OUT_DIR]
#
# Two phases, as shipped:
#   1. general pretraining from scratch on the whole mix, 1,000 steps of 64 x 64 tokens;
#   2. continued pretraining from phase 1 on an idiom-heavy mix, 64 x 32 tokens, for a
#      wall-time budget (the learning-rate decay follows the clock). Set PHASE2_BUDGET to a step
#      count (e.g. 3000) for a step-based schedule that is bit-for-bit repeatable.
# Then evaluate and install with scripts/install_bundled.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/corpus}
OUT=${2:-runs/mini}
PHASE2_BUDGET=${PHASE2_BUDGET:-65m}
TRAIN=(.venv/bin/tiankong train --heldout "$CORPUS/classical.heldout.txt.xz"
  --heldout "$CORPUS/modern.heldout.txt.xz" --eval-lines 1000 --mask-rate 0.2 --threads 2
  --shuffle-buffer 300000)

"${TRAIN[@]}" --out "$OUT-phase1" --config mini \
  --data "$CORPUS/classical.txt.xz:0.40" --data "$CORPUS/modern.txt.xz:0.35" \
  --data "$CORPUS/idioms.txt.xz:0.25" \
  --max-steps 1000 --seed 42 --batch-size 64 --seq-len 64 --lr 1e-3 --warmup-steps 300 \
  --eval-every 500 --save-every 500

if [[ "$PHASE2_BUDGET" =~ ^[0-9]+$ ]]; then
  LIMIT=(--max-steps "$PHASE2_BUDGET")
else
  LIMIT=(--max-steps 100000 --max-time "$PHASE2_BUDGET")
fi
"${TRAIN[@]}" --out "$OUT" --init "$OUT-phase1/checkpoint" \
  --data "$CORPUS/classical.txt.xz:0.05" --data "$CORPUS/modern.txt.xz:0.08" \
  --data "$CORPUS/idioms.txt.xz:0.87" \
  "${LIMIT[@]}" --seed 43 --batch-size 64 --seq-len 32 --lr 1e-3 --warmup-steps 100 \
  --eval-every 300 --save-every 300 --fp16
