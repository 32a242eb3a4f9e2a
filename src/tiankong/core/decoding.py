"""Post-processing in pure numpy: softmax, special-token filtering, constraints and top-k."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from tiankong.core.results import Memory, TokenScore
from tiankong.errors import BadOptionError, ModelUnavailableError

# a model whose scores are NaN (a training run that diverged: `train --lr 1e10` wrote one) gave
# no candidates, and an IndexError's traceback came of the empty list (a review)
NOT_NUMBERS = (
    "The model's scores are not numbers (NaN): its weights are broken, as a training run that "
    "diverged leaves them; train it again with a lower --lr, or use another model."
)


def softmax(logits: np.ndarray, overwrite: bool = False, numbers_only: bool = True) -> np.ndarray:
    """Row-wise softmax in float32, as transformers' pipeline computes it, with each row's sum
    taken in float64. numpy's float32 ``exp`` is about twice as fast as its float64 one, and no
    float64 copy of the row is made: a 21,128-entry row took 0.25 ms in float64 and 0.12 ms
    this way on a 2-core AVX2 server (0.49 and 0.12 ms a row in a batch of 20). A probability
    under float32's smallest (about 1e-45: a logit over 100 below the row's best) reads 0; the
    search paths clamp logs at 1e-300.

    ``overwrite``: the caller owns ``logits`` (an engine's output), so a float32 array that may
    be written is turned into the probabilities where it lies, with no second array of its size:
    512 rows took 18 ms instead of 29, and 16 rows 0.40 ms instead of 0.51 (amx, 2 cores).

    A row with a score that is NaN or infinite comes out all NaN (its sum is NaN); with
    ``numbers_only`` that is ``ModelUnavailableError(NOT_NUMBERS)`` for the whole call, else the
    caller tells such rows apart (``not_numbers``) and fails only the requests that hold one."""
    logits = np.asarray(logits, dtype=np.float32)
    if overwrite and logits.flags.writeable:
        exp = logits
        exp -= logits.max(axis=-1, keepdims=True)
    else:
        exp = logits - logits.max(axis=-1, keepdims=True)
    np.exp(exp, out=exp)  # in place: one row-sized array per call, not two
    sums = exp.sum(axis=-1, keepdims=True, dtype=np.float64)
    if numbers_only and not np.isfinite(sums).all():  # a NaN score made the row's every one NaN
        raise ModelUnavailableError(NOT_NUMBERS)
    exp /= sums.astype(np.float32)
    return exp


def not_numbers(probabilities: np.ndarray) -> bool:
    """Whether any row of ``softmax``'s output is NaN (a row is all NaN or all numbers, so its
    first entry tells)."""
    return bool(probabilities.size and np.isnan(probabilities[..., 0]).any())


def banned_token_ids(vocab: dict[str, int], outputs: int | None = None) -> np.ndarray:
    """Ids that never appear in results: bracketed specials such as [CLS] [SEP] [PAD] [UNK]
    [MASK] [unusedN] (and bert-base-chinese's [SUB] [OBJ]), or <s>-style ones, and, where the
    model has ``outputs`` scores a row (its config's vocab_size), the ids below that which its
    tokenizer has no token for (a vocabulary padded past the tokenizer: they spell nothing)."""
    banned = {
        index
        for token, index in vocab.items()
        if len(token) > 2
        and ((token[0], token[-1]) == ("[", "]") or (token[0], token[-1]) == ("<", ">"))
    }
    if outputs is not None:
        banned |= set(range(outputs)) - set(vocab.values())
    return np.asarray(sorted(banned), dtype=np.int64)


TOP_K_GROUP = 64  # entries per group for top_indices' group maxima


def top_k(
    probabilities: np.ndarray,
    k: int,
    banned: np.ndarray,
    token_string: Callable[[int], str],
) -> list[TokenScore]:
    """The ``k`` most probable non-banned tokens of one probability row, best first.

    The one top-k of every path: any step that changes the probabilities (constraints, a
    mixing step) calls it on its own row."""
    return [
        TokenScore(token_string(i), i, float(probabilities[i]))
        for i in allowed_top(probabilities, k, banned)
    ]


def allowed_top(probabilities: np.ndarray, k: int, banned: np.ndarray) -> list[int]:
    """The indices of the ``k`` most probable tokens outside ``banned``, best first.

    ``top_indices`` passes the banned tokens over, so the row is not copied; where banned
    tokens held enough of its group maxima that fewer than ``k`` others came back, again over a
    copy with the banned entries below every probability. The same answer as that copy sorted
    for any row of probabilities or mixed scores (entries from 0 to 1, no NaN); on a row with
    NaN or with entries at or below -1 it may differ. At most every token outside ``banned``
    comes back (a top_k past them, where a server allows it, returned [PAD] and [unused3])."""
    k = min(k, probabilities.shape[0] - int(np.searchsorted(banned, probabilities.shape[0])))
    best = top_indices(probabilities, k, banned)
    if len(best) == min(k, probabilities.shape[0]):
        return best
    scores = probabilities.copy()
    scores[banned] = -1.0
    return top_indices(scores, k)


def any_of(indices: Sequence[int], sorted_ids: np.ndarray) -> bool:
    """Whether any of a few ``indices`` is in ``sorted_ids`` (ascending, as
    ``banned_token_ids`` gives them)."""
    return bool(members(np.asarray(indices), sorted_ids).any())


def members(indices: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Which of ``indices`` are in ``sorted_ids`` (ascending): a binary search each, where
    ``np.isin`` sorts both arrays (62 µs for five indices against bert-base-chinese's 105
    banned ids, quiet AVX2)."""
    if not len(sorted_ids) or not len(indices):
        return np.zeros(len(indices), dtype=bool)
    found = np.minimum(np.searchsorted(sorted_ids, indices), len(sorted_ids) - 1)
    return np.asarray(sorted_ids[found] == indices)


def top_indices(scores: np.ndarray, k: int, excluded: np.ndarray | None = None) -> list[int]:
    """Indices of the ``k`` largest entries of a row, largest first (equal ones by index),
    passing over the ids in ``excluded`` (ascending: ``banned_token_ids``).

    A full ``argpartition`` of a 21,128-entry vocabulary costs 0.07-0.4 ms per mask, and far
    more on rows with many equal entries. Instead the first ``TOP_K_GROUP * width`` entries are
    cut into ``width`` groups (entry ``i`` in group ``i % width``) whose maxima are one
    vectorised pass; the last few entries (fewer than ``TOP_K_GROUP``) are looked at directly.
    The k largest entries all lie in groups whose maximum is at least the k-th largest group
    maximum ``t`` (those k groups alone hold k entries >= t), so only the entries above ``t``
    in the few groups whose maximum is above it (at most k - 1), and in the last few, are
    sorted; entries equal to ``t`` fill any places left, lowest index first, found by scanning
    the row from its start in growing pieces (a row of equal entries is answered from its
    first piece). Excluded ids are dropped from what is sorted and from the entries equal to
    ``t``; where they held some of the k largest group maxima, fewer than ``k`` may be left
    (``allowed_top`` then sorts a copy without them).
    """
    size = scores.shape[0]
    k = min(k, size)
    width = size // TOP_K_GROUP
    if width <= k:  # a short row: sort it whole
        order = np.lexsort((np.arange(size), -scores))
        if excluded is not None:
            order = order[~members(order, excluded)]
        return order[:k].tolist()
    whole = width * TOP_K_GROUP
    maxima = scores[:whole].reshape(TOP_K_GROUP, width).max(axis=0)
    threshold = np.partition(maxima, width - k)[width - k]
    columns = np.flatnonzero(maxima > threshold)  # at most k - 1 groups
    indices = (group_starts(width)[:, None] + columns).ravel()
    if whole < size:
        indices = np.concatenate([indices, np.arange(whole, size)])
    values = scores[indices]
    above = values > threshold
    indices, values = indices[above], values[above]
    if excluded is not None:
        kept = ~members(indices, excluded)
        indices, values = indices[kept], values[kept]
    best: list[int] = indices[np.lexsort((indices, -values))[:k]].tolist()
    start, piece = 0, TIE_PIECE
    while len(best) < k and start < size:  # a NaN threshold equals nothing: fewer than k
        ties = np.flatnonzero(scores[start : start + piece] == threshold) + start
        if excluded is not None:
            ties = ties[~members(ties, excluded)]
        best += ties[: k - len(best)].tolist()
        start, piece = start + piece, piece * 4
    return best


TIE_PIECE = 256  # the first piece of the row scanned for entries equal to the threshold


@lru_cache(maxsize=8)
def group_starts(width: int) -> np.ndarray:
    """The offsets of the ``TOP_K_GROUP`` rows of ``top_indices``' groups, made once a width."""
    return np.arange(0, TOP_K_GROUP * width, width)


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

    ``allowed``: characters or words (a word allows its characters; where one of them is a
    multi-character word, the whole fills of whole-word decoding and [BLANK]s are the entries
    themselves: ``allowed_fills``). ``exclude``: characters or words
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
    def allowed_fills(self) -> frozenset[str]:
        """The whole fills allowed (whole-word, [BLANK]): every allowed entry once one of them is
        a word of several characters, so a character given beside words is a one-character
        fill (it was dropped: 好 beside 很好 left only 很好); none, so no limit on the fill,
        where all are single characters (they limit each position)."""
        if not any(len(entry) > 1 for entry in self.allowed):
            return frozenset()
        return frozenset(self.allowed)


def allowed_token_mask(
    constraints: Constraints, vocab: dict[str, int], banned: np.ndarray, width: int | None = None
) -> np.ndarray:
    """Boolean array over a row's ``width`` ids (default the vocabulary's; a model's rows may be
    wider, a vocabulary padded past its tokenizer): True where a token may be a candidate."""
    width = len(vocab) if width is None else width
    if constraints.preset is not None and constraints.preset not in PRESETS:
        raise BadOptionError(
            f"Unknown constraints preset '{constraints.preset}'; use one of {', '.join(PRESETS)}."
        )
    allowed = np.ones(width, dtype=bool)
    allowed[banned] = False
    if constraints.preset == "chinese_only":
        allowed &= preset_array(vocab, lambda t: t != "" and all(map(is_han, t)), width)
    elif constraints.preset == "no_punctuation":
        allowed &= preset_array(vocab, lambda t: any(char.isalnum() for char in t), width)
    if constraints.allowed:
        listed = np.zeros(width, dtype=bool)
        for token_id in ids_of(constraints.allowed, vocab):
            listed[token_id] = True
        allowed &= listed
    for token_id in ids_of(constraints.exclude, vocab, pieces_too=True):
        allowed[token_id] = False
    if not allowed.any():
        raise BadOptionError("The constraints leave no token that could fill the blank.")
    return allowed


def preset_array(
    vocab: dict[str, int], keep: Callable[[str], bool], width: int | None = None
) -> np.ndarray:
    array = np.zeros(len(vocab) if width is None else width, dtype=bool)
    for token, index in vocab.items():
        array[index] = not token.startswith("##") and keep(token)
    return array


def ids_of(entries: tuple[str, ...], vocab: dict[str, int], pieces_too: bool = False) -> list[int]:
    """Vocabulary ids for listed entries: whole entries that are tokens, and their characters;
    never a word piece typed (## alone is the vocabulary's empty piece: it was answered as '').
    ``pieces_too``: each one's word piece as well (##果 beside 果), which an answer shows as the
    same string: an excluded 果 came back as ##果, shown 果 (a review)."""
    ids = []
    for entry in entries:
        for piece in {entry, *entry}:
            if piece.startswith("##"):
                continue
            ids += [
                vocab[form] for form in (piece, "##" + piece)[: 1 + pieces_too] if form in vocab
            ]
    return ids


def restrict(probabilities: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Zero out disallowed tokens and renormalise each row over what is left; a row whose
    allowed tokens all score 0 (float32's underflow) stays 0: its floor, 1e-300, was 0 in
    float32, and 0 / 0 printed "score": NaN, which is no JSON (a verifying review)."""
    kept = np.where(allowed, probabilities, 0.0)
    total = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, total, out=np.zeros_like(kept), where=total > 0)


def top_k_constrained(
    probabilities: np.ndarray,
    k: int,
    allowed: np.ndarray,
    token_string: Callable[[int], str],
) -> list[TokenScore]:
    """Top-k among allowed tokens: ``score`` renormalised, ``raw_score`` the model's softmax.
    Ranked among the allowed ids alone, so a token outside them never comes back, even where
    the allowed ones score 0 (an underflow; the index's punctuation rule) and tie with it."""
    renormalised = restrict(probabilities, allowed)
    ids = np.flatnonzero(allowed)  # ascending: equal scores by index, as top_indices ranks
    best = ids[top_indices(renormalised[ids], k)].tolist()
    return [
        TokenScore(token_string(i), i, float(renormalised[i]), float(probabilities[i]))
        for i in best
    ]


def no_evidence(_token_id: int) -> Memory:
    return None


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
        return [
            TokenScore(
                token_string(i),
                i,
                float(scores[i]),
                model_score=float(model[i]),
                memory=evidence(i),
            )
            for i in allowed_top(scores, k, banned)
        ]
    if scores is not model and not np.any(scores[allowed]):
        # the index left no allowed token any score (its punctuation rule at a text's end,
        # where only punctuation is allowed): it has nothing to say, the model's row ranks
        # and no evidence is shown
        scores, evidence = model, no_evidence
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
