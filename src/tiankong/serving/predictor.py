"""The one door between the HTTP routes and the engine.

Every route turns its texts into prepared requests (``prepare_request``: validated, tokenized,
path decided; bad input never reaches the engine) and runs them with ``run_request``: the plain
path through ``run``, the search path (the multi-call modes) through ``run_search``.

* ``run`` looks each text up in the result cache and sends the misses through the dynamic
  batcher (``serving.batching``), one item per text, so concurrent /predict, /batch_predict and
  Hugging Face requests share engine calls. Each item carries its own top-k and allowed tokens:
  the batch shares the forward pass, decoding is per item.
* ``run_search`` runs one whole multi-call job (whole-word, candidates, [BLANK], constraints)
  as an exclusive turn on the batcher's engine thread: the batches and these jobs take turns
  through one FIFO-fair lock, so neither starves the other, they never use the engine at the
  same time, and a job never waits on the batcher while holding its turn (no deadlock).
* ``prepare`` goes through the tokenization cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from tiankong.config import Settings, check_settings
from tiankong.core.modes import PredictOptions
from tiankong.core.request import PreparedRequest, prepare_request
from tiankong.core.results import FillResult
from tiankong.core.text import PreparedText
from tiankong.errors import (
    EngineError,
    TiankongError,
    new_error_id,
)
from tiankong.service import FillMasker
from tiankong.serving.batching import BatchLimits, BatchObserver, DynamicBatcher
from tiankong.serving.caches import LRUCache, PlainKey, ResultKey

logger = logging.getLogger("tiankong.server")
WARMUP_TEXT = "春眠不觉晓，处处闻啼[MASK]。"
JobT = TypeVar("JobT")


def check_serving_settings(settings: Settings) -> BatchLimits:
    """The batcher's limits from ``settings``, after every row's rule (``check_settings``)."""
    check_settings(settings)
    return BatchLimits.from_settings(settings)


@dataclass(frozen=True)
class PlainJob:
    """One text's plain-mode work: a batcher item."""

    prepared: PreparedText
    top_k: int
    allowed: np.ndarray | None = None


def run_plain_batch(masker: FillMasker, jobs: list[PlainJob]) -> list[FillResult]:
    """On the engine thread: one forward pass for every job, then each job's own decoding."""
    probabilities = masker.mask_probabilities([job.prepared for job in jobs])
    return [
        masker.decode(job.prepared, rows, job.top_k, job.allowed)
        for job, rows in zip(jobs, probabilities, strict=True)
    ]


class EngineScheduler(Protocol):
    """What schedules the engine for a Predictor: the standalone server's ``DynamicBatcher``, or
    a Ray Serve replica's scheduler (``server.ray_serve.RayBatchScheduler``)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit_many(self, items: Sequence[PlainJob]) -> list[FillResult]:
        """Plain jobs, batched with other requests' jobs; results in order."""
        ...

    async def run_exclusive(self, job: Callable[[], JobT]) -> JobT:
        """A multi-call job, alone on the engine."""
        ...

    def describe(self) -> dict[str, Any]:
        """GET /info's ``batching`` section."""
        ...


class ServingObserver(BatchObserver, Protocol):
    """Where a Predictor reports batches and cache lookups; the server's ServerMetrics is one."""

    def observe_cache(self, cache: str, hit: bool) -> None: ...


# Builds the scheduler once the model is loaded (create_app's ``scheduler`` argument).
SchedulerFactory = Callable[[FillMasker, Settings, ServingObserver], EngineScheduler]


