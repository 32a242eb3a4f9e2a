"""Proofreading behind a server: the check task through a Predictor's batcher.

A check request (``tasks.check``) makes two engine steps for all of its texts (the unmasked or
masked rows, then the suspects' rows). It runs like a search: on a thread of a small pool, its
steps sent through the same dynamic batcher as search rows (``StepScorer``), so they share
engine calls with /predict and take turns with plain batches; it is admitted by the batcher's
queue by its cost in forward rows, refused over ``max_request_cost`` (400, naming the cap), and
stopped at the request's deadline (504) or when its client leaves.

>>> checking = CheckServing(predictor)                                   # doctest: +SKIP
>>> [result] = await checking.run([checking.prepare("守株待免")])          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tiankong.errors import BadOptionError, EngineError, TiankongError, new_error_id
from tiankong.serving.predictor import Predictor
from tiankong.serving.search_steps import (
    SEARCH_WORKERS,
    RowJob,
    SearchStopped,
    StepScorer,
    timed_out,
)
from tiankong.tasks.check import CheckMethod, CheckRequest, CheckResult, Proofreader

logger = logging.getLogger("tiankong.server")
WARMUP_TEXT = "画龙点晴。"


class CheckServing:
    """The check task for one Predictor (one per app, built in its lifespan)."""

    def __init__(self, predictor: Predictor, method: CheckMethod | None = None) -> None:
        self.predictor = predictor
        self.checker = Proofreader(predictor.masker, method)
        self.pool = ThreadPoolExecutor(SEARCH_WORKERS, thread_name_prefix="tiankong-check")

    def prepare(self, text: object) -> CheckRequest:
        """Validate and tokenize; a typed BadInputError (400) before anything is queued."""
        return self.checker.prepare(text)

    def check_cost(self, requests: Sequence[CheckRequest]) -> int:
        cost = sum(self.checker.forward_rows(request) for request in requests)
        cap = self.predictor.settings.max_request_cost
        if cost > cap:
            raise BadOptionError(
                f"Checking this would cost {cost:,} forward rows, over this server's limit of "
                f"{cap:,} (max_request_cost); send shorter or fewer texts."
            )
        return cost

    async def run(self, requests: Sequence[CheckRequest]) -> list[CheckResult]:
        """The results in order; ``RequestTimeoutError`` (504) past the request timeout."""
        if not requests:
            return []
        return await self.execute(requests, self.check_cost(requests))

    async def execute(self, requests: Sequence[CheckRequest], cost: int) -> list[CheckResult]:
        """``run`` once the cost is checked: admitted by the batcher's queue for ``cost``."""
        predictor = self.predictor
        deadline = predictor.deadline()
        loop = asyncio.get_running_loop()

        def submit(jobs: list[RowJob]) -> Coroutine[Any, Any, list[np.ndarray]]:
            return predictor.submit_rows(jobs, deadline)

        scorer = StepScorer(submit, loop, deadline, predictor.limits.timeout_s)
        with predictor.batcher.search_admission(cost):
            running = loop.run_in_executor(self.pool, self.checker.run, list(requests), scorer)
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    return await running
            except TimeoutError:
                raise timed_out(predictor.limits.timeout_s) from None
            except (TiankongError, SearchStopped):
                raise
            except Exception as error:  # an engine fault is ours, not the user's
                error_id = new_error_id()
                logger.error("check run %s failed", error_id, exc_info=error)
                raise EngineError(
                    f"The engine failed on this request ({type(error).__name__}); error id "
                    f"{error_id} in the server log.",
                    error_id=error_id,
                ) from None
            finally:
                scorer.stop()

    async def warm_up(self) -> None:
        """Load the confusion table and the idiom lexicon, and run the two steps once, as the
        fill warm-up does: an exclusive turn on the engine thread, outside the batch metrics."""
        request = self.prepare(WARMUP_TEXT)
        await self.predictor.batcher.run_exclusive(lambda: self.checker.run([request]))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
