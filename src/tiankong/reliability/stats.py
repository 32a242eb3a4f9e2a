"""Summaries of load outcomes: status counts, throughput and latency percentiles."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from tiankong.reliability.client import Outcome


def percentile_ms(latencies_s: Sequence[float], q: float) -> float | None:
    if not latencies_s:
        return None
    return round(float(np.percentile(np.asarray(latencies_s) * 1000.0, q)), 2)


def summarize(outcomes: Sequence[Outcome], duration_s: float) -> dict[str, Any]:
    """Counts by status, served req/s, and p50/p90/p99/max of the served (200) requests."""
    served = [outcome.latency_s for outcome in outcomes if outcome.status == 200]
    statuses = Counter(str(outcome.status) for outcome in outcomes)
    errors = Counter(outcome.error for outcome in outcomes if outcome.error)
    refused = [outcome for outcome in outcomes if outcome.status == 503]
    return {
        "requests": len(outcomes),
        "duration_s": round(duration_s, 2),
        "statuses": dict(sorted(statuses.items())),
        "transport_errors": dict(errors),
        "served_per_s": round(len(served) / duration_s, 1) if duration_s > 0 else None,
        "p50_ms": percentile_ms(served, 50),
        "p90_ms": percentile_ms(served, 90),
        "p99_ms": percentile_ms(served, 99),
        "max_ms": percentile_ms(served, 100),
        "refused_without_retry_after": sum(not outcome.retry_after for outcome in refused),
    }


def windows(
    outcomes: Sequence[Outcome], start: float, width_s: float
) -> list[tuple[float, float | None, int]]:
    """(window start since ``start``, p50 ms of the served, requests) per ``width_s`` window."""
    buckets: dict[int, list[Outcome]] = {}
    for outcome in outcomes:
        if outcome.finished_at >= start:
            buckets.setdefault(int((outcome.finished_at - start) // width_s), []).append(outcome)
    if not buckets:
        return []
    return [
        (
            index * width_s,
            percentile_ms([o.latency_s for o in buckets.get(index, []) if o.status == 200], 50),
            len(buckets.get(index, [])),
        )
        for index in range(max(buckets) + 1)
    ]


def recovery_threshold_ms(baseline_p50_ms: float | None, slowest_normal_ms: float | None) -> float:
    """The p50 a window may have and count as "back to normal": 1.5x the normal phase's p50
    + 1 ms, or its slowest window's p50 (``slowest_window_ms``) where that was higher (on a
    shared machine another program's load moves one window's p50 more than half again; a
    server that has not recovered stays far above both)."""
    return max((baseline_p50_ms or 0.0) * 1.5 + 1.0, slowest_normal_ms or 0.0)


def slowest_window_ms(series: list[tuple[float, float | None, int]]) -> float | None:
    """The highest p50 among the windows that hold at least half the median window's requests
    (a window cut short by the phase's end holds a few, and one slow request would be its
    p50)."""
    counts = sorted(count for _, p50, count in series if p50 is not None)
    if not counts:
        return None
    enough = counts[len(counts) // 2] / 2
    return max(p50 for _, p50, count in series if p50 is not None and count >= enough)


def recovery_time_s(
    series: list[tuple[float, float | None, int]], threshold_ms: float, steady: int = 3
) -> float | None:
    """Start of the first window from which ``steady`` windows in a row have a p50 at or under
    ``threshold_ms``; None if latency never settled back."""
    for index in range(len(series)):
        run = series[index : index + steady]
        if len(run) == steady and all(p50 is not None and p50 <= threshold_ms for _, p50, _ in run):
            return series[index][0]
    return None
