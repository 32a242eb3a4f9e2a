"""The one door between the HTTP routes and the engine.

Every route turns its texts into prepared requests (``options`` checks the options once,
``prepare_request`` tokenizes and decides each text's kind; bad input never reaches the engine)
and runs them with ``run_many`` (``run_request`` is one text of it): the plain path through
``run``, the search path (the multi-call modes) through ``run_search``, every answer through
``FillMasker.finish``. The engine work itself is ``service.run_jobs``, the batcher's callback.

* **Cost.** Before anything runs, ``run_many`` prices the request in forward rows once
  (``check_cost``: the sum of ``PreparedRequest.forward_rows``), refuses one over
  ``max_request_cost`` (400 ``bad_option``, naming the cap and the cost) and hands the cost to
  the route's ``spend`` (the rate limit). The batcher's queue counts the same rows.
* ``run`` looks each text up in the result cache and sends the misses through the dynamic
  batcher (``serving.batching``), one item per text, so concurrent /predict, /batch_predict and
  Hugging Face requests share engine calls. Each item carries its own top-k and allowed tokens:
  the batch shares the forward pass, decoding is per item.
* ``run_search`` runs one multi-call search (whole-word, candidates, [BLANK], constraints) on
  a search thread (``serving.search_steps``) that sends each step's rows through the same
  batcher as search rows: its steps take turns with plain batches, and the request's deadline
  and client are checked before every step.
* **Deadlines.** A request's timeout covers all of its texts. ``run_many`` answers the texts
  that finished and a ``timeout`` error for each of the rest, or raises ``RequestTimeoutError``
  (504) when none finished.
* ``prepare`` goes through the tokenization cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np

from tiankong.config import Settings, check_settings
from tiankong.core.options import PredictOptions
from tiankong.core.request import (
    EngineJob,
    PlainJob,
    PreparedRequest,
    RowJob,
    plain_groups,
    prepare_request,
)
from tiankong.core.results import FillResult
from tiankong.core.text import PreparedText
from tiankong.errors import (
    BadInputError,
    BadOptionError,
    EngineError,
    ModelUnavailableError,
    OverloadedError,
    RequestTimeoutError,
    TiankongError,
    new_error_id,
)
from tiankong.service import FillMasker, run_jobs
from tiankong.serving.batch_policy import BatchLimits, BatchObserver
from tiankong.serving.batching import DynamicBatcher
from tiankong.serving.caches import LRUCache, PlainKey, ResultKey, small_result, small_text
from tiankong.serving.search_steps import SearchRunner, timed_out

logger = logging.getLogger("tiankong.server")
WARMUP_TEXT = "春眠不觉晓，处处闻啼[MASK]。"
JobT = TypeVar("JobT")


def job_tokens(job: EngineJob) -> int:
    return len(job.row)


class EngineScheduler(Protocol):
    """What schedules the engine for a Predictor: the standalone server's ``DynamicBatcher``, or
    a Ray Serve replica's scheduler (``server.ray_serve.RayBatchScheduler``)."""

    async def start(self) -> None: ...

    async def close(self, timeout_s: float | None = None) -> None:
        """Refuse new work and finish what is queued within ``timeout_s`` (default: the
        drain's time)."""
        ...

    async def submit_many(
        self, items: Sequence[EngineJob], search: bool = False, deadline: float | None = None
    ) -> list[Any]:
        """Jobs batched with other requests' jobs; results in order. ``search``: one search
        step's rows (after plain jobs); ``deadline``: the request's, in ``time.monotonic()``."""
        ...

    def search_admission(
        self, cost: int, deadline: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Admit a search of ``cost`` forward rows for a block: it waits for the searches
        running to make room until ``deadline`` (504), 503 when too many wait already."""
        ...

    async def run_exclusive(self, job: Callable[[], JobT], bounded: bool = True) -> JobT:
        """A multi-call job, alone on the engine; ``bounded``: within the request timeout."""
        ...

    def describe(self) -> dict[str, Any]:
        """GET /info's ``batching`` section."""
        ...


class ServingObserver(BatchObserver, Protocol):
    """Where a Predictor reports batches and cache lookups; the server's ServerMetrics is one."""

    def observe_cache(self, cache: str, hit: bool) -> None: ...


# Builds the scheduler once the model is loaded (create_app's ``scheduler`` argument).
SchedulerFactory = Callable[[FillMasker, Settings, ServingObserver], EngineScheduler]


class Spending(Protocol):
    """A client's rate-limit allowance (``server.middleware.security.Allowance``)."""

    def spend(self, cost: int) -> None: ...

    def refund(self, cost: int) -> None: ...


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
        company: Callable[[], int] | None = None,
    ) -> None:
        """``company``: how many other requests the server is handling now, so that a lone
        request may skip the hop to the engine thread (``DynamicBatcher``)."""
        self.masker = masker
        self.settings = settings  # the server's limits; the masker keeps the model's own
        self.metrics = metrics
        check_settings(settings)  # once per instance: create_app's check returns at once
        self.limits = BatchLimits.from_settings(settings)
        self.batcher: EngineScheduler = (
            scheduler(masker, settings, metrics)
            if scheduler is not None
            else DynamicBatcher[EngineJob, Any](
                lambda jobs: run_jobs(masker, jobs),
                size_of=job_tokens,
                limits=self.limits,
                observer=metrics,
                company=company,
            )
        )
        self.searches = SearchRunner(masker, self.submit_rows, self.limits.timeout_s, metrics)
        self.token_cache: LRUCache[str, PreparedText] = LRUCache(
            "tokens", settings.token_cache_size, metrics.observe_cache, small_text
        )
        self.result_cache: LRUCache[ResultKey, FillResult] = LRUCache(
            "results", settings.result_cache_size, metrics.observe_cache, small_result
        )

    async def start(self) -> None:
        await self.batcher.start()

    async def close(self, timeout_s: float | None = None) -> None:
        """Stop the batcher (queued work finishes within ``timeout_s``, default its drain
        time)."""
        await self.batcher.close(timeout_s)
        self.searches.close()

    def options(self, top_k: int | None, **changes: Any) -> PredictOptions:
        """A request's options, checked once (``FillMasker.options``); ``top_k`` None is this
        server's ``default_top_k``."""
        return self.masker.options(
            self.settings.default_top_k if top_k is None else top_k, **changes
        )

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize one text; raises a typed BadInputError (never cached)."""
        return self.token_cache.get_or_compute(text, lambda: self.masker.prepare(text))

    def result_key(self, text: str, options: Any) -> ResultKey:
        model, engine = self.masker.model, self.masker.engine
        memory = self.masker.memory
        return ResultKey(
            model.name,
            str(model.path),
            engine.name,
            engine.precision,
            text,
            options,
            memory.key if memory is not None else "none",
        )

    async def run(
        self,
        prepared: Sequence[PreparedText],
        k: int,
        allowed: np.ndarray | None = None,
        use_index: bool = True,
        deadline: float | None = None,
    ) -> list[FillResult]:
        """Fill every mask of ``prepared`` (already validated), in input order; ``use_index``
        False gives the model's own numbers where the model has a corpus index."""
        # without an index both choices give the model's numbers: one cache entry serves both
        use_index = use_index and self.masker.memory is not None
        options = PlainKey.of(k, allowed, use_index)
        keys = [self.result_key(item.text, options) for item in prepared]
        results = [self.result_cache.get(key) for key in keys]
        missing = [index for index, result in enumerate(results) if result is None]
        if missing:
            fresh = await self.batcher.submit_many(
                [PlainJob(prepared[index], k, allowed, use_index) for index in missing],
                deadline=deadline,
            )
            for index, result in zip(missing, fresh, strict=True):
                results[index] = result
                self.result_cache.put(keys[index], result)
        filled = [result for result in results if result is not None]
        if len(filled) != len(prepared):
            raise EngineError("The engine returned a different number of results than texts.")
        return filled

    async def run_each(
        self,
        prepared: Sequence[PreparedText],
        k: int,
        allowed: np.ndarray | None,
        use_index: bool,
        deadline: float,
    ) -> list[FillResult | TiankongError]:
        """``run``, where a text the model gives no numbers for (``run_jobs``) fails alone: the
        texts are then run one by one, and its error is its answer (a /batch_predict with one
        such text was a 503 for all of them: a review). A lone text's error is raised."""
        try:
            return list(await self.run(prepared, k, allowed, use_index, deadline))
        except ModelUnavailableError:
            if len(prepared) == 1:
                raise
        answers: list[FillResult | TiankongError] = []
        for item in prepared:
            try:
                answers += await self.run([item], k, allowed, use_index, deadline)
            except ModelUnavailableError as error:
                answers.append(error)
        return answers

    def prepare_request(self, text: str, options: PredictOptions) -> PreparedRequest:
        """Tokenize (through the token cache) and decide the kind; typed errors. ``options``
        come from ``options`` (checked there, once)."""
        return prepare_request(text, options, self.prepare, self.masker.converts_script(options))

    def check_cost(self, requests: Sequence[PreparedRequest]) -> int:
        """The requests' cost in forward rows; a ``BadOptionError`` over ``max_request_cost``."""
        cost = sum(request.forward_rows() for request in requests)
        cap = self.settings.max_request_cost
        if cost > cap:
            raise BadOptionError(
                f"This request would cost {cost:,} forward rows, over this server's limit of "
                f"{cap:,} (max_request_cost); send fewer texts or masks, or a smaller "
                "beam_width or max_blank_length."
            )
        return cost

    def deadline(self) -> float:
        return time.monotonic() + self.limits.timeout_s

    async def run_request(
        self, request: PreparedRequest, allowance: Spending | None = None
    ) -> FillResult:
        """One prepared request (``run_many`` of one): its answer, or its typed error raised."""
        [answer] = await self.run_many([request], allowance=allowance)
        if isinstance(answer, TiankongError):
            raise answer
        return answer

    async def run_many(
        self,
        requests: Sequence[PreparedRequest],
        allowed: np.ndarray | None = None,
        allowance: Spending | None = None,
    ) -> list[FillResult | TiankongError]:
        """The one run of prepared requests on a server. Answers in input order under one
        deadline, each finished (``FillMasker.finish``): the plain texts share engine calls
        (``allowed``: the Hugging Face route's single-token targets), the searches run one by
        one. The cost is checked once, here, and spent from ``allowance`` (the client's
        rate-limit allowance) before anything runs, and given back where a full queue refuses
        the request before any of it ran. A search that can't be filled, or isn't done by the
        deadline, gets its typed error; when some timed out and no text at all was answered,
        the request is a ``RequestTimeoutError`` (504). Engine faults still fail the request."""
        cost = self.check_cost(requests)
        if allowance is not None:
            allowance.spend(cost)
        answers: list[FillResult | TiankongError | None] = [None] * len(requests)
        try:
            return await self.answer_all(requests, allowed, answers)
        except OverloadedError:
            # refused by a full queue before any of it ran: the client is told to come back
            # after Retry-After, and charged for rows that never ran it met the rate limit's
            # 429 then (a review); a refusal after part of a batch ran keeps the charge
            if allowance is not None and all(answer is None for answer in answers):
                allowance.refund(cost)
            raise

    async def answer_all(
        self,
        requests: Sequence[PreparedRequest],
        allowed: np.ndarray | None,
        answers: list[FillResult | TiankongError | None],
    ) -> list[FillResult | TiankongError]:
        """``run_many``'s work, each answer put in ``answers`` as it comes."""
        deadline = self.deadline()
        searches = [index for index, request in enumerate(requests) if not request.plain]
        # admitted before anything runs: a full queue refuses the request before engine work
        cost_of_searches = sum(requests[index].forward_rows() for index in searches)
        async with self.searching(cost_of_searches, deadline):
            for (k, use_index), plain in plain_groups(requests).items():
                prepared = [requests[index].prepared for index in plain]
                results = await self.run_each(prepared, k, allowed, use_index, deadline)
                for index, result in zip(plain, results, strict=True):
                    answers[index] = (
                        result
                        if isinstance(result, TiankongError)
                        else self.masker.finish(requests[index], result)
                    )
            for index in searches:
                try:
                    result = await self.run_search(requests[index], deadline)
                    answers[index] = self.masker.finish(requests[index], result)
                except (BadInputError, RequestTimeoutError) as error:
                    answers[index] = error
        timeouts = [answer for answer in answers if isinstance(answer, RequestTimeoutError)]
        if timeouts and not any(isinstance(answer, FillResult) for answer in answers):
            raise timeouts[0]
        finished = [answer for answer in answers if answer is not None]
        assert len(finished) == len(requests)
        return finished

    def searching(self, cost: int, deadline: float) -> AbstractAsyncContextManager[None]:
        return self.batcher.search_admission(cost, deadline) if cost else nullcontext()

    async def submit_rows(self, jobs: list[RowJob], deadline: float) -> list[np.ndarray]:
        """One search step through the batcher (called on the loop by a search thread)."""
        return await self.batcher.submit_many(jobs, search=True, deadline=deadline)

    async def run_search(self, request: PreparedRequest, deadline: float) -> FillResult:
        """Whole-word, candidate, [BLANK] and constrained predictions for one text, admitted
        by the caller (``search_admission``); ``RequestTimeoutError`` past ``deadline``."""
        text, options = request.text, request.options
        # as in ``run``: without an index, "index": true and false are the same request
        key = self.result_key(text, options if self.masker.memory else replace(options, index=True))
        cached = self.result_cache.get(key)
        if cached is not None:
            return cached
        if time.monotonic() >= deadline:
            raise timed_out(self.limits.timeout_s)
        try:
            result = await self.searches.run(request, deadline)
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
        """One real inference, so the first user request doesn't pay for lazy initialisation;
        one per engine where two split the batches by size (``warm_up_rows``)."""
        prepared = self.masker.prepare(WARMUP_TEXT)
        rows: tuple[int, ...] = getattr(self.masker.engine, "warm_up_rows", (1,))
        for size in rows:
            batch = [prepared] * size
            await self.batcher.run_exclusive(
                partial(self.masker.run_prepared, batch, 1), bounded=False
            )

    def serving_info(self) -> dict[str, Any]:
        """The batcher's settings and state, the caches, and the INT8 guard's figures."""
        info: dict[str, Any] = {
            "batching": self.batcher.describe(),
            "caches": {
                "results": self.result_cache.stats(),
                "tokens": self.token_cache.stats(),
            },
        }
        info["index"] = self.masker.index.describe()
        quality = getattr(self.masker.engine, "quality", None)
        if quality:
            info["quality"] = dict(quality)
        return info
