"""The load and soak suites: what each runs, what it measures, and the checks that pass or fail.

Load: a warm-up, then ``normal_concurrency`` clients for ``normal_s`` (no errors allowed: the
baseline), then ``overload_concurrency`` clients for ``overload_s`` (every answer a 200 or a 503
with Retry-After; no other status, no dropped connection, the server still ready after), and
from the moment the overload stops, ``normal_concurrency`` clients again for ``recovery_s``:
the recovery time is when the served p50 is back within 1.5x the baseline p50 (+1 ms) for three
windows in a row.

Soak: ``concurrency`` clients (paced to ``rate_per_s`` when set) until ``total_requests`` or
``max_minutes``, sending a mix of plain, whole-word, candidates and ``[BLANK]`` requests on
texts that never repeat within ``mix_size`` requests, and sampling the server's RSS, open file
descriptors and threads. After the warm-up (the longer of ``min_warmup_s`` and
``warmup_fraction`` of the run; the server's one-minute latency window fills during the first
60 s) RSS may grow by at most ``rss_growth_limit`` (median of the last tenth of the samples
against the first tenth), and the most fds and threads seen in the last quarter may not exceed
the most seen in the first quarter.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tiankong.core.text import BLANK, MASK
from tiankong.reliability.client import Outcome, closed_loop, post, predict_requests
from tiankong.reliability.server import ProcessSampler, Sample, ServerUnderTest, ready
from tiankong.reliability.stats import (
    recovery_threshold_ms,
    recovery_time_s,
    slowest_window_ms,
    summarize,
    windows,
)


@dataclass(frozen=True)
class LoadPlan:
    normal_concurrency: int = 20
    normal_s: float = 60.0
    overload_concurrency: int = 200
    overload_s: float = 60.0
    recovery_s: float = 30.0
    window_s: float = 1.0
    recovery_limit_s: float = 5.0
    warmup_s: float = 5.0


@dataclass(frozen=True)
class SoakPlan:
    concurrency: int = 8
    total_requests: int = 100_000
    max_minutes: float = 30.0
    sample_every_s: float = 2.0
    min_warmup_s: float = 60.0
    warmup_fraction: float = 0.1
    rss_growth_limit: float = 0.02
    rate_per_s: float | None = None  # None: a closed loop as fast as the server answers
    mix_size: int = 20_000


QUICK_LOAD = LoadPlan(normal_s=4, overload_s=4, recovery_s=8, window_s=0.5, warmup_s=1)
QUICK_SOAK = SoakPlan(
    total_requests=100_000,
    max_minutes=0.4,
    sample_every_s=0.25,
    min_warmup_s=6.0,
    rss_growth_limit=0.05,  # 18 s of samples: too short to hold a long run's 2%
    mix_size=2_000,
)
SOAK_KINDS = ("plain", "whole_word", "candidates", "blank")
SOAK_CANDIDATES = ("鸟", "花", "睛", "兔", "天空")


def soak_requests(texts: Sequence[str], host: str, count: int) -> list[bytes]:
    """``count`` requests that take turns through ``SOAK_KINDS``, each on a text made unique
    by a numbered prefix, from the texts with exactly one [MASK]: plain top-5; whole word over
    two masks; a candidate list; the mask as a ``[BLANK]`` of unknown length."""
    single = [text for text in texts if text.count(MASK) == 1]
    if not single:
        raise ValueError("the soak needs texts with exactly one [MASK]")
    requests = []
    for index in range(count):
        text = f"第{index}条：{single[index % len(single)]}"
        kind = SOAK_KINDS[index % len(SOAK_KINDS)]
        body: dict[str, Any] = {"text": text, "top_k": 5}
        if kind == "whole_word":
            body.update(text=text.replace(MASK, MASK * 2), mode="whole_word")
        elif kind == "candidates":
            body.update(candidates=list(SOAK_CANDIDATES))
        elif kind == "blank":
            body.update(text=text.replace(MASK, BLANK))
        requests.append(post("/predict", body, host))
    return requests


async def timed_loop(
    server: ServerUnderTest, requests: Sequence[bytes], concurrency: int, duration_s: float
) -> tuple[list[Outcome], float]:
    started = time.monotonic()
    outcomes = await closed_loop(
        server.host, server.port, requests, concurrency, duration_s=duration_s
    )
    return outcomes, time.monotonic() - started


async def run_load(server: ServerUnderTest, plan: LoadPlan, texts: Sequence[str]) -> dict[str, Any]:
    sampler = ProcessSampler(server.pid, plan.window_s)
    sampling = asyncio.create_task(sampler.run())
    try:
        report = await load_phases(server, plan, texts)
    finally:
        sampling.cancel()
    report["contention"] = contention(sampler.samples)
    return report


def contention(samples: list[Sample]) -> dict[str, Any]:
    """CPU used by other programs while the suite ran (100 = one core): figures taken while
    another program was busy are not the server's alone."""
    others = [sample.other_cpu_pct for sample in samples[1:]]
    return {
        "other_cpu_pct_mean": round(statistics.fmean(others), 1) if others else None,
        "other_cpu_pct_max": max(others) if others else None,
        "server_rss_max_mb": round(max(s.rss_bytes for s in samples) / 2**20, 1)
        if samples
        else None,
    }


