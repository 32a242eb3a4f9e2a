"""One run of the whole bench: every contender on every model, side by side, on loopback.

For each model and contender, at each of its thread settings (peers: 1, 2 and every core;
tiankong and the floor: their default): a fresh start timed to the first 200 on its readiness
URL, an answer checked, c=1 latency, c=20 closed loop, RSS after the load; a peer keeps its best
setting per phase. Then the offline batch through tiankong's Python API and the pipeline.
Results go to ``--out-dir`` as ``latest.json``, ``latest.md`` and ``latest.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench import optimum_env, ort_recipe, paired, profiling, report, roofline
from bench.contenders.registry import Contender, select, thread_settings
from bench.load import run_load
from bench.models import DEFAULT_MODEL_CACHE, REPO_ROOT, BenchModel, model_problem, resolve
from bench.offline import measure as measure_offline
from bench.refusal import Refused
from bench.sentences import sentences
from bench.servers import Server, ServerFailed, free_port, start
from bench.wrk_load import CLIENTS, run_client, wrk_path
from tiankong.engines.openvino_engine import has_openvino
from tiankong.export.int8_recipe import cpu_kind
from tiankong.host import usable_cores

# Disjoint sentence ranges per phase, so no server sees a text twice (its cache never hits):
# under wrk, c=1 runs for a time, and a fast server's c=1 can pass 10,000 requests.
C1_FIRST = 0
C20_FIRST = 100_000
WARMUP_FIRST = 175_000
WARMUP_REQUESTS = 5
MB = 1e6
QUICK_TUNED = "ort-recipe-int8"  # the peer --quick runs at every thread setting


@dataclass(frozen=True)
class Plan:
    quick: bool
    out_dir: Path
    model_cache: Path
    c1_requests: int
    c1_max_s: float
    c20_duration_s: float
    concurrency: int
    client: str  # bench.wrk_load.CLIENTS: aiohttp in the bench process, or wrk
    offline_sentences: int
    offline_chunk: int
    ready_timeout_s: float
    profile: str
    paired_rounds: int  # issue 23's goal pairs taking turns after a model's rows (0: not)
    paired_seconds: int  # whole seconds: wrk's -d reads no fractions

    @property
    def log_dir(self) -> Path:
        return self.out_dir / "tmp" / "logs"


@dataclass(frozen=True)
class Launch:
    """How one contender starts on one model: the interpreter and the folder it serves."""

    python: str
    model_arg: Path


def cpu_snapshot() -> tuple[float, float, float, float]:
    """(wall, CPU seconds busy on the machine, of it at a positive nice, CPU seconds of this
    process and its waited-for children): between two snapshots taken with no child running,
    busy minus ours is the CPU other programs on the machine used meanwhile."""
    times = psutil.cpu_times()
    busy = times.user + times.nice + times.system + getattr(times, "irq", 0.0)
    busy += getattr(times, "softirq", 0.0)
    mine = sum(os.times()[:4])
    return time.perf_counter(), busy, times.nice, mine


def foreign_load(before: tuple[float, float, float, float]) -> dict[str, float]:
    """CPU that other programs used since ``before``, as a share of every core; "niced" is
    the part at a positive nice, which mostly fills cycles the bench leaves idle."""
    wall, busy, niced, mine = (now - then for now, then in zip(cpu_snapshot(), before, strict=True))
    other = max(0.0, busy - mine)
    other_niced = min(other, max(0.0, niced - (mine if os.nice(0) > 0 else 0.0)))
    capacity = wall * (psutil.cpu_count() or 1)
    return {
        "cpu_s": round(other, 1),
        "pct_of_machine": round(100 * other / capacity, 1),
        "niced_pct_of_machine": round(100 * other_niced / capacity, 1),
    }


def server_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def command(contender: Contender, launch: Launch, port: int, threads: int | None) -> list[str]:
    if contender.is_tiankong:
        line = [launch.python, "-m", "tiankong", "serve", "--model", str(launch.model_arg)]
        line += ["--port", str(port), "--engine", contender.engine]
        line += ["--precision", contender.precision, "--log-level", "warning"]
        # The peers look nothing up, so tiankong runs without the corpus index (the same work),
        # but for the one row that measures what the index costs.
        line += ["--index", contender.index]
        return line
    line = [launch.python, "-m", contender.module, "--model", str(launch.model_arg)]
    line += ["--port", str(port), "--precision", contender.precision]
    return [*line, "--threads", str(threads or 1)]


def start_ready(
    contender: Contender, launch: Launch, threads: int | None, plan: Plan, tag: str
) -> tuple[Server, float]:
    port = free_port()
    log = plan.log_dir / f"{tag}.log"
    server = start(command(contender, launch, port, threads), port, log, server_env(), REPO_ROOT)
    try:
        return server, server.wait_ready(contender.ready_path, plan.ready_timeout_s)
    except BaseException:
        server.stop()
        raise


def check_answer(server: Server) -> None:
    """One request whose answer must hold five candidates for its one mask."""
    answer = server.post_json("/predict", {"text": sentences(WARMUP_FIRST - 1, 1)[0], "top_k": 5})
    masks = answer.get("masks") if isinstance(answer, dict) else None
    if not masks or len(masks[0]) != 5 or "token" not in masks[0][0]:
        raise ServerFailed(f"unexpected answer to /predict: {str(answer)[:200]}")


def tiankong_figures(server: Server) -> dict[str, Any]:
    """From /info and /metrics: what the server really runs, its cache hits and batch sizes."""
    _, info_body = server.get("/info")
    info = json.loads(info_body)
    _, metrics_body = server.get("/metrics")
    metrics = metrics_body.decode()

    def value(pattern: str) -> float | None:
        found = re.search(pattern + r" ([0-9.e+-]+)", metrics)
        return float(found.group(1)) if found else None

    batches = value(r"tiankong_batch_size_count")
    texts = value(r"tiankong_batch_size_sum")
    misses = value(r'tiankong_cache_misses_total\{cache="results"\}')
    hits = value(r'tiankong_cache_hits_total\{cache="results"\}')
    return {
        "engine": info.get("engine"),
        "precision": info.get("precision"),
        "threads": info.get("threads"),
        "quality": info.get("quality"),
        "index": (info.get("index") or {}).get("used"),
        # A label appears once counted: misses without a hits line are zero hits.
        "result_cache_hits": hits if hits is not None or misses is None else 0.0,
        "result_cache_misses": misses,
        "engine_batches": batches,
        "mean_batch_size": round(texts / batches, 2) if batches and texts is not None else None,
    }


def cores() -> int:
    """The cores the peers' thread settings go up to: the ones tiankong's default uses."""
    return usable_cores()


def settings_for(contender: Contender, plan: Plan) -> tuple[list[int | None], str]:
    """The thread settings ``contender`` runs with, and why fewer than all when so."""
    if not contender.tuned:
        return [None], ""
    every = list(thread_settings(cores()))
    # --quick runs one peer through every setting (the per-phase choice stays covered) and
    # the others at every core only.
    if plan.quick and contender.key != QUICK_TUNED and len(every) > 1:
        return [cores()], f"--quick: {cores()} threads only (every setting for {QUICK_TUNED})"
    return list(every), ""


def measure_server(
    contender: Contender, launch: Launch, plan: Plan, model: BenchModel, threads: int | None
) -> dict[str, Any]:
    """One start of one server: cold start, answer check, c=1, c=20 (py-spy'd if asked), RSS."""
    tag = f"{model.key}-{contender.key}" + (f"-t{threads}" if threads else "")
    server, ready_s = start_ready(contender, launch, threads, plan, tag)
    label = f"{contender.key}" + (f" threads {threads}" if threads else "")
    result: dict[str, Any] = {"threads": threads}
    try:
        result["cold_start_s"] = round(ready_s, 2)
        check_answer(server)
        if contender.is_tiankong:
            result["server"] = tiankong_figures(server)
            result["threads"] = result["server"]["threads"]
        result["rss_idle_mb"] = round(server.rss_bytes() / MB, 1)
        url = server.base_url + "/predict"
        run_load(url, 1, WARMUP_FIRST, count=WARMUP_REQUESTS)
        if plan.client == "wrk":  # wrk runs for a time, not a count: c=1 for as long as c=20
            c1 = run_client("wrk", url, 1, C1_FIRST, plan.c20_duration_s)
        else:
            c1 = run_load(url, 1, C1_FIRST, count=plan.c1_requests, duration_s=plan.c1_max_s)
        result["c1"] = c1.to_dict()
        print(f"  {label}: c=1 p50 {c1.p50_ms:.1f} ms over {c1.requests}", flush=True)
        spy = None
        if plan.profile == contender.key:
            raw = plan.out_dir / "tmp" / f"profile-{tag}.txt"
            spy = profiling.start_py_spy(server.process.pid, plan.c20_duration_s, raw)
        c20 = run_client(plan.client, url, plan.concurrency, C20_FIRST, plan.c20_duration_s)
        result["c20"] = c20.to_dict()
        result["rss_after_load_mb"] = round(server.rss_bytes() / MB, 1)
        if spy is not None:
            spy.wait(timeout=60)
            result["profile"] = profiling.summarise(raw) if raw.exists() else None
        if contender.is_tiankong:
            result["server"] = tiankong_figures(server)
        print(
            f"  {label}: c={plan.concurrency} {c20.requests_per_s:.1f} req/s, "
            f"p99 {c20.p99_ms:.0f} ms, {c20.errors} errors; "
            f"RSS {result['rss_after_load_mb']:.0f} MB",
            flush=True,
        )
    finally:
        server.stop()
    return result


def bench_contender(
    contender: Contender, launch: Launch, plan: Plan, model: BenchModel
) -> dict[str, Any]:
    """Every thread setting of ``contender``; the row keeps the best per phase: c=1 from the
    setting with the lowest p50, c=20 (and RSS after it) from the one with the highest rate
    among those without errors."""
    result: dict[str, Any] = {}
    if contender.is_tiankong and contender.engine == "onnx":
        # The first start on a model exports it to ONNX (cached); time it, then start again.
        first, first_s = start_ready(
            contender, launch, None, plan, f"{model.key}-{contender.key}-first"
        )
        first.stop()
        result["first_start_s"] = round(first_s, 2)
    settings, narrowed = settings_for(contender, plan)
    if narrowed:
        result["threads_note"] = narrowed
        print(f"  {narrowed}", flush=True)
    runs = [measure_server(contender, launch, plan, model, threads) for threads in settings]
    best_c1 = min(runs, key=lambda run: run["c1"]["p50_ms"])
    best_c20 = max(runs, key=lambda run: (run["c20"]["errors"] == 0, run["c20"]["requests_per_s"]))
    result.update(best_c20)
    result.update(c1=best_c1["c1"], c1_threads=best_c1["threads"], c20_threads=best_c20["threads"])
    result["cold_start_s"] = best_c1["cold_start_s"]
    if len(runs) > 1:
        result["by_threads"] = [
            {key: run[key] for key in ("threads", "cold_start_s", "c1", "c20", "rss_after_load_mb")}
            for run in runs
        ]
    return result


def launches(contenders: Sequence[Contender], model: BenchModel, plan: Plan) -> dict[str, Any]:
    """Each contender's Launch, or the reason it can't run on this model."""
    assert model.path is not None
    out: dict[str, Any] = {}
    optimum: tuple[Path | None, str] | None = None
    recipe: tuple[Path | None, str] | None = None
    for contender in contenders:
        if contender.family == "openvino-recipe" and not has_openvino():
            out[contender.key] = "openvino is not installed (pip install 'tiankong[openvino]')"
            continue
        if contender.family in ("ort-recipe", "openvino-recipe"):  # the same FP32 graph
            if recipe is None:
                log = plan.log_dir / f"ort-recipe-export-{model.key}.log"
                recipe = ort_recipe.ensure_export(model.path, plan.model_cache, log)
            folder, reason = recipe
            out[contender.key] = Launch(sys.executable, folder) if folder is not None else reason
            continue
        if contender.family != "optimum":
            out[contender.key] = Launch(sys.executable, model.path)
            continue
        if optimum is None:
            python, reason = optimum_env.ensure_venv(
                not plan.quick, plan.log_dir / "optimum-venv.log"
            )
            optimum = (None, reason)
            if python is not None:
                folder, reason = optimum_env.ensure_export(
                    python,
                    model.path,
                    plan.model_cache,
                    plan.log_dir / f"optimum-export-{model.key}.log",
                )
                optimum = (folder, reason) if folder is None else (folder, str(python))
        folder, detail = optimum
        out[contender.key] = Launch(detail, folder) if folder is not None else detail
    return out


def tokens_per_sentence(model: BenchModel, count: int = 200) -> float:
    from tiankong.core.text import TextEncoder, TextLimits

    assert model.path is not None
    encoder = TextEncoder.from_folder(model.path, TextLimits(16, 128, 10_000))
    texts = sentences(C20_FIRST, count)
    return sum(len(encoder.prepare(text).input_ids) for text in texts) / count


def bench_model(
    model: BenchModel, contenders: Sequence[Contender], plan: Plan, offline_targets: list[str]
) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": model.key}
    if model.path is None:
        print(f"bench: model {model.key} skipped: {model.missing}", flush=True)
        return {**entry, "missing": model.missing}
    tokens = tokens_per_sentence(model)
    entry.update(
        path=str(
            model.path.relative_to(REPO_ROOT)
            if model.path.is_relative_to(REPO_ROOT)
            else model.path
        ),
        config=model.config,
        tokens_per_sentence=tokens,
        flops=roofline.flops_per_sentence(model.config, tokens),
        contenders=[],
        offline=[],
    )
    ways = launches(contenders, model, plan)
    for contender in contenders:
        print(f"bench: {model.key} / {contender.key}", flush=True)
        row: dict[str, Any] = {
            "key": contender.key,
            "family": contender.family,
            "role": contender.role,
            "precision": contender.precision,
            "description": contender.description,
        }
        way = ways[contender.key]
        before = cpu_snapshot()
        if isinstance(way, str):
            row["skipped"] = way
            print(f"  skipped: {way}", flush=True)
        else:
            try:
                row.update(bench_contender(contender, way, plan, model))
            except (ServerFailed, OSError, ValueError) as error:
                row["skipped"] = f"failed: {error}"
                print(f"  failed: {error}", flush=True)
            row["other_load"] = foreign_load(before)
        entry["contenders"].append(row)
    if plan.paired_rounds:
        entry["paired"] = measure_paired(entry["contenders"], contenders, ways, plan, model)
    for target in offline_targets:
        print(f"bench: {model.key} / offline {target}", flush=True)
        threads = os.cpu_count() or 1
        before = cpu_snapshot()
        measured = measure_offline(
            target, model.path, plan.offline_sentences, plan.offline_chunk, threads
        )
        measured["other_load"] = foreign_load(before)
        rate = measured.get("sentences_per_s")
        failure = measured.get("error")
        shown = f"{rate:.1f} sentences/s" if rate is not None else f"failed: {failure}"
        print(f"  offline {target}: {shown}", flush=True)
        entry["offline"].append(measured)
    return entry


def measure_paired(
    rows: list[dict[str, Any]],
    contenders: Sequence[Contender],
    ways: dict[str, Any],
    plan: Plan,
    model: BenchModel,
) -> dict[str, Any]:
    """Issue 23's goal pairs again, taking turns (``bench.paired``); a failure is recorded."""
    print(f"bench: {model.key} / the goals' pairs, taking turns", flush=True)

    def start(contender: Contender, threads: int | None) -> Server:
        tag = f"{model.key}-{contender.key}-paired" + (f"-t{threads}" if threads else "")
        server = start_ready(contender, ways[contender.key], threads, plan, tag)[0]
        try:
            check_answer(server)
        except BaseException:
            server.stop()
            raise
        return server

    by_key = {contender.key: contender for contender in contenders}
    before = cpu_snapshot()
    try:
        # check_answer sends sentence WARMUP_FIRST - 1: the turns stay below it
        distinct = WARMUP_FIRST - 1
        result = paired.measure(
            rows, by_key, start, plan.client, plan.paired_rounds, plan.paired_seconds, distinct
        )
    except Exception as error:  # after the rows: the failure is recorded, the rows judge the goals
        print(f"  failed: {error!r}", flush=True)
        return {"failed": repr(error)}
    result["other_load"] = foreign_load(before)
    return result


# The x86 features that decide which INT8 and FP32 kernels ONNX Runtime and torch can use.
CPU_FLAGS = {
    "avx2": "AVX2",
    "avx512f": "AVX-512F",
    "avx512_vnni": "AVX512_VNNI",
    "avx_vnni": "AVX_VNNI",
    "avx512_bf16": "AVX512_BF16",
    "amx_tile": "AMX",
    "amx_int8": "AMX-INT8",
    "amx_bf16": "AMX-BF16",
}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, bool] | None:
    """Each of ``CPU_FLAGS`` present or not, from the first processor's flags; None off Linux."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    found = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    flags = set(found.group(1).split()) if found else set()
    return {name: flag in flags for flag, name in CPU_FLAGS.items()}


def machine() -> dict[str, Any]:
    import importlib.metadata

    cpu_model = platform.processor()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        found = re.search(r"Model name:\s*(.+)", lscpu)
        cpu_model = found.group(1).strip() if found else cpu_model
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for name in ("torch", "transformers", "onnxruntime", "openvino", "numpy", "fastapi", "uvicorn"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu_model": cpu_model,
        "cpu_kind": cpu_kind(),  # tiankong's name for it: the INT8 recipe chain's key
        "cpu_flags": cpu_flags(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cpus": psutil.cpu_count(logical=True),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "python": platform.python_version(),
        "versions": versions,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def highest_peaks(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's highest over the runs (at the start and the end of the bench): a peak is a
    ceiling, and a measurement taken while something else ran only reads low (one run on the
    shared machine read 540 Gop/s INT8 where the ones before and after read 819-844)."""
    usable = [run for run in runs if "error" not in run]
    if not usable:
        return runs[0]
    merged = dict(usable[0])
    for run in usable[1:]:
        for key, value in run.items():
            if key.endswith(("_gflops", "_gops")) and isinstance(value, (int, float)):
                merged[key] = max(merged.get(key, 0.0), value)
    return merged


