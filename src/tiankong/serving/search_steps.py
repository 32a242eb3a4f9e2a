"""A search (whole word, candidates, [BLANK], constraints) run step by step through the batcher.

A search makes several engine calls, one per step. Each search runs on a thread of a small pool
(``SEARCH_WORKERS``), and its ``StepScorer`` sends every step's rows to the event loop's
``DynamicBatcher`` as search rows, so the steps take turns with plain batches instead of
holding the engine for the whole search. Before each step the scorer checks the request's
deadline and whether its client is still there: the one place a search stops, within one step.

>>> runner = SearchRunner(masker, batcher)                          # doctest: +SKIP
>>> await runner.run(request, deadline=time.monotonic() + 30)       # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from tiankong.core.beam_search import RowScorer
from tiankong.core.request import PreparedRequest, RowJob
from tiankong.core.results import FillResult
from tiankong.errors import RequestTimeoutError
from tiankong.service import FillMasker
from tiankong.serving.batch_policy import BatchObserver
from tiankong.serving.timing import request_timing

# Searches running at once (more wait for a thread; each still stops at its deadline). A search
# thread mostly waits for its steps, so a few keep the engine busy without crowding the CPU.
SEARCH_WORKERS = 4
T = TypeVar("T")


class SearchStopped(Exception):
    """The search's request has gone (client disconnected or handler cancelled)."""


# What a fill-mask request can ask for less of; a task names its own (``Task.less_work``).
FILL_LESS_WORK = "fewer texts or masks, a smaller beam_width or max_blank_length"


def timed_out(timeout_s: float, less_work: str = FILL_LESS_WORK) -> RequestTimeoutError:
    return RequestTimeoutError(
        f"The request did not finish within {timeout_s:g} s; retry later, or ask for less "
        f"({less_work})."
    )


class StepScorer:
    """A ``RowScorer`` for a search thread: each call is one step, scored on the event loop's
    batcher; before it, the deadline and the client are checked."""

    def __init__(
        self,
        submit: Callable[[list[RowJob]], Coroutine[Any, Any, list[np.ndarray]]],
        loop: asyncio.AbstractEventLoop,
        deadline: float,
        timeout_s: float,
        less_work: str = FILL_LESS_WORK,
    ) -> None:
        self.submit = submit
        self.loop = loop
        self.deadline = deadline  # time.monotonic()
        self.timeout_s = timeout_s  # for the message
        self.less_work = less_work
        self.lock = threading.Lock()
        self.stopped = False
        self.step: concurrent.futures.Future[list[np.ndarray]] | None = None
        self.steps = 0

    def check(self) -> None:
        if self.stopped:
            raise SearchStopped
        if time.monotonic() >= self.deadline:
            raise timed_out(self.timeout_s, self.less_work)

    def __call__(self, rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        jobs = [RowJob(list(row), list(indices)) for row, indices in zip(rows, asked, strict=True)]
        with self.lock:  # stop() either sees this step and cancels it, or the check refuses it
            self.check()
            step: concurrent.futures.Future[list[np.ndarray]] = asyncio.run_coroutine_threadsafe(
                self.submit(jobs), self.loop
            )
            self.step = step
            self.steps += 1
        try:
            return step.result()
        except concurrent.futures.CancelledError:
            raise SearchStopped from None

    def stop(self) -> None:
        """From the event loop: no further step starts; the step waiting for the engine is
        taken out of the queue (rows already on the engine finish, unread)."""
        with self.lock:
            self.stopped = True
            if self.step is not None:
                self.step.cancel()


class StepRunner:
    """Runs step-wise work (a search, a task's run) on ``SEARCH_WORKERS`` threads of its own,
    each engine call one step through ``submit_rows``."""

    def __init__(
        self,
        submit_rows: Callable[[list[RowJob], float], Coroutine[Any, Any, list[np.ndarray]]],
        timeout_s: float,
        thread_name: str = "tiankong-search",
        less_work: str = FILL_LESS_WORK,
        observer: BatchObserver | None = None,
    ) -> None:
        self.submit_rows = submit_rows
        self.timeout_s = timeout_s
        # a deadline passed here is a "timeout" batcher event, counted here once a run: the
        # batcher leaves its search steps' timeouts to this (the two timers fired together)
        self.observer = observer
        self.less_work = less_work  # the timeout message's hint
        self.pool = ThreadPoolExecutor(SEARCH_WORKERS, thread_name_prefix=thread_name)

    async def run_steps(self, work: Callable[[RowScorer], T], deadline: float) -> T:
        """``work(score_rows)`` on a thread of the pool; ``RequestTimeoutError`` past
        ``deadline``. Cancelling the caller (a client that left) stops it before its next
        step."""
        loop = asyncio.get_running_loop()
        timing = request_timing.get()

        async def submit(jobs: list[RowJob]) -> list[np.ndarray]:
            # a step's task runs in the loop's context, not the request's: its Server-Timing
            # showed no queue and no engine time for a search
            request_timing.set(timing)
            return await self.submit_rows(jobs, deadline)

        scorer = StepScorer(submit, loop, deadline, self.timeout_s, self.less_work)
        running = loop.run_in_executor(self.pool, work, scorer)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                return await running
        except TimeoutError:  # waited for a thread, or between steps, past the deadline
            self.count_timeout()
            raise timed_out(self.timeout_s, self.less_work) from None
        except RequestTimeoutError:  # between steps, or a step's (the batcher counts none)
            self.count_timeout()
            raise
        finally:
            scorer.stop()  # a no-op once the work has ended

    def count_timeout(self) -> None:
        if self.observer is not None:
            self.observer.count_batcher_event("timeout")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class SearchRunner(StepRunner):
    """Runs fill-mask searches (``FillMasker.run_search``) step by step."""

    def __init__(
        self,
        masker: FillMasker,
        submit_rows: Callable[[list[RowJob], float], Coroutine[Any, Any, list[np.ndarray]]],
        timeout_s: float,
        observer: BatchObserver | None = None,
    ) -> None:
        super().__init__(submit_rows, timeout_s, observer=observer)
        self.masker = masker

    async def run(self, request: PreparedRequest, deadline: float) -> FillResult:
        """The search's result; ``RequestTimeoutError`` past ``deadline``."""
        return await self.run_steps(partial(self.masker.run_search, request), deadline)
