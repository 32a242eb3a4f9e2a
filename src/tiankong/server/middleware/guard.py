"""One pure-ASGI layer for everything the server promises about an HTTP request.

Each HTTP request passes these stages, outermost first; the optional CORS and API-key layers
(``security.py``) sit between them where configured:

1. **metrics**: times the request and records its route template and status
   (``ServerMetrics``), 499 included; on the inference routes adds ``Server-Timing``
   (queue, engine, total); names the request (``X-Request-ID``: ``request_ids.py``) on its
   answer and writes its access line (``tiankong.access``, at info).
   *Host* (where ``hosts.host_check`` asks for it): a ``Host`` the server does not answer to
   is 400 ``bad_host``, before anything else runs (the DNS-rebinding guard).
2. *CORS* (only with ``cors_origins``): preflights are answered before the drain and the keys.
3. **drain**: counts the request in flight; once the drain has begun (after SIGTERM), every
   path but ``/health`` gets 503 ``shutting_down`` with ``Connection: close``.
4. *API keys and rate limit* (only when configured): before any body is read.
5. **body**: a declared Content-Length over ``max_body_bytes`` is 413 before the app runs, and a
   streamed body is counted as it arrives (413 as soon as it passes the limit); the body must
   arrive within ``client_timeout_s`` of the handler starting to read it (408
   ``client_timeout``, ``Connection: close``); and once the body is read, a client that
   disconnects cancels its handler, so its queued texts never run (recorded as 499, nothing is
   sent: the client is gone).

Neither Starlette nor uvicorn cancels a handler whose client has gone: the handler would wait
for the engine and answer no one. So once the app has its body, a watcher task owns
``receive`` and cancels the handler's task on ``http.disconnect``. The cancellation reaches
``DynamicBatcher.submit_many``, which cancels the request's futures, and the batcher drops them.

One layer instead of five: each layer wrapped ``receive`` and ``send`` in its own closures and
the disconnect watcher ran in an anyio task group; here one ``Exchange`` per request holds the
state and wraps each once, and the watcher is one plain asyncio task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import string
import time
from collections.abc import Set as AbstractSet
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiankong.errors import ShuttingDownError
from tiankong.server import request_ids
from tiankong.server.error_handlers import (
    CLIENT_CLOSED_REQUEST,
    body_encoded,
    body_too_large,
    error_response,
)
from tiankong.server.metrics import INFERENCE_ROUTES, ServerMetrics
from tiankong.server.middleware.hosts import HostCheck
from tiankong.server.middleware.security import Layer
from tiankong.serving.drain import Drain
from tiankong.serving.timing import RequestTiming, request_timing

access_log = logging.getLogger("tiankong.access")  # one line a request, at info
URL_PUNCTUATION = "".join(sorted(set(string.punctuation) - set('"\\')))  # a logged query's, as sent
ALWAYS_ANSWERED = frozenset({"/health"})  # liveness: the process is still up while it drains
EXCHANGE = "tiankong.exchange"  # the scope key of a request's Exchange


NOSNIFF = (b"x-content-type-options", b"nosniff")


class Exchange:
    """One HTTP request's state across the stages: its status, body and client."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, started: float) -> None:
        self.scope = scope
        self.raw_receive = receive
        self.raw_send = send
        self.timing = RequestTiming(started)
        self.declared = -1  # the Content-Length, if one was given
        self.encoded: str | None = None  # a Content-Encoding other than identity
        chunked = False
        given_id: bytes | None = None
        self.host: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                self.declared = int(value) if value.isdigit() else -1
            elif name == b"transfer-encoding":
                chunked = True
            elif name == request_ids.HEADER:
                given_id = value
            elif name == b"host" and self.host is None:  # the first, as Starlette reads it
                self.host = value
            elif name == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
                self.encoded = value.decode("latin-1")
        self.request_id = scope[request_ids.SCOPE_KEY] = request_ids.request_id(given_id)
        has_body = chunked or self.declared > 0
        self.status = 500  # what the client gets if the app raises before responding
        self.response_started = False
        self.response_done = False
        self.has_body = has_body
        self.body_read = not has_body
        self.empty_body_given = False
        self.received = 0
        self.deadline: float | None = None
        self.client_gone = False
        self.handler: asyncio.Task[None] | None = None
        self.watcher: asyncio.Task[None] | None = None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.response_started = True
            route = getattr(self.scope.get("route"), "path", None)  # set once routed
            headers = [
                *message.get("headers", ()),
                (request_ids.HEADER, self.request_id.encode()),
                NOSNIFF,  # every answer read as the type it says (JSON, the page's modules)
            ]
            if (self.scope["method"], route) in INFERENCE_ROUTES:
                headers.append(self.timing.header(time.perf_counter()))
            if not self.body_read and not any(name == b"connection" for name, _ in headers):
                # answered before its body arrived (a 413 by its length, a 401, a 429): the
                # rest of the body must not be read as the next request's head
                headers.append((b"connection", b"close"))
            message = {**message, "headers": headers}
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.response_done = True
        await self.raw_send(message)

    def watch(self) -> None:
        """From now on the watcher owns ``receive``: a disconnect cancels the handler."""
        loop = asyncio.get_running_loop()
        self.watcher = loop.create_task(self.wait_for_disconnect(), name="tiankong-disconnect")

    async def wait_for_disconnect(self) -> None:
        try:
            while True:
                message = await self.raw_receive()
                if message["type"] == "http.disconnect":
                    break
        except Exception:  # the server could not read: nothing to watch any more
            return
        if not self.response_done and self.handler is not None:
            self.client_gone = True
            self.handler.cancel()


