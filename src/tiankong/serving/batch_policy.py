"""The dynamic batcher's policy, pure: which waiting items make the next batch.

No asyncio, threads or clocks here (``serving/batching.py`` owns the lifecycle: the queue,
admission, the engine thread, timeouts, drain); these functions only choose, so they are tested
on plain lists.

* **Full** means ``max_size`` items or ``max_tokens`` padded tokens (items × the longest item).
  An item longer than the budget on its own still runs, alone.
* **Length buckets, oldest first.** Each batch holds the oldest waiting item, so nothing
  starves, plus the waiting items nearest to it in length order, each added where it adds the
  least padding (``pack``). A batch is padded only to its own longest item.
* **Two lanes: plain items first** (``select_batch``). A batch is formed from the plain items
  first; a search's rows, oldest first, fill what room is left: at most
  ``search_rows_with_plain`` beside plain items and ``search_rows`` alone while plain requests
  are about, a whole batch otherwise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from tiankong.config import Settings
from tiankong.errors import BadOptionError
from tiankong.serving.timing import RequestTiming

# Search rows get the small shares of a batch while plain requests came in this recently.
PLAIN_RECENT_S = 1.0

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class BatchLimits:
    """The batcher's knobs (``Settings`` names in brackets)."""

    # The defaults are Settings' own, so each is written once (in config.py).
    window_s: float = Settings.batch_window_ms / 1000  # [batch_window_ms] wait for company,
    # only once the engine was busy
    max_size: int = Settings.max_batch_size  # [max_batch_size] items per engine call
    max_tokens: int = Settings.max_batch_tokens  # [max_batch_tokens] padded tokens per call
    max_queue: int = Settings.max_queue  # [max_queue] waiting items before 503
    timeout_s: float = Settings.request_timeout_s  # [request_timeout_s] queueing and running
    drain_timeout_s: float = Settings.drain_timeout_s  # [drain_timeout_s] close() waits for work

    @classmethod
    def from_settings(cls, settings: Settings) -> BatchLimits:
        return cls(
            window_s=settings.batch_window_ms / 1000,
            max_size=settings.max_batch_size,
            max_tokens=settings.max_batch_tokens,
            max_queue=settings.max_queue,
            timeout_s=settings.request_timeout_s,
            drain_timeout_s=settings.drain_timeout_s,
        )

    def __post_init__(self) -> None:
        """The limits' one check, where they are made (from settings, or by hand)."""
        if self.window_s < 0:
            raise BadOptionError("The batch window must be 0 ms or more.")
        if self.max_size < 1 or self.max_tokens < 1 or self.max_queue < 1:
            raise BadOptionError(
                "max_batch_size, max_batch_tokens and max_queue must each be at least 1."
            )
        if self.timeout_s <= 0:
            raise BadOptionError("The request timeout must be above 0 s.")
        if self.drain_timeout_s < 0:
            raise BadOptionError("The drain timeout must be 0 s or more.")

    def validated(self) -> BatchLimits:
        """The limits, checked (they were, when made)."""
        return self

    @property
    def search_rows(self) -> int:
        """Search rows per batch while plain requests are about: a quarter of a batch (8 at the
        default 32, one step of the default beam of 8). A plain request waits at most for one
        such batch on the engine, and a search step is one engine call, not one call a row (one
        row a batch made a whole-word search 6x slower whenever plain traffic was about)."""
        return max(1, self.max_size // 4)

    @property
    def search_rows_with_plain(self) -> int:
        """Search rows that ride in a batch with plain items: one per 32 rows of batch (1 at the
        default), so a plain batch grows by a row or so."""
        return max(1, self.max_size // 32)


@dataclass(frozen=True)
class BatchStats:
    """What one batch cost (one engine call, but for a batch whose rows ask for more output
    rows than one call may give, ``engines.engine_calls``): ``padded_tokens - real_tokens`` is
    padding."""

    size: int
    real_tokens: int
    padded_tokens: int
    seconds: float

    @property
    def padding_ratio(self) -> float:
        return 1 - self.real_tokens / self.padded_tokens if self.padded_tokens else 0.0


class BatchObserver(Protocol):
    """Where the batcher reports; the server's ServerMetrics implements it."""

    def observe_batch(self, stats: BatchStats) -> None: ...

    def set_queue_depth(self, depth: int) -> None: ...

    def count_batcher_event(self, event: str, count: int = 1) -> None:
        """``event``: skipped (cancelled before running), overloaded, timeout, failed_batch."""


class NullObserver:
    def observe_batch(self, stats: BatchStats) -> None:
        pass

    def set_queue_depth(self, depth: int) -> None:
        pass

    def count_batcher_event(self, event: str, count: int = 1) -> None:
        pass


@dataclass(eq=False)
class Pending(Generic[ItemT, ResultT]):
    item: ItemT
    size: int  # tokens
    future: asyncio.Future[ResultT]
    arrived_busy: bool  # the engine was busy when it arrived: the window may apply
    search: bool = False  # a search step's row: goes after the plain items
    arrived_at: float = field(default_factory=time.monotonic)
    timing: RequestTiming | None = None  # its request's Server-Timing figures, in a server


def select_batch(
    pending: Sequence[Pending[ItemT, ResultT]], limits: BatchLimits, plain_recent: bool
) -> tuple[list[Pending[ItemT, ResultT]], bool]:
    """The next batch (not yet removed) and whether it is full (a limit stopped it).

    Plain items first (``pack``); search rows, oldest first, fill the room left, at most
    ``search_rows_with_plain`` of them beside plain items and ``search_rows`` alone while
    plain requests are about (a whole batch otherwise).
    """
    plain = [entry for entry in pending if not entry.search]
    batch, full = pack(plain, limits) if plain else ([], False)
    if not plain_recent:
        share = limits.max_size
    elif plain:
        share = limits.search_rows_with_plain
    else:
        share = limits.search_rows
    room = min(limits.max_size - len(batch), share)
    if full or room <= 0:
        return batch, full or len(batch) >= limits.max_size
    longest = max((entry.size for entry in batch), default=0)
    added = 0
    for entry in pending:
        if not entry.search:
            continue
        grown = max(longest, entry.size)
        if batch and (len(batch) + 1) * grown > limits.max_tokens:
            return batch, True
        batch.append(entry)
        longest, added = grown, added + 1
        if added >= room:
            break
    return batch, len(batch) >= limits.max_size


def pack(
    entries: list[Pending[ItemT, ResultT]], limits: BatchLimits
) -> tuple[list[Pending[ItemT, ResultT]], bool]:
    """A batch of ``entries`` (arrival order) and whether a limit stopped it.

    The oldest entry anchors the batch; neighbours in length order join where each adds the
    least padding, while the batch stays within ``max_size`` items and ``max_tokens``.
    """
    anchor = entries[0]
    by_length = sorted(entries, key=lambda entry: entry.size)
    low = high = by_length.index(anchor)
    count, longest = 1, anchor.size
    while count < limits.max_size:
        options: list[tuple[int, int, int]] = []  # (added padding, side, new longest)
        if low > 0:
            shorter = by_length[low - 1]
            options.append((longest - shorter.size, -1, longest))
        if high < len(by_length) - 1:
            longer = by_length[high + 1]
            grown = max(longest, longer.size)
            options.append(((grown - longest) * count + grown - longer.size, 1, grown))
        if not options:
            break
        fitting = [option for option in options if (count + 1) * option[2] <= limits.max_tokens]
        if not fitting:
            return by_length[low : high + 1], True
        _, side, longest = min(fitting)
        if side < 0:
            low -= 1
        else:
            high += 1
        count += 1
    return by_length[low : high + 1], count >= limits.max_size
