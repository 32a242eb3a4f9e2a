"""Request metrics: a Prometheus registry per app, and a rolling one-minute window for /info.

``MetricsMiddleware`` sees every HTTP request once, after routing, so it labels by the route's
path template (``/predict``), never by the raw URL, and unmatched paths share one label.
The batch-size histogram and the queue-depth gauge are the hooks the dynamic batcher fills in.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Routes that run the model: their latency feeds the rolling window shown by /info.
INFERENCE_ROUTES = frozenset(
    {("POST", "/predict"), ("GET", "/predict"), ("POST", "/batch_predict"), ("POST", "/")}
)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


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
            "Texts per engine run.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "tiankong_queue_depth",
            "Requests waiting for the engine (stays 0 until the dynamic batcher exists).",
            registry=self.registry,
        )
        self.window = RollingWindow(window_seconds)
        self.inference_requests = 0

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)
        if (method, route) in INFERENCE_ROUTES:
            self.inference_requests += 1
            self.window.add(time.monotonic(), seconds)

    def observe_batch(self, size: int) -> None:
        self.batch_size.observe(size)

    def last_minute(self) -> WindowSummary:
        return self.window.summary(time.monotonic())

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI middleware: times each HTTP request and records its route and status."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before responding

        async def send_and_record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_and_record_status)
        finally:
            self.metrics.in_flight.dec()
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe_request(
                route, scope["method"], status, time.perf_counter() - started
            )