class Predictor:
    """Validates texts and runs them through the batcher, with caches in front.

    ``start()`` (in the app's lifespan) starts the batcher; ``close()`` drains it.
    """

    def __init__(
        self,
        masker: FillMasker,
        settings: Settings,
        metrics: ServingObserver,
        scheduler: SchedulerFactory | None = None,
    ) -> None:
        self.masker = masker
        self.settings = settings  # the server's limits; the masker keeps the model's own
        self.metrics = metrics
        self.limits = check_serving_settings(settings)
        self.batcher: EngineScheduler = (
            scheduler(masker, settings, metrics)
            if scheduler is not None
            else DynamicBatcher[PlainJob, FillResult](
                lambda jobs: run_plain_batch(masker, jobs),
                size_of=lambda job: len(job.prepared.input_ids),
                limits=self.limits,
                observer=metrics,
            )
        )
        self.token_cache: LRUCache[str, PreparedText] = LRUCache(
            "tokens", settings.token_cache_size, metrics.observe_cache
        )
        self.result_cache: LRUCache[ResultKey, FillResult] = LRUCache(
            "results", settings.result_cache_size, metrics.observe_cache
        )

    async def start(self) -> None:
        await self.batcher.start()

    async def close(self) -> None:
        await self.batcher.close()

    def check_top_k(self, top_k: int | None) -> int:
        return self.masker.check_top_k(self.settings.default_top_k if top_k is None else top_k)

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize one text; raises a typed BadInputError (never cached)."""
        return self.token_cache.get_or_compute(text, lambda: self.masker.prepare(text))

    def result_key(self, text: str, options: Any) -> ResultKey:
        model, engine = self.masker.model, self.masker.engine
        return ResultKey(model.name, str(model.path), engine.name, engine.precision, text, options)

    async def run(
        self, prepared: Sequence[PreparedText], k: int, allowed: np.ndarray | None = None
    ) -> list[FillResult]:
        """Fill every mask of ``prepared`` (already validated), in input order."""
        options = PlainKey.of(k, allowed)
        keys = [self.result_key(item.text, options) for item in prepared]
        results = [self.result_cache.get(key) for key in keys]
        missing = [index for index, result in enumerate(results) if result is None]
        if missing:
            fresh = await self.batcher.submit_many(
                [PlainJob(prepared[index], k, allowed) for index in missing]
            )
            for index, result in zip(missing, fresh, strict=True):
                results[index] = result
                self.result_cache.put(keys[index], result)
        filled = [result for result in results if result is not None]
        if len(filled) != len(prepared):
            raise EngineError("The engine returned a different number of results than texts.")
        return filled

    def prepare_request(self, text: str, options: PredictOptions) -> PreparedRequest:
        """Validate, tokenize (through the token cache) and decide the path; typed errors."""
        return prepare_request(text, options, self.prepare)

    async def run_request(self, request: PreparedRequest) -> FillResult:
        """One prepared request by its path, finished (``FillMasker.finish``)."""
        if request.plain:
            [result] = await self.run([request.prepared], request.options.top_k)
        else:
            result = await self.run_search(request)
        return self.masker.finish(request, result)

    async def run_options(self, text: str, options: PredictOptions) -> FillResult:
        """``run_search`` for a text that isn't prepared yet."""
        return await self.run_search(self.prepare_request(text, options))

    async def run_search(self, request: PreparedRequest) -> FillResult:
        """Whole-word, candidate, [BLANK] and constrained predictions for one text.

        These modes make several engine calls per text (one per search step), so the whole job
        runs as one exclusive turn on the engine thread rather than through the batches.
        """
        text, options = request.text, request.options
        key = self.result_key(text, options)
        cached = self.result_cache.get(key)
        if cached is not None:
            return cached
        try:
            result = await self.batcher.run_exclusive(lambda: self.masker.run_search(request))
        except TiankongError:
            raise
        except Exception as error:  # an engine fault is ours, not the user's
            error_id = new_error_id()
            logger.error("engine run %s failed in mode %s", error_id, options.mode, exc_info=error)
            raise EngineError(
                f"The engine failed on this request ({type(error).__name__}); error id "
                f"{error_id} in the server log.",
                error_id=error_id,
            ) from None
        self.result_cache.put(key, result)
        return result

    async def warm_up(self) -> None:
        """One real inference, so the first user request doesn't pay for lazy initialisation."""
        prepared = self.masker.prepare(WARMUP_TEXT)
        await self.batcher.run_exclusive(lambda: self.masker.run_prepared([prepared], 1))

    def serving_info(self) -> dict[str, Any]:
        """The batcher's settings and state, the caches, and the INT8 guard's figures."""
        info: dict[str, Any] = {
            "batching": self.batcher.describe(),
            "caches": {
                "results": self.result_cache.stats(),
                "tokens": self.token_cache.stats(),
            },
        }
        quality = getattr(self.masker.engine, "quality", None)
        if quality:
            info["quality"] = dict(quality)
        return info