async def load_phases(
    server: ServerUnderTest, plan: LoadPlan, texts: Sequence[str]
) -> dict[str, Any]:
    requests = predict_requests(texts, server.host)
    await timed_loop(server, requests, plan.normal_concurrency, plan.warmup_s)
    normal_start = time.monotonic()
    normal, normal_s = await timed_loop(server, requests, plan.normal_concurrency, plan.normal_s)
    baseline = summarize(normal, normal_s)
    slowest_normal_ms = slowest_window_ms(windows(normal, normal_start, plan.window_s))

    overload_end = time.monotonic() + plan.overload_s

    async def recovery() -> list[Outcome]:
        await asyncio.sleep(max(0.0, overload_end - time.monotonic()))
        outcomes, _ = await timed_loop(server, requests, plan.normal_concurrency, plan.recovery_s)
        return outcomes

    (overload, overload_s), recovered = await asyncio.gather(
        timed_loop(server, requests, plan.overload_concurrency, plan.overload_s), recovery()
    )
    series = windows(recovered, overload_end, plan.window_s)
    threshold_ms = recovery_threshold_ms(baseline["p50_ms"], slowest_normal_ms)
    recovery_s = recovery_time_s(series, threshold_ms)
    overloaded = summarize(overload, overload_s)
    still_ready = ready(server.host, server.port)
    allowed = {"200", "503"}
    checks = {
        f"c={plan.normal_concurrency}: every request served (200)": set(baseline["statuses"])
        == {"200"},
        f"c={plan.overload_concurrency}: only 200 or 503 + Retry-After, no dropped connection": (
            set(overloaded["statuses"]) <= allowed
            and overloaded["refused_without_retry_after"] == 0
        ),
        "server ready after the overload": still_ready,
        f"latency back to normal within {plan.recovery_limit_s:g} s": (
            recovery_s is not None and recovery_s <= plan.recovery_limit_s
        ),
    }
    return {
        "plan": asdict(plan),
        "normal": baseline,
        "overload": overloaded,
        "recovery": {
            "threshold_p50_ms": round(threshold_ms, 2),
            "normal_slowest_window_p50_ms": slowest_normal_ms,
            "recovered_after_s": recovery_s,
            "windows": [
                {"at_s": at, "p50_ms": p50, "requests": count} for at, p50, count in series
            ],
            "after": summarize(recovered, plan.recovery_s),
        },
        "checks": checks,
    }


