"""A closed-loop HTTP load generator: ``concurrency`` clients, each sending its next request as
soon as its last one is answered, every request a sentence no request before it used.

>>> import asyncio
>>> result = asyncio.run(closed_loop("http://127.0.0.1:8000/predict", 1, 0, count=10))
... # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.sentences import sentence

REQUEST_TIMEOUT_S = 120.0
TOP_K = 5


@dataclass(frozen=True)
class LoadResult:
    concurrency: int
    requests: int  # answered with 200
    errors: int  # any other status, a timeout or a broken connection
    seconds: float  # from the first request sent to the last answer received
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    error_samples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(
    concurrency: int, latencies: list[float], errors: list[str], seconds: float
) -> LoadResult:
    values = np.asarray(latencies or [float("nan")]) * 1e3
    return LoadResult(
        concurrency=concurrency,
        requests=len(latencies),
        errors=len(errors),
        seconds=round(seconds, 3),
        requests_per_s=round(len(latencies) / seconds, 2) if seconds > 0 else 0.0,
        p50_ms=round(float(np.percentile(values, 50)), 2),
        p95_ms=round(float(np.percentile(values, 95)), 2),
        p99_ms=round(float(np.percentile(values, 99)), 2),
        mean_ms=round(float(values.mean()), 2),
        max_ms=round(float(values.max()), 2),
        error_samples=sorted(set(errors))[:5],
    )


async def closed_loop(
    url: str,
    concurrency: int,
    first_index: int,
    count: int | None = None,
    duration_s: float | None = None,
) -> LoadResult:
    """POST ``{"text", "top_k"}`` to ``url`` until ``count`` requests were sent or
    ``duration_s`` has passed (no new request starts after it; those running finish)."""
    import aiohttp

    if count is None and duration_s is None:
        raise ValueError("give count or duration_s")
    indices = itertools.count(first_index)
    sent = 0
    latencies: list[float] = []
    errors: list[str] = []
    started = time.perf_counter()
    deadline = started + duration_s if duration_s is not None else float("inf")

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal sent
        while (count is None or sent < count) and time.perf_counter() < deadline:
            sent += 1
            body = {"text": sentence(next(indices)), "top_k": TOP_K}
            begin = time.perf_counter()
            try:
                async with session.post(url, json=body) as response:
                    await response.read()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError) as error:
                errors.append(type(error).__name__)
                continue
            if status == 200:
                latencies.append(time.perf_counter() - begin)
            else:
                errors.append(f"HTTP {status}")

    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
    return summarise(concurrency, latencies, errors, time.perf_counter() - started)


def run_load(
    url: str,
    concurrency: int,
    first_index: int,
    count: int | None = None,
    duration_s: float | None = None,
) -> LoadResult:
    return asyncio.run(closed_loop(url, concurrency, first_index, count, duration_s))
