#!/usr/bin/env bash
# Retrain the bundled model tiankong-mini-zh with the shipped recipe and seed.
#
#   bash scripts/train_bundled.sh CORPUS_DIR [OUT_DIR] [BUDGET]
#
# CORPUS_DIR holds classical.txt.xz, modern.txt.xz, idioms.txt.xz and the two *.heldout.txt.xz
# files: one passage a line (docs/TRAINING.md describes them and where they come from).
# The learning rate warms up for 300 steps and then decays linearly to zero over the wall-time
# BUDGET (90m as shipped), so the LR at each step depends on the machine's speed: a rerun
# matches the recipe and seed, not the bits. The shipped run used 2 CPU threads with bfloat16
# autocast (a CPU with AVX512-BF16; use --precision fp32 elsewhere). Then install and evaluate
# it with
#   bash scripts/install_bundled.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:?usage: train_bundled.sh CORPUS_DIR [OUT_DIR] [BUDGET] (docs/TRAINING.md: the corpus)}
OUT=${2:-runs/mini}
BUDGET=${3:-90m}
exec .venv/bin/tiankong train --out "$OUT" --config mini --position-init sinusoidal \
  --data "$CORPUS/classical.txt.xz:0.40" --data "$CORPUS/modern.txt.xz:0.35" \
  --data "$CORPUS/idioms.txt.xz:0.25" \
  --heldout "$CORPUS/classical.heldout.txt.xz" --heldout "$CORPUS/modern.heldout.txt.xz" \
  --eval-lines 1000 --max-steps 1000000 --max-time "$BUDGET" --seed 42 \
  --batch-size 64 --seq-len 64 --lr 1e-3 --warmup-steps 300 --mask-rate 0.15 \
  --eval-every 500 --save-every 500 --shuffle-buffer 300000 --threads 2 --precision bf16 --fp16
