"""The tiankong routes: thin handlers that validate, call the Predictor and shape the answer."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

import psutil
from fastapi import APIRouter, Body, Depends, Query
from fastapi.responses import FileResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from tiankong import __version__
from tiankong.core.options import MAX_CANDIDATES, MAX_OPTION_CHARS
from tiankong.core.results import FillResult
from tiankong.server.deps import ServingDep, StateDep, once_each, utf8_query
from tiankong.server.dispatch import (
    check_batch_size,
    fill_many,
    fill_one,
    index_warned,
    options_from_fields,
)
from tiankong.server.middleware.security import Allowance
from tiankong.server.responses import JSONBody, RangedFile, batch_payload, fill_payload
from tiankong.server.schemas import (
    BATCH_EXAMPLES,
    ERROR_RESPONSES,
    PREDICT_EXAMPLES,
    BatchPredictRequest,
    BatchPredictResponse,
    ErrorResponse,
    OptionFields,
    PredictQuery,
    PredictRequest,
    PredictResponse,
)
from tiankong.server.serving_route import ServingRoute
from tiankong.serving.predictor import Predictor

STATIC_DIR = Path(__file__).parent / "static"
# The page loads only its own script, style and API: model output can never run as code.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",  # (nosniff: on every answer, middleware/guard.py)
}

router = APIRouter(route_class=ServingRoute)


async def predict_one(
    predictor: Predictor,
    text: str,
    top_k: int | None,
    fields: OptionFields,
    allowance: Allowance,
) -> JSONBody:
    started = time.perf_counter()
    options = options_from_fields(predictor, top_k, fields)
    [result] = index_warned(
        predictor, fields, [await fill_one(predictor, text, options, allowance)]
    )
    assert isinstance(result, FillResult)
    latency_ms = (time.perf_counter() - started) * 1000
    return JSONBody(fill_payload(result, latency_ms=latency_ms))


# The inference routes return JSONBody (responses.py); response_model still declares the body.
@router.post(
    "/predict", response_model=PredictResponse, responses=ERROR_RESPONSES, tags=["fill-mask"]
)
async def predict(
    body: Annotated[PredictRequest, Body(openapi_examples=PREDICT_EXAMPLES)], serving: ServingDep
) -> Response:
    """Ranked candidates for every [MASK] in one text; whole words, candidate ranking,
    [BLANK]s of unknown length and vocabulary constraints through the optional fields."""
    return await predict_one(serving.predictor, body.text, body.top_k, body, serving.allowance)


@router.get(
    "/predict",
    response_model=PredictResponse,
    responses=ERROR_RESPONSES,
    tags=["fill-mask"],
    dependencies=[Depends(utf8_query), Depends(once_each)],
)
@router.head(  # HEAD wherever GET answers (HTTP asks it of every GET route)
    "/predict", include_in_schema=False, dependencies=[Depends(utf8_query), Depends(once_each)]
)
async def predict_get(serving: ServingDep, query: Annotated[PredictQuery, Query()]) -> Response:
    """The same as POST /predict, for load tests on a URL (percent-encoded UTF-8 text); list
    options repeat the key: `&candidates=充电&candidates=吃饭`."""
    return await predict_one(serving.predictor, query.text, query.top_k, query, serving.allowance)


@router.post(
    "/batch_predict",
    response_model=BatchPredictResponse,
    responses=ERROR_RESPONSES,
    tags=["fill-mask"],
)
async def batch_predict(
    body: Annotated[BatchPredictRequest, Body(openapi_examples=BATCH_EXAMPLES)],
    serving: ServingDep,
) -> Response:
    """Many texts, the same options for each; a text that can't be filled gets its own error
    entry. Plain texts share one engine run."""
    started = time.perf_counter()
    predictor = serving.predictor
    check_batch_size(predictor.settings, len(body.texts))
    options = options_from_fields(predictor, body.top_k, body)
    answers = index_warned(
        predictor, body, await fill_many(predictor, body.texts, options, serving.allowance)
    )
    latency_ms = (time.perf_counter() - started) * 1000
    return JSONBody(batch_payload(answers, predictor.masker.model.name, latency_ms))


@router.get("/health", tags=["operations"])
@router.head("/health", include_in_schema=False)
async def health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/ready", tags=["operations"], responses={503: {"model": ErrorResponse}})
@router.head("/ready", include_in_schema=False)  # probes that send HEAD, as for /health
async def ready(state: StateDep) -> dict[str, str]:
    """Readiness: the model is loaded and a warm-up inference has run (503 before that)."""
    state.require_predictor()
    return {"status": "ready"}


@router.get("/info", tags=["operations"])
@router.head("/info", include_in_schema=False)
async def info(state: StateDep) -> dict[str, Any]:
    """Model, engine, limits, memory and the last minute's throughput and latency."""
    last_minute = state.metrics.last_minute()
    masker = state.predictor.masker if state.predictor else None
    settings = state.settings
    process = psutil.Process(os.getpid())
    serving = state.predictor.serving_info() if state.predictor else {}
    return {
        **serving,  # batcher settings and queue depth, caches, the INT8 quality guard
        "version": __version__,
        "ready": state.ready,
        "model": {
            "name": masker.model.name if masker else settings.model,
            "kind": masker.model.kind if masker else None,
            "summary": masker.model.summary if masker else None,
        },
        "engine": masker.engine.name if masker else settings.engine,
        "device": masker.engine.device if masker else settings.device,
        "device_reason": masker.engine.device_reason if masker else None,
        "precision": masker.engine.precision if masker else settings.precision,
        "threads": settings.threads,
        "memory_rss_bytes": process.memory_info().rss,
        "uptime_s": round(time.time() - process.create_time(), 3),  # the process, model load too
        "requests_served": state.metrics.inference_requests,
        "last_minute": {
            "requests": last_minute.requests,
            "qps": round(last_minute.qps, 3),
            "p50_ms": last_minute.p50_ms,
            "p95_ms": last_minute.p95_ms,
        },
        "limits": {
            "default_top_k": settings.default_top_k,
            "max_top_k": settings.max_top_k,
            "max_masks": settings.max_masks,
            "max_text_chars": settings.max_text_chars,
            "max_check_chars": settings.max_check_chars,  # /check's, /batch_check's per text
            "max_length": settings.max_length,
            "max_batch_texts": settings.max_batch_texts,
            "max_body_bytes": settings.max_body_bytes,
            "max_request_cost": settings.max_request_cost,
            "max_candidates": MAX_CANDIDATES,  # the page checks candidates with these two
            "max_option_chars": MAX_OPTION_CHARS,
        },
    }


@router.get("/metrics", tags=["operations"], response_class=Response)
@router.head("/metrics", include_in_schema=False, response_class=Response)
async def metrics(state: StateDep) -> Response:
    """Prometheus text format: requests by route and status, latency and batch-size histograms."""
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
async def page() -> FileResponse:
    """The web page (POST / is the Hugging Face route); a Range it can't serve is an error in
    the one shape, as for its modules (a review)."""
    return RangedFile(STATIC_DIR / "index.html", headers=PAGE_HEADERS)
