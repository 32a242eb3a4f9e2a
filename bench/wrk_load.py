"""The same closed loop as ``bench.load``, driven by ``wrk`` (a C load generator), so the
client costs the shared cores almost nothing next to the server it measures.

>>> result = run_wrk("http://127.0.0.1:8000/predict", 20, 0, duration_s=5)  # doctest: +SKIP

``wrk`` (Debian: ``apt-get install wrk``) runs one thread with ``concurrency`` connections;
its Lua script sends each request a sentence no earlier request used (``bench.sentences``,
POST ``{"text", "top_k"}``, as ``bench.load`` does) and prints its figures as one JSON line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.load import TOP_K, LoadResult, run_load
from bench.sentences import sentence

# Bodies written per second of a run: above any rate a server reaches on loopback here, so no
# sentence repeats (and no result cache hits) within a run.
BODIES_PER_S = 8_000
MARK = "WRK_JSON "
SCRIPT = """
local bodies = {}
for line in io.lines(os.getenv("WRK_BODIES")) do bodies[#bodies + 1] = line end
local next_body = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '%s{"requests": %d, "duration_us": %d, "status": %d, "connect": %d, "read": %d, '
    .. '"write": %d, "timeout": %d, "p50": %d, "p95": %d, "p99": %d, "mean": %f, "max": %d}\\n',
    os.getenv("WRK_MARK"), summary.requests, summary.duration, e.status, e.connect, e.read,
    e.write, e.timeout, latency:percentile(50), latency:percentile(95), latency:percentile(99),
    latency.mean, latency.max))
end
"""


def wrk_path() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    return found


def run_wrk(url: str, concurrency: int, first_index: int, duration_s: float) -> LoadResult:
    """``concurrency`` connections for ``duration_s``, sentences from ``first_index`` on."""
    with tempfile.TemporaryDirectory(prefix="tiankong-wrk-") as folder:
        bodies = Path(folder) / "bodies.jsonl"
        count = int(BODIES_PER_S * duration_s) + 100
        lines = (
            json.dumps({"text": sentence(first_index + offset), "top_k": TOP_K}, ensure_ascii=False)
            for offset in range(count)
        )
        bodies.write_text("\n".join(lines) + "\n", encoding="utf-8")
        script = Path(folder) / "load.lua"
        script.write_text(SCRIPT, encoding="utf-8")
        command = [wrk_path(), "-t1", f"-c{concurrency}", f"-d{duration_s:g}s", "--timeout", "30s"]
        command += ["-s", str(script), url]
        env = {"WRK_BODIES": str(bodies), "WRK_MARK": MARK, "PATH": "/usr/bin:/bin"}
        finished = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    line = next(line for line in finished.stdout.splitlines() if line.startswith(MARK))
    figures = json.loads(line[len(MARK) :])
    errors = sum(figures[name] for name in ("status", "connect", "read", "write", "timeout"))
    answered = figures["requests"] - figures["status"]
    seconds = figures["duration_us"] / 1e6
    return LoadResult(
        concurrency=concurrency,
        requests=answered,
        errors=errors,
        seconds=round(seconds, 3),
        requests_per_s=round(answered / seconds, 2) if seconds > 0 else 0.0,
        p50_ms=round(figures["p50"] / 1e3, 3),
        p95_ms=round(figures["p95"] / 1e3, 3),
        p99_ms=round(figures["p99"] / 1e3, 3),
        mean_ms=round(figures["mean"] / 1e3, 3),
        max_ms=round(figures["max"] / 1e3, 3),
        error_samples=[
            name for name in ("status", "connect", "read", "write", "timeout") if figures[name]
        ],
    )


CLIENTS = ("aiohttp", "wrk")


def run_client(
    client: str, url: str, concurrency: int, first_index: int, duration_s: float
) -> LoadResult:
    """The closed loop by ``client`` (one of ``CLIENTS``): the bench's aiohttp one or wrk."""
    if client == "wrk":
        return run_wrk(url, concurrency, first_index, duration_s)
    return run_load(url, concurrency, first_index, duration_s=duration_s)
