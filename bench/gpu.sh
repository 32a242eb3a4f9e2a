#!/usr/bin/env bash
# The GPU check in one call: latency and throughput at batch 1, 8, 16, 32 and 64 for the
# bert-base-shaped model (torch FP16 on CUDA; ONNX Runtime's CUDA provider in FP32 where
# onnxruntime-gpu is installed), and whether the GPU's top-5 agree with the CPU's. Writes
# gpu-bench.json, gpu-bench.md and gpu-bench.log to $OUT (set by the device tool) or bench/results/.
#
#   bash bench/gpu.sh                          # on a machine with an NVIDIA GPU, ~3-5 min
#   bash bench/gpu.sh --device cpu --quick     # a self-check of the script on a CPU, tiny model
#
# Which Python: $PYTHON (default python3) is used as it is when it has torch, transformers and
# tokenizers and torch sees a GPU; the workplace's GPU machines come like that (their torch is a
# CUDA 13 build) and reach no package index. Otherwise a venv is made at $BENCH_VENV with
# python3.11 and filled from PyPI, which needs network and takes 1-3 min for ~3 GB:
# torch==2.13.0 (on PyPI the Linux x86_64 wheel is the CUDA 13.0 build, with its CUDA and cuDNN
# libraries as pip packages; it needs an NVIDIA driver >= 580), then tiankong[torch],
# onnxruntime-gpu==1.31.1 (CUDA 13, cuDNN 9), onnx and filelock for the ONNX export.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
OUT_DIR=${OUT:-bench/results}
PYTHON=${PYTHON:-python3}
BENCH_VENV=${BENCH_VENV:-/tmp/tiankong-gpu-venv}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu-bench.log"

check='import torch, transformers, tokenizers, numpy'
case " $* " in
  *" --device cpu "*) ;;
  *) check="$check; assert torch.cuda.is_available(), 'torch sees no GPU'" ;;
esac

{
  date -u +"start %Y-%m-%dT%H:%M:%SZ"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader || echo "nvidia-smi: not found"
  if "$PYTHON" -c "$check" 2>/dev/null; then
    echo "using $("$PYTHON" -c 'import sys; print(sys.executable)') as it is"
  else
    echo "$PYTHON lacks a GPU torch: installing into $BENCH_VENV"
    [ -x "$BENCH_VENV/bin/python" ] || "${PYTHON311:-python3.11}" -m venv "$BENCH_VENV"
    timeout 300 "$BENCH_VENV/bin/python" -m pip install -q "torch==2.13.0"
    timeout 240 "$BENCH_VENV/bin/python" -m pip install -q -e ".[torch]" "onnx>=1.16" \
      "filelock>=3.12" "onnxruntime-gpu==1.31.1"
    PYTHON=$BENCH_VENV/bin/python
    "$PYTHON" -c "$check"
  fi
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" timeout 480 "$PYTHON" -m bench.gpu_bench \
    --out-dir "$OUT_DIR" "$@"
} 2>&1 | tee "$LOG"
