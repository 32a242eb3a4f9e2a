"""Graceful drain's state: requests in flight, and whether the drain has begun.

Plain state with no HTTP in it, so any server can count its work here: the standalone server's
``RequestGuard`` (``server/middleware/guard.py``) and ``uvicorn_server`` use it.
"""

from __future__ import annotations

import time

# After the drain: uvicorn gives what still runs CLOSE_GRACE_S, then the batcher waits for the
# engine's running call until CLOSE_BY_S after the drain's time; a watchdog ends a process still
# alive HARD_EXIT_MARGIN_S after it (exit code 1). The batcher's wait ends before the watchdog,
# so a hung engine call ends the process by the re-raised signal, not by the watchdog.
CLOSE_GRACE_S = 2
HARD_EXIT_MARGIN_S = 5.0
CLOSE_BY_S = HARD_EXIT_MARGIN_S - 1


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

    def close_wait(self, drain_timeout_s: float) -> float:
        """How long the batcher may still wait for the engine at the end: its own drain time,
        but never past ``drain_timeout_s + CLOSE_BY_S`` after the drain began."""
        if self.started_at is None:
            return drain_timeout_s
        left = self.started_at + drain_timeout_s + CLOSE_BY_S - time.monotonic()
        return max(0.0, min(drain_timeout_s, left))

    def settled(self, timeout_s: float) -> bool:
        """True once draining and nothing is in flight, or the drain has used its time."""
        if self.started_at is None:
            return False
        return self.in_flight == 0 or time.monotonic() - self.started_at >= timeout_s
