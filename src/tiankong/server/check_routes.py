"""The proofreading routes: POST /check and POST /batch_check (``serving.checking``)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import Response

from tiankong.errors import ModelUnavailableError, TiankongError
from tiankong.server.check_schemas import (
    BATCH_CHECK_EXAMPLES,
    CHECK_EXAMPLES,
    BatchCheckBody,
    BatchCheckResponse,
    CheckBody,
    CheckOut,
)
from tiankong.server.deps import AllowanceDep
from tiankong.server.dispatch import check_batch_size
from tiankong.server.responses import JSONBody, error_payload
from tiankong.server.schemas import error_responses
from tiankong.server.state import server_state
from tiankong.serving.checking import CheckServing
from tiankong.tasks.check import CheckRequest, CheckResult

router = APIRouter()


async def ready_checking(request: Request) -> CheckServing:
    """The app's check task, or a 503 (model_unavailable) while the model is loading."""
    state = server_state(request)
    state.require_predictor()
    assert state.checking is not None
    return state.checking


CheckingDep = Annotated[CheckServing, Depends(ready_checking)]


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


CHECK_ERRORS = error_responses(  # /check: one text, no options
    "Bad input: an empty text, or a text over max_check_chars."
)
BATCH_CHECK_ERRORS = error_responses(
    "Bad input: more texts than max_batch_texts (a text that can't be checked, empty or over "
    "max_check_chars, gets its own error entry)."
)


@router.post("/check", response_model=CheckOut, responses=CHECK_ERRORS, tags=["check"])
async def check(
    body: Annotated[CheckBody, Body(openapi_examples=CHECK_EXAMPLES)],
    checking: CheckingDep,
    allowance: AllowanceDep,
) -> Response:
    """Proofread one text: each suspected wrong character with its fix, score and 出处."""
    started = time.perf_counter()
    request = checking.prepare(body.text)
    [result] = await checking.run([request], allowance=allowance)
    return JSONBody({**result.to_dict(), "latency_ms": elapsed_ms(started)})


@router.post(
    "/batch_check", response_model=BatchCheckResponse, responses=BATCH_CHECK_ERRORS, tags=["check"]
)
async def batch_check(
    body: Annotated[BatchCheckBody, Body(openapi_examples=BATCH_CHECK_EXAMPLES)],
    checking: CheckingDep,
    allowance: AllowanceDep,
) -> Response:
    """Proofread many texts in one run; a text that can't be checked gets its own error entry."""
    started = time.perf_counter()
    check_batch_size(checking.predictor.settings, len(body.texts))
    answers: list[Any] = [None] * len(body.texts)
    ready: list[tuple[int, CheckRequest]] = []
    for number, text in enumerate(body.texts):
        try:
            ready.append((number, checking.prepare(text)))
        except TiankongError as error:
            answers[number] = error_payload(error)
    try:
        results: list[Any] = await checking.run([r for _, r in ready], allowance=allowance)
    except ModelUnavailableError:  # a text the model gives no numbers for: it fails alone
        if len(ready) == 1:
            raise
        results = [await checked_alone(checking, request) for _, request in ready]
    for (number, _), result in zip(ready, results, strict=True):
        answers[number] = (
            error_payload(result) if isinstance(result, TiankongError) else result.to_dict()
        )
    model = checking.predictor.masker.model.name
    return JSONBody({"results": answers, "model": model, "latency_ms": elapsed_ms(started)})


async def checked_alone(
    checking: CheckServing, request: CheckRequest
) -> CheckResult | TiankongError:
    """One text of a /batch_check checked on its own (its cost was spent with the batch's): its
    result, or the model's error for it (a /batch_check with one text the model gives no
    numbers for was a 503 for all of them: a review)."""
    try:
        [result] = await checking.run([request])
    except ModelUnavailableError as error:
        return error
    return result
