"""Graceful drain: after SIGTERM, requests in flight finish and new ones are turned away.

``Drain`` counts the HTTP requests in flight. ``begin()`` (``server/runner.py`` calls it on the
first SIGTERM or SIGINT) starts the drain: from then on every new request except ``/health``
gets 503 ``shutting_down`` with ``Retry-After`` and ``Connection: close``, ``/ready`` included,
so a load balancer stops sending work, while the requests already in flight run to the end.
The server closes once none is left or ``drain_timeout_s`` has passed.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Receive, Scope, Send

from tiankong.errors import ShuttingDownError

ALWAYS_ANSWERED = frozenset({"/health"})  # liveness: the process is still up while it drains


class Drain:
    def __init__(self) -> None:
        self.in_flight = 0
        self.started_at: float | None = None

    @property
    def draining(self) -> bool:
        return self.started_at is not None

    def begin(self) -> None:
        if self.started_at is None:
            self.started_at = time.monotonic()

    def settled(self, timeout_s: float) -> bool:
        """True once draining and nothing is in flight, or the drain has used its time."""
        if self.started_at is None:
            return False
        return self.in_flight == 0 or time.monotonic() - self.started_at >= timeout_s


class DrainMiddleware:
    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        # Imported here: error_handlers -> deps -> predictor (ServerState) -> this module.
        from tiankong.server.error_handlers import error_response

        self.app = app
        self.drain = drain
        error = ShuttingDownError("The server is shutting down; retry on another instance.")
        self.refusal = error_response(error, {"Connection": "close"})  # one immutable answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.drain.draining and scope["path"] not in ALWAYS_ANSWERED:
            await self.refusal(scope, receive, send)
            return
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1
