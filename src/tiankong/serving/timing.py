"""Where one request's time went: waiting for the engine, on the engine, in all.

The server starts a ``RequestTiming`` per HTTP request and sets it in ``request_timing`` (a
context variable, so it follows the request's task and nothing global is shared); the batcher
notes when the request's texts started waiting and every engine run they were in. The server
sends the figures as a ``Server-Timing`` header, which browsers' devtools and load tools show.
Outside a server request (the library, the CLI) there is no timing and nothing is noted.
"""

from __future__ import annotations

from contextvars import ContextVar


class RequestTiming:
    """Seconds on ``time.perf_counter``'s clock. ``queue`` runs from the first text's arrival
    at the batcher to the first engine run it was in; ``engine`` sums the engine runs (a
    request whose texts ran in two batches counts both)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.waiting_since: float | None = None
        self.first_run: float | None = None
        self.last_run_started: float | None = None
        self.engine_s = 0.0

    def waiting(self, now: float) -> None:
        if self.waiting_since is None:
            self.waiting_since = now

    def ran(self, started: float, ended: float) -> None:
        if started == self.last_run_started:  # another text of this request, same run
            return
        self.last_run_started = started
        if self.first_run is None:
            self.first_run = started
        self.engine_s += ended - started

    @property
    def queue_s(self) -> float:
        if self.waiting_since is None or self.first_run is None:
            return 0.0
        return max(0.0, self.first_run - self.waiting_since)

    def header(self, now: float) -> tuple[bytes, bytes]:
        """The ``Server-Timing`` header (milliseconds), as an ASGI header pair."""
        total_ms = (now - self.started) * 1000
        value = (
            f"queue;dur={self.queue_s * 1000:.3f}, engine;dur={self.engine_s * 1000:.3f}, "
            f"total;dur={total_ms:.3f}"
        )
        return b"server-timing", value.encode()


request_timing: ContextVar[RequestTiming | None] = ContextVar("request_timing", default=None)
