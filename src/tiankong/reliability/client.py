"""A closed-loop HTTP/1.1 load generator on raw asyncio streams, for loopback only.

Each of ``concurrency`` workers holds one keep-alive connection and sends its next request as
soon as the last one is answered (a closed loop: the offered load follows the server). The
client is a few lines of asyncio rather than an HTTP library so that, on a small machine, the
load generator costs far less CPU than the server it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
TRANSPORT_ERROR = 0  # the status recorded when no HTTP answer came back


@dataclass(frozen=True)
class Outcome:
    status: int  # TRANSPORT_ERROR when the connection failed or timed out
    latency_s: float
    finished_at: float  # time.monotonic()
    retry_after: bool = False
    error: str = ""


def check_loopback(host: str) -> None:
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"load goes to loopback only (127.0.0.1, localhost, ::1), not {host!r}")


def post(path: str, body: dict[str, Any], host: str) -> bytes:
    """One ready-to-send HTTP/1.1 POST of ``body`` as JSON."""
    payload = json.dumps(body, ensure_ascii=False).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    return head + payload


def predict_requests(texts: Sequence[str], host: str, top_k: int = 5) -> list[bytes]:
    """One ready-to-send POST /predict per text."""
    return [post("/predict", {"text": text, "top_k": top_k}, host) for text in texts]


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def exchange(self, request: bytes) -> tuple[int, dict[str, str]]:
        """Send one request, read the whole answer; returns the status and headers."""
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(request)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", ""):
            raise ValueError("chunked answers are not supported")
        await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, headers

    async def close(self) -> None:
        writer, self.reader, self.writer = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def closed_loop(
    host: str,
    port: int,
    requests: Sequence[bytes],
    concurrency: int,
    duration_s: float | None = None,
    total: int | None = None,
    timeout_s: float = 60.0,
    on_outcome: Callable[[Outcome], None] | None = None,
    rate_per_s: float | None = None,
) -> list[Outcome]:
    """Run ``concurrency`` workers until ``duration_s`` has passed or ``total`` requests were
    sent (whichever comes first; at least one must be given). Requests cycle through
    ``requests``. A worker whose request fails reconnects for the next one. With
    ``rate_per_s``, the workers together start at most that many requests a second (the n-th
    not before n / rate_per_s), so a long run can leave the machine room for other work."""
    check_loopback(host)
    if duration_s is None and total is None:
        raise ValueError("give duration_s or total")
    if rate_per_s is not None and rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be positive, not {rate_per_s}")
    began = time.monotonic()
    deadline = began + duration_s if duration_s is not None else float("inf")
    outcomes: list[Outcome] = []
    sent = 0

    async def worker(offset: int) -> None:
        nonlocal sent
        connection = Connection(host, port)
        try:
            while time.monotonic() < deadline and (total is None or sent < total):
                request = requests[(sent + offset) % len(requests)]
                sent += 1
                if rate_per_s is not None:
                    await asyncio.sleep(max(0.0, began + sent / rate_per_s - time.monotonic()))
                started = time.monotonic()
                try:
                    status, headers = await asyncio.wait_for(
                        connection.exchange(request), timeout_s
                    )
                    outcome = Outcome(
                        status,
                        time.monotonic() - started,
                        time.monotonic(),
                        "retry-after" in headers,
                    )
                except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as error:
                    await connection.close()
                    outcome = Outcome(
                        TRANSPORT_ERROR,
                        time.monotonic() - started,
                        time.monotonic(),
                        error=type(error).__name__,
                    )
                    await asyncio.sleep(0.05)  # a server that is down is not hammered
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
        finally:
            await connection.close()

    await asyncio.gather(*(worker(index * 7919) for index in range(concurrency)))
    return outcomes