async def run_soak(server: ServerUnderTest, plan: SoakPlan, texts: Sequence[str]) -> dict[str, Any]:
    requests = soak_requests(texts, server.host, plan.mix_size)
    sampler = ProcessSampler(server.pid, plan.sample_every_s)
    sampling = asyncio.create_task(sampler.run())

    def count(_: Outcome) -> None:
        sampler.requests_done += 1

    started = time.monotonic()
    try:
        outcomes = await closed_loop(
            server.host,
            server.port,
            requests,
            plan.concurrency,
            duration_s=plan.max_minutes * 60,
            total=plan.total_requests,
            on_outcome=count,
            rate_per_s=plan.rate_per_s,
        )
    finally:
        sampling.cancel()
    elapsed = time.monotonic() - started
    summary = summarize(outcomes, elapsed)
    trend = resource_trend(sampler.samples, plan, elapsed)
    checks = {
        "every request served (200)": set(summary["statuses"]) == {"200"},
        f"RSS growth after warm-up <= {plan.rss_growth_limit:.0%}": trend["rss_growth"]
        <= plan.rss_growth_limit,
        "open fds don't grow": trend["fds_growth"] <= 0,
        "threads don't grow": trend["threads_growth"] <= 0,
    }
    return {
        "plan": asdict(plan),
        "mix": {"kinds": list(SOAK_KINDS), "candidates": list(SOAK_CANDIDATES)},
        "requests": summary,
        "resources": trend,
        "contention": contention(sampler.samples),
        "checks": checks,
        "samples": [asdict(sample) for sample in sampler.samples],
    }


def resource_trend(samples: list[Sample], plan: SoakPlan, elapsed_s: float) -> dict[str, Any]:
    warmup_s = max(plan.min_warmup_s, plan.warmup_fraction * elapsed_s)
    after = [sample for sample in samples if sample.at_s >= warmup_s]
    if len(after) < 8:
        raise RuntimeError(f"too few samples after the {warmup_s:.0f} s warm-up; soak longer")
    tenth, quarter = max(1, len(after) // 10), max(1, len(after) // 4)
    rss_start = statistics.median(sample.rss_bytes for sample in after[:tenth])
    rss_end = statistics.median(sample.rss_bytes for sample in after[-tenth:])
    return {
        "warmup_s": round(warmup_s, 1),
        "samples_after_warmup": len(after),
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_end_mb": round(rss_end / 2**20, 1),
        "rss_max_mb": round(max(sample.rss_bytes for sample in after) / 2**20, 1),
        "rss_growth": round((rss_end - rss_start) / rss_start, 4),
        "fds_start_max": max(sample.fds for sample in after[:quarter]),
        "fds_end_max": max(sample.fds for sample in after[-quarter:]),
        "fds_growth": max(s.fds for s in after[-quarter:]) - max(s.fds for s in after[:quarter]),
        "threads_start_max": max(sample.threads for sample in after[:quarter]),
        "threads_end_max": max(sample.threads for sample in after[-quarter:]),
        "threads_growth": max(s.threads for s in after[-quarter:])
        - max(s.threads for s in after[:quarter]),
    }


def plot_rss(soak: dict[str, Any], path: Path) -> Path | None:
    """RSS, fds and threads over the soak, to a PNG; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    samples = soak["samples"]
    minutes = [sample["at_s"] / 60 for sample in samples]
    figure, (rss_axis, count_axis) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    rss_mib = [sample["rss_bytes"] / 2**20 for sample in samples]
    rss_axis.plot(minutes, rss_mib, color="tab:blue")
    rss_axis.set_ylim(0.9 * min(rss_mib), 1.1 * max(rss_mib))  # +-10%: the 5% limit is visible
    rss_axis.axvline(soak["resources"]["warmup_s"] / 60, color="grey", linestyle="--")
    rss_axis.set_ylabel("RSS (MiB)")
    rss_axis.set_title(
        f"tiankong soak: {soak['requests']['requests']:,} requests, RSS growth after warm-up "
        f"{soak['resources']['rss_growth']:+.1%}"
    )
    count_axis.plot(minutes, [sample["fds"] for sample in samples], label="open fds")
    count_axis.plot(minutes, [sample["threads"] for sample in samples], label="threads")
    count_axis.set_xlabel("minutes")
    count_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
