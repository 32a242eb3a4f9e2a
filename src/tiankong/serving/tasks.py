"""A task beside fill-mask behind a server: its requests through a Predictor's batcher.

``TaskServing`` takes any ``core.task.Task`` (proofreading's ``Proofreader`` is one) and runs it
as the predictor runs a fill-mask search: on a thread of a small pool of its own, every engine
call sent through the same dynamic batcher as search rows (``StepScorer``), so the task shares
engine calls with /predict and takes turns with plain batches; admitted by the batcher's queue
by its cost in forward rows, refused over ``max_request_cost`` (400, the task's message), and
stopped at the request's deadline (504) or when its client leaves. A new task needs none of
this written again: one ``Task`` and one ``TaskServing`` for it in the app's lifespan.

>>> serving = TaskServing(predictor, Proofreader(predictor.masker), "画龙点晴。")  # doctest: +SKIP
>>> [result] = await serving.run([serving.prepare("守株待免")])                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Generic

from tiankong.core.task import RequestT, ResultT, Task
from tiankong.errors import (
    BadOptionError,
    EngineError,
    OverloadedError,
    TiankongError,
    new_error_id,
)
from tiankong.serving.predictor import Predictor, Spending
from tiankong.serving.search_steps import SearchStopped, StepRunner

logger = logging.getLogger("tiankong.server")


class TaskServing(Generic[RequestT, ResultT]):
    """One task for one Predictor (one per app, built in its lifespan)."""

    def __init__(
        self, predictor: Predictor, task: Task[RequestT, ResultT], warmup_text: str
    ) -> None:
        self.predictor = predictor
        self.task = task
        self.warmup_text = warmup_text
        self.steps = StepRunner(
            predictor.submit_rows,
            predictor.limits.timeout_s,
            "tiankong-task",
            task.less_work,
            predictor.metrics,
        )

    def prepare(self, text: object) -> RequestT:
        """Validate and tokenize; a typed BadInputError (400) before anything is queued."""
        return self.task.prepare(text)

    def check_cost(self, requests: Sequence[RequestT]) -> int:
        """The requests' cost in forward rows; a ``BadOptionError`` over ``max_request_cost``."""
        cost = sum(self.task.forward_rows(request) for request in requests)
        cap = self.predictor.settings.max_request_cost
        if cost > cap:
            raise BadOptionError(self.task.over_cost.format(cost=cost, cap=cap))
        return cost

    async def run(
        self, requests: Sequence[RequestT], allowance: Spending | None = None
    ) -> list[ResultT]:
        """The results in order; the cost is checked once, here, and spent from ``allowance``
        (the client's rate-limit allowance; given back where the queue refuses the request,
        before any of it ran); ``RequestTimeoutError`` (504) past the request timeout."""
        cost = self.check_cost(requests)
        if allowance is not None:
            allowance.spend(cost)
        if not requests:
            return []
        predictor = self.predictor
        deadline = predictor.deadline()
        admitted = False
        try:
            async with predictor.batcher.search_admission(cost, deadline):
                admitted = True
                return await self.run_admitted(requests, deadline)
        except OverloadedError:
            if allowance is not None and not admitted:
                allowance.refund(cost)  # nothing of it ran (Predictor.run_many's rule)
            raise

    async def run_admitted(self, requests: Sequence[RequestT], deadline: float) -> list[ResultT]:
        try:
            return await self.steps.run_steps(partial(self.task.run, list(requests)), deadline)
        except (TiankongError, SearchStopped):
            raise
        except Exception as error:  # an engine fault is ours, not the user's
            error_id = new_error_id()
            logger.error("%s run %s failed", type(self.task).__name__, error_id, exc_info=error)
            raise EngineError(
                f"The engine failed on this request ({type(error).__name__}); error id "
                f"{error_id} in the server log.",
                error_id=error_id,
            ) from None

    async def warm_up(self) -> None:
        """The task's first run, as the fill warm-up does: an exclusive turn on the engine
        thread, outside the batch metrics (a task's tables load here, not on a user's request)."""
        request = self.prepare(self.warmup_text)
        # no request's deadline: the check's warm-up stopped a --request-timeout 0.001 server's
        # start where the fill warm-up no longer did (a verifying review)
        await self.predictor.batcher.run_exclusive(lambda: self.task.run([request]), bounded=False)

    def close(self) -> None:
        self.steps.close()
