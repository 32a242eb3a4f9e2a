"""A/B the request path: several ``tiankong serve`` builds (and the bare-FastAPI floor) side by
side, the same closed-loop load on each in turn, round after round, medians at the end.

    python -m bench.serve_ab --tree base=/tmp/base/src --tree new=src --engine fake \\
        --rounds 5 --seconds 6

Each ``--tree NAME=SRC`` starts ``tiankong serve`` with ``PYTHONPATH=SRC`` (so two checkouts of
the code can run against each other); ``--serve-args`` adds flags to every one of them, and
``--tree 'NAME=SRC|--threads 1|OMP_WAIT_POLICY=PASSIVE'`` flags or environment to one. The
floor (``bench/contenders/floor_app.py``) runs too unless ``--no-floor``. All servers stay up
for the whole run and only one takes load at a time; each round runs c=1 and then c=20 on every
server, in an order that rotates from round to round, so a noisy neighbour on a shared machine
spreads over all of them. The table gives the median over rounds of each run's p50 and
requests/s, each tiankong build's c=1 p50 over the floor's, and its mean engine batch at c=20
(from ``/metrics``, counted over the c=20 runs only). ``--client wrk`` drives the load with
``wrk`` (``bench/wrk_load.py``: a C client that takes the shared cores almost no CPU) instead of
the bench's aiohttp client. The server's CPU per request (user + system, psutil) is given too:
on a shared machine it moves less than latency does.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import psutil

from bench.load import run_load
from bench.models import BUNDLED_FOLDER, REPO_ROOT
from bench.servers import Server, free_port, start
from bench.suite import WARMUP_FIRST, server_env
from bench.wrk_load import CLIENTS, run_client

FLOOR = "floor"


def batch_counts(server: Server) -> tuple[float, float]:
    """(engine batches, texts in them) so far, from /metrics."""
    _, body = server.get("/metrics")
    text = body.decode()

    def value(name: str) -> float:
        found = re.search(name + r" ([0-9.e+-]+)", text)
        return float(found.group(1)) if found else 0.0

    return value("tiankong_batch_size_count"), value("tiankong_batch_size_sum")


def start_all(args: argparse.Namespace, log_dir: Path) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    python = sys.executable
    model = str(args.model)
    for spec in args.tree:
        head, *items = spec.split("|")
        name, _, src = head.partition("=")
        flags = [flag for item in items if item.startswith("--") for flag in item.split()]
        extra_env = dict(item.split("=", 1) for item in items if not item.startswith("--"))
        port = free_port()
        command = [python, "-m", "tiankong", "serve", "--model", model, "--port", str(port)]
        # without the corpus index, as in the bench (--serve-args "--index bundled" to add it)
        command += ["--engine", args.engine, "--log-level", "warning", "--index", "none"]
        command += args.serve_args.split()
        command += flags
        env = {**server_env(), "PYTHONPATH": str(Path(src).resolve()), **extra_env}
        servers[name] = start(command, port, log_dir / f"{name}.log", env, REPO_ROOT)
    for spec in args.peer:
        head, *items = spec.split("|")
        name, _, module = head.partition("=")
        port = free_port()
        command = [python, "-m", module, "--port", str(port)]
        command += [flag for item in items for flag in item.split()]
        env = {**server_env(), "PYTHONPATH": str(REPO_ROOT)}
        servers[name] = start(command, port, log_dir / f"{name}.log", env, REPO_ROOT)
    if not args.no_floor:
        port = free_port()
        command = [python, "-m", "bench.contenders.floor_app", "--model", model]
        command += ["--port", str(port)]
        env = {**server_env(), "PYTHONPATH": str(REPO_ROOT)}
        servers[FLOOR] = start(command, port, log_dir / "floor.log", env, REPO_ROOT)
    peers = {FLOOR, *(spec.split("=")[0] for spec in args.peer)}
    for name, server in servers.items():
        server.wait_ready("/health" if name in peers else "/ready", args.ready_timeout_s)
        run_load(server.base_url + "/predict", 1, WARMUP_FIRST, count=args.warmup)
    return servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=SRC folder")
    parser.add_argument("--model", type=Path, default=BUNDLED_FOLDER)
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--serve-args", default="", help="extra `tiankong serve` flags")
    parser.add_argument(
        "--peer", action="append", default=[], help="NAME=MODULE|--model DIR|--threads N"
    )
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0, help="per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--warmup", type=int, default=50, help="requests per server first")
    parser.add_argument("--client", choices=CLIENTS, default="aiohttp")
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--log-dir", type=Path, default=REPO_ROOT / "bench" / "results" / "tmp")
    args = parser.parse_args(argv)

    servers = start_all(args, args.log_dir)
    names = list(servers)
    trees = {spec.split("=")[0] for spec in args.tree}
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    batches: dict[str, list[float]] = {name: [0.0, 0.0] for name in names}
    first = dict.fromkeys(names, 0)  # each server's own sentences, up to the warm-up's
    try:
        for round_index in range(args.rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            for concurrency in args.concurrency:
                for name in order:
                    server = servers[name]
                    tiankong = name in trees
                    before = batch_counts(server) if tiankong else (0.0, 0.0)
                    url = server.base_url + "/predict"
                    cpu_before = server_cpu_s(server)
                    result = run_client(args.client, url, concurrency, first[name], args.seconds)
                    cpu_ms = 1e3 * (server_cpu_s(server) - cpu_before) / max(1, result.requests)
                    first[name] += result.requests + result.errors + concurrency
                    if tiankong and concurrency > 1:
                        after = batch_counts(server)
                        batches[name][0] += after[0] - before[0]
                        batches[name][1] += after[1] - before[1]
                    runs.setdefault((name, concurrency), []).append(
                        {**result.to_dict(), "cpu_ms": cpu_ms}
                    )
                    print(
                        f"round {round_index + 1} c={concurrency:<3} {name:<12} "
                        f"p50 {result.p50_ms:7.2f} ms  {result.requests_per_s:8.1f} req/s  "
                        f"CPU {cpu_ms:6.2f} ms/request  errors {result.errors}",
                        flush=True,
                    )
    finally:
        for server in servers.values():
            server.stop()
    print(render(runs, batches, names, args.concurrency))
    return 0


def server_cpu_s(server: Server) -> float:
    """CPU seconds (user + system) the server process and its children used so far."""
    process = psutil.Process(server.process.pid)
    processes = [process, *process.children(recursive=True)]
    return sum(sum(item.cpu_times()[:2]) for item in processes)


def render(
    runs: dict[tuple[str, int], list[dict[str, Any]]],
    batches: dict[str, list[float]],
    names: list[str],
    concurrencies: list[int],
) -> str:
    def median(name: str, concurrency: int, key: str) -> float:
        return statistics.median(run[key] for run in runs[(name, concurrency)])

    head = (
        "| server | "
        + " | ".join(f"c={c} p50 ms | c={c} req/s" for c in concurrencies)
        + " | c=1 p50 / floor | top c req/s / floor | mean batch (c>1) | "
        + " | ".join(f"c={c} CPU ms/request" for c in concurrencies)
        + " |"
    )
    lines = [head, "|" + "---|" * (3 * len(concurrencies) + 4)]
    top = max(concurrencies)
    for name in names:
        cells = []
        for concurrency in concurrencies:
            cells += [
                f"{median(name, concurrency, 'p50_ms'):.2f}",
                f"{median(name, concurrency, 'requests_per_s'):.1f}",
            ]
        ratio = rate_ratio = "—"
        if FLOOR in names and name != FLOOR:
            if 1 in concurrencies:
                ratio = f"{median(name, 1, 'p50_ms') / median(FLOOR, 1, 'p50_ms'):.2f}×"
            rate = median(name, top, "requests_per_s") / median(FLOOR, top, "requests_per_s")
            rate_ratio = f"{rate:.2f}×"
        count, texts = batches[name]
        mean_batch = f"{texts / count:.2f}" if count else "—"
        cells += [ratio, rate_ratio, mean_batch]
        cells += [f"{median(name, c, 'cpu_ms'):.2f}" for c in concurrencies]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    errors = sum(run["errors"] for values in runs.values() for run in values)
    lines.append(f"\nmedians over {len(next(iter(runs.values())))} rounds; errors: {errors}")
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
