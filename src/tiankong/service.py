"""FillMasker: the library facade that ties the stages together.

text -> validate/tokenize (text.py) -> pad (engines.pad_batch) -> engine -> decode -> result.

>>> from tiankong import FillMasker
>>> fm = FillMasker.load()                      # the bundled model  # doctest: +SKIP
>>> fm.predict("春眠不觉晓，处处闻啼[MASK]。").masks[0][0].token  # doctest: +SKIP
'鸟'
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from tiankong.config import Settings
from tiankong.core.beam_search import RowScorer
from tiankong.core.decoding import (
    Constraints,
    allowed_token_mask,
    banned_token_ids,
    softmax,
    top_k,
    top_k_constrained,
)
from tiankong.core.models import ResolvedModel, resolve_model
from tiankong.core.modes import PredictOptions, SearchModes
from tiankong.core.request import (
    PreparedRequest,
    ResultStep,
    ScheduledScorer,
    prepare_request,
)
from tiankong.core.results import FillResult
from tiankong.core.text import (
    MASK,
    PreparedText,
    TextEncoder,
    TextLimits,
    fill_text,
)
from tiankong.engines import Engine, create_engine, pad_batch
from tiankong.errors import TopKOutOfRangeError

DEFAULT_TOP_K = Settings.default_top_k  # written once, in config.py


def find_onnx_export(model: ResolvedModel, precision: str, settings: Settings) -> Any:
    """The ONNX engine's file from the export cache (built there on first use). Imported here,
    lazily, so the export machinery loads only when an ONNX engine is asked for."""
    from tiankong.build.export_cache import ensure_export

    return ensure_export(model, precision, settings)


class FillMasker:
    """Fill [MASK]s in Chinese text with a masked language model."""

    def __init__(
        self, model: ResolvedModel, encoder: TextEncoder, engine: Engine, settings: Settings
    ) -> None:
        self.model = model
        self.encoder = encoder
        self.engine = engine
        self.settings = settings
        self.banned = banned_token_ids(encoder.vocab)
        self.result_steps: list[ResultStep] = []  # after the softmax, on every path

    @classmethod
    def load(cls, source: str | None = None, settings: Settings | None = None) -> FillMasker:
        """Resolve ``source`` (bundled name, folder or hub id) and start its engine."""
        settings = settings or Settings()
        if source is not None:
            settings = settings.with_overrides(model=source)
        model = resolve_model(settings.model)
        limits = TextLimits(settings.max_masks, settings.max_length, settings.max_text_chars)
        encoder = TextEncoder.from_folder(model.path, limits)
        engine = create_engine(model, settings, len(encoder.vocab), find_onnx_export)
        return cls(model, encoder, engine, settings)

    def check_top_k(self, k: int) -> int:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= self.settings.max_top_k:
            raise TopKOutOfRangeError(
                f"top_k must be an integer from 1 to {self.settings.max_top_k}; got {k!r}."
            )
        return k

    def options(self, top_k: int = DEFAULT_TOP_K, **changes: Any) -> PredictOptions:
        """Validated PredictOptions (raises a typed BadInputError for bad values)."""
        self.check_top_k(top_k)
        return PredictOptions(top_k=top_k, **changes).validated()

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize; raises a typed BadInputError for bad input."""
        return self.encoder.prepare(text)

    def prepare_request(self, text: str, options: PredictOptions) -> PreparedRequest:
        """Validate, tokenize and decide the path (``core/request.py``); typed errors."""
        self.check_top_k(options.top_k)
        return prepare_request(text, options, self.prepare)

    def predict(
        self,
        text: str,
        top_k: int = DEFAULT_TOP_K,
        options: PredictOptions | None = None,
        **changes: Any,
    ) -> FillResult:
        """Top-k candidates for every [MASK] in ``text``; whole words, candidates and
        constraints through ``options`` (or keyword arguments of PredictOptions).

        >>> fm.predict("手机没电了，赶紧去[MASK][MASK]。", mode="whole_word").sequences[0].fill
        ... # doctest: +SKIP
        '充电'
        """
        options = options or self.options(top_k, **changes)
        return self.run_requests([self.prepare_request(text, options)])[0]

    def predict_batch(
        self,
        texts: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        options: PredictOptions | None = None,
    ) -> list[FillResult]:
        """Like ``predict`` for many texts; the plain ones share one engine call."""
        options = options or self.options(top_k)
        return self.run_requests([self.prepare_request(text, options) for text in texts])

    def run_requests(self, requests: Sequence[PreparedRequest]) -> list[FillResult]:
        """Answers in input order: plain requests share engine calls (one per top-k), search
        requests run one by one; every answer passes ``finish``."""
        results: list[FillResult | None] = [None] * len(requests)
        plain_by_k: dict[int, list[int]] = {}
        for index, request in enumerate(requests):
            if request.plain:
                plain_by_k.setdefault(request.options.top_k, []).append(index)
            else:
                results[index] = self.run_search(request)
        for k, indices in plain_by_k.items():
            batch = self.run_prepared([requests[index].prepared for index in indices], k)
            for index, result in zip(indices, batch, strict=True):
                results[index] = result
        return [
            self.finish(request, result)
            for request, result in zip(requests, results, strict=True)
            if result is not None
        ]

    def run_search(
        self, request: PreparedRequest, score_rows: RowScorer | None = None
    ) -> FillResult:
        """The search path for one request: several engine calls, each through ``score_rows``
        (default: this masker's engine, on the calling thread; the server passes one that
        sends each call through its batcher and stops the search at its deadline)."""
        if score_rows is None:
            return self.modes.predict(request.text, request.options)
        return SearchModes(ScheduledScorer(self, score_rows)).predict(request.text, request.options)

    def finish(self, request: PreparedRequest, result: FillResult) -> FillResult:
        """The steps after the model's softmax, in order (none by default: ``ResultStep``)."""
        for step in self.result_steps:
            result = step(request, result)
        return result

    def score_rows(self, rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        """Softmax at the ``asked`` indices of each row: one engine call per chunk of rows."""
        chunk = max(1, self.settings.max_batch_size)
        results: list[np.ndarray] = []
        for start in range(0, len(rows), chunk):
            batch = pad_batch(
                list(rows[start : start + chunk]),
                list(asked[start : start + chunk]),
                self.encoder.pad_id,
            )
            probabilities = softmax(self.engine.mask_logits(batch))
            splits = np.cumsum([len(item) for item in asked[start : start + chunk]])[:-1]
            results += np.split(probabilities, splits)
        return results

    def mask_probabilities(self, prepared: Sequence[PreparedText]) -> list[np.ndarray]:
        """One ``[masks, vocab]`` probability array per text."""
        return self.score_rows(
            [item.input_ids for item in prepared], [item.mask_indices for item in prepared]
        )

    def run_prepared(
        self, prepared: Sequence[PreparedText], k: int, allowed: np.ndarray | None = None
    ) -> list[FillResult]:
        """One engine call for all of ``prepared``; ``allowed`` limits the candidates."""
        if not prepared:
            return []
        rows = self.mask_probabilities(prepared)
        return [
            self.decode(item, probabilities, k, allowed)
            for item, probabilities in zip(prepared, rows, strict=True)
        ]

    def decode(
        self,
        item: PreparedText,
        probabilities: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
    ) -> FillResult:
        if allowed is None:
            masks = [top_k(row, k, self.banned, self.encoder.token_string) for row in probabilities]
        else:
            masks = [
                top_k_constrained(row, k, allowed, self.encoder.token_string)
                for row in probabilities
            ]
        return FillResult(
            text=item.text,
            masks=masks,
            sequence=fill_text(item.text, [candidates[0].token for candidates in masks]),
            truncated=item.truncated,
            model=self.model.name,
        )

    @cached_property
    def modes(self) -> SearchModes:
        return SearchModes(self)

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray:
        return allowed_token_mask(constraints, self.encoder.vocab, self.banned)


__all__ = ["MASK", "FillMasker", "PredictOptions"]
