"""Limits for clients that send their request slowly (slowloris, a trickled body) or send an
endless request head.

uvicorn has an idle keep-alive timeout but no deadline for a request that has begun to arrive:
a client sending one header byte every few seconds holds its connection for ever, and one
trickling its body holds a handler. Nor does its httptools protocol bound the size of the
request head: one client could send gigabytes of headers into the server's memory. So:

* the request head (request line and headers) must be complete within ``client_timeout_s`` of
  the connection opening or the previous response finishing, else the connection is closed,
  and may be at most ``MAX_HEAD_BYTES``, else 431 ``headers_too_large`` and the connection is
  closed (``head_timeout_protocol``, a subclass of uvicorn's httptools protocol, which also
  answers a request that isn't HTTP in the one error shape);
* the body must be complete within the deadline of the handler starting to read it, else the
  request ends with 408 ``client_timeout`` and the connection closes (``RequestGuard``,
  ``guard.py``).

Neither blocks another request while it waits: the server is one event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from tiankong.errors import (
    BadInputError,
    HeadersTooLargeError,
    TiankongError,
    UrlTooLongError,
    mapping_for,
)
from tiankong.server import request_ids

logger = logging.getLogger("tiankong.server")
MAX_HEAD_BYTES = 1_048_576  # far above real heads
# httptools' URL parser keeps offsets in 16 bits: a longer URL fails to parse (uvicorn's
# "Invalid HTTP request received."), and is answered 414 with the way out, a POST
MAX_URL_BYTES = 65_535


def raw_error(error: TiankongError) -> bytes:
    """A whole HTTP answer in the one error shape, for the protocol (no ASGI app yet), named by
    a new request id as every other answer is (``X-Request-ID``; the client's can't be read
    from a head that wasn't parsed)."""
    status = mapping_for(error).http_status
    body = json.dumps(  # compact, as every other error body
        {"error": {"code": error.code, "message": error.message}}, separators=(",", ":")
    ).encode()
    named = request_ids.request_id(None)
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{request_ids.HEADER.decode()}: {named}\r\n"
        "x-content-type-options: nosniff\r\nconnection: close\r\n\r\n"
    )
    logger.info("answered %d %s before the app id=%s", status, error.code, named)
    return head.encode() + body


def head_too_large() -> HeadersTooLargeError:
    return HeadersTooLargeError(
        f"The request head is larger than the {MAX_HEAD_BYTES:,}-byte limit."
    )


class HeadTooLargeSignal(Exception):
    """Raised in the parser's callback to stop a head over the limit (never seen outside)."""


def head_timeout_protocol(
    timeout_s: float, on_answer: Callable[[int], None] | None = None
) -> type[asyncio.Protocol] | str:
    """uvicorn's httptools protocol with a deadline for each request head; "auto" (no head
    deadline, logged) where httptools is not installed. ``on_answer(status)``: told of each
    answer it gives before the app (the metrics count them: a 431 or a 400 was in none)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        logger.warning("httptools is not installed: slow request heads have no deadline")
        return "auto"

    class HeadTimeoutProtocol(HttpToolsProtocol):
        head_timer: asyncio.TimerHandle | None = None
        head_bytes = 0
        head_refused = False
        running_cycles: list[Any]  # requests still running behind a pipelined one

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.running_cycles = []
            super().connection_made(transport)
            self.arm_head_timer()

        def data_received(self, data: bytes) -> None:
            head_arriving = self.head_timer is not None
            super().data_received(data)
            if head_arriving and self.head_timer is not None:  # still no whole head
                self.head_bytes += len(data)
                if self.head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
                    self.answer(head_too_large())

        def send_400_response(self, msg: str) -> None:
            error: TiankongError = BadInputError("The request is not valid HTTP.")
            if self.head_refused:
                error = head_too_large()
            elif len(self.url) > MAX_URL_BYTES:
                error = UrlTooLongError(
                    f"The URL is longer than {MAX_URL_BYTES:,} bytes, the most this server "
                    "reads; send a long text in a JSON body with POST."
                )
            self.answer(error)

        def answer(self, error: TiankongError) -> None:
            self.transport.write(raw_error(error))
            self.transport.close()
            if on_answer is not None:
                on_answer(mapping_for(error).http_status)

        def on_headers_complete(self) -> None:
            self.disarm_head_timer()
            # The chunk that completes a head is parsed before data_received counts it, so a
            # head up to one read over the limit got through: the head as parsed is measured.
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > MAX_HEAD_BYTES:
                self.head_refused = True
                # raised in httptools' callback: uvicorn stops parsing and calls
                # send_400_response, which answers 431
                raise HeadTooLargeSignal
            running = self.cycle
            super().on_headers_complete()
            if running is not None and running is not self.cycle and not running.response_complete:
                # a pipelined request: uvicorn now holds only the new cycle, and on a hang-up
                # tells only it (connection_lost below tells the one still running too)
                self.running_cycles = [*self.unfinished(), running]

        def unfinished(self) -> list[Any]:
            return [cycle for cycle in self.running_cycles if not cycle.response_complete]

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self.arm_head_timer()  # the next request on this connection gets its own time

        def connection_lost(self, exc: Exception | None) -> None:
            self.disarm_head_timer()
            # A request running while the next was pipelined behind it never learnt the client
            # had gone: it ran to its end, and its answer, written to the closed transport,
            # was an "unhandled error" traceback counted as a 200 (a review). Each is told, as
            # uvicorn tells the last: its receive() answers http.disconnect (a 499, the work
            # stopped) and its send() writes nothing.
            for cycle in self.unfinished():
                cycle.disconnected = True
                cycle.message_event.set()
            self.running_cycles = []
            super().connection_lost(exc)

        def arm_head_timer(self) -> None:
            self.disarm_head_timer()
            self.head_bytes = 0
            self.head_timer = self.loop.call_later(timeout_s, self.head_timed_out)

        def disarm_head_timer(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def head_timed_out(self) -> None:
            self.head_timer = None
            idle = self.cycle is None or self.cycle.response_complete  # no request under way
            if idle and not self.transport.is_closing():
                self.transport.close()

    return HeadTimeoutProtocol
