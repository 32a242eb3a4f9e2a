"""The asyncio dynamic batcher: one future per request item, one engine worker thread.

>>> batcher = DynamicBatcher(run_batch=lambda texts: [t.upper() for t in texts], size_of=len,
...                          limits=BatchLimits(window_s=0.002))  # doctest: +SKIP
>>> await batcher.start()                                        # doctest: +SKIP
>>> await batcher.submit_many(["a", "bc"])                       # doctest: +SKIP
['A', 'BC']

Policy ("continuous" batching; the engine is the one scarce resource):

* **Idle engine: run at once.** An item that arrives while the engine is idle goes to the engine
  on the next turn of the event loop, together with whatever arrived in that same turn. A lone
  request at low load never waits for the window.
* **A lone request runs inline** (``can_run_inline``; the rule and its limits are
  ``serving/lone_runs.py``): when the server is handling nothing else and a lone run is cheap,
  a one-text request runs on the event loop's own thread, with no scheduler turn and no hop to
  the engine thread and back. Without ``company`` (the library's and Ray's batchers) nothing
  runs inline.
* **Busy engine: accumulate.** Items that arrive while a batch (or an exclusive job) runs wait
  in the queue and go in the next batch. When the engine frees up and the waiting items don't
  fill a batch, the batcher waits up to ``window_s`` *from that moment* for more to arrive
  (closing early as soon as the batch is full). Under a closed-loop load the clients whose
  answers just went out come back within a few ms, so the window turns "1, 19, 1, 19" batches
  into batches of 20. ``window_s = 0`` is pure continuous batching.
* **Which items make a batch** is ``serving/batch_policy.py`` (pure): full at ``max_size``
  items or ``max_tokens`` padded tokens, length buckets anchored on the oldest item, plain items
  first and a search's rows (sent by its worker thread through ``submit_many(..., search=True)``)
  in what room is left. So a plain request waits at most for one small search batch on the
  engine, never for a whole search.
* **Backpressure, in forward rows.** The queue counts engine work in forward rows (a plain text
  is one; a search reserves its estimate, ``PreparedRequest.forward_rows``, from admission until
  it ends). A plain request counts the plain rows waiting (search rows never go before it); a
  search counts every row waiting or reserved. Over ``max_queue`` the request is refused whole
  with ``OverloadedError`` (503 + Retry-After); a request larger than the whole queue is
  admitted only when no request of its own kind is ahead of it (a search: no other search);
  a search reserves at most half the queue, leaving room for other searches. A search that
  does not fit beside the searches running **waits for them**, first come first served, up to
  its deadline (then 504), as long as the searches waiting reserve no more than the queue
  (past that, 503): the room it waits for is theirs to give back. Two users proofreading a
  paragraph each at once got a 503 on an idle server (the first search held half the queue).
  The wait is fair: a search that comes later waits behind those already waiting.
* **Timeouts and cancellation.** Each request waits at most ``timeout_s``, or until the
  ``deadline`` it passes (``RequestTimeoutError``, 504). A request that is cancelled (timeout,
  client gone) cancels its futures and takes its queued items out of the queue before it
  returns, even while the engine is busy; items already on the engine finish, and their
  results are dropped. A search checks its deadline and its client before each step (the
  predictor's ``StepScorer``), so it stops within one step.
* **Failures.** If ``run_batch`` raises or returns the wrong number of results, every future of
  that batch gets an ``EngineError`` with one short error id (logged with the traceback), and the
  batcher carries on. A result that is an ``Exception`` is that item's own error, raised to its
  caller alone (``run_jobs``: a text a broken model gives no numbers for). If the scheduler
  itself ever stops on a bug, every waiting future is failed and later submissions are refused:
  nothing hangs silently.
* **Exclusive jobs** (``run_exclusive``: the warm-up) run alone on the same worker thread.
  They and the batches take turns through one FIFO-fair ``asyncio.Lock``, so a job waits at
  most for the batch that is running and a batch for the jobs queued before it: neither can
  starve the other, and since no job ever waits on the batcher while holding the lock, they
  cannot deadlock.
* **Shutdown.** ``close()`` refuses new work (``ShuttingDownError``, 503), runs everything already
  queued and the steps of the searches already admitted, then stops the worker; what is still
  waiting after the drain timeout is failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

from tiankong.errors import (
    EngineError,
    OverloadedError,
    RequestTimeoutError,
    ShuttingDownError,
    new_error_id,
)
from tiankong.serving.batch_policy import (
    PLAIN_RECENT_S,
    BatchLimits,
    BatchObserver,
    BatchStats,
    NullObserver,
    Pending,
    select_batch,
)
from tiankong.serving.lone_runs import SETTLE_TURNS, LoneRuns, RowPace
from tiankong.serving.timing import RequestTiming, request_timing

logger = logging.getLogger("tiankong.serving.batching")
ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
JobT = TypeVar("JobT")


class DynamicBatcher(Generic[ItemT, ResultT]):
    """Batches items for ``run_batch`` (called on the worker thread with a list of items, must
    return one result per item, in order, an item's own error as its result). ``size_of`` gives
    an item's length in tokens."""

    def __init__(
        self,
        run_batch: Callable[[list[ItemT]], Sequence[ResultT]],
        size_of: Callable[[ItemT], int],
        limits: BatchLimits | None = None,
        observer: BatchObserver | None = None,
        company: Callable[[], int] | None = None,
    ) -> None:
        self.run_batch = run_batch
        # The other requests the server is handling now; given, a lone request may run inline.
        self.company = company
        self.lone_runs = LoneRuns()  # what a lone item's run lately cost (lone_runs.py)
        self.pace = RowPace()  # the engine's seconds per row lately: a full queue's Retry-After
        self.size_of = size_of
        self.limits = limits or BatchLimits()
        self.observer: BatchObserver = observer or NullObserver()
        self.pending: list[Pending[ItemT, ResultT]] = []  # arrival order
        self.running: list[Pending[ItemT, ResultT]] = []  # the batch on the engine now
        self.exclusive_waiting = 0
        self.search_reserved = 0  # forward rows reserved by the searches admitted and not ended
        self.searches = 0  # searches admitted and not ended
        # searches waiting for room, in arrival order: each one's share of the queue
        self.search_waiters: deque[tuple[object, int]] = deque()
        self.search_room = asyncio.Condition()  # notified when a search ends or leaves the line
        self.last_plain_at = -PLAIN_RECENT_S  # when the last plain item arrived
        self.engine_lock = asyncio.Lock()  # FIFO-fair: batches and exclusive jobs take turns
        self.executor: ThreadPoolExecutor | None = None
        self.scheduler: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()
        self.closing = False
        self.broken: BaseException | None = None

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the scheduler task and the engine worker thread (needs a running loop)."""
        if self.scheduler is not None:
            return
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tiankong-engine")
        self.scheduler = asyncio.get_running_loop().create_task(
            self.schedule(), name="tiankong-batcher"
        )
        self.scheduler.add_done_callback(self.on_scheduler_exit)

    async def close(self, timeout_s: float | None = None) -> None:
        """Refuse new work, finish what is queued or running, then stop the worker."""
        self.closing = True
        self.wake.set()
        async with self.search_room:  # the searches waiting for room are refused
            self.search_room.notify_all()
        timeout_s = self.limits.drain_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        if self.scheduler is not None and not self.scheduler.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.scheduler), timeout_s)
            except TimeoutError:
                logger.warning("batcher: %d items still queued after the drain", self.depth)
                self.scheduler.cancel()
            except Exception:
                pass  # it stopped on a bug, already logged by on_scheduler_exit
        try:  # the exclusive jobs queued before close() run too
            remaining = max(0.0, deadline - time.monotonic())
            await asyncio.wait_for(self.engine_lock.acquire(), remaining)
            self.engine_lock.release()
        except TimeoutError:
            pass
        self.fail_waiting(shutting_down)
        if self.executor is not None:
            self.executor.shutdown(wait=False)

    def on_scheduler_exit(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        error_id = new_error_id()
        logger.critical("batcher %s: the scheduler stopped", error_id, exc_info=error)
        self.broken = error
        self.fail_waiting(lambda: engine_error(error_id))

    # --- submitting -----------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Items waiting for the engine (cancelled ones excluded), exclusive jobs included."""
        return sum(not entry.future.done() for entry in self.pending) + self.exclusive_waiting

    @property
    def plain_depth(self) -> int:
        """The rows that go before a new plain item: plain items and exclusive jobs waiting."""
        waiting = sum(not (entry.search or entry.future.done()) for entry in self.pending)
        return waiting + self.exclusive_waiting

    @property
    def busy(self) -> bool:
        return self.engine_lock.locked()

    def describe(self) -> dict[str, Any]:
        """The policy, limits and queue depth, as GET /info shows them under ``batching``."""
        limits = self.limits
        return {
            "policy": "continuous",
            "batch_window_ms": limits.window_s * 1000,
            "max_batch_size": limits.max_size,
            "max_batch_tokens": limits.max_tokens,
            "max_queue": limits.max_queue,
            "request_timeout_s": limits.timeout_s,
            "search_rows_per_batch": limits.search_rows,
            "search_rows_beside_plain": limits.search_rows_with_plain,
            "queue_depth": self.depth,
            "searches": self.searches,
            "search_rows_reserved": self.search_reserved,
            "searches_waiting": len(self.search_waiters),
            "engine_busy": self.busy,
        }

    def check_open(self) -> None:
        if self.closing:
            raise shutting_down()
        if self.broken is not None or self.scheduler is None:
            raise EngineError("The engine worker is not running; see the server log.")

    def admit(self, count: int) -> None:
        """Raise OverloadedError unless ``count`` more plain rows fit in the queue behind the
        plain rows and exclusive jobs waiting (search rows never go before them). A request
        larger than the queue is admitted when nothing is ahead of it."""
        self.check_open()
        self.prune()
        depth = self.plain_depth
        if depth and depth + count > self.limits.max_queue:
            self.observer.count_batcher_event("overloaded")
            raise self.overloaded(f"{depth} forward rows queued", depth)

    def overloaded(self, why: str, rows_ahead: int) -> OverloadedError:
        """The full queue's 503, with how long the rows ahead take at the engine's pace."""
        wait_s = self.pace.wait_s(rows_ahead)
        when = "shortly" if wait_s is None else f"in about {wait_s} s"
        return OverloadedError(f"The server is busy ({why}); retry {when}.", wait_s)

    def search_share(self, cost: int) -> int:
        """The rows a search of ``cost`` reserves while it runs: at most half the queue."""
        return min(cost, max(1, self.limits.max_queue // 2))

    def search_fits(self, cost: int) -> bool:
        """Whether a search of ``cost`` fits behind every row waiting or reserved (one larger
        than the queue fits when no other search is running)."""
        reserved = self.search_reserved
        return not reserved or self.plain_depth + reserved + cost <= self.limits.max_queue

    @asynccontextmanager
    async def search_admission(
        self, cost: int, deadline: float | None = None
    ) -> AsyncIterator[None]:
        """Admit a search of ``cost`` forward rows (everything queued or reserved is ahead of
        it) and keep its rows reserved until the block ends: at most half the queue, so that one
        large search leaves room for others (one larger than the queue reserved it all, and every
        other search was a 503 for as long as it ran). One that does not fit now waits for the
        searches running to end (``wait_for_room``) until ``deadline`` (``time.monotonic()``;
        default ``timeout_s`` from now)."""
        self.check_open()
        self.prune()
        if self.search_waiters or not self.search_fits(cost):
            await self.wait_for_room(cost, deadline)
        reserved = self.search_share(cost)
        self.search_reserved += reserved
        self.searches += 1
        try:
            yield
        finally:
            self.search_reserved -= reserved
            self.searches -= 1
            self.wake.set()  # a closing scheduler waits for the searches to end
            async with self.search_room:
                self.search_room.notify_all()

    async def wait_for_room(self, cost: int, deadline: float | None) -> None:
        """Wait, behind the searches already waiting, until a search of ``cost`` fits; 503 at
        once when the searches waiting already reserve the whole queue, 504 at ``deadline``,
        and the shutdown's 503 when the server starts closing meanwhile."""
        share = self.search_share(cost)
        waiting = sum(rows for _, rows in self.search_waiters)
        if waiting + share > self.limits.max_queue:
            self.observer.count_batcher_event("overloaded")
            # the rows the line holds, not the queue's depth: it said "387 forward rows
            # queued" of a 256-row queue whose /info showed none queued (a review)
            raise self.overloaded(
                f"the searches and checks waiting hold {waiting:,} of the queue's "
                f"{self.limits.max_queue:,} forward rows",
                waiting + self.plain_depth + self.search_reserved,
            )
        me = (object(), share)
        self.search_waiters.append(me)
        timeout_s = self.limits.timeout_s if deadline is None else deadline - time.monotonic()
        try:
            async with asyncio.timeout(max(0.0, timeout_s)), self.search_room:
                await self.search_room.wait_for(
                    lambda: (
                        self.closing
                        or self.broken is not None
                        or (self.search_waiters[0] is me and self.search_fits(cost))
                    )
                )
        except TimeoutError:
            self.observer.count_batcher_event("timeout")
            raise RequestTimeoutError(
                f"The request did not start within {self.limits.timeout_s:g} s: other searches "
                "held the engine; retry later or send fewer texts."
            ) from None
        finally:
            self.search_waiters.remove(me)
            if self.search_waiters:  # the next in line may fit now
                async with self.search_room:
                    self.search_room.notify_all()
        self.check_open()

    def check_steps_open(self) -> None:
        """A search step may still run while the batcher drains, not once it has stopped."""
        if self.broken is not None:
            raise EngineError("The engine worker is not running; see the server log.")
        if self.scheduler is None or self.scheduler.done():
            raise shutting_down()

    async def submit(self, item: ItemT) -> ResultT:
        [result] = await self.submit_many([item])
        return result

    async def submit_many(
        self, items: Sequence[ItemT], search: bool = False, deadline: float | None = None
    ) -> list[ResultT]:
        """Queue ``items`` (one future each) and wait for all their results, in order.

        ``search``: the items are one step of a search admitted by ``search_admission`` (they
        go after plain items and are not admitted again). ``deadline`` (``time.monotonic()``):
        the request's own, instead of ``timeout_s`` from now."""
        if not items:
            return []
        if search:
            self.check_steps_open()
        else:
            self.admit(len(items))
            self.last_plain_at = time.monotonic()
        timing = request_timing.get()
        if timing is not None:
            timing.waiting(time.perf_counter())
        if not search and len(items) == 1 and self.can_run_inline(deadline):
            for _ in range(SETTLE_TURNS):  # requests already received start, and are company
                await asyncio.sleep(0)
            if self.can_run_inline(deadline):
                return [self.run_inline(items[0], timing)]
        loop = asyncio.get_running_loop()
        busy = self.busy
        entries = [
            Pending[ItemT, ResultT](
                item, self.size_of(item), loop.create_future(), busy, search, timing=timing
            )
            for item in items
        ]
        self.pending.extend(entries)
        self.observer.set_queue_depth(self.depth)
        self.wake.set()
        futures = [entry.future for entry in entries]
        timeout_s = self.limits.timeout_s if deadline is None else deadline - time.monotonic()
        try:
            async with asyncio.timeout(max(0.0, timeout_s)):
                return list(await asyncio.gather(*futures))
        except TimeoutError:
            if not search:  # a search's step: its search's timeout, which its runner counts
                self.observer.count_batcher_event("timeout")
            raise RequestTimeoutError(
                f"The request did not finish within {self.limits.timeout_s:g} s; retry later "
                "or send fewer texts."
            ) from None
        finally:
            for future in futures:
                if not future.cancel() and not future.cancelled():
                    future.exception()  # a sibling's error, already raised: mark it seen
            if any(future.cancelled() for future in futures):
                # Drop them from the queue now: the scheduler only looks again once the engine
                # is free, and a gone request must not hold queue slots until then.
                self.prune()
            self.observer.set_queue_depth(self.depth)

    def can_run_inline(self, deadline: float | None) -> bool:
        """A lone request may skip the hop to the engine thread (module docstring): the server
        is handling nothing else, the engine is idle with nothing waiting, and its lone runs
        lately were cheap (``LoneRuns.cheap``)."""
        if self.company is None or not self.lone_runs.cheap():
            return False
        if self.busy or self.exclusive_waiting or self.closing or self.company():
            return False
        if deadline is not None and deadline <= time.monotonic():
            return False
        self.prune()
        return not self.pending

    def run_inline(self, item: ItemT, timing: RequestTiming | None) -> ResultT:
        """One item's batch on the event loop's own thread: the same errors and metrics as a
        batch on the engine thread."""
        started = time.perf_counter()
        try:
            results = self.engine_call([item])
            if len(results) != 1:
                raise EngineError(f"run_batch returned {len(results)} results for 1 item")
        except Exception as error:  # an engine fault: this request fails, the batcher serves on
            raise engine_error(self.batch_failed(error, 1)) from None
        finally:
            ended = time.perf_counter()
            if timing is not None:
                timing.ran(started, ended)
        size = self.size_of(item)
        self.observer.observe_batch(BatchStats(1, size, size, ended - started))
        self.pace.note(1, ended - started)
        if isinstance(results[0], Exception):  # its own error (``run_batch``), as in a batch
            raise results[0]
        return results[0]

    def engine_call(self, items: list[ItemT]) -> Sequence[ResultT]:
        """``run_batch``, noting what a lone item's run cost on the thread that ran it (the
        engine thread, or inline) in ``lone_runs``: its CPU time and its wall time."""
        started, wall_started = time.thread_time(), time.perf_counter()
        results = self.run_batch(items)
        if len(items) == 1:
            self.lone_runs.note(time.thread_time() - started, time.perf_counter() - wall_started)
        return results

    def batch_failed(self, error: Exception, items: int) -> str:
        """Log an engine fault under a fresh error id, counted as a failed batch; the id."""
        error_id = new_error_id()
        logger.error(
            "batch %s failed on %d items (%s)",
            error_id,
            items,
            type(error).__name__,
            exc_info=error,
        )
        self.observer.count_batcher_event("failed_batch")
        return error_id

    async def run_exclusive(self, job: Callable[[], JobT], bounded: bool = True) -> JobT:
        """Run ``job`` alone on the engine thread, in FIFO turn with the batches.

        ``job`` must not wait on this batcher (it runs while holding the engine's turn). It
        counts towards the queue bound while it waits and shares the request timeout, unless
        not ``bounded`` (the warm-up before /ready, no request: a --request-timeout shorter
        than it was a traceback at startup, a review). If the caller gives up while the job
        runs, the engine stays taken until the job ends.
        """
        self.admit(1)
        assert self.executor is not None
        self.exclusive_waiting += 1
        self.observer.set_queue_depth(self.depth)
        timing = request_timing.get()
        if timing is not None:
            timing.waiting(time.perf_counter())
            job = timed(job, timing)
        try:
            async with asyncio.timeout(self.limits.timeout_s if bounded else None):
                try:
                    await self.engine_lock.acquire()
                finally:
                    self.exclusive_waiting -= 1
                    self.observer.set_queue_depth(self.depth)
                running = asyncio.get_running_loop().run_in_executor(self.executor, job)
                running.add_done_callback(self.release_after_job)
                return await asyncio.shield(running)
        except TimeoutError:
            self.observer.count_batcher_event("timeout")
            raise RequestTimeoutError(
                f"The request did not finish within {self.limits.timeout_s:g} s; retry later."
            ) from None

    def release_after_job(self, running: asyncio.Future[Any]) -> None:
        if not running.cancelled():
            running.exception()  # retrieved: an abandoned job's error is not "never retrieved"
        self.engine_lock.release()

    # --- scheduling -----------------------------------------------------------------------

    def prune(self) -> None:
        """Drop items whose request has gone (cancelled or timed out) before they run."""
        live = [entry for entry in self.pending if not entry.future.done()]
        skipped = len(self.pending) - len(live)
        if skipped:
            self.pending = live
            self.observer.count_batcher_event("skipped", skipped)

    async def schedule(self) -> None:
        while True:
            self.prune()
            if not self.pending:
                if self.closing and not self.searches:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            async with self.engine_lock:
                await self.wait_for_company()
                batch = self.take_batch()
                if batch:
                    await self.run(batch)

    async def wait_for_company(self) -> None:
        """The window: only when the oldest item arrived while the engine was busy."""
        self.prune()
        if self.closing or not self.pending or not self.pending[0].arrived_busy:
            return
        started = time.monotonic()
        while not self.select()[1] and not self.closing:
            remaining = started + self.limits.window_s - time.monotonic()
            if remaining <= 0:
                return
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), remaining)
            except TimeoutError:
                return
            self.prune()

    def plain_recent(self) -> bool:
        return time.monotonic() - self.last_plain_at < PLAIN_RECENT_S

    def select(self) -> tuple[list[Pending[ItemT, ResultT]], bool]:
        """The next batch (not yet removed) and whether it is full (``batch_policy``)."""
        return select_batch(self.pending, self.limits, self.plain_recent())

    def take_batch(self) -> list[Pending[ItemT, ResultT]]:
        self.prune()
        batch, _ = self.select()
        chosen = set(map(id, batch))
        self.pending = [entry for entry in self.pending if id(entry) not in chosen]
        self.observer.set_queue_depth(self.depth)
        return batch

    async def run(self, batch: list[Pending[ItemT, ResultT]]) -> None:
        """One batch on the engine (``run_batch``: one engine call, or several where its rows ask
        for more than the batch limits allow); every future gets its result or the batch's error."""
        assert self.executor is not None
        items = [entry.item for entry in batch]
        started = time.perf_counter()
        self.running = batch
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.engine_call, items
            )
            if len(results) != len(items):
                raise EngineError(
                    f"run_batch returned {len(results)} results for {len(items)} items"
                )
        except Exception as error:  # an engine fault: fail this batch only, keep serving
            error_id = self.batch_failed(error, len(items))
            for entry in batch:
                if not entry.future.done():
                    entry.future.set_exception(engine_error(error_id))
            return
        finally:
            self.running = []
            ended = time.perf_counter()
            for entry in batch:
                if entry.timing is not None:
                    entry.timing.ran(started, ended)
        longest = max(entry.size for entry in batch)
        self.pace.note(len(batch), ended - started)
        self.observer.observe_batch(
            BatchStats(
                size=len(batch),
                real_tokens=sum(entry.size for entry in batch),
                padded_tokens=longest * len(batch),
                seconds=time.perf_counter() - started,
            )
        )
        for entry, result in zip(batch, results, strict=True):
            if entry.future.done():  # its client may have gone while it ran
                continue
            if isinstance(result, Exception):  # this item's own error (``run_batch``)
                entry.future.set_exception(result)
            else:
                entry.future.set_result(result)

    def fail_waiting(self, make_error: Callable[[], Exception]) -> None:
        """Fail every queued or running item (the scheduler is gone, or the drain ran out)."""
        for entry in [*self.pending, *self.running]:
            if not entry.future.done():
                entry.future.set_exception(make_error())
        self.pending, self.running = [], []
        self.observer.set_queue_depth(self.depth)


def timed(job: Callable[[], JobT], timing: RequestTiming) -> Callable[[], JobT]:
    """``job``, noting its run in ``timing`` (on the engine thread; read after it ends)."""

    def run() -> JobT:
        started = time.perf_counter()
        try:
            return job()
        finally:
            timing.ran(started, time.perf_counter())

    return run


def shutting_down() -> ShuttingDownError:
    return ShuttingDownError("The server is shutting down; retry shortly.")


def engine_error(error_id: str) -> EngineError:
    """A fresh error per future (a shared instance would collect every awaiter's traceback)."""
    return EngineError(
        f"The engine failed on the batch holding this request; error id {error_id} "
        "in the server log.",
        error_id=error_id,
    )
