#!/usr/bin/env bash
# The README's first-start figures: clone this repository's HEAD into a new folder, run
# `bash scripts/serve.sh` there with an empty cache (a new XDG_CACHE_HOME), and time it to the
# first 200 from GET /ready; then the .venv's and the cache's sizes, and a restart's time.
# uv (setup.sh's installer, itself installed there) and its package cache live under
# XDG_CACHE_HOME too, so they start empty as well; wheels may still come from a local wheel
# folder or mirror that the machine's pip config names.
#
#   bash scripts/time_first_start.sh [WORK_DIR] [PORT]     # default: a new temp dir, a free port
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
port=${2:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
if curl -s "http://127.0.0.1:$port/" >/dev/null 2>&1; then
  echo "port $port already answers; give a free one" >&2
  exit 1
fi
git clone --quiet "$repo" "$work/clone"
export XDG_CACHE_HOME=$work/cache
unset PYTHONPATH

serve_until_ready() { # sets $seconds (start to /ready) and $server (the server's pid)
  local log=$1 begun
  begun=$(date +%s.%N)
  (cd "$work/clone" && exec bash scripts/serve.sh --port "$port") >"$log" 2>&1 &
  server=$!
  until curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1; do
    kill -0 "$server" 2>/dev/null || { cat "$log" >&2; echo "serve.sh stopped" >&2; exit 1; }
    sleep 0.25
  done
  seconds=$(echo "$(date +%s.%N) - $begun" | bc)
}

serve_until_ready "$work/first.log"
first=$seconds
kill "$server" && wait "$server" 2>/dev/null || true
serve_until_ready "$work/restart.log"
kill "$server" && wait "$server" 2>/dev/null || true
grep "^setup: ready in" "$work/first.log"
echo "first start to /ready: $first s; restart: $seconds s" \
  "(load average: $(cut -d' ' -f1-3 /proc/loadavg))"
echo ".venv $(du -sh "$work/clone/.venv" | cut -f1); cache:" \
  "$(du -sh "$XDG_CACHE_HOME"/tiankong/* | tr '\t\n' '  ')"
