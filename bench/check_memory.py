"""A server's memory around long proofreading requests (docs/PERFORMANCE.md, "Memory that
follows the work").

    python -m bench.check_memory [--chars 1990] [--checks 6] [--predicts 50] [--trim]
    PYTHONPATH=/tmp/base/src python -m bench.check_memory    # another checkout's code

The app (``create_app``: the bundled model, defaults but the result cache off) in this process,
called through Starlette's TestClient: its RSS at ready, after ``--checks`` ``POST /check`` of
one text of ``--chars`` characters (the proofreading test split's texts, joined), and after
``--predicts`` ``POST /predict`` of new sentences; and the check's median latency, the first
left out; then the peak of one more check's allocations that ``tracemalloc`` sees (Python's
objects and numpy's arrays, not the engine's own buffers). ``--trim`` calls glibc's
``malloc_trim(0)`` after the checks and gives the RSS after it: how much of what the checks
left is free memory in glibc's heap.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
import tracemalloc
from pathlib import Path

import psutil

from tiankong.offline.check_eval import read_check_items

ROOT = Path(__file__).resolve().parent.parent


def long_text(chars: int) -> str:
    text = ""
    for item in read_check_items(ROOT / "data/eval/check_test.jsonl"):
        text += item.text
        if len(text) >= chars:
            return text[:chars]
    raise SystemExit(f"the test split has fewer than {chars} characters")


def main() -> None:
    from fastapi.testclient import TestClient

    from tiankong.config import Settings
    from tiankong.server.app import create_app

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1990)
    parser.add_argument("--checks", type=int, default=6)
    parser.add_argument("--predicts", type=int, default=50)
    parser.add_argument("--trim", action="store_true", help="malloc_trim(0) after the checks")
    args = parser.parse_args()
    text, process = long_text(args.chars), psutil.Process()

    def rss() -> float:
        return process.memory_info().rss / 2**20

    with TestClient(
        create_app(Settings(result_cache_size=0)), base_url="http://localhost"
    ) as client:
        ready, seconds = rss(), []
        for _ in range(args.checks):
            started = time.perf_counter()
            answer = client.post("/check", json={"text": text})
            seconds.append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise SystemExit(f"POST /check answered {answer.status_code}: {answer.text}")
        checked = rss()
        trimmed = ""
        if args.trim:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            trimmed = f", {rss():.0f} after malloc_trim(0)"
        for number in range(args.predicts):
            client.post("/predict", json={"text": f"第{number}句：春眠不觉晓，处处闻啼[MASK]。"})
        predicted = rss()
        tracemalloc.start()  # one more check, traced: its peak of Python's and numpy's buffers
        client.post("/check", json={"text": text})
        traced = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    median = statistics.median(seconds[1:] or seconds)
    print(
        f"RSS {ready:.0f} MiB at ready, {checked:.0f} after {args.checks} checks of "
        f"{len(text)} characters{trimmed}, {predicted:.0f} after {args.predicts} predicts; "
        f"check median {median:.2f} s; one check's traced peak {traced:.1f} MiB"
    )


if __name__ == "__main__":
    main()
