"""Post-processing in pure numpy: softmax, special-token filtering, constraints and top-k."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tiankong.core.results import Memory, TokenScore
from tiankong.errors import BadOptionError


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


# --- vocabulary constraints ------------------------------------------------------------------

PRESETS = ("chinese_only", "no_punctuation")


def is_han(char: str) -> bool:
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


@dataclass(frozen=True)
class Constraints:
    """Which tokens may fill a blank. Applied before top-k; probabilities are renormalised.

    ``allowed``: characters or words (a word allows its characters; in whole-word decoding a
    multi-character allowed word also restricts whole fills). ``exclude``: characters or words
    whose characters are never used. ``preset``: ``chinese_only`` (Han characters only: no
    punctuation, digits, Latin letters or ``##`` pieces) or ``no_punctuation``.
    """

    allowed: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    preset: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.allowed or self.exclude or self.preset)

    @property
    def allowed_words(self) -> frozenset[str]:
        return frozenset(word for word in self.allowed if len(word) > 1)


def allowed_token_mask(
    constraints: Constraints, vocab: dict[str, int], banned: np.ndarray
) -> np.ndarray:
    """Boolean ``[vocab]`` array: True where a token may be a candidate."""
    if constraints.preset is not None and constraints.preset not in PRESETS:
        raise BadOptionError(
            f"Unknown constraints preset '{constraints.preset}'; use one of {', '.join(PRESETS)}."
        )
    allowed = np.ones(len(vocab), dtype=bool)
    allowed[banned] = False
    if constraints.preset == "chinese_only":
        allowed &= preset_array(vocab, lambda token: all(is_han(char) for char in token))
    elif constraints.preset == "no_punctuation":
        allowed &= preset_array(vocab, lambda token: any(char.isalnum() for char in token))
    if constraints.allowed:
        listed = np.zeros(len(vocab), dtype=bool)
        for token_id in ids_of(constraints.allowed, vocab):
            listed[token_id] = True
        allowed &= listed
    for token_id in ids_of(constraints.exclude, vocab):
        allowed[token_id] = False
    if not allowed.any():
        raise BadOptionError("The constraints leave no token that could fill the blank.")
    return allowed


def preset_array(vocab: dict[str, int], keep: Callable[[str], bool]) -> np.ndarray:
    array = np.zeros(len(vocab), dtype=bool)
    for token, index in vocab.items():
        array[index] = not token.startswith("##") and keep(token)
    return array


def ids_of(entries: tuple[str, ...], vocab: dict[str, int]) -> list[int]:
    """Vocabulary ids for listed entries: whole entries that are tokens, and their characters."""
    ids = []
    for entry in entries:
        for piece in {entry, *entry}:
            if piece in vocab:
                ids.append(vocab[piece])
    return ids


def restrict(probabilities: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Zero out disallowed tokens and renormalise each row over what is left."""
    kept = np.where(allowed, probabilities, 0.0)
    return kept / np.maximum(kept.sum(axis=-1, keepdims=True), 1e-300)


def top_k_constrained(
    probabilities: np.ndarray,
    k: int,
    allowed: np.ndarray,
    token_string: Callable[[int], str],
) -> list[TokenScore]:
    """Top-k among allowed tokens: ``score`` renormalised, ``raw_score`` the model's softmax."""
    renormalised = restrict(probabilities, allowed)
    k = min(k, int(allowed.sum()))
    best = np.argpartition(-renormalised, k - 1)[:k]
    best = best[np.argsort(-renormalised[best], kind="stable")]
    return [
        TokenScore(token_string(int(i)), int(i), float(renormalised[i]), float(probabilities[i]))
        for i in best
    ]


def ranked_candidates(
    scores: np.ndarray,
    model: np.ndarray,
    k: int,
    banned: np.ndarray,
    allowed: np.ndarray | None,
    token_string: Callable[[int], str],
    evidence: Callable[[int], Memory],
) -> list[TokenScore]:
    """Top-k of one mask by ``scores`` (the model's row with a corpus index mixed in, or the
    model's own), each with the model's own score beside it and the index's evidence."""
    if allowed is None:
        chosen = top_k(scores, k, banned, token_string)
        return [
            replace(c, model_score=float(model[c.token_id]), memory=evidence(c.token_id))
            for c in chosen
        ]
    chosen = top_k_constrained(scores, k, allowed, token_string)
    kept = model if scores is model else restrict(model, allowed)
    return [
        replace(
            c,
            raw_score=float(model[c.token_id]),
            model_score=c.score if scores is model else float(kept[c.token_id]),
            memory=evidence(c.token_id),
        )
        for c in chosen
    ]
