"""The expensive-request suite: one client floods costly searches beside plain traffic.

Phases, on one server:

1. **idle**: plain ``POST /predict`` at ``plain_concurrency`` for ``idle_s``: the baseline.
2. **flood**: the same plain traffic for ``flood_s`` while one flood client sends, in turn,
   ``POST /batch_predict`` with ``flood_texts`` texts of ``flood_masks`` adjacent [MASK]s
   (``whole_word``, ``beam_width`` 64, ``top_k`` 50, each text a little different, so no cache
   helps) and ``POST /predict`` with one such text. A refused flood request (4xx, 503) is
   retried after ``refused_pause_s``, as a client that reads the answer would.
3. **deadline**: nothing else running, one ``/batch_predict`` of ``deadline_texts`` flood texts,
   each lengthened by ``deadline_padding_chars`` characters in front
   (under the default cost cap, and more work than a CPU does in the request timeout) until
   its answer (200 with per-text timeouts, or 504); then ``GET /info`` every few ms until the
   engine is idle (no search admitted, nothing queued, no batch running): how long after the
   deadline the engine went idle.
4. **disconnect**: one flood ``/predict`` whose client closes the connection after
   ``disconnect_after_s``; the same measurement from the moment it left.

Checks: every flood answer came within the request timeout + 2 s, or was refused within 1 s;
the plain requests' p99 under the flood is within 2x their idle p99 (every plain request
served); the engine went idle within ``idle_limit_s`` after the deadline and the disconnect.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from tiankong.reliability.client import Connection, closed_loop, post, predict_requests
from tiankong.reliability.server import ProcessSampler, ServerUnderTest
from tiankong.reliability.stats import summarize
from tiankong.reliability.suites import contention

INFO_POLL_S = 0.005
REFUSED_AT_ONCE_S = 1.0


@dataclass(frozen=True)
class ExpensivePlan:
    plain_concurrency: int = 4
    idle_s: float = 30.0
    flood_s: float = 90.0
    flood_texts: int = 64
    flood_masks: int = 16
    beam_width: int = 64
    top_k: int = 50
    refused_pause_s: float = 0.2
    deadline_texts: int = 15  # 15 x 1,025 forward rows: within the default cap of 16,384
    # Each deadline text starts with this many more characters: the cap counts rows, not their
    # length, so long rows make the same request outlast the deadline on a fast, quiet machine
    # too (with short texts it took 23.5 s of a 30 s deadline on two idle cores).
    deadline_padding_chars: int = 90
    disconnect_after_s: float = 1.0
    idle_limit_s: float = 1.0  # about one step of the flood's search on a CPU
    fairness_ratio: float = 2.0


QUICK_EXPENSIVE = ExpensivePlan(idle_s=4, flood_s=8, flood_texts=8, disconnect_after_s=0.3)


def flood_texts(count: int, masks: int) -> list[str]:
    """``count`` texts with ``masks`` adjacent [MASK]s, each a little different."""
    return [f"第{index + 1}回，他说{'[MASK]' * masks}，大家都笑了。" for index in range(count)]


def flood_requests(plan: ExpensivePlan, host: str, round_: int) -> list[tuple[str, bytes]]:
    """One /batch_predict and one /predict, their texts unlike any earlier round's."""
    options = {"mode": "whole_word", "beam_width": plan.beam_width, "top_k": plan.top_k}
    texts = flood_texts(plan.flood_texts * (round_ + 1), plan.flood_masks)[-plan.flood_texts :]
    single = f"第{round_}遍：{texts[0]}"
    return [
        ("/batch_predict", post("/batch_predict", {"texts": texts, **options}, host)),
        ("/predict", post("/predict", {"text": single, **options}, host)),
    ]


@dataclass(frozen=True)
class FloodOutcome:
    route: str
    status: int
    latency_s: float


async def flood(
    server: ServerUnderTest, plan: ExpensivePlan, duration_s: float
) -> list[FloodOutcome]:
    """One client: the flood requests in turn, each on a fresh round of texts."""
    outcomes: list[FloodOutcome] = []
    deadline = time.monotonic() + duration_s
    connection = Connection(server.host, server.port)
    round_ = 0
    try:
        while time.monotonic() < deadline:
            for route, request in flood_requests(plan, server.host, round_):
                started = time.monotonic()
                try:
                    status, _ = await asyncio.wait_for(connection.exchange(request), 600)
                except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
                    await connection.close()
                    status = 0
                outcomes.append(FloodOutcome(route, status, time.monotonic() - started))
                if status not in (200, 504):
                    await asyncio.sleep(plan.refused_pause_s)
            round_ += 1
    finally:
        await connection.close()
    return outcomes


