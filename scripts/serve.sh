#!/usr/bin/env bash
# Fresh machine to running service: set up .venv, then serve the bundled model on 127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/tiankong serve "$@"
