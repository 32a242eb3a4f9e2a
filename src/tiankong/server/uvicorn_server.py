"""Run an app under uvicorn with a graceful drain on SIGTERM and deadlines for slow clients.

On the first SIGTERM (or SIGINT) the app starts draining (``middleware/drain.py``): requests in
flight finish, new ones get 503 ``shutting_down``, ``/ready`` turns 503. Once none is in
flight, or after ``drain_timeout_s``, uvicorn closes the listener and the connections, whatever
is still running gets ``CLOSE_GRACE_S`` more before it is cancelled, and the batcher stops,
waiting for the engine's running call until ``drain_timeout_s + CLOSE_BY_S`` after the signal at
most (``Drain.close_wait``); the signal is then re-raised. A second signal skips the drain
(uvicorn's own shutdown). If the process is somehow still alive ``drain_timeout_s +
HARD_EXIT_MARGIN_S`` after the signal, a watchdog ends it with exit code 1, so a SIGTERM always
ends the process in bounded time.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from tiankong.config import Settings
from tiankong.errors import EXIT_INTERNAL
from tiankong.server.middleware.slow_clients import head_timeout_protocol
from tiankong.server.state import ServerState
from tiankong.serving.drain import CLOSE_GRACE_S, HARD_EXIT_MARGIN_S, Drain

logger = logging.getLogger("tiankong.server")
LOG_FORMAT = "%(asctime)s %(levelprefix)s %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # ISO 8601, the machine's zone named
KEEP_ALIVE_S = 5  # an idle keep-alive connection is closed after this long


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Drain, drain_timeout_s: float) -> None:
        super().__init__(config)
        self.drain = drain
        self.drain_timeout_s = drain_timeout_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.drain.draining
        super().handle_exit(sig, frame)  # records the signal, so it is re-raised at the end
        if first and self.started:
            self.should_exit = False  # on_tick sets it once the drain has settled
            self.drain.begin()
            logger.info("draining: %d request(s) in flight", self.drain.in_flight)
            watchdog = threading.Timer(self.drain_timeout_s + HARD_EXIT_MARGIN_S, hard_exit)
            watchdog.daemon = True
            watchdog.start()

    async def on_tick(self, counter: int) -> bool:
        if not self.should_exit and self.drain.settled(self.drain_timeout_s):
            if self.drain.in_flight:
                logger.warning("drain timeout: %d request(s) still running", self.drain.in_flight)
            self.should_exit = True
        return await super().on_tick(counter)


def hard_exit() -> None:
    logger.error("the server did not stop in time after the drain; exiting now")
    logging.shutdown()
    os._exit(EXIT_INTERNAL)


def show_logs(level: str) -> None:
    """tiankong's own log lines (an export at a first start, the corpus index chosen, a drain,
    each request's access line) on stderr at ``--log-level``, in uvicorn's format with the
    time. Without a handler of its own Python printed only their warnings and errors, bare,
    and none of the rest."""
    from uvicorn.config import LOG_LEVELS
    from uvicorn.logging import DefaultFormatter

    logs = logging.getLogger("tiankong")
    logs.setLevel(LOG_LEVELS[level])
    if not any(getattr(handler, "tiankong_terminal", False) for handler in logs.handlers):
        handler = logging.StreamHandler()  # stderr, as uvicorn's own lines
        handler.setFormatter(DefaultFormatter(LOG_FORMAT, LOG_DATE_FORMAT))
        handler.tiankong_terminal = True  # type: ignore[attr-defined]
        logs.addHandler(handler)


def log_config() -> dict[str, Any]:
    """uvicorn's logging setup with the time at the start of each line, as tiankong's own."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter.update(fmt=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    return config


def counted_before_app(app: FastAPI) -> Callable[[int], None] | None:
    """What counts an answer the protocol gives before the app (``slow_clients``) in the app's
    ``tiankong_requests_total``: route ``unmatched``, method ``unknown`` (the head was not
    read). None for an app without tiankong's state."""
    state = getattr(getattr(app, "state", None), "tiankong", None)
    if not isinstance(state, ServerState):
        return None
    metrics = state.metrics

    def count(status: int) -> None:
        metrics.observe_request("unmatched", "unknown", status, 0.0, routed=False)

    return count


def uvicorn_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=log_config(),
        access_log=False,  # RequestGuard writes each request's line, with its time and id
        http=head_timeout_protocol(settings.client_timeout_s, counted_before_app(app)),
        ws="none",  # no WebSocket routes: an upgrade request is answered as plain HTTP
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=CLOSE_GRACE_S,
        # X-Forwarded-For names the client (the rate limit's address, the access line's) only
        # from the proxies named: uvicorn's default trusts it from 127.0.0.1, so through a
        # local proxy that passes the header on, a client chose its own address (a review)
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=trusted_proxies(settings.forwarded_allow_ips),
    )


def trusted_proxies(given: tuple[str, ...]) -> list[str] | None:
    """``--forwarded-allow-ip`` as uvicorn reads it: ``*`` trusts every address only alone in
    the list (beside an address it matched nothing: a review), so with it the list is ``*``."""
    return ["*"] if "*" in given else list(given) or None


def run_server(app: FastAPI, settings: Settings, listener: socket.socket) -> None:
    """Serve ``app`` (from ``create_app``) on an already bound ``listener`` until a signal."""
    state = app.state.tiankong
    assert isinstance(state, ServerState)
    server = DrainingServer(uvicorn_config(app, settings), state.drain, settings.drain_timeout_s)
    server.run(sockets=[listener])
