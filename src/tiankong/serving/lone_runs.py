"""When a lone request may run on the event loop's own thread (the batcher's inline path).

A request the server handles alone would otherwise take two thread wake-ups (to the engine
thread and back), which cost more than a cheap run. ``DynamicBatcher.can_run_inline`` lets it
run on the loop's thread when the server is handling no other request (the ``company`` it was
given says 0), the engine is idle with nothing waiting, and ``LoneRuns.cheap`` says a lone
item's run lately took at most ``INLINE_MAX_S`` of CPU and ``INLINE_MAX_WALL_S`` of wall time.
Before it runs, the request yields ``SETTLE_TURNS`` turns of the loop, so requests the server
has already read start and count as company: without them a closed loop of 20 clients ran one
by one inline (a mean batch of 1.2, and a real engine wants batches). A slower engine (a lone run
over either limit) always takes the engine thread, so the loop never stalls for long.

Pure bookkeeping: the batcher notes each lone run here (``note``) and asks ``cheap``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A lone request runs on the event loop's thread when a lone run lately took at most this much
# CPU time on the thread that ran it: a few times the two thread wake-ups it saves, and short
# enough that /health never waits long. (An engine whose pool threads share a run, as ONNX
# Runtime's do, shows its calling thread's share: up to ``threads`` times as long in wall time.)
INLINE_MAX_S = 0.003
# ... and its wall time at most this: a run that waits without the CPU (a GPU's forward pass)
# would hold the loop that long; on a busy machine a cheap run's wall time is a few times its CPU.
INLINE_MAX_WALL_S = 0.02
# Loop turns a lone request yields before it runs inline: a request the server has already read
# starts in them (a task is created in one turn and runs in the next) and counts as company, so
# a burst of requests goes to the batcher together instead of one by one on the loop.
SETTLE_TURNS = 2
# The weight of the newest run in the moving means.
NEWEST_WEIGHT = 0.2
# The longest Retry-After a full queue's 503 gives (the request timeout's scale).
MAX_RETRY_AFTER_S = 60


@dataclass
class LoneRuns:
    """What a lone item's engine run lately cost: moving means of its CPU time on the thread
    that ran it, and of its wall time. CPU time, not wall time, decides: on a busy machine a
    run's wall time is mostly waiting for a core or the GIL, which doesn't say what the run
    would cost the loop; the wall time is kept for a run that waits without the CPU (a GPU's)."""

    cpu_s: float | None = None
    wall_s: float | None = None

    def note(self, cpu_s: float, wall_s: float) -> None:
        self.cpu_s = moving_mean(self.cpu_s, cpu_s)
        self.wall_s = moving_mean(self.wall_s, wall_s)

    def cheap(self) -> bool:
        """Whether a lone run may take the loop's thread: measured, and under both limits."""
        if self.cpu_s is None or self.wall_s is None:
            return False
        return self.cpu_s <= INLINE_MAX_S and self.wall_s <= INLINE_MAX_WALL_S


@dataclass
class RowPace:
    """The engine's recent seconds per forward row (a moving mean over its batches), for a full
    queue's Retry-After: a client told 1 s whatever the queue held came back to another 503."""

    seconds_per_row: float | None = None

    def note(self, rows: int, seconds: float) -> None:
        if rows > 0:
            self.seconds_per_row = moving_mean(self.seconds_per_row, seconds / rows)

    def wait_s(self, rows: int) -> int | None:
        """Whole seconds until ``rows`` queued rows have run at this pace (1 to
        ``MAX_RETRY_AFTER_S``), or None before any batch ran."""
        if self.seconds_per_row is None:
            return None
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil(rows * self.seconds_per_row)))


def moving_mean(recent: float | None, seconds: float) -> float:
    if recent is None:
        return seconds
    return (1 - NEWEST_WEIGHT) * recent + NEWEST_WEIGHT * seconds
