"""Graceful drain: after SIGTERM, requests in flight finish and new ones are turned away.

``Drain`` (``serving/drain.py``) counts the HTTP requests in flight. ``begin()`` (called by
``server/uvicorn_server.py`` on the first SIGTERM or SIGINT) starts the drain: from then on
every new request except ``/health`` gets 503 ``shutting_down`` with ``Retry-After`` and
``Connection: close``, ``/ready`` included, so a load balancer stops sending work, while the
requests already in flight run to the end. The server closes once none is left or
``drain_timeout_s`` has passed.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tiankong.errors import ShuttingDownError
from tiankong.server.error_handlers import error_response
from tiankong.serving.drain import Drain

ALWAYS_ANSWERED = frozenset({"/health"})  # liveness: the process is still up while it drains


class DrainMiddleware:
    def __init__(self, app: ASGIApp, drain: Drain) -> None:
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