QUICK_GEMM_SIZE = 1024  # --quick: an eighth of the work of the full run's 2048³ matmuls


def measure_peaks(quick: bool) -> dict[str, Any]:
    env = {**os.environ, **({"BENCH_GEMM_SIZE": str(QUICK_GEMM_SIZE)} if quick else {})}
    done = subprocess.run(
        [sys.executable, "-m", "bench.roofline"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout))


def make_plan(args: argparse.Namespace) -> Plan:
    quick = bool(args.quick)
    if args.paired_rounds is not None and args.paired_rounds < 0:
        raise Refused("bench: --paired-rounds must be 0 or more.")
    if args.paired_seconds is not None and args.paired_seconds < 1:
        raise Refused("bench: --paired-seconds must be a whole number of seconds, 1 or more.")
    # a 0 was taken as "not given" and the default run instead, a negative one run as given
    if args.duration is not None and not args.duration > 0:
        raise Refused(f"bench: --duration must be more than 0 seconds; got {args.duration}.")
    for flag, value in (
        ("--c1-requests", args.c1_requests),
        ("--offline-sentences", args.offline_sentences),
    ):
        if value is not None and value < 1:
            raise Refused(f"bench: {flag} must be 1 or more; got {value}.")
    return Plan(
        quick=quick,
        out_dir=args.out_dir,
        model_cache=args.model_cache,
        c1_requests=args.c1_requests if args.c1_requests is not None else (10 if quick else 200),
        c1_max_s=5.0 if quick else 30.0,
        c20_duration_s=args.duration if args.duration is not None else (1.0 if quick else 20.0),
        concurrency=20,
        client=args.client,
        offline_sentences=(
            args.offline_sentences
            if args.offline_sentences is not None
            else (50 if quick else 2000)
        ),
        offline_chunk=32,
        ready_timeout_s=600.0,
        profile=args.profile or "",
        paired_rounds=(
            args.paired_rounds
            if args.paired_rounds is not None
            else (paired.QUICK_ROUNDS if quick else paired.ROUNDS)
        ),
        paired_seconds=(
            args.paired_seconds
            if args.paired_seconds is not None
            else (paired.QUICK_SECONDS if quick else paired.SECONDS)
        ),
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="tiankong vs the usual deployments, side by side."
    )
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument(
        "--models",
        default=None,
        help="comma-separated: random-base, bundled, random-tiny or a model folder "
        "(default random-base,bundled; --quick: random-tiny)",
    )
    parser.add_argument(
        "--contenders",
        default="all",
        help="comma-separated keys or families (pipeline, torchscript, optimum, tiankong, "
        "tiankong-onnx-int8, ...); default all",
    )
    parser.add_argument("--duration", type=float, default=None, help="c=20 seconds (20)")
    parser.add_argument("--c1-requests", type=int, default=None, help="c=1 requests (200)")
    parser.add_argument("--offline-sentences", type=int, default=None, help="(2000)")
    parser.add_argument("--offline", default="all", help="offline targets, or 'none'")
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="aiohttp",
        help="the load generator: aiohttp in the bench process (default), or wrk, a C client "
        "that takes the shared cores almost no CPU (apt-get install wrk)",
    )
    parser.add_argument("--profile", default=None, help="py-spy this contender during c=20")
    parser.add_argument(
        "--paired-rounds",
        type=int,
        default=None,
        help="rounds of issue 23's goal pairs taking turns after each model's rows "
        f"({paired.ROUNDS}; --quick: {paired.QUICK_ROUNDS}; 0: none, the rows judge the goals)",
    )
    parser.add_argument(
        "--paired-seconds",
        type=int,
        default=None,
        help=f"each side's load per round, whole seconds ({paired.SECONDS}; --quick: "
        f"{paired.QUICK_SECONDS})",
    )
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "bench" / "results")
    parser.add_argument("--model-cache", type=Path, default=DEFAULT_MODEL_CACHE)
    return parser.parse_args(argv)


