#!/usr/bin/env bash
# Create .venv and install tiankong at the tested versions, so every fresh machine gets the same
# environment. Two sets:
#   --serve  (scripts/serve.sh) requirements-serve-lock.txt: the server on ONNX Runtime, no
#            torch, Ray or test tools; the bundled model ships its FP32 ONNX graph, so its first
#            start quantizes that with ONNX Runtime and needs no torch.
#   --full   (the default; scripts/test.sh) requirements-lock.txt, everything: torch first, at
#            its locked version from the CPU wheel index (TORCH_INDEX_URL), because PyPI's Linux
#            torch is the multi-GB CUDA build; then the rest of the lock.
# Each lock is the whole closure, so it is installed --no-deps; then tiankong itself, editable,
# --no-deps, and `pip check`. Then, for the bundled model, its INT8 export (quantized from the
# shipped FP32 graph and checked by the INT8 guard) and its corpus index are made once in the
# user cache, so the first request doesn't pay for them.
# Nothing is installed again while .venv holds the set asked for (or the full set) and
# pyproject.toml, the locks and this script are unchanged (their hash is kept in
# .venv/tiankong-setup.stamp), so a rerun takes a few ms; --force reinstalls anyway (say, after
# a hand-made change to .venv). After changing dependencies in pyproject.toml:
# .venv/bin/python scripts/lock_deps.py --update (it writes both locks).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
FULL_LOCK=requirements-lock.txt
SERVE_LOCK=requirements-serve-lock.txt
STAMP=.venv/tiankong-setup.stamp
mode=full force=
for arg in "$@"; do
  case $arg in
    --serve) mode=serve ;;
    --full) mode=full ;;
    --force) force=1 ;;
    *) echo "usage: bash scripts/setup.sh [--serve|--full] [--force]" >&2; exit 2 ;;
  esac
done

hash=$(cat pyproject.toml "$FULL_LOCK" "$SERVE_LOCK" scripts/setup.sh | sha256sum | cut -d' ' -f1)
have=$(cat "$STAMP" 2>/dev/null || true)
# A full .venv serves too; a serving one is topped up by --full.
if [ -z "$force" ] && [ -x .venv/bin/python ] \
  && { [ "$have" = "full $hash" ] || [ "$have" = "$mode $hash" ]; }; then
  exit 0
fi

LOCK=$FULL_LOCK
[ "$mode" = serve ] && LOCK=$SERVE_LOCK
begun=$SECONDS step_begun=$SECONDS timings=()
say() { echo "setup: $*" >&2; }
done_step() { # one name for the closing line, with the seconds since the step began
  timings+=("$1 $((SECONDS - step_begun)) s")
  step_begun=$SECONDS
}
# pip's own output is one line per package; it is shown as a count, "packages 12/52 (name)",
# in place on a terminal and every tenth package in a log. Its warnings and errors pass
# through, except one that needs nothing from the user: a local index named in the machine's
# pip config lacks a package, which pip then takes from the next index (a partial local mirror
# repeats it for every package). pip's exit status is kept.
pip_install() {
  local total=$1 label=$2
  shift 2
  .venv/bin/python -m pip install --progress-bar off "$@" 2>&1 | {
    count=0
    while IFS= read -r line; do
      case $line in
        Collecting* | Processing* | "Obtaining "* | "Requirement already satisfied: "*)
          count=$((count + 1))
          name=${line#Requirement already satisfied: }
          [ "$name" = "$line" ] && name=${line#* }
          name=${name%% *}
          name=${name##*/}
          name=${name%%-[0-9]*.whl}
          if [ -t 2 ]; then
            printf '\rsetup: %s %d/%d (%s)\033[K' "$label" "$count" "$total" "$name" >&2
          elif [ $((count % 10)) = 0 ] || [ "$count" = "$total" ]; then
            say "$label $count/$total ($name)"
          fi
          ;;
        "Installing collected packages"*)
          [ -t 2 ] && printf '\r\033[K' >&2
          say "$label: $count/$total found; installing the new ones into .venv"
          ;;
        *"is ignored: it is neither a file nor a directory"* | "  "* | Successfully* \
          | Downloading* | Using\ cached* | "Looking in"* | Building* | Created* | Stored* | "Preparing "* | "Getting requirements"* | Attempting* \
          | "Found existing"* | "Uninstalling"* | "Checking if build"* | "Installing build"* \
          | "Installing backend"* | "Saved "* | "") ;;
        *) printf '%s\n' "$line" >&2 ;;
      esac
    done
    [ -t 2 ] && [ "$count" -gt 0 ] && printf '\r\033[K' >&2
    true
  }
  return "${PIPESTATUS[0]}"
}
locked() { grep -m1 "^$1==" "$FULL_LOCK"; }
# pip itself is pinned in the lock, so pip's "a new release of pip is available" notice is noise.
export PIP_DISABLE_PIP_VERSION_CHECK=1

packages=$(grep -c "==" "$LOCK")
say "installing the $mode set into .venv: the $packages packages of $LOCK, then tiankong"
rm -f "$STAMP"
if [ ! -x .venv/bin/python ]; then
  # Without ensurepip's own pip (10 s on 2 cores): the machine's pip puts the locked pip in,
  # when it is new enough for --python (22.3); else the usual way.
  if "$PYTHON" -m venv --without-pip .venv \
    && "$PYTHON" -m pip --python .venv/bin/python install --quiet "$(locked pip)" 2>/dev/null; then
    :
  else
    "$PYTHON" -m venv --clear .venv
  fi
fi
pip_pin=$(locked pip)
if [ "$(.venv/bin/python -m pip --version 2>/dev/null | cut -d' ' -f2)" != "${pip_pin#pip==}" ]; then
  pip_install 1 pip --quiet "$pip_pin"
fi
if [ "$mode" = full ]; then
  torch=$(locked torch)
  installed=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' \
    2>/dev/null || true)
  if [ "torch==$installed" != "$torch" ]; then
    say "packages: $torch (CPU build, about 200 MB)"
    # A CPU wheel already reachable through the machine's pip config (a local wheel folder or
    # mirror) is used as is; otherwise the CPU index is asked.
    if ! .venv/bin/python -m pip install --quiet --no-deps "$torch" >/dev/null 2>&1; then
      pip_install 1 torch --quiet --no-deps --index-url "$TORCH_INDEX_URL" "$torch"
    fi
  fi
fi
# setuptools (the build backend, pinned in the full lock) goes in with them, so tiankong's own
# editable install needs no isolated build environment of its own (7 s saved). --no-compile:
# Python writes a module's bytecode when it is first imported, so only what runs pays for it
# (the serving set installs in half the time: 15 s against 30 s on the busy 2-core machine).
backend=()
grep -q "^setuptools==" "$LOCK" || backend=("$(locked setuptools)")
pip_install $((packages + ${#backend[@]})) packages --no-deps --no-compile --requirement "$LOCK" \
  "${backend[@]}"
pip_install 1 tiankong --quiet --no-deps --no-build-isolation --editable .
.venv/bin/python -m pip check >/dev/null || { .venv/bin/python -m pip check; exit 1; }
done_step packages
# The bundled model's INT8 export and corpus index, each made once into the user cache (keyed
# by what made them: a rerun with both in place returns at once). The script says what it does
# and prints its steps' times, which join the closing line.
prepared=$(.venv/bin/python scripts/prepare_bundled.py)
step_begun=$SECONDS
echo "$mode $hash" >"$STAMP"
say "ready in $((SECONDS - begun)) s (${timings[*]/%/;} $prepared)"
