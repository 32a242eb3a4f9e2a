"""Where a ``tiankong serve`` request's time goes: py-spy on a live server under the bench's
closed-loop load, the busy samples sorted into the stages of the request path.

    python -m bench.serve_profile --model src/tiankong/bundled/tiankong-mini-zh \\
        --engine fake --concurrency 1 --seconds 20
    python -m bench.serve_profile --engine onnx --precision int8 --concurrency 20

It starts the server (``--log-level warning``, everything else default), warms it up, runs
py-spy for the whole load and prints, per server thread, the share of samples in each stage,
the top functions (self and inclusive), the load's figures and the server's mean batch from
``/metrics``. A sample counts for the innermost frame
that belongs to a stage, so pydantic called from a route counts as pydantic, and a
middleware's own code (not the app it wraps) as that middleware.

By default py-spy samples only the thread holding the GIL (``--gil``): the server's Python
time, wherever it runs, and never a thread parked in uvloop's C loop or a queue wait (py-spy's
own idle detection counts those as busy on this Python). Native work that releases the GIL
(ONNX Runtime's run) is then invisible: ``--all-threads`` shows it. The server's CPU time per
request (psutil, user + system, every thread) is printed either way. ``--out`` keeps the raw
collapsed stacks and a JSON summary; ``--py-spy-args`` adds options such as ``--native``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psutil

from bench import profiling
from bench.load import run_load
from bench.models import BUNDLED_FOLDER, REPO_ROOT
from bench.servers import free_port, start
from bench.suite import C20_FIRST, WARMUP_FIRST, cpu_snapshot, server_env, tiankong_figures
from bench.wrk_load import CLIENTS, run_client

# (stage, pattern on "function (path:line)"); the first stage whose pattern matches a frame
# names it, and a sample goes to its innermost named frame.
STAGES: tuple[tuple[str, str], ...] = (
    ("engine: ONNX Runtime run", r"onnxruntime_inference_collection|OnnxEngine|onnx_engine\.py"),
    ("engine: torch", r"torch_engine\.py|/torch/"),
    ("engine: fake", r"engines/fake\.py"),
    ("decode: softmax + top-k", r"decoding\.py|\b(softmax|top_k) \("),
    ("fill: batch assembly, results", r"tiankong/fill\.py|results\.py|engines/base\.py"),
    ("tokenize / prepare", r"core/text\.py|core/request\.py|tokenizers|caches\.py"),
    ("hand-off: batcher", r"serving/batching\.py|serving/predictor\.py|serving/timing\.py"),
    ("hand-off: executor / futures", r"concurrent/futures|threading\.py|queue\.py"),
    ("middleware: metrics", r"server/metrics\.py|prometheus_client"),
    ("middleware: request guard", r"middleware/guard\.py"),
    ("middleware: drain", r"server/drain\.py"),
    ("middleware: body limit", r"server/body_limit\.py"),
    ("middleware: body deadline", r"server/slow_clients\.py"),
    ("middleware: disconnect", r"server/disconnect\.py"),
    ("middleware: security / rate limit", r"server/security\.py|server/rate_limit\.py"),
    ("middleware: starlette stack", r"starlette/middleware/|exceptions\.py|_exception_handler"),
    ("response: pydantic models", r"pydantic|server/schemas\.py|server/responses\.py"),
    ("response: JSON + encoders", r"fastapi/encoders\.py|json/|responses\.py|orjson"),
    ("routing: FastAPI / starlette", r"fastapi/|starlette/routing\.py|server/routes\.py"),
    ("server: uvicorn / httptools / h11", r"uvicorn/|httptools|h11"),
    ("event loop: asyncio", r"asyncio/"),
    ("tiankong: other", r"tiankong/"),
)
COMPILED = [(stage, re.compile(pattern)) for stage, pattern in STAGES]


def stage_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for stage, pattern in COMPILED:
            if pattern.search(frame):
                return stage
    return "other"


def thread_of(frame: str) -> str:
    """py-spy ``--threads`` puts ``thread (0x...)`` or the thread's name at the root."""
    return frame.split(" (")[0] if frame.startswith(("thread", "process")) else frame


