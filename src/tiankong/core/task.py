"""The seam a task beside fill-mask plugs into: one object with three steps.

A task (``tasks/check``, proofreading, is one) brings its own request kind, cost and decoding,
and shares everything else: tokenization (``core/text.py``), the engines, the corpus index, the
server's batcher and admission (``serving/tasks.TaskServing``) and the error table.

* ``prepare(text)``: validate and tokenize once, where the text enters; bad input is a typed
  error before anything is queued, and the prepared form is carried to the end.
* ``forward_rows(request)``: the request's engine work in forward rows, an upper bound; the
  server's cost cap (``max_request_cost``), its queue and the rate limit count it.
* ``run(requests, score_rows)``: the results, in order. Every engine call goes through
  ``score_rows`` (a ``RowScorer``): the library passes ``FillMasker.score_rows`` (the calling
  thread), the server a ``StepScorer`` that sends each call through its dynamic batcher and
  stops at the request's deadline. A task never calls an engine itself.

>>> serving = TaskServing(predictor, MyTask(masker))            # doctest: +SKIP
>>> results = await serving.run([serving.prepare("...")])       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from tiankong.core.beam_search import RowScorer

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


class Task(Protocol[RequestT, ResultT]):
    """A task's three steps (module docstring); ``Proofreader`` is one."""

    # The message of a request over the server's cost cap, with ``{cost}`` and ``{cap}``.
    over_cost: str
    # What a request past its deadline can ask for less of, for the 504's message.
    less_work: str

    def prepare(self, text: object) -> RequestT: ...

    def forward_rows(self, request: RequestT) -> int: ...

    def run(
        self, requests: Sequence[RequestT], score_rows: RowScorer | None = None
    ) -> list[ResultT]: ...
