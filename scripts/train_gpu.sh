#!/usr/bin/env bash
# The next bundled model on a lent GPU, in one device call (docs/TRAINING.md, "On a lent GPU").
#
#   bash scripts/train_gpu.sh --prepare CORPUS_DIR   # here: copy the text and jieba into
#                                                    # .train-corpus/ (git-ignored)
#   bash scripts/train_gpu.sh [train_gpu.py options] # there, with carry [".train-corpus"]
#
# CORPUS_DIR holds the files docs/TRAINING.md lists. classical.txt.xz is not copied: the
# bundled corpus index ships the same file (src/tiankong/bundled/corpus/), so it travels with the
# tree. jieba travels without its part-of-speech, keyword and LAC models (28 of its 38 MB), which
# segmentation doesn't use: about 12 MB is carried in all. The weights come back in
# $OUT/NAME.tar.00, .01, ... (train_gpu.py --name, default "model"), the log in $OUT/NAME.log.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --prepare ]; then
  src=${2:?usage: train_gpu.sh --prepare CORPUS_DIR}
  mkdir -p .train-corpus
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx /.train-corpus/ "$exclude" 2>/dev/null || echo /.train-corpus/ >>"$exclude"
  for name in modern wiki_dialogue idioms classical.heldout modern.heldout wiki_dialogue.heldout; do
    cp "$src/$name.txt.xz" .train-corpus/
  done
  rm -rf .train-corpus/site /tmp/jieba-full
  python3 -m pip install --quiet --no-deps --target /tmp/jieba-full jieba==0.42.1
  mkdir -p .train-corpus/site
  cp -r /tmp/jieba-full/jieba .train-corpus/site/
  rm -rf .train-corpus/site/jieba/{lac_small,posseg,analyse} /tmp/jieba-full
  find .train-corpus/site -name __pycache__ -prune -exec rm -rf {} +
  du -sh .train-corpus
  exit 0
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
OUT_DIR=${OUT:-runs/gpu}
mkdir -p "$OUT_DIR"
ln -sf "$PWD/src/tiankong/bundled/corpus/classical.txt.xz" .train-corpus/classical.txt.xz
python3 -c 'import jieba' 2>/dev/null || export PYTHONPATH=$PWD/.train-corpus/site
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
name=model  # the log is named as train_gpu.py names the pieces: --name NAME or --name=NAME
previous=
for argument in "$@"; do
  [ "$previous" = --name ] && name=$argument
  case $argument in --name=*) name=${argument#--name=} ;; esac
  previous=$argument
done
python3 scripts/train_gpu.py --corpus .train-corpus --out "$OUT_DIR" "$@" 2>&1 | tee "$OUT_DIR/$name.log"
