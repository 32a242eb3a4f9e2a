#!/usr/bin/env bash
# Create .venv and install tiankong at the tested versions, so every fresh machine gets the same
# environment. Two sets:
#   --serve  (scripts/serve.sh) requirements-serve-lock.txt: the server on ONNX Runtime, no
#            torch, Ray or test tools; the bundled model ships its FP32 ONNX graph, so its first
#            start quantizes that with ONNX Runtime and needs no torch.
#   --full   (the default; scripts/test.sh) requirements-lock.txt, everything: torch first, at
#            its locked CPU build, from where the machine's pip config points (a local wheel
#            folder or mirror) or else from the CPU wheel index (TORCH_INDEX_URL), because PyPI's
#            Linux torch is the multi-GB CUDA build; then the rest of the lock.
# Each lock is the whole closure, so it is installed --no-deps; then tiankong itself, editable,
# --no-deps, and `pip check`. uv installs them (a pinned copy, kept in the user cache): the
# full set's 161 packages in 23 s from an empty cache on 2 cores, where pip took about 98 s.
# It is given the indexes and wheel folders that the machine's pip config names, so a mirror set
# up for pip is used as pip would use it. Then, for the bundled model, its INT8 export (quantized
# from the shipped FP32 graph and checked by the INT8 guard) and its corpus index are made once
# in the user cache, so the first request doesn't pay for them.
# Nothing is installed again while .venv holds the set asked for (or the full set) and
# pyproject.toml, the locks and this script are unchanged (their hash is kept in
# .venv/tiankong-setup.stamp), so a rerun takes a few ms; --force reinstalls anyway (say, after
# a hand-made change to .venv). After changing dependencies in pyproject.toml:
# .venv/bin/python scripts/lock_deps.py --update (it writes both locks).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
UV_PIN=uv==0.13.9
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
locked() { grep -m1 "^$1==" "$FULL_LOCK"; }

# uv, pinned, outside .venv (so the locks still describe .venv exactly), installed once with the
# machine's pip; where that has no pip, with the pip of a throwaway venv.
uv_home=${XDG_CACHE_HOME:-$HOME/.cache}/tiankong/${UV_PIN/==/-}
uv=$uv_home/bin/uv
if [ ! -x "$uv" ]; then
  say "installing $UV_PIN (the package installer) into $uv_home"
  if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$uv_home" \
    "$UV_PIN" 2>/dev/null; then
    boot=$(mktemp -d)
    if ! { "$PYTHON" -m venv "$boot" && "$boot/bin/python" -m pip install --quiet \
      --disable-pip-version-check --target "$uv_home" "$UV_PIN"; }; then
      rm -rf "$boot"
      say "could not install $UV_PIN with $PYTHON's pip or a venv's (see above); on Debian," \
        "apt-get install python3-venv"
      exit 1
    fi
    rm -rf "$boot"
  fi
fi
# Where the machine's pip installs from (its config and PIP_* variables: indexes, wheel folders,
# no-index, trusted hosts, a CA bundle), as uv options: scripts/uv_sources.py.
sources=()
while IFS= read -r -d '' argument; do
  if [ "${pending:-}" = --cert ]; then
    export SSL_CERT_FILE=$argument # uv's variable for pip's cert
    pending=
  elif [ "$argument" = --cert ]; then
    pending=--cert
  else
    sources+=("$argument")
  fi
done < <("$PYTHON" scripts/uv_sources.py)
# uv's summary lines ("Resolved", "Prepared 160 packages in 13.4s", "Installed ...") pass
# through; its line per package ("+ name==version") does not. Its exit status is kept.
uv_install() {
  set +e
  "$uv" pip install --python .venv/bin/python "$@" 2>&1 | grep -v '^ [-+~] ' >&2
  local status=${PIPESTATUS[0]}
  set -e
  return "$status"
}

packages=$(grep -c "==" "$LOCK")
say "installing the $mode set into .venv: the $packages packages of $LOCK, then tiankong"
rm -f "$STAMP"
[ -x .venv/bin/python ] || "$PYTHON" -m venv --without-pip .venv
if [ "$mode" = full ]; then
  torch=$(locked torch)
  installed=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' \
    2>/dev/null || true)
  if [ "torch==$installed" != "$torch" ]; then
    say "packages: $torch (CPU build, about 200 MB)"
    # A CPU wheel already reachable through the machine's pip config (a local wheel folder or
    # mirror) is used as is; otherwise the CPU index is asked.
    if ! uv_install --quiet --no-deps "${sources[@]}" "$torch" 2>/dev/null; then
      uv_install --no-deps --index-url "$TORCH_INDEX_URL" "$torch"
    fi
  fi
fi
# pip (for `pip check` and a user's own `pip install`) and setuptools (the build backend, so
# tiankong's editable install needs no isolated build environment) go in with the lock when it
# doesn't hold them. No bytecode is written now: Python writes a module's when it is first
# imported, so only what runs pays for it.
extra=()
grep -q "^pip==" "$LOCK" || extra+=("$(locked pip)")
grep -q "^setuptools==" "$LOCK" || extra+=("$(locked setuptools)")
say "packages: $((packages + ${#extra[@]})) with $UV_PIN"
uv_install --no-deps "${sources[@]}" --requirement "$LOCK" "${extra[@]}"
uv_install --quiet --no-deps --no-build-isolation "${sources[@]}" --editable .
.venv/bin/python -m pip check >/dev/null || { .venv/bin/python -m pip check; exit 1; }
done_step packages
# The bundled model's INT8 export and corpus index, each made once into the user cache (keyed
# by what made them: a rerun with both in place returns at once). The script says what it does
# and prints its steps' times, which join the closing line.
prepared=$(.venv/bin/python scripts/prepare_bundled.py)
step_begun=$SECONDS
echo "$mode $hash" >"$STAMP"
say "ready in $((SECONDS - begun)) s (${timings[*]/%/;} $prepared)"
