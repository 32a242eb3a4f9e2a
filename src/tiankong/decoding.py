"""Post-processing in pure numpy: softmax, special-token filtering and top-k."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tiankong.results import TokenScore


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 for stable small probabilities."""
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def banned_token_ids(vocab: dict[str, int]) -> np.ndarray:
    """Ids that never appear in results: bracketed specials such as [CLS] [SEP] [PAD] [UNK]
    [MASK] [unusedN] (and bert-base-chinese's [SUB] [OBJ]), or <s>-style ones."""
    banned = [
        index
        for token, index in vocab.items()
        if len(token) > 2
        and ((token[0], token[-1]) == ("[", "]") or (token[0], token[-1]) == ("<", ">"))
    ]
    return np.asarray(sorted(banned), dtype=np.int64)


def top_k(
    probabilities: np.ndarray,
    k: int,
    banned: np.ndarray,
    token_string: Callable[[int], str],
) -> list[TokenScore]:
    """The ``k`` most probable non-banned tokens of one probability row, best first."""
    scores = probabilities.copy()
    scores[banned] = -1.0
    k = min(k, scores.shape[0])
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [TokenScore(token_string(int(i)), int(i), float(probabilities[i])) for i in best]