def summarise(raw: Path, rate: int, seconds: float) -> dict[str, Any]:
    """Stage shares per thread (and over all), plus the function tops of profiling.py."""
    per_thread: dict[str, Counter[str]] = defaultdict(Counter)
    overall: Counter[str] = Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        frames = stack_text.split(";")
        # Root frames: "process <pid>:..." then "thread (0x..)"; the rest is the Python stack.
        thread = next((f for f in frames[:2] if f.startswith("thread")), "thread ?")
        stage = stage_of(frames)
        per_thread[thread][stage] += int(count_text)
        overall[stage] += int(count_text)
    total = sum(overall.values())

    def shares(counter: Counter[str]) -> list[list[Any]]:
        size = sum(counter.values())
        return [[name, round(100 * n / size, 1)] for name, n in counter.most_common()]

    threads = sorted(per_thread.items(), key=lambda item: -sum(item[1].values()))
    return {
        "busy_samples": total,
        # Busy samples over the samples one always-busy thread would give: CPU-seconds used.
        "busy_cpu_share": round(total / (rate * seconds), 2) if seconds else None,
        "stages": shares(overall),
        "threads": [
            {
                "thread": thread,
                "busy_pct_of_all": round(100 * sum(counter.values()) / total, 1),
                "busy_cpu_share": round(sum(counter.values()) / (rate * seconds), 2),
                "stages": shares(counter),
            }
            for thread, counter in threads
        ],
        "functions": profiling.summarise(raw, top=25),
    }


def thread_cpu(process: psutil.Process) -> dict[int, float]:
    """CPU seconds (user + system) of each of the server's OS threads."""
    return {thread.id: thread.user_time + thread.system_time for thread in process.threads()}


def thread_names(raw: Path) -> dict[int, str]:
    """OS thread id -> Python thread name, from py-spy's ``thread (TID): NAME`` root frames."""
    names: dict[int, str] = {}
    for found in re.finditer(r"thread \((\d+)\): ([^;(]+?)[;\s]", raw.read_text(errors="replace")):
        names[int(found.group(1))] = found.group(2).strip()
    return names


