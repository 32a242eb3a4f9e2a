"""The task seam (core/task.py): a task beside fill-mask is one object (its request, its cost,
its decoding) and runs in the library and behind the server's batcher without copying the run
path, the batcher or the admission rules. A tiny internal task shows it (not a user feature):
it masks a text's first character and answers the model's top token there."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest

from tiankong import FillMasker, Settings
from tiankong.core.beam_search import RowScorer
from tiankong.core.task import Task
from tiankong.core.text import MASK, PreparedText
from tiankong.errors import BadOptionError, EmptyTextError
from tiankong.server.metrics import ServerMetrics
from tiankong.serving.predictor import Predictor
from tiankong.serving.tasks import TaskServing

TEXTS = ["春眠不觉晓", "处处闻啼鸟", "夜来风雨声，花落知多少"]


class FirstCharacter:
    """The example task: one forward row per text, decoded as fill-mask decodes (banned
    tokens never answer)."""

    over_cost = "First characters for {cost:,} rows, over the limit of {cap:,}."
    less_work = "fewer texts"

    def __init__(self, masker: FillMasker) -> None:
        self.masker = masker

    def prepare(self, text: object) -> PreparedText:
        if not isinstance(text, str) or not text.strip():
            raise EmptyTextError("Send a text.")
        return self.masker.prepare(MASK + text[1:])

    def forward_rows(self, request: PreparedText) -> int:
        return 1

    def run(
        self, requests: Sequence[PreparedText], score_rows: RowScorer | None = None
    ) -> list[str]:
        score = score_rows or self.masker.score_rows
        rows = score([r.input_ids for r in requests], [r.mask_indices for r in requests])
        answers = []
        for probabilities in rows:
            row = np.array(probabilities[0])
            row[self.masker.banned] = -1.0
            answers.append(self.masker.encoder.token_string(int(np.argmax(row))))
        return answers


def test_the_example_task_fits_the_seam(tiny_masker: FillMasker) -> None:
    task: Task[PreparedText, str] = FirstCharacter(tiny_masker)  # mypy checks the protocol
    assert task.forward_rows(task.prepare(TEXTS[0])) == 1


def test_in_the_library_it_agrees_with_fill_mask(tiny_masker: FillMasker) -> None:
    task = FirstCharacter(tiny_masker)
    answers = task.run([task.prepare(text) for text in TEXTS])
    expected = [
        tiny_masker.predict(MASK + text[1:], top_k=1, index=False).masks[0][0].token
        for text in TEXTS
    ]
    assert answers == expected


@asynccontextmanager
async def serving(
    masker: FillMasker, **settings: Any
) -> AsyncIterator[tuple[TaskServing[PreparedText, str], ServerMetrics]]:
    metrics = ServerMetrics()
    predictor = Predictor(masker, Settings(batch_window_ms=0, **settings), metrics)
    await predictor.start()
    task = TaskServing(predictor, FirstCharacter(masker), TEXTS[0])
    try:
        yield task, metrics
    finally:
        task.close()
        await predictor.close()


class Ledger:
    """A rate-limit allowance that writes down what it is charged and given back."""

    def __init__(self) -> None:
        self.spent: list[int] = []
        self.refunded: list[int] = []

    def spend(self, cost: int) -> None:
        self.spent.append(cost)

    def refund(self, cost: int) -> None:
        self.refunded.append(cost)


def sample(metrics: ServerMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name, {}) or 0.0


@pytest.mark.anyio
async def test_behind_the_server_its_rows_go_through_the_batcher(tiny_masker: FillMasker) -> None:
    library = FirstCharacter(tiny_masker).run([tiny_masker.prepare(MASK + t[1:]) for t in TEXTS])
    async with serving(tiny_masker) as (task, metrics):
        await task.warm_up()  # an exclusive turn, outside the batch metrics
        assert sample(metrics, "tiankong_batch_size_count") == 0
        requests = [task.prepare(text) for text in TEXTS]
        spent = Ledger()
        assert await task.run(requests, allowance=spent) == library
        assert spent.spent == [len(TEXTS)]  # priced once, and the price spent once
        assert sample(metrics, "tiankong_batch_size_count") >= 1
        real_tokens = sum(len(request.input_ids) for request in requests)
        assert sample(metrics, "tiankong_batch_real_tokens_total") == real_tokens


@pytest.mark.anyio
async def test_the_cost_cap_refuses_it_before_any_engine_work(tiny_masker: FillMasker) -> None:
    async with serving(tiny_masker, max_request_cost=2) as (task, metrics):
        requests = [task.prepare(text) for text in TEXTS]
        spent = Ledger()
        with pytest.raises(
            BadOptionError, match="First characters for 3 rows, over the limit of 2"
        ):
            await task.run(requests, allowance=spent)
        assert spent.spent == [] and sample(metrics, "tiankong_batch_size_count") == 0
        assert await task.run(requests[:2]) == FirstCharacter(tiny_masker).run(requests[:2])


@pytest.mark.anyio
async def test_a_request_the_queue_refuses_gets_its_allowance_back(
    tiny_masker: FillMasker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full queue's 503 came after the rate limit had charged the request's rows, so a
    client that waited the Retry-After it was told met a 429 for rows that never ran (a
    review). Refused before any of it ran, the charge is given back; the task's searches and
    the fill path's requests alike."""
    from contextlib import asynccontextmanager

    from tiankong.errors import OverloadedError

    @asynccontextmanager
    async def full(cost: int, deadline: float | None = None) -> AsyncIterator[None]:
        raise OverloadedError("The server is busy; retry shortly.")
        yield

    async with serving(tiny_masker) as (task, _):
        requests = [task.prepare(text) for text in TEXTS]
        monkeypatch.setattr(task.predictor.batcher, "search_admission", full)
        ledger = Ledger()
        with pytest.raises(OverloadedError):
            await task.run(requests, allowance=ledger)
        assert ledger.spent == ledger.refunded == [len(TEXTS)]
        # the fill path: the queue refuses the plain texts before any ran
        predictor = task.predictor
        options = tiny_masker.options(1)
        prepared = [predictor.prepare_request(MASK + text[1:], options) for text in TEXTS]

        async def refused(*args: object, **kwargs: object) -> list[object]:
            raise OverloadedError("The server is busy; retry shortly.")

        monkeypatch.setattr(predictor, "run", refused)
        ledger = Ledger()
        with pytest.raises(OverloadedError):
            await predictor.run_many(prepared, allowance=ledger)
        assert ledger.spent == ledger.refunded == [len(TEXTS)]
