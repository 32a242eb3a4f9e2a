"""Which path a request takes through the Predictor.

A plain request (single mode, no constraints, no [BLANK]) goes through ``Predictor.run``, the
batched path where many texts share one engine call. Whole-word, candidate, [BLANK] and
constrained requests go through ``Predictor.run_options``, one text at a time, because their
searches make several engine calls per text. Either way a text is validated (tokenized and
windowed) before it takes the engine, so bad input never holds the engine lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiankong.core.decoding import Constraints
from tiankong.core.modes import PredictOptions
from tiankong.core.results import FillResult
from tiankong.core.text import BLANK, MASK, PreparedText, normalize_masks
from tiankong.errors import BadInputError, TiankongError
from tiankong.server.predictor import Predictor
from tiankong.server.schemas import OptionFields


def predict_options(
    predictor: Predictor, top_k: int | None, fields: OptionFields
) -> PredictOptions:
    """Validated options from a request's fields; a bad value is a ``BadOptionError`` (400)."""
    return predictor.masker.options(
        predictor.check_top_k(top_k),
        mode=fields.mode,
        beam_width=fields.beam_width,
        order=fields.order,
        candidates=tuple(fields.candidates or ()),
        constraints=Constraints(
            allowed=tuple(fields.allowed or ()),
            exclude=tuple(fields.exclude or ()),
            preset=fields.preset,
        ),
        max_blank_length=fields.max_blank_length,
        length_alpha=fields.length_alpha,
    )


def is_plain(text: str, options: PredictOptions) -> bool:
    """True when ``text`` can take the batched fast path."""
    return (
        options.mode == "single"
        and options.constraints is None
        and BLANK not in normalize_masks(text)
    )


def check_text(predictor: Predictor, text: str) -> PreparedText:
    """Validate a text before it takes the engine. A [BLANK] is checked as its shortest fill;
    the rules that only the modes know (one blank for candidates, one [BLANK] per text) are
    checked by the library, and fail with the same typed errors."""
    return predictor.prepare(normalize_masks(text).replace(BLANK, MASK))


async def fill_one(predictor: Predictor, text: str, options: PredictOptions) -> FillResult:
    """The answer for one text, by the path its options need."""
    if is_plain(text, options):
        [result] = await predictor.run([predictor.prepare(text)], options.top_k)
        return result
    check_text(predictor, text)
    return await predictor.run_options(text, options)


async def fill_many(
    predictor: Predictor, texts: Sequence[str], options: PredictOptions
) -> list[FillResult | TiankongError]:
    """Answers in input order; a text that can't be filled gets its typed error instead.

    The plain texts share one engine run; the others run one by one through the modes path.
    """
    answers: list[FillResult | TiankongError | None] = [None] * len(texts)
    plain: list[tuple[int, PreparedText]] = []
    for index, text in enumerate(texts):
        try:
            prepared = check_text(predictor, text)
        except TiankongError as error:
            answers[index] = error
            continue
        if is_plain(text, options):
            plain.append((index, prepared))
    results = await predictor.run([prepared for _, prepared in plain], options.top_k)
    for (index, _), result in zip(plain, results, strict=True):
        answers[index] = result
    for index, text in enumerate(texts):
        if answers[index] is None:
            try:
                answers[index] = await predictor.run_options(text, options)
            except BadInputError as error:  # this text's own problem; engine faults still fail
                answers[index] = error
    finished = [answer for answer in answers if answer is not None]
    assert len(finished) == len(texts)
    return finished
