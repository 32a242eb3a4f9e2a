"""FillMasker: the library facade that ties the stages together.

text -> validate/tokenize (text.py) -> pad (engines.pad_batch) -> engine -> decode -> result.

>>> from tiankong import FillMasker
>>> fm = FillMasker.load()                      # the bundled model  # doctest: +SKIP
>>> fm.predict("春眠不觉晓，处处闻啼[MASK]。").masks[0][0].token  # doctest: +SKIP
'鸟'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tiankong.config import Settings
from tiankong.decoding import banned_token_ids, softmax, top_k
from tiankong.engines import Engine, create_engine, pad_batch
from tiankong.errors import TopKOutOfRangeError
from tiankong.models import ResolvedModel, resolve_model
from tiankong.results import FillResult
from tiankong.text import MASK, PreparedText, TextEncoder, TextLimits


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

    @classmethod
    def load(cls, source: str | None = None, settings: Settings | None = None) -> FillMasker:
        """Resolve ``source`` (bundled name, folder or hub id) and start its engine."""
        settings = settings or Settings()
        if source is not None:
            settings = settings.with_overrides(model=source)
        model = resolve_model(settings.model)
        limits = TextLimits(settings.max_masks, settings.max_length, settings.max_text_chars)
        encoder = TextEncoder.from_folder(model.path, limits)
        engine = create_engine(model, settings, len(encoder.vocab))
        return cls(model, encoder, engine, settings)

    def check_top_k(self, k: int) -> int:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= self.settings.max_top_k:
            raise TopKOutOfRangeError(
                f"top_k must be an integer from 1 to {self.settings.max_top_k}; got {k!r}."
            )
        return k

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize; raises a typed BadInputError for bad input."""
        return self.encoder.prepare(text)

    def predict(self, text: str, top_k: int = 5) -> FillResult:
        """Top-k candidates for every [MASK] in ``text``."""
        return self.predict_batch([text], top_k)[0]

    def predict_batch(self, texts: Sequence[str], top_k: int = 5) -> list[FillResult]:
        """Like ``predict`` for many texts in one engine call (padded per batch)."""
        k = self.check_top_k(top_k)
        prepared = [self.prepare(text) for text in texts]
        return self.run_prepared(prepared, k)

    def mask_probabilities(self, prepared: Sequence[PreparedText]) -> list[np.ndarray]:
        """One ``[masks, vocab]`` probability array per text, from a single engine call."""
        batch = pad_batch(
            [item.input_ids for item in prepared],
            [item.mask_indices for item in prepared],
            self.encoder.pad_id,
        )
        probabilities = softmax(self.engine.mask_logits(batch))
        splits = np.cumsum([len(item.mask_indices) for item in prepared])[:-1]
        return np.split(probabilities, splits)

    def run_prepared(self, prepared: Sequence[PreparedText], k: int) -> list[FillResult]:
        if not prepared:
            return []
        rows = self.mask_probabilities(prepared)
        return [
            self.decode(item, probabilities, k)
            for item, probabilities in zip(prepared, rows, strict=True)
        ]

    def decode(self, item: PreparedText, probabilities: np.ndarray, k: int) -> FillResult:
        masks = [top_k(row, k, self.banned, self.encoder.token_string) for row in probabilities]
        segments = item.segments
        filled = segments[0] + "".join(
            candidates[0].token + segment
            for candidates, segment in zip(masks, segments[1:], strict=True)
        )
        return FillResult(
            text=item.text,
            masks=masks,
            sequence=filled,
            truncated=item.truncated,
            model=self.model.name,
        )


__all__ = ["MASK", "FillMasker"]
