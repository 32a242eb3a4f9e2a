"""Threads under a container's CPU quota: the serving image run with ``docker run --cpus``,
once per thread count, taking turns round after round, each under the same wrk load.

    python -m bench.cpu_quota --image tiankong:cpu --cpus 1 --threads 2 1 --rounds 3

Before ``--threads`` kept to the cgroup's CPU quota (``host.usable_cores``), a container saw
every core of its host and ran that many threads; ``TIANKONG_THREADS`` sets the count here, so
the old default (the host's cores) and the new one (the quota's) run side by side in one image.
Each round starts a container per thread count, waits for ``/ready``, prints the engine and
precision ``/info`` says it serves (``--precision auto`` measures again in each container, at
its thread count, so the two may differ), sends 2 s of warm-up,
then c=1 and c=20 for ``--seconds`` each (``bench.wrk_load``: every request a sentence no
earlier one used), and removes it. Medians over the rounds at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
import urllib.request

from bench.load import LoadResult
from bench.wrk_load import run_wrk

WARMUP_S = 2.0
FIRST_SENTENCE = 0  # each container starts with empty caches: no sentence is answered twice


def ready(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/ready", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} was not ready within {timeout_s:.0f} s")


def one_round(
    image: str, cpus: str, threads: str, port: int, first: int, seconds: float
) -> tuple[LoadResult, LoadResult]:
    name = f"tiankong-cpu-quota-{threads}"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(
        ["docker", "run", "-d", "--name", name, f"--cpus={cpus}", "-p", f"127.0.0.1:{port}:8000",
         "-e", f"TIANKONG_THREADS={threads}", image],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        ready(url)
        with urllib.request.urlopen(url + "/info", timeout=5) as answer:
            info = json.load(answer)
        print(f"  {threads} threads: {info.get('engine')} {info.get('precision')}", flush=True)
        run_wrk(url + "/predict", 1, first, WARMUP_S)
        step = int(10_000 * seconds)  # more sentences than any run here sends
        lone = run_wrk(url + "/predict", 1, first + step, seconds)
        loaded = run_wrk(url + "/predict", 20, first + 2 * step, seconds)
        return lone, loaded
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="tiankong:cpu")
    parser.add_argument("--cpus", default="1", help="docker run --cpus")
    parser.add_argument("--threads", nargs="+", default=["2", "1"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    runs: dict[str, list[tuple[LoadResult, LoadResult]]] = {t: [] for t in args.threads}
    first = FIRST_SENTENCE
    for number in range(args.rounds):
        for index, threads in enumerate(args.threads):
            lone, loaded = one_round(
                args.image, args.cpus, threads, 18_000 + index, first, args.seconds
            )
            first += int(30_000 * args.seconds)
            runs[threads].append((lone, loaded))
            print(
                f"round {number + 1}, {threads} threads: c=1 p50 {lone.p50_ms:.2f} ms, p99 "
                f"{lone.p99_ms:.1f} ms; c=20 {loaded.requests_per_s:.1f} req/s, p99 "
                f"{loaded.p99_ms:.0f} ms; errors {lone.errors + loaded.errors}",
                flush=True,
            )
    print(f"--cpus {args.cpus}, medians of {args.rounds} rounds:")
    for threads, rounds in runs.items():
        print(
            f"  {threads} threads: c=1 p50 "
            f"{statistics.median(r[0].p50_ms for r in rounds):.2f} ms, p99 "
            f"{statistics.median(r[0].p99_ms for r in rounds):.1f} ms; c=20 "
            f"{statistics.median(r[1].requests_per_s for r in rounds):.1f} req/s, p99 "
            f"{statistics.median(r[1].p99_ms for r in rounds):.0f} ms; errors "
            f"{sum(r[0].errors + r[1].errors for r in rounds)}"
        )


if __name__ == "__main__":
    main()
