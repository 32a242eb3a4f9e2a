"""Graceful drain's state: requests in flight, and whether the drain has begun.

Plain state with no HTTP in it, so any server can count its work here: the standalone server's
``RequestGuard`` (``server/middleware/guard.py``) and ``uvicorn_server`` use it.
"""

from __future__ import annotations

import time


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
