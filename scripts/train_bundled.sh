#!/usr/bin/env bash
# Retrain the bundled model tiankong-mini-zh from ../shared/corpus with the shipped recipe and seed.
#
#   bash scripts/train_bundled.sh [CORPUS_DIR] [OUT_DIR]
#
# The shipped weights are step 1,000 of a run whose learning rate was scheduled to decay
# linearly over 120 minutes of wall time; --stop-after-steps ends it there without changing the
# schedule. Because that decay follows the clock, the LR at each step depends on the machine's
# speed: a rerun matches the recipe and seed, not the bits. Then install and evaluate it with
#   bash scripts/install_bundled.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/corpus}
OUT=${2:-runs/mini}
exec .venv/bin/tiankong train --out "$OUT" --config mini \
  --data "$CORPUS/classical.txt.xz:0.40" --data "$CORPUS/modern.txt.xz:0.35" \
  --data "$CORPUS/idioms.txt.xz:0.25" \
  --heldout "$CORPUS/classical.heldout.txt.xz" --heldout "$CORPUS/modern.heldout.txt.xz" \
  --eval-lines 1000 --max-steps 100000 --max-time 120m --stop-after-steps 1000 --seed 42 \
  --batch-size 64 --seq-len 64 --lr 1e-3 --warmup-steps 300 --mask-rate 0.2 \
  --eval-every 500 --save-every 500 --shuffle-buffer 300000 --threads 2 --fp16
