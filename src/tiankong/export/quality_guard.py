"""The INT8 quality guard: how often INT8 ranks the same tokens first as FP32 does.

Both engines fill the same fixed Chinese sentences (idioms, poems, everyday and news text,
multi-mask) from ``resources/guard_sentences.txt``. Special tokens are left out of the rankings,
as they are from every answer tiankong gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tiankong.core.decoding import banned_token_ids, softmax, top_k
from tiankong.core.text import PreparedText, TextEncoder, TextLimits
from tiankong.engines.base import Engine, pad_prepared

GUARD_FILE = Path(__file__).parent.parent / "resources" / "guard_sentences.txt"
GUARD_BATCH = 16


def guard_sentences() -> list[str]:
    lines = GUARD_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def guard_file_sha256() -> str:
    return hashlib.sha256(GUARD_FILE.read_bytes()).hexdigest()


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
        encoder = TextEncoder.from_folder(model_folder, TextLimits())
        self.prepared = [encoder.prepare(text) for text in sentences or guard_sentences()]
        self.pad_id = encoder.pad_id
        self.banned = banned_token_ids(encoder.vocab)
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
