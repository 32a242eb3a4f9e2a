"""The one door between the HTTP routes and the engine.

Every route validates its texts with ``Predictor.prepare`` (bad input never reaches the engine)
and then calls ``Predictor.run``. ``run`` is where the dynamic batcher will slot in: today it
runs each request's texts as one engine call in a worker thread, one call at a time, because
the engine already uses every core it was given and the event loop must never block.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import numpy as np

from tiankong.config import Settings
from tiankong.errors import EngineError, ModelUnavailableError, TiankongError
from tiankong.modes import PredictOptions
from tiankong.results import FillResult
from tiankong.server.metrics import ServerMetrics
from tiankong.service import FillMasker
from tiankong.text import PreparedText

logger = logging.getLogger("tiankong.server")
WARMUP_TEXT = "春眠不觉晓，处处闻啼[MASK]。"


class Predictor:
    """Validates texts and runs them through the masker off the event loop."""

    def __init__(self, masker: FillMasker, settings: Settings, metrics: ServerMetrics) -> None:
        self.masker = masker
        self.settings = settings  # the server's limits; the masker keeps the model's own
        self.metrics = metrics
        self.engine_lock = anyio.Lock()

    def check_top_k(self, top_k: int | None) -> int:
        return self.masker.check_top_k(self.settings.default_top_k if top_k is None else top_k)

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize one text; raises a typed BadInputError."""
        return self.masker.prepare(text)

    async def run(
        self, prepared: Sequence[PreparedText], k: int, allowed: np.ndarray | None = None
    ) -> list[FillResult]:
        """Fill every mask of ``prepared`` (already validated), in input order."""
        if not prepared:
            return []
        async with self.engine_lock:
            self.metrics.observe_batch(len(prepared))
            try:
                results = await anyio.to_thread.run_sync(
                    self.masker.run_prepared, prepared, k, allowed
                )
            except TiankongError:
                raise
            except Exception as error:  # an engine fault is ours, not the user's
                logger.exception("engine run failed on %d texts", len(prepared))
                raise EngineError(
                    f"The engine failed on this request ({type(error).__name__}); "
                    "see the server log."
                ) from None
        if len(results) != len(prepared):
            raise EngineError("The engine returned a different number of results than texts.")
        return results

    async def run_options(self, text: str, options: PredictOptions) -> FillResult:
        """Whole-word, candidate, [BLANK] and constrained predictions for one text.

        These modes make several engine calls per text (one per search step), so they run as
        one job under the engine lock rather than through the plain-mode path.
        """
        async with self.engine_lock:
            try:
                return await anyio.to_thread.run_sync(
                    lambda: self.masker.predict(text, options=options)
                )
            except TiankongError:
                raise
            except Exception as error:
                logger.exception("engine run failed in mode %s", options.mode)
                raise EngineError(
                    f"The engine failed on this request ({type(error).__name__}); "
                    "see the server log."
                ) from None

    async def warm_up(self) -> None:
        """One real inference, so the first user request doesn't pay for lazy initialisation."""
        prepared = self.prepare(WARMUP_TEXT)
        await anyio.to_thread.run_sync(self.masker.run_prepared, [prepared], 1)


@dataclass
class ServerState:
    """What one app holds on ``app.state``: no module-level model or settings."""

    settings: Settings
    metrics: ServerMetrics
    masker: FillMasker | None = None  # given by the caller, else loaded in lifespan
    predictor: Predictor | None = None  # set once the model is loaded and warmed up

    @property
    def ready(self) -> bool:
        return self.predictor is not None

    def require_predictor(self) -> Predictor:
        if self.predictor is None:
            raise ModelUnavailableError(
                "The model is still loading; retry when GET /ready answers 200."
            )
        return self.predictor
