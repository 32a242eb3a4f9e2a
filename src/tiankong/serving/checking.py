"""Proofreading behind a server: the check task through a Predictor's batcher.

A check request (``tasks.check``) makes two passes for all of its texts: the unmasked rows, one
engine call's worth a step (or, with ``detect="masked"``, every position's masked row in one
step), then the suspects' rows in one step. It is one
``core.task.Task`` run by ``TaskServing`` (``serving/tasks.py``): like a search, on a thread of
a small pool, its steps sent through the same dynamic batcher as search rows, admitted by the
batcher's queue by its cost in forward rows, refused over ``max_request_cost`` (400, naming
the cap), and stopped at the request's deadline (504) or when its client leaves.

>>> checking = CheckServing(predictor)                                   # doctest: +SKIP
>>> [result] = await checking.run([checking.prepare("守株待免")])          # doctest: +SKIP
"""

from __future__ import annotations

from tiankong.serving.predictor import Predictor
from tiankong.serving.tasks import TaskServing
from tiankong.tasks.check import CheckMethod, CheckRequest, CheckResult, Proofreader

WARMUP_TEXT = "画龙点晴。"


class CheckServing(TaskServing[CheckRequest, CheckResult]):
    """The check task for one Predictor (one per app, built in its lifespan)."""

    def __init__(self, predictor: Predictor, method: CheckMethod | None = None) -> None:
        self.checker = Proofreader(predictor.masker, method)
        super().__init__(predictor, self.checker, WARMUP_TEXT)
