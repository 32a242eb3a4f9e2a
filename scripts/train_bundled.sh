#!/usr/bin/env bash
# Retrain the bundled model tiankong-mini-zh from ../shared/corpus with the exact recipe and seed.
#
#   bash scripts/train_bundled.sh [CORPUS_DIR] [OUT_DIR] [BUDGET]
#
# BUDGET is either a wall-time like 120m (the learning-rate decay then follows the clock, as in
# the shipped run) or a step count like 4000 (a step-based schedule: bit-for-bit repeatable for a
# given seed and machine). Then evaluate it and install it into the package with
# scripts/install_bundled.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/corpus}
OUT=${2:-runs/mini}
BUDGET=${3:-120m}
if [[ "$BUDGET" =~ ^[0-9]+$ ]]; then
  LIMIT=(--max-steps "$BUDGET")
else
  LIMIT=(--max-steps 100000 --max-time "$BUDGET")
fi
exec .venv/bin/tiankong train --out "$OUT" --config mini \
  --data "$CORPUS/classical.txt.xz:0.40" \
  --data "$CORPUS/modern.txt.xz:0.35" \
  --data "$CORPUS/idioms.txt.xz:0.25" \
  --heldout "$CORPUS/classical.heldout.txt.xz" --heldout "$CORPUS/modern.heldout.txt.xz" \
  --eval-lines 1000 "${LIMIT[@]}" --seed 42 --batch-size 64 --seq-len 64 --lr 1e-3 \
  --warmup-steps 300 --mask-rate 0.2 --eval-every 500 --save-every 500 \
  --shuffle-buffer 300000 --threads 2 --fp16
