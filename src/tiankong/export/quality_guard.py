"""The INT8 quality guard: how often INT8 ranks the same tokens first as FP32 does.

Both engines fill the same fixed Chinese sentences (idioms, poems, everyday and news text,
multi-mask) from ``resources/guard_sentences.txt``. Special tokens are left out of the rankings,
as they are from every answer tiankong gives.

The rows are as long as the model reads (``model_encoder``): a model with fewer positions than
the default window gets each sentence cut to a window around its masks, as a request would be,
and a sentence whose masks don't fit in it is left out (``prepare_to_fit``); the figures count
the sentences and masks measured.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tiankong.core.decoding import banned_token_ids, softmax, top_k
from tiankong.core.models import model_outputs, usable_positions
from tiankong.core.text import PreparedText, TextEncoder, TextLimits
from tiankong.engines.base import Engine, pad_prepared
from tiankong.errors import MasksDoNotFitError, ModelUnavailableError

GUARD_FILE = Path(__file__).parent.parent / "resources" / "guard_sentences.txt"
GUARD_BATCH = 16


def guard_sentences() -> list[str]:
    lines = GUARD_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def guard_file_sha256() -> str:
    return hashlib.sha256(GUARD_FILE.read_bytes()).hexdigest()


def model_encoder(model_folder: Path) -> TextEncoder:
    """The model's tokenizer with the default window, or a shorter one where the model reads
    fewer positions (``core.models.usable_positions``): the export's guard, timing and
    calibration rows are never longer than the model reads."""
    window = TextLimits().max_length
    positions = usable_positions(model_folder)
    if positions is not None:
        window = min(window, positions.usable)
    return TextEncoder.from_folder(model_folder, TextLimits(max_length=window))


def prepare_to_fit(encoder: TextEncoder, texts: Sequence[str]) -> list[PreparedText]:
    """``texts`` prepared for ``encoder``'s window: one longer than it is cut to a window
    around its masks (``TextEncoder.window``), one whose masks don't fit in it is left out."""
    prepared = []
    for text in texts:
        try:
            prepared.append(encoder.prepare(text))
        except MasksDoNotFitError:  # its masks span more than the window holds
            continue
    if not prepared:
        raise ModelUnavailableError(
            f"No sentence of the export's check fits in the {encoder.limits.max_length}-token "
            "rows this model reads, so its INT8 quality can't be measured; use --precision fp32."
        )
    return prepared


def compare_engines(
    reference: Engine, candidate: Engine, model_folder: Path, sentences: Sequence[str] = ()
) -> dict[str, float | int]:
    """Top-1 agreement and mean top-5 overlap of ``candidate`` with ``reference``, per mask."""
    return GuardReference(reference, model_folder, sentences).compare(candidate)


class GuardReference:
    """The reference engine's rankings on the guard sentences, computed once, so that several
    INT8 candidates (an export's recipe chain) are each measured with one pass of their own."""

    def __init__(
        self, reference: Engine, model_folder: Path, sentences: Sequence[str] = ()
    ) -> None:
        encoder = model_encoder(model_folder)
        self.prepared = prepare_to_fit(encoder, sentences or guard_sentences())
        self.pad_id = encoder.pad_id
        self.banned = banned_token_ids(encoder.vocab, model_outputs(model_folder))
        self.reference_top = top_tokens(reference, self.prepared, self.pad_id, self.banned)

    def compare(self, candidate: Engine) -> dict[str, float | int]:
        candidate_top = top_tokens(candidate, self.prepared, self.pad_id, self.banned)
        top1 = self.reference_top[:, 0] == candidate_top[:, 0]
        overlap = [
            len(set(ours.tolist()) & set(theirs.tolist())) / 5
            for ours, theirs in zip(self.reference_top, candidate_top, strict=True)
        ]
        return {
            "sentences": len(self.prepared),
            "masks": len(top1),
            "top1_agreement": round(float(top1.mean()), 4),
            "top5_overlap": round(float(np.mean(overlap)), 4),
        }


def top_tokens(
    engine: Engine, prepared: Sequence[PreparedText], pad_id: int, banned: np.ndarray
) -> np.ndarray:
    """The five best allowed token ids per mask, best first: ``[masks, 5]``."""
    rows: list[list[int]] = []
    for start in range(0, len(prepared), GUARD_BATCH):
        chunk = prepared[start : start + GUARD_BATCH]
        batch = pad_prepared(chunk, pad_id)
        for probabilities in softmax(engine.mask_logits(batch)):
            rows.append([choice.token_id for choice in top_k(probabilities, 5, banned, str)])
    return np.asarray(rows, dtype=np.int64)