def log_access(scope: Scope, exchange: Exchange, elapsed_s: float) -> None:
    """The request's access line: uvicorn's (client, request line, status) with the time it
    took and its id; 499 where the client hung up first. Its own lines are off (one a request)."""
    client = scope.get("client")
    address = f"{client[0]}:{client[1]}" if client else "-"
    target = quote(scope["path"])  # percent-encoded, as uvicorn's: one line, whatever was sent
    if query := scope.get("query_string", b""):
        target += "?" + quote(query, safe=URL_PUNCTUATION)
    access_log.info(
        '%s "%s %s HTTP/%s" %d %.1f ms id=%s',
        address,
        scope["method"],
        target,
        scope.get("http_version", "1.1"),
        exchange.status,
        elapsed_s * 1000.0,
        exchange.request_id,
    )


STATIC_PATH = "/static"  # where server/app.py mounts the page's files
DOCS_ASSETS_PATH = "/docs-assets"  # and /docs's (Swagger UI's script, style and icon)
MOUNTS = (STATIC_PATH, DOCS_ASSETS_PATH)  # a mount sets no route: one label each


def route_label(scope: Scope, known_paths: AbstractSet[str] = frozenset()) -> str:
    """The metrics label of a request: its route's path template. An inference request
    answered before routing (a 413 by its Content-Length, a 401, a 429, the drain's 503) is
    labelled by its route too, as one whose body ran over mid-stream is: the same 413 was
    counted under ``unmatched`` or ``/predict`` by how the body was sent. So is a request to
    one of ``known_paths`` (the app's routes without parameters: /info, /metrics) answered
    before routing, a missing API key's 401 (counted as a probe of unknown paths before)."""
    route = getattr(scope.get("route"), "path", None)
    if route is None and (scope["method"], scope["path"]) in INFERENCE_ROUTES:
        route = scope["path"]  # these routes' templates are their paths
    if route is None:
        route = next((mount for mount in MOUNTS if scope["path"].startswith(f"{mount}/")), None)
    if route is None and scope["path"] in known_paths:
        route = scope["path"]  # /info or /metrics answered 401 before routing
    return route or "unmatched"