def cpu_split(
    before: dict[int, float],
    after: dict[int, float],
    machine_before: tuple[float, float, float, float],
    machine_after: tuple[float, float, float, float],
    server_s: float,
    names: dict[int, str],
) -> dict[str, float]:
    """Where the machine's cores went during the load, in cores (CPU seconds per second):
    each named server thread, the server's threads without Python (ONNX Runtime's pool), this
    process (the load generator), and everything else on the machine."""
    wall = machine_after[0] - machine_before[0]
    busy = machine_after[1] - machine_before[1]
    client = machine_after[3] - machine_before[3]  # this process: the aiohttp load generator
    # (with --client wrk, wrk is a child process and counts under "everything else")
    split: dict[str, float] = defaultdict(float)
    for tid, seconds in after.items():
        name = names.get(tid, "threads without Python (ORT intra-op pool, ...)")
        split[f"server: {name}"] += seconds - before.get(tid, 0.0)
    out = {
        name: round(seconds / wall, 2)
        for name, seconds in sorted(split.items(), key=lambda item: -item[1])
    }
    out["client: aiohttp load generator"] = round(client / wall, 2)
    out["everything else (py-spy, other programs)"] = round(
        max(0.0, busy - server_s - client) / wall, 2
    )
    out["idle"] = round(max(0.0, (psutil.cpu_count() or 1) - busy / wall), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=BUNDLED_FOLDER)
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--client", choices=CLIENTS, default="aiohttp", help="load generator")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" / "tmp")
    parser.add_argument("--serve-args", default="", help="extra `tiankong serve` flags")
    parser.add_argument("--py-spy-args", default="", help="extra `py-spy record` flags")
    parser.add_argument(
        "--all-threads",
        action="store_true",
        help="sample every thread py-spy thinks busy, not only the GIL holder",
    )
    args = parser.parse_args(argv)

    tag = f"serve-{args.engine}-{args.precision}-c{args.concurrency}"
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [sys.executable, "-m", "tiankong", "serve", "--model", str(args.model)]
    command += ["--port", str(port), "--engine", args.engine, "--precision", args.precision]
    # without the corpus index, as in the bench (--serve-args "--index bundled" to add it)
    command += ["--log-level", "warning", "--index", "none", *args.serve_args.split()]
    server = start(command, port, args.out / f"{tag}.log", server_env(), REPO_ROOT)
    try:
        server.wait_ready("/ready", 600)
        url = server.base_url + "/predict"
        run_load(url, args.concurrency, WARMUP_FIRST, count=50)
        before = tiankong_figures(server)
        raw = args.out / f"{tag}.txt"
        spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid"]
        spy += [str(server.process.pid), "--threads", "--rate", str(args.rate)]
        spy += ["--duration", str(int(args.seconds)), "--format", "raw", "--output", str(raw)]
        spy += args.py_spy_args.split()
        if not args.all_threads:
            spy.append("--gil")
        recorder = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(0.5)  # py-spy attaches before the load starts
        process = psutil.Process(server.process.pid)
        threads_before, machine_before = thread_cpu(process), cpu_snapshot()
        cpu_before = sum(process.cpu_times()[:2])
        load = run_client(args.client, url, args.concurrency, C20_FIRST, args.seconds - 1)
        cpu_s = sum(process.cpu_times()[:2]) - cpu_before
        threads_after, machine_after = thread_cpu(process), cpu_snapshot()
        recorder.wait(timeout=120)
        after = tiankong_figures(server)
    finally:
        server.stop()
    batches = (after["engine_batches"] or 0) - (before["engine_batches"] or 0)
    texts = (after["result_cache_misses"] or 0) - (before["result_cache_misses"] or 0)
    summary = {
        "command": " ".join(command),
        "load": load.to_dict(),
        "sampled": "GIL holder only" if not args.all_threads else "every thread, busy",
        "server_cpu_ms_per_request": round(1e3 * cpu_s / max(1, load.requests), 2),
        "engine_batches": batches,
        "mean_batch": round(texts / batches, 2) if batches else None,
        "profile": summarise(raw, args.rate, args.seconds),
    }
    summary["cpu_cores"] = cpu_split(
        threads_before, threads_after, machine_before, machine_after, cpu_s, thread_names(raw)
    )
    (args.out / f"{tag}.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    print(render(summary, tag))
    return 0


def render(summary: dict[str, Any], tag: str) -> str:
    load = summary["load"]
    profile = summary["profile"]
    lines = [
        f"{tag}: {load['requests']} requests, {load['requests_per_s']} req/s, "
        f"p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms, {load['errors']} errors; "
        f"mean batch {summary['mean_batch']}; server CPU {summary['server_cpu_ms_per_request']} "
        f"ms per request; sampled: {summary['sampled']}, {profile['busy_samples']} samples "
        f"= {profile['busy_cpu_share']} of the wall time",
        "cores used during the load: "
        + ", ".join(f"{name} {cores}" for name, cores in summary["cpu_cores"].items()),
        "stages (share of busy samples):",
    ]
    lines += [f"  {pct:5.1f}%  {name}" for name, pct in profile["stages"]]
    for thread in profile["threads"][:4]:
        lines.append(
            f"{thread['thread']}: {thread['busy_pct_of_all']}% of busy samples, "
            f"{thread['busy_cpu_share']} cores"
        )
        lines += [f"  {pct:5.1f}%  {name}" for name, pct in thread["stages"][:8]]
    lines.append("top functions, self:")
    lines += [f"  {pct:5.1f}%  {name}" for name, pct in profile["functions"]["self_pct"][:15]]
    lines.append("top functions, inclusive:")
    lines += [f"  {pct:5.1f}%  {name}" for name, pct in profile["functions"]["inclusive_pct"][:25]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
