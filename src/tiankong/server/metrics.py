"""Request metrics: a Prometheus registry per app, and a rolling one-minute window for /info.

``RequestGuard`` (``middleware/guard.py``) records every HTTP request once, after routing, so it
labels by the route's path template (``/predict``), never by the raw URL, and unmatched paths
share one label.
``ServerMetrics`` is also the dynamic batcher's observer (batch sizes, tokens, padding, queue
depth, skipped/refused/failed work) and the caches' (hits and misses per cache).

Off the hot path: a request, a batch and a cache lookup are only noted (a tuple appended, an
int counted); they are folded into the Prometheus registry, whose every update takes a lock,
when anything reads it (``/metrics``, ``/info``, ``registry.get_sample_value``: a collector
registered first folds them) or every ``FOLD_EVERY`` notes. The two gauges read plain ints.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from tiankong.serving.batch_policy import BatchStats

# Routes that run the model: their latency feeds the rolling window shown by /info.
INFERENCE_ROUTES = frozenset(
    {("POST", "/predict"), ("GET", "/predict"), ("POST", "/batch_predict"), ("POST", "/")}
    | {("POST", "/check"), ("POST", "/batch_check")}  # proofreading (server/check_routes.py)
)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
PADDING_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
FOLD_EVERY = 256  # notes kept before they are folded into the registry unread


@dataclass(frozen=True)
class WindowSummary:
    requests: int
    qps: float
    p50_ms: float | None
    p95_ms: float | None


class RollingWindow:
    """Latencies of the requests finished in the last ``seconds``."""

    def __init__(self, seconds: float = 60.0) -> None:
        self.seconds = seconds
        self.samples: deque[tuple[float, float]] = deque()  # (finished at, latency seconds)

    def add(self, finished_at: float, latency_s: float) -> None:
        self.samples.append((finished_at, latency_s))
        self.prune(finished_at)

    def prune(self, now: float) -> None:
        while self.samples and self.samples[0][0] < now - self.seconds:
            self.samples.popleft()

    def summary(self, now: float) -> WindowSummary:
        self.prune(now)
        if not self.samples:
            return WindowSummary(0, 0.0, None, None)
        latencies_ms = np.fromiter((latency for _, latency in self.samples), float) * 1000
        p50, p95 = np.percentile(latencies_ms, [50, 95])
        count = len(latencies_ms)
        return WindowSummary(count, count / self.seconds, float(p50), float(p95))


class ServerMetrics:
    """Everything one app counts. Nothing here is global: each app gets its own registry."""

    def __init__(self, window_seconds: float = 60.0) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(Folder(self))  # first: every read of the registry folds first
        ProcessCollector(registry=self.registry)
        self.requests = Counter(
            "tiankong_requests",
            "HTTP requests by route template, method and status code.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "tiankong_request_duration_seconds",
            "Time from request to response, by route template.",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "tiankong_requests_in_flight", "HTTP requests being handled.", registry=self.registry
        )
        self.batch_size = Histogram(
            "tiankong_batch_size",
            "Texts per batched engine run.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.batch_tokens = Histogram(
            "tiankong_batch_tokens",
            "Padded tokens (texts x longest text) per batched engine run.",
            buckets=TOKEN_BUCKETS,
            registry=self.registry,
        )
        self.batch_padding = Histogram(
            "tiankong_batch_padding_ratio",
            "Share of a batch's padded tokens that are padding.",
            buckets=PADDING_BUCKETS,
            registry=self.registry,
        )
        self.batch_real_tokens = Counter(
            "tiankong_batch_real_tokens",
            "Text tokens sent to the engine in batches.",
            registry=self.registry,
        )
        self.batch_padded_tokens = Counter(
            "tiankong_batch_padded_tokens",
            "Padded tokens sent to the engine in batches (real plus padding).",
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "tiankong_queue_depth",
            "Texts (and exclusive jobs) waiting for the engine.",
            registry=self.registry,
        )
        self.batcher_events = Counter(
            "tiankong_batcher_events",
            "skipped: cancelled before running; overloaded: refused with 503; timeout: 504; "
            "failed_batch: an engine call that raised.",
            ["event"],
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "tiankong_cache_hits",
            "Cache hits by cache (results, tokens).",
            ["cache"],
            registry=self.registry,
        )
        self.cache_misses = Counter(
            "tiankong_cache_misses",
            "Cache misses by cache (results, tokens).",
            ["cache"],
            registry=self.registry,
        )
        self.window = RollingWindow(window_seconds)
        # (route template, method, status) -> its request counter and latency histogram
        self.request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self.served = 0  # inference requests answered with a result (2xx) so far
        self.requests_in_flight = 0  # the guard counts; the gauge reads it
        self.in_flight.set_function(lambda: self.requests_in_flight)
        self.depth = 0
        self.queue_depth.set_function(lambda: self.depth)
        self.noted_requests: list[tuple[str, str, int, float, float, bool]] = []
        self.noted_batches: list[BatchStats] = []
        self.noted_cache: dict[tuple[str, bool], int] = {}
        self.notes = 0

    @property
    def inference_requests(self) -> int:
        self.fold()
        return self.served

    def observe_request(
        self, route: str, method: str, status: int, seconds: float, routed: bool = True
    ) -> None:
        """``routed``: False for a request answered before routing (a 413, 401 or 429, the
        drain's 503): counted under its route, never among the requests served."""
        self.noted_requests.append((route, method, status, seconds, time.monotonic(), routed))
        self.noted()

    def noted(self) -> None:
        self.notes += 1
        if self.notes >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        """Everything noted since the last fold, into the registry and the rolling window."""
        self.notes = 0
        requests, self.noted_requests = self.noted_requests, []
        batches, self.noted_batches = self.noted_batches, []
        cache, self.noted_cache = self.noted_cache, {}
        for route, method, status, seconds, finished, routed in requests:
            self.fold_request(route, method, status, seconds, finished, routed)
        for stats in batches:
            self.batch_size.observe(stats.size)
            self.batch_tokens.observe(stats.padded_tokens)
            self.batch_padding.observe(stats.padding_ratio)
            self.batch_real_tokens.inc(stats.real_tokens)
            self.batch_padded_tokens.inc(stats.padded_tokens)
        for (name, hit), count in cache.items():
            (self.cache_hits if hit else self.cache_misses).labels(name).inc(count)

    def fold_request(
        self,
        route: str,
        method: str,
        status: int,
        seconds: float,
        finished: float,
        routed: bool = True,
    ) -> None:
        key = (route, method, status)
        children = self.request_children.get(key)
        if children is None:  # labels() locks and checks its values: once per combination
            children = (
                self.requests.labels(route, method, str(status)),
                self.latency.labels(route, method),
            )
            self.request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        # served: answered with a result. A refusal (400, 429, a full queue's 503) or a
        # timeout counted too, and an overloaded server showed more requests served and its
        # quick refusals' latency on /info
        if routed and (method, route) in INFERENCE_ROUTES and status < 300:
            self.served += 1
            self.window.add(finished, seconds)

    # --- the batcher's observer (tiankong.serving.batch_policy.BatchObserver) ---

    def observe_batch(self, stats: BatchStats) -> None:
        self.noted_batches.append(stats)
        self.noted()

    def set_queue_depth(self, depth: int) -> None:
        self.depth = depth

    def count_batcher_event(self, event: str, count: int = 1) -> None:
        self.batcher_events.labels(event).inc(count)

    # --- the caches' observer ---

    def observe_cache(self, cache: str, hit: bool) -> None:
        key = (cache, hit)
        self.noted_cache[key] = self.noted_cache.get(key, 0) + 1
        self.noted()

    def last_minute(self) -> WindowSummary:
        self.fold()
        return self.window.summary(time.monotonic())

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class Folder(Collector):
    """Folds what ``metrics`` noted whenever its registry is read; it has no metrics itself."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        self.metrics.fold()
        return []
