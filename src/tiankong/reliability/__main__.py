"""`python -m tiankong.reliability load|soak|all|expensive [--quick]`: start a server, run,
report. ``all`` is load and soak; ``expensive`` floods costly searches beside plain traffic.

Each suite gets a server of its own. Writes ``report.json`` (every figure and check),
``rss.png`` (the soak) and ``server-<suite>.log`` to ``--out``, prints a summary, and exits 1 if
any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from tiankong.config import Settings
from tiankong.reliability.expensive import QUICK_EXPENSIVE, ExpensivePlan, run_expensive
from tiankong.reliability.server import served
from tiankong.reliability.suites import (
    QUICK_LOAD,
    QUICK_SOAK,
    LoadPlan,
    SoakPlan,
    plot_rss,
    run_load,
    run_soak,
)

# load and expensive: small, so that 200 clients overflow it and shedding is what's measured
SHEDDING_QUEUE = 64
# soak: far above 8 clients' largest requests (a [BLANK] search reserves 81 rows), so every
# request is served and the soak measures leaks, not shedding
SOAK_QUEUE = 4096
GUARD_SENTENCES = Path(__file__).resolve().parent.parent / "resources" / "guard_sentences.txt"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tiankong.reliability", description=__doc__)
    parser.add_argument("suite", choices=["load", "soak", "all", "expensive"])
    parser.add_argument("--quick", action="store_true", help="the short CI versions")
    parser.add_argument("--model", help="model for the server (default: the bundled one)")
    parser.add_argument("--engine", default="auto", help="auto, onnx, torch or fake")
    parser.add_argument("--threads", type=int, help="the server's --threads")
    parser.add_argument(
        "--max-queue",
        type=int,
        help=f"server queue (default {SHEDDING_QUEUE} for load and expensive, so that they "
        f"overflow it; {SOAK_QUEUE} for the soak)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=Settings().request_timeout_s,
        help="the server's --request-timeout (expensive: what the flood's answers must meet)",
    )
    parser.add_argument("--max-request-cost", type=int, help="the server's --max-request-cost")
    parser.add_argument("--soak-requests", type=int, help="soak: stop after this many")
    parser.add_argument("--soak-minutes", type=float, help="soak: stop after this long")
    parser.add_argument(
        "--soak-rate", type=float, help="soak: requests a second (default: as fast as answered)"
    )
    parser.add_argument("--out", default="reliability-results", help="report folder")
    return parser.parse_args(argv)


def sentences() -> list[str]:
    lines = GUARD_SENTENCES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def environment() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit or None,
        "machine": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "python": platform.python_version(),
        "command": " ".join(
            [os.path.basename(sys.executable), "-m", "tiankong.reliability", *sys.argv[1:]]
        ),
        # what the server inherits that changes its memory or threads (the soak's RSS steps:
        # docs/RELIABILITY.md, "Soak steps: glibc's moving mmap threshold")
        "environment": {
            name: value
            for name, value in sorted(os.environ.items())
            if name.startswith(("MALLOC_", "TIANKONG_", "OMP_"))
            and "KEY" not in name  # never an API key in a report
        },
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def serve_args(args: argparse.Namespace, suite: str) -> list[str]:
    queue = args.max_queue or (SOAK_QUEUE if suite == "soak" else SHEDDING_QUEUE)
    values = ["--engine", args.engine, "--result-cache-size", "0", "--log-level", "warning"]
    values += ["--max-queue", str(queue)]
    values += ["--request-timeout", str(args.request_timeout)]
    if args.max_request_cost:
        values += ["--max-request-cost", str(args.max_request_cost)]
    if args.model:
        values += ["--model", args.model]
    if args.threads:
        values += ["--threads", str(args.threads)]
    return values


def soak_plan(args: argparse.Namespace) -> SoakPlan:
    plan = QUICK_SOAK if args.quick else SoakPlan()
    if args.soak_requests:
        plan = replace(plan, total_requests=args.soak_requests)
    if args.soak_minutes:
        plan = replace(plan, max_minutes=args.soak_minutes)
    if args.soak_rate:
        plan = replace(plan, rate_per_s=args.soak_rate)
    return plan


def print_expensive(result: dict[str, Any]) -> None:
    idle, flood = result["plain_idle"], result["plain_under_flood"]
    print(
        f"expensive: plain c={result['plan']['plain_concurrency']} p50/p99 idle "
        f"{idle['p50_ms']}/{idle['p99_ms']} ms, under the flood {flood['p50_ms']}/"
        f"{flood['p99_ms']} ms (p99 x{result['p99_ratio']}); plain statuses {flood['statuses']}"
    )
    for route, figures in result["flood"]["routes"].items():
        print(
            f"  flood {route}: {figures['statuses']}, slowest answer "
            f"{figures['slowest_answer_s']} s (timeout {result['request_timeout_s']:g} s)"
        )
    deadline, disconnect = result["after_deadline"], result["after_disconnect"]
    print(
        f"  engine idle {deadline['engine_idle_after_s']} s after a {deadline['status']} at "
        f"{deadline['answered_after_s']} s; {disconnect['engine_idle_after_s']} s after a "
        "client left"
    )


def print_summary(report: dict[str, Any]) -> bool:
    passed = True
    for suite in ("load", "soak", "expensive"):
        if suite not in report:
            continue
        result = report[suite]
        if suite == "expensive":
            print_expensive(result)
        elif suite == "load":
            for phase in ("normal", "overload"):
                figures = result[phase]
                print(
                    f"load {phase}: {figures['requests']} requests, {figures['statuses']}, "
                    f"{figures['served_per_s']} served/s, p50 {figures['p50_ms']} ms, "
                    f"p99 {figures['p99_ms']} ms"
                )
            print(
                f"load recovery: back to normal after {result['recovery']['recovered_after_s']} s"
            )
        else:
            figures, trend = result["requests"], result["resources"]
            print(
                f"soak: {figures['requests']} requests in {figures['duration_s']} s, "
                f"{figures['statuses']}, p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms; "
                f"RSS {trend['rss_start_mb']} -> {trend['rss_end_mb']} MiB "
                f"({trend['rss_growth']:+.2%}), fds {trend['fds_start_max']} -> "
                f"{trend['fds_end_max']}, threads {trend['threads_start_max']} -> "
                f"{trend['threads_end_max']}"
            )
        if "contention" in result:
            busy = result["contention"]["other_cpu_pct_mean"]
            print(f"  other programs used {busy}% CPU on average meanwhile (100 = one core)")
        for check, ok in result["checks"].items():
            print(f"  {'PASS' if ok else 'FAIL'}  {check}")
            passed = passed and ok
    return passed


async def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"environment": environment(), "server": {}}
    texts = sentences()
    suites = ["load", "soak"] if args.suite == "all" else [args.suite]
    for suite in suites:
        with served(serve_args(args, suite), out / f"server-{suite}.log") as server:
            report["server"][suite] = server.command
            if suite == "load":
                plan = QUICK_LOAD if args.quick else LoadPlan()
                report["load"] = await run_load(server, plan, texts)
            elif suite == "soak":
                report["soak"] = await run_soak(server, soak_plan(args), texts)
                plot = plot_rss(report["soak"], out / "rss.png")
                report["soak"]["plot"] = str(plot) if plot else "matplotlib is not installed"
            else:
                expensive = QUICK_EXPENSIVE if args.quick else ExpensivePlan()
                report["expensive"] = await run_expensive(
                    server, expensive, texts, args.request_timeout, args.quick
                )
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(run(args, out))
    (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    passed = print_summary(report)
    print(f"report: {out / 'report.json'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