async def batching_info(server: ServerUnderTest) -> dict[str, Any]:
    """GET /info's ``batching`` section, on a connection of its own."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(f"GET /info HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = 0
        for line in head.split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        info: dict[str, Any] = json.loads(await reader.readexactly(length))["batching"]
        return info
    finally:
        writer.close()


async def seconds_until_idle(server: ServerUnderTest, since: float, limit_s: float = 60.0) -> float:
    """From ``since`` until /info shows no search admitted, nothing queued, the engine free."""
    while time.monotonic() - since < limit_s:
        info = await batching_info(server)
        if not info["searches"] and not info["queue_depth"] and not info["engine_busy"]:
            return round(time.monotonic() - since, 3)
        await asyncio.sleep(INFO_POLL_S)
    raise RuntimeError(f"the engine was still busy {limit_s:.0f} s after the request ended")


async def after_deadline(server: ServerUnderTest, plan: ExpensivePlan) -> dict[str, Any]:
    padding = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。" * (
        plan.deadline_padding_chars // 24 + 1
    )
    texts = [
        padding[: plan.deadline_padding_chars] + text
        for text in flood_texts(plan.deadline_texts + 10_000, plan.flood_masks)[
            -plan.deadline_texts :
        ]
    ]
    options = {"mode": "whole_word", "beam_width": plan.beam_width, "top_k": plan.top_k}
    request = post("/batch_predict", {"texts": texts, **options}, server.host)
    connection = Connection(server.host, server.port)
    started = time.monotonic()
    try:
        status, _ = await connection.exchange(request)
    finally:
        await connection.close()
    answered = time.monotonic()
    return {
        "status": status,
        "answered_after_s": round(answered - started, 3),
        "engine_idle_after_s": await seconds_until_idle(server, answered),
    }


async def after_disconnect(server: ServerUnderTest, plan: ExpensivePlan) -> dict[str, Any]:
    _, request = flood_requests(plan, server.host, 20_000)[1]
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(request)
    await writer.drain()
    await asyncio.sleep(plan.disconnect_after_s)
    answered = reader.at_eof() or len(await peek(reader)) > 0
    writer.close()
    left = time.monotonic()
    return {
        "answered_before_leaving": answered,  # then there was no search left to stop
        "engine_idle_after_s": await seconds_until_idle(server, left),
    }


async def peek(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(1), 0.001)
    except TimeoutError:
        return b""


def flood_summary(outcomes: list[FloodOutcome], timeout_s: float) -> dict[str, Any]:
    by_route: dict[str, Any] = {}
    for route in sorted({outcome.route for outcome in outcomes}):
        mine = [outcome for outcome in outcomes if outcome.route == route]
        by_route[route] = {
            "statuses": dict(sorted(Counter(str(o.status) for o in mine).items())),
            "slowest_answer_s": round(max(o.latency_s for o in mine), 3),
            "slowest_refusal_s": round(
                max((o.latency_s for o in mine if o.status not in (200, 504)), default=0.0), 3
            ),
        }
    in_time = all(
        outcome.latency_s <= timeout_s + 2.0
        if outcome.status in (200, 504)
        else 400 <= outcome.status < 600 and outcome.latency_s <= REFUSED_AT_ONCE_S
        for outcome in outcomes
    )
    return {"routes": by_route, "all_in_time": in_time}


async def run_expensive(
    server: ServerUnderTest, plan: ExpensivePlan, texts: list[str], timeout_s: float, quick: bool
) -> dict[str, Any]:
    sampler = ProcessSampler(server.pid, 1.0)
    sampling = asyncio.create_task(sampler.run())
    try:
        report = await expensive_phases(server, plan, texts, timeout_s, quick)
    finally:
        sampling.cancel()
    report["contention"] = contention(sampler.samples)
    return report


async def expensive_phases(
    server: ServerUnderTest, plan: ExpensivePlan, texts: list[str], timeout_s: float, quick: bool
) -> dict[str, Any]:
    plain = predict_requests(texts, server.host)
    await closed_loop(server.host, server.port, plain, plan.plain_concurrency, duration_s=1.0)
    started = time.monotonic()
    idle = await closed_loop(
        server.host, server.port, plain, plan.plain_concurrency, duration_s=plan.idle_s
    )
    idle_summary = summarize(idle, time.monotonic() - started)
    started = time.monotonic()
    beside, flooded = await asyncio.gather(
        closed_loop(
            server.host, server.port, plain, plan.plain_concurrency, duration_s=plan.flood_s
        ),
        flood(server, plan, plan.flood_s),
    )
    beside_summary = summarize(beside, time.monotonic() - started)
    floods = flood_summary(flooded, timeout_s)
    deadline = await after_deadline(server, plan)
    disconnect = await after_disconnect(server, plan)
    idle_p99, flood_p99 = idle_summary["p99_ms"] or 0.0, beside_summary["p99_ms"] or 0.0
    ratio = round(flood_p99 / idle_p99, 2) if idle_p99 else None
    fairness = f"plain p99 under the flood within {plan.fairness_ratio:g}x idle"
    checks = {
        "every flood request answered within the timeout + 2 s, or refused within 1 s": floods[
            "all_in_time"
        ],
        "every plain request served (200), idle and under the flood": set(idle_summary["statuses"])
        == set(beside_summary["statuses"])
        == {"200"},
        # a few seconds of a shared CI machine say little about a latency ratio: reported only
        (fairness + (" (reported, not checked, in --quick)" if quick else "")): quick
        or (ratio is not None and ratio <= plan.fairness_ratio),
        f"the deadline request ran into its {timeout_s:g} s deadline": deadline["answered_after_s"]
        >= timeout_s - 0.1,
        f"engine idle within {plan.idle_limit_s:g} s after the deadline": deadline[
            "engine_idle_after_s"
        ]
        <= plan.idle_limit_s,
        f"engine idle within {plan.idle_limit_s:g} s after the client left": disconnect[
            "engine_idle_after_s"
        ]
        <= plan.idle_limit_s,
    }
    return {
        "plan": asdict(plan),
        "request_timeout_s": timeout_s,
        "plain_idle": idle_summary,
        "plain_under_flood": beside_summary,
        "p99_ratio": ratio,
        "flood": floods,
        "after_deadline": deadline,
        "after_disconnect": disconnect,
        "checks": checks,
    }
