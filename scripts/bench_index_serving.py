"""Serving cost of the corpus index: p50 latency at concurrency 1 and server memory, side by side.

    nice -n 10 python scripts/bench_index_serving.py CORPUS_DIR [--requests 400] [--threads 1]

Starts two `tiankong serve` processes on the bundled model, one with the default index (auto:
the bundled index) and one with `--index none`, and sends POST /predict from one closed-loop
client, alternating between them request by request, so both see the same machine load. Texts
are cut from the held-out files of CORPUS_DIR (one masked Han character, up to 30 characters of
context on each side; a new text every request, and the result cache is off). Memory comes from
/proc/PID/status: RssAnon (private) and RssFile (mapped files: the index's mmaps, shared and
reclaimable), after start-up and after the run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_index_weight import cut_items, read_lines

HELD_OUT = ("classical.heldout.txt.xz", "modern.heldout.txt.xz")


def memory(pid: int) -> dict[str, int]:
    """RssAnon, RssFile and VmRSS of ``pid`` in MB."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile", "VmRSS"):
            figures[key] = round(int(value.split()[0]) / 1024)
    return figures


def start(port: int, index: str | None, threads: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tiankong", "serve", "--port", str(port)]
    command += ["--threads", str(threads), "--result-cache-size", "0", "--log-level", "warning"]
    if index is not None:
        command += ["--index", index]
    return subprocess.Popen(command)


def wait_ready(url: str, process: subprocess.Popen[bytes], limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server at {url} was not ready in {limit_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="the folder with the held-out files")
    parser.add_argument("--requests", type=int, default=400, help="per server")
    parser.add_argument("--warmup", type=int, default=20, help="per server, not timed")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lines = read_lines([args.corpus / name for name in HELD_OUT])
    texts = [text for text, _ in cut_items(lines, args.requests + args.warmup, rng)]
    servers = {"index": (8771, None), "none": (8772, "none")}
    processes = {name: start(port, index, args.threads) for name, (port, index) in servers.items()}
    report: dict[str, object] = {"requests": args.requests, "threads": args.threads}
    try:
        urls = {name: f"http://127.0.0.1:{port}" for name, (port, _) in servers.items()}
        for name, url in urls.items():
            wait_ready(url, processes[name])
        infos = {name: httpx.get(f"{url}/info").json() for name, url in urls.items()}
        report["index_used"] = {name: info["index"]["used"] for name, info in infos.items()}
        report["memory_ready"] = {name: memory(p.pid) for name, p in processes.items()}
        latencies: dict[str, list[float]] = {name: [] for name in urls}
        grounded = 0
        with httpx.Client(timeout=60) as client:
            for number, text in enumerate(texts):
                order = list(urls) if number % 2 == 0 else list(urls)[::-1]
                for name in order:
                    started = time.perf_counter()
                    response = client.post(f"{urls[name]}/predict", json={"text": text})
                    elapsed = (time.perf_counter() - started) * 1000
                    response.raise_for_status()
                    if number >= args.warmup:
                        latencies[name].append(elapsed)
                        if name == "index":
                            grounded += response.json()["predictions"][0]["memory"] is not None
        report["memory_after"] = {name: memory(p.pid) for name, p in processes.items()}
        report["latency_ms"] = {
            name: {
                "p50": round(statistics.median(values), 2),
                "p90": round(statistics.quantiles(values, n=10)[-1], 2),
                "mean": round(statistics.fmean(values), 2),
            }
            for name, values in latencies.items()
        }
        p50 = report["latency_ms"]
        assert isinstance(p50, dict)
        report["p50_ratio"] = round(p50["index"]["p50"] / p50["none"]["p50"], 3)
        report["top_candidate_with_memory"] = grounded
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(timeout=30)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
