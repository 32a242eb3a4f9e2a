"""Proofreading speed on the bundled model (docs/PROOFREADING.md, "Speed").

    python -m bench.check_speed [--sentences 200] [--requests 100]

* offline batch: sentences of about 30 characters (the test split's, joined or cut to 28-32
  characters) through ``Proofreader.check_batch`` in batches of 16, as ``tiankong check FILE``
  does; sentences per second;
* HTTP at c=1: one sentence per ``POST /check``, one request at a time, against the app served
  by uvicorn on a loopback port; p50 and p95 of the client's latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # server_helpers.serve_in_thread


def thirty_char_sentences(count: int) -> list[str]:
    lines = (ROOT / "data/eval/check_test.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines]
    out, buffer = [], ""
    for text in texts * 10:
        buffer += text
        if len(buffer) >= 28:
            out.append(buffer[:32])
            buffer = ""
        if len(out) == count:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    from server_helpers import serve_in_thread

    from tiankong import FillMasker, Settings
    from tiankong.server import create_app
    from tiankong.tasks.check import Proofreader

    masker = FillMasker.load()
    checker = Proofreader(masker)
    sentences = thirty_char_sentences(args.sentences)
    checker.check_batch(sentences[:16])  # warm
    started = time.perf_counter()
    for first in range(0, len(sentences), 16):
        checker.check_batch(sentences[first : first + 16])
    elapsed = time.perf_counter() - started
    mean_chars = statistics.mean(len(s) for s in sentences)
    print(
        f"offline: {len(sentences)} sentences of {mean_chars:.1f} characters in {elapsed:.2f} s: "
        f"{len(sentences) / elapsed:.1f} sentences/s ({masker.engine.name} "
        f"{masker.engine.precision}, threads {masker.settings.threads})"
    )
    with serve_in_thread(create_app(Settings(), masker)) as url, httpx.Client() as client:
        latencies = []
        for number in range(args.requests + 5):
            text = sentences[number % len(sentences)]
            sent = time.perf_counter()
            response = client.post(f"{url}/check", json={"text": text}, timeout=30)
            assert response.status_code == 200, response.text
            if number >= 5:  # the first few warm the connection
                latencies.append((time.perf_counter() - sent) * 1000)
    latencies.sort()
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(
        f"HTTP c=1: {len(latencies)} requests, p50 {statistics.median(latencies):.1f} ms, "
        f"p95 {p95:.1f} ms"
    )


if __name__ == "__main__":
    main()
