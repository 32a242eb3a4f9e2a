#!/usr/bin/env bash
# The masking and mix ablation in docs/TRAINING.md: three 300-step continuations of the bundled
# model, scored on the same fixed character masks, plus the bundled model's own score.
#
#   bash scripts/ablate_masking.sh CORPUS_DIR [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
C=${1:?usage: ablate_masking.sh CORPUS_DIR [OUT_DIR]}
OUT=${2:-runs/ablate}
held=(--heldout "$C/classical.heldout.txt.xz" --heldout "$C/modern.heldout.txt.xz"
  --heldout "$C/wiki_dialogue.heldout.txt.xz" --eval-lines 1000)
common=(--init tiankong-mini-zh --batch-size 64 --seq-len 64 --threads 2 --precision bf16
  --seed 42 --shuffle-buffer 100000 "${held[@]}")
old=(--data "$C/classical.txt.xz:0.40" --data "$C/modern.txt.xz:0.35" --data "$C/idioms.txt.xz:0.25")
new=(--data "$C/classical.txt.xz:0.30" --data "$C/modern.txt.xz:0.25"
  --data "$C/wiki_dialogue.txt.xz:0.30" --data "$C/idioms.txt.xz:0.15")
run() { .venv/bin/tiankong train "${common[@]}" --max-steps 300 --lr 3e-4 --warmup-steps 30 \
  --eval-every 100 --save-every 100 "$@"; }
.venv/bin/tiankong train "${common[@]}" --out "$OUT/baseline" --max-steps 1 --lr 0 \
  --warmup-steps 1 --eval-every 1 "${old[@]}"
run --out "$OUT/token-old" --masking token "${old[@]}"
run --out "$OUT/token-new" --masking token "${new[@]}"
run --out "$OUT/ngram-new" --masking ngram "${new[@]}"
