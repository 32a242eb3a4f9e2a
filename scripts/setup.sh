#!/usr/bin/env bash
# Create .venv and install tiankong with every extra, at the versions in requirements-lock.txt
# (the tested ones), so every fresh machine gets the same environment:
#   1. pip and torch at their locked versions; torch from the CPU wheel index (TORCH_INDEX_URL),
#      because PyPI's Linux torch is the multi-GB CUDA build;
#   2. everything else in the lock, --no-deps (the lock is the whole closure);
#   3. tiankong itself, editable, --no-deps; then `pip check`.
# Nothing is installed again while .venv exists and pyproject.toml, the lock and this script are
# unchanged (their hash is kept in .venv/tiankong-setup.stamp), so a rerun takes a few ms;
# `bash scripts/setup.sh --force` reinstalls anyway (say, after a hand-made change to .venv).
# After changing dependencies in pyproject.toml: .venv/bin/python scripts/lock_deps.py --update
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
LOCK=requirements-lock.txt
STAMP=.venv/tiankong-setup.stamp

wanted=$(cat pyproject.toml "$LOCK" scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "${1:-}" != --force ] && [ -x .venv/bin/python ] \
  && [ "$(cat "$STAMP" 2>/dev/null)" = "$wanted" ]; then
  exit 0
fi

# pip -q still prints warnings. One of them says only that a local index named in the machine's
# pip config lacks a package, which pip then takes from the next index: it needs nothing from the
# user, and a partial local mirror repeats it for every package, so it is dropped; every other
# warning and error shows, and pip's exit status is kept.
pip_install() {
  .venv/bin/python -m pip install --quiet "$@" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
locked() { grep -m1 "^$1==" "$LOCK"; }
# pip itself is pinned in the lock, so pip's "a new release of pip is available" notice is noise.
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
rm -f "$STAMP"
pip_install "$(locked pip)"
torch=$(locked torch)
have=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "torch==$have" != "$torch" ]; then
  # A CPU wheel already reachable through the machine's pip config (a local wheel folder or
  # mirror) is used as is; otherwise the CPU index is asked.
  if ! .venv/bin/python -m pip install --quiet --no-deps "$torch" >/dev/null 2>&1; then
    pip_install --no-deps --index-url "$TORCH_INDEX_URL" "$torch"
  fi
fi
pip_install --no-deps --requirement "$LOCK"
pip_install --no-deps --editable .
.venv/bin/python -m pip check >/dev/null || { .venv/bin/python -m pip check; exit 1; }
# The bundled corpus index is built once into the user cache (about 40 s, 200 MB; a progress
# bar on stderr), so the first `tiankong predict` doesn't pay for it. It is keyed by the shipped
# text's hash: a rerun with the index in place returns at once.
index_dir=$(.venv/bin/python -m tiankong.index.bundled)
echo "$wanted" >"$STAMP"
echo "set up .venv: tiankong and the $(grep -c "==" "$LOCK") packages of $LOCK; bundled index in $index_dir"
