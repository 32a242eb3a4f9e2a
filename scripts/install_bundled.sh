#!/usr/bin/env bash
# Install a trained run as the bundled model: copy the HF folder into the package, evaluate it
# on the public cloze set (alone, with [BLANK]s, and with and without the bundled corpus index)
# and write its model card.
#
#   bash scripts/install_bundled.sh RUN_DIR [EVAL_FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:?usage: install_bundled.sh RUN_DIR [EVAL_FILE]}
EVAL=${2:-data/eval/public_cloze.jsonl}
DEST=src/tiankong/bundled/tiankong-mini-zh
mkdir -p "$DEST"
cp "$RUN/config.json" "$RUN/model.safetensors" "$RUN/training.json" "$DEST/"
# the package's tokenizer files stay (every bundled model has the bert-base-chinese vocabulary):
# a run's own can carry state from its training (a --seq-len truncation, with transformers 5.17)
for name in tokenizer.json tokenizer_config.json; do
  [ -f "$DEST/$name" ] || cp "$RUN/$name" "$DEST/"
done
# the model's own figures first: no corpus index
.venv/bin/tiankong eval "$EVAL" --model "$DEST" --engine torch --index none --json "$RUN/eval.json"
.venv/bin/tiankong eval "$EVAL" --model "$DEST" --engine torch --index none --blank \
  --json "$RUN/eval-blank.json"
.venv/bin/tiankong eval "$EVAL" --model "$DEST" --engine torch --index bundled --compare-index \
  --json "$RUN/eval-index.json"
.venv/bin/python scripts/model_card.py "$DEST" "$RUN/eval.json" "$RUN/eval-blank.json" \
  --index-report "$RUN/eval-index.json"
# its FP32 ONNX graph, shipped so that serving it needs no torch (tests/export/test_shipped_graph.py)
.venv/bin/python -m tiankong.export.ship_graph "$DEST"
du -sh "$DEST"
