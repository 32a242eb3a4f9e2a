#!/usr/bin/env bash
# Fresh machine to running service: set up .venv with the serving set (requirements-serve-lock.txt:
# ONNX Runtime and the server, no torch) and the bundled model's INT8 export and corpus index,
# then serve the bundled model on 127.0.0.1:8000. Extra arguments go to `tiankong serve`.
# A model of your own needs torch for its export: bash scripts/setup.sh --full once.
set -euo pipefail
# Each start imports the same modules: let Python keep their bytecode in .venv even where
# PYTHONDONTWRITEBYTECODE is set (setup.sh installs with --no-compile; scripts/test.sh says more).
unset PYTHONDONTWRITEBYTECODE
cd "$(dirname "$0")/.."
bash scripts/setup.sh --serve
exec .venv/bin/tiankong serve "$@"
