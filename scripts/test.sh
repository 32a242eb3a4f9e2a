#!/usr/bin/env bash
# Fresh machine to test results: set up .venv with everything (scripts/setup.sh --full: the whole
# requirements-lock.txt, torch included), install Debian's chromium and a CJK font for the browser
# test when they are missing (apt-get, as root; it says so first), then run the whole pytest
# suite (3 workers) with the lint, type checks and lock checks beside it. Extra arguments go to
# pytest. Each step says what it runs, and the last line gives each step's time.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python writes each module's bytecode into .venv the first time something imports it (setup.sh
# installs with --no-compile, so only what runs is compiled). Where PYTHONDONTWRITEBYTECODE is
# set, as on the 2-core test machine, nothing is written and each of the suite's few hundred
# Python processes compiles what it imports again: `from transformers import BertForMaskedLM`
# took 17 s of CPU that way, 9 s from bytecode.
unset PYTHONDONTWRITEBYTECODE
begun=$SECONDS step_begun=$SECONDS timings=()
say() { echo "test: $*" >&2; }
done_step() {
  timings+=("$1 $((SECONDS - step_begun)) s")
  step_begun=$SECONDS
}
bash scripts/setup.sh --full
done_step setup
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
dpkg-query -W -f='${Status}' fonts-wqy-zenhei 2>/dev/null | grep -q "ok installed" \
  || missing+=(fonts-wqy-zenhei)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's ${missing[*]} with apt-get (the browser test drives chromium; the" \
      "font draws the Chinese in its screenshots)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    done_step apt
  else
    say "missing Debian packages for the browser test: ${missing[*]};" \
      "install them (sudo apt-get install ${missing[*]}) and rerun"
    exit 1
  fi
fi
# The checks run beside pytest, their output kept and printed after its: pytest keeps the 2
# cores about 87% busy (its workers wait on the servers and workers they start), and the
# checks, about 40 s of CPU, fill much of the rest. Their exit status counts as much as pytest's.
checks() {
  set -e
  step_begun=$SECONDS
  say "ruff, ruff format, mypy, import contracts (pyproject.toml, docs/ARCHITECTURE.md)"
  .venv/bin/ruff check src tests bench scripts
  .venv/bin/ruff format --check src tests bench scripts
  # mypy's cache sits in the user cache, so a fresh clone on the same machine reuses it (mypy
  # checks each cached module's content hash). A clean run takes 26 s of CPU: pyproject.toml
  # has mypy skip torch, transformers and Ray (about 4,700 modules, 100 s when it read them).
  .venv/bin/mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/tiankong/mypy" src bench
  .venv/bin/lint-imports  # the stages import one way only
  say "lint took $((SECONDS - step_begun)) s"
  step_begun=$SECONDS
  # .venv holds exactly the locked versions (both locks); then known vulnerabilities in them
  # (an unreachable advisory database is reported, not failed on: scripts/audit_deps.py says
  # why; TIANKONG_AUDIT_STRICT=1 fails it).
  say "the locks against .venv, then the audit of known vulnerabilities"
  .venv/bin/python scripts/lock_deps.py --check
  .venv/bin/python scripts/audit_deps.py
  say "the locks took $((SECONDS - step_begun)) s"
}
checks_log=$(mktemp)
trap 'rm -f "$checks_log"' EXIT
say "lint, type checks and the locks start beside pytest; their output follows pytest's"
(checks) >"$checks_log" 2>&1 &
checks_pid=$!
# Three pytest-xdist workers, whole files each (pyproject's --dist loadfile, so a module's server
# or Ray cluster starts once): on 2 cores most process-starting tests wait on a child, so more
# workers than cores pay (2 cores: 17 min in one process, under 7 with three). The longest files
# go first (tests/conftest.py SLOW_FILES_FIRST); --no-loadscope-reorder keeps that order, which
# xdist would otherwise replace by the files' test counts, starting the 200 s bench smoke last
# (pytest 723 s against 598 s in one pair of runs). Later options win: `bash scripts/test.sh
# -n 0` runs in one process. --max-worker-restart 0: a worker that dies (a crash in native
# code) ends the run at once with the test it was running named, where xdist's file scheduler
# would otherwise replace the worker and then wait forever for that file's other tests.
say "pytest, 3 workers (the 15 slowest tests are listed at the end)"
status=0
.venv/bin/python -m pytest -n 3 --no-loadscope-reorder --max-worker-restart 0 --durations=15 \
  "$@" || status=$?
done_step pytest
checks_status=0
wait "$checks_pid" || checks_status=$?
cat "$checks_log"
if [ "$checks_status" != 0 ]; then
  say "lint, type checks or the locks failed (exit $checks_status; their output is above)"
  [ "$status" != 0 ] || status=$checks_status
fi
printf -v joined '%s; ' "${timings[@]}"
say "done in $((SECONDS - begun)) s (${joined%; })"
exit "$status"