class RequestGuard:
    """Metrics, drain, body limit and deadline and disconnects, in one layer (module docstring).

    ``cors`` and ``security`` are the optional layers (``security.cors_layer``,
    ``security.security_layer``), placed between the stages as the docstring says.
    """

    def __init__(
        self,
        app: ASGIApp,
        metrics: ServerMetrics,
        drain: Drain,
        max_body_bytes: int,
        client_timeout_s: float,
        cors: Layer | None = None,
        security: Layer | None = None,
        known_paths: AbstractSet[str] = frozenset(),
        hosts: HostCheck | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts  # None: any Host is answered
        self.known_paths = known_paths  # route_label's
        self.metrics = metrics
        self.drain = drain
        self.limit = max_body_bytes
        self.timeout_s = client_timeout_s
        error = ShuttingDownError("The server is shutting down; retry on another instance.")
        self.refusal = error_response(error, {"Connection": "close"})  # one immutable answer
        after_drain: ASGIApp = self.body_stage
        self.after_drain = security(after_drain) if security else after_drain
        after_metrics: ASGIApp = self.drain_stage
        self.after_metrics = cors(after_metrics) if cors else after_metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        exchange = scope[EXCHANGE] = Exchange(scope, receive, send, started)
        token = request_timing.set(exchange.timing)
        self.metrics.requests_in_flight += 1
        try:
            if self.hosts is None or self.hosts.allows(exchange.host):
                await self.after_metrics(scope, receive, exchange.send)
            else:
                refusal = error_response(self.hosts.refusal(exchange.host or b""))
                await refusal(scope, receive, exchange.send)
        finally:
            request_timing.reset(token)
            self.metrics.requests_in_flight -= 1
            elapsed = time.perf_counter() - started
            self.metrics.observe_request(
                route_label(scope, self.known_paths),
                scope["method"],
                exchange.status,
                elapsed,
                routed=scope.get("route") is not None,
            )
            if access_log.isEnabledFor(logging.INFO):
                log_access(scope, exchange, elapsed)

    async def drain_stage(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.drain.draining and scope["path"] not in ALWAYS_ANSWERED:
            await self.refusal(scope, receive, send)
            return
        self.drain.in_flight += 1
        try:
            await self.after_drain(scope, receive, send)
        finally:
            self.drain.in_flight -= 1

    async def body_stage(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange: Exchange = scope[EXCHANGE]
        if exchange.declared > self.limit:
            await error_response(body_too_large(self.limit))(scope, receive, send)
            return
        if exchange.encoded is not None and exchange.has_body:
            # it was read as it came: gzip bytes were "not UTF-8" (422), a body labelled gzip
            # but sent plain was answered
            await error_response(body_encoded(exchange.encoded))(scope, receive, send)
            return
        handler = asyncio.current_task()
        exchange.handler = handler
        if exchange.body_read:
            exchange.watch()
        try:
            await self.app(scope, self.receiver(exchange), send)
        except asyncio.CancelledError:
            # Our own cancellation (the client went) ends here; any other goes on.
            if not exchange.client_gone or handler is None or handler.uncancel() > 0:
                if self.drain.draining and not exchange.response_started:
                    # the drain's time is up and uvicorn cancels what is left: the client gets
                    # the one JSON shape (503 shutting_down), not uvicorn's plain-text 500,
                    # and the request ends there, answered (re-raised, uvicorn logged it as
                    # "Exception in ASGI application" with the cancellation's traceback)
                    with contextlib.suppress(Exception):  # a gone client: the cancel goes on
                        await self.refusal(scope, receive, send)
                        return
                raise
        finally:
            exchange.response_done = True  # the app is done: a disconnect now cancels nothing
            if exchange.watcher is not None:
                exchange.watcher.cancel()
        if exchange.client_gone and not exchange.response_started:
            # Nothing reaches the client; this lets the metrics record what happened.
            await send({"type": "http.response.start", "status": CLIENT_CLOSED_REQUEST})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def receiver(self, exchange: Exchange) -> Receive:
        """The app's ``receive``: the body within its limit and deadline, then the watcher's."""
        receive = exchange.raw_receive

        async def app_receive() -> Message:
            if not exchange.body_read:
                return await self.read_body(exchange)
            if not exchange.empty_body_given and not exchange.has_body:
                exchange.empty_body_given = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if exchange.watcher is None:  # only after a disconnect during the body
                return await receive()
            await asyncio.shield(exchange.watcher)  # the watcher owns receive now
            return {"type": "http.disconnect"}

        return app_receive

    async def read_body(self, exchange: Exchange) -> Message:
        if exchange.deadline is None:  # counted from the first read, so queueing never counts
            exchange.deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            async with asyncio.timeout_at(exchange.deadline):
                message = await exchange.raw_receive()
        except TimeoutError:
            # FastAPI hands an HTTPException raised while reading the body to the handlers,
            # which answer it from the error table (408 client_timeout).
            raise HTTPException(408) from None
        if message["type"] != "http.request":
            return message  # a disconnect while the body arrives
        exchange.received += len(message.get("body", b""))
        if exchange.received > self.limit:
            raise HTTPException(413)  # answered from the error table as well
        if not message.get("more_body", False):
            exchange.body_read = True
            exchange.watch()
        return message
