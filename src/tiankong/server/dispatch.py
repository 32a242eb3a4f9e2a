"""From a route's texts and option fields to answers, by the path each request decided.

``Predictor.options`` checks a request's options once; ``Predictor.prepare_request``
(``core/request.py``) tokenizes each text and decides its kind once. ``Predictor.run_many`` runs
them: plain requests share engine calls through the batcher, search requests (whole word,
candidates, [BLANK], constraints) run one text at a time, because their searches make several
engine calls per text; it prices them once and spends the cost from the client's allowance.
Either way a text is validated before it takes the engine, so bad input never holds the engine
lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiankong.config import Settings
from tiankong.core.options import PredictOptions, check_entry_count
from tiankong.core.request import PreparedRequest
from tiankong.core.results import FillResult
from tiankong.errors import BatchTooLargeError, TiankongError
from tiankong.server.middleware.security import Allowance
from tiankong.server.schemas import OptionFields
from tiankong.serving.predictor import Predictor


def options_from_fields(
    predictor: Predictor, top_k: int | None, fields: OptionFields
) -> PredictOptions:
    """Validated options from a request's fields; a bad value is a ``BadOptionError`` (400).
    The server's own limit first: at most MAX_CONSTRAINT_ENTRIES ``allowed`` and ``exclude``
    entries, each tokenized on the event loop (the library and the CLI take any number)."""
    for name, entries in (("allowed", fields.allowed), ("exclude", fields.exclude)):
        if entries is not None:
            check_entry_count(entries, f"'{name}'")
    return predictor.options(  # an empty list is refused there (core.options.EMPTY_LISTS)
        top_k,
        mode=fields.mode,
        beam_width=fields.beam_width,
        order=fields.order,
        candidates=fields.candidates,
        allowed=fields.allowed,
        exclude=fields.exclude,
        preset=fields.preset,
        max_blank_length=fields.max_blank_length,
        length_alpha=fields.length_alpha,
        index=fields.index,
    )


def index_warned(
    predictor: Predictor, fields: OptionFields, answers: list[FillResult | TiankongError]
) -> list[FillResult | TiankongError]:
    """``answers`` with the library's warning (``FillMasker.index_warned``) where the request
    set ``index`` true and the server has no index. Added after the result cache, which keeps
    answers without it."""
    asked = "index" in fields.model_fields_set and bool(fields.index)
    return predictor.masker.index_warned(answers, asked)


async def fill_one(
    predictor: Predictor, text: str, options: PredictOptions, allowance: Allowance
) -> FillResult:
    """The answer for one text, by the path its prepared request decided; its cost in forward
    rows (over the cap: 400) is spent from the client's rate-limit allowance."""
    request = predictor.prepare_request(text, options)
    return await predictor.run_request(request, allowance=allowance)


async def fill_many(
    predictor: Predictor, texts: Sequence[str], options: PredictOptions, allowance: Allowance
) -> list[FillResult | TiankongError]:
    """Answers in input order; a text that can't be filled, or wasn't done by the request's
    deadline, gets its typed error instead (``Predictor.run_many``)."""
    answers: list[FillResult | TiankongError | None] = [None] * len(texts)
    requests: list[tuple[int, PreparedRequest]] = []
    for index, text in enumerate(texts):
        try:
            requests.append((index, predictor.prepare_request(text, options)))
        except TiankongError as error:
            answers[index] = error
    results = await predictor.run_many([request for _, request in requests], allowance=allowance)
    for (index, _), result in zip(requests, results, strict=True):
        answers[index] = result
    finished = [answer for answer in answers if answer is not None]
    assert len(finished) == len(texts)
    return finished


def check_batch_size(settings: Settings, count: int, what: str = "texts") -> None:
    """The one limit on texts per request (``max_batch_texts``), before any text is prepared."""
    limit = settings.max_batch_texts
    if count > limit:
        raise BatchTooLargeError(f"{count} {what} is over the limit of {limit}.")