OFFLINE_TARGETS = ("tiankong-onnx-int8", "tiankong-onnx-fp32", "tiankong-torch-fp32", "pipeline")


def offline_targets_of(spec: str) -> list[str]:
    """``--offline``: all, none or comma-separated targets, each one of ``OFFLINE_TARGETS``
    (a misspelled one failed only after every contender had run, and the bench exited 0)."""
    if spec == "none":
        return []
    if spec == "all":
        return list(OFFLINE_TARGETS)
    targets = [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [target for target in targets if target not in OFFLINE_TARGETS]
    if unknown or not targets:
        raise Refused(
            f"bench: unknown offline target(s) {', '.join(unknown) or repr(spec)}; choose "
            f"from {', '.join(OFFLINE_TARGETS)}, all or none."
        )
    return targets


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    if plan.client == "wrk":
        try:
            wrk_path()  # not installed: one sentence now, not after the models are built
        except RuntimeError as error:
            raise SystemExit(f"bench: {error}.") from None
    started = time.perf_counter()
    default_models = "random-tiny" if plan.quick else "random-base,bundled"
    model_keys = [key.strip() for key in (args.models or default_models).split(",")]
    for key in model_keys:  # before anything is built or measured, and the report is kept
        problem = model_problem(key)
        if problem:
            raise Refused(f"bench: {problem}.")
    contenders = select(args.contenders)
    offline_targets = offline_targets_of(args.offline)
    results: dict[str, Any] = {
        "bench": {
            "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
            "quick": plan.quick,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "concurrency": plan.concurrency,
            "client": plan.client,
            "c1_requests": plan.c1_requests,
            "c1_max_s": plan.c1_max_s,
            "c20_duration_s": plan.c20_duration_s,
            "offline_sentences": plan.offline_sentences,
            "offline_chunk": plan.offline_chunk,
        },
        "machine": machine(),
    }
    models = [resolve(key, plan.model_cache) for key in model_keys]
    if all(model.path is None for model in models):  # only the bundled model, not there yet
        raise Refused(f"bench: no model to bench: {'; '.join(model.missing for model in models)}.")
    print("bench: measuring GEMM peaks", flush=True)
    first_peaks = measure_peaks(plan.quick)
    results["models"] = [bench_model(model, contenders, plan, offline_targets) for model in models]
    print("bench: measuring GEMM peaks again", flush=True)
    results["peak_runs"] = [first_peaks, measure_peaks(plan.quick)]
    results["peaks"] = highest_peaks(results["peak_runs"])
    results["bench"]["seconds"] = round(time.perf_counter() - started, 1)
    report.finish(results, plan.out_dir)
    print(report.markdown(results))
    return 0
