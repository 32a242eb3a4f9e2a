"""top_indices against a plain sort: the same indices on every kind of row, ties by index."""

from __future__ import annotations

import numpy as np
import pytest

from tiankong.core.decoding import (
    allowed_top,
    ids_of,
    softmax,
    top_indices,
    top_k,
    top_k_constrained,
)


def reference(scores: np.ndarray, k: int) -> list[int]:
    """Largest first, equal values by lower index: a full stable sort."""
    order = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
    return order[: min(k, len(scores))]


@pytest.mark.parametrize("size", [1, 5, 63, 64, 65, 127, 4096, 21128])
@pytest.mark.parametrize("k", [1, 5, 50])
def test_top_indices_equals_a_full_sort(size: int, k: int) -> None:
    rng = np.random.default_rng(size * 100 + k)
    rows = [
        softmax(rng.normal(0.0, 3.0, size).astype(np.float32)),  # a model-like row
        rng.integers(0, 4, size).astype(np.float64),  # few values: ties everywhere
        np.zeros(size),  # all equal: the lowest indices win
    ]
    peaked = np.zeros(size)  # the fake engine's shape: three peaks on a flat floor
    peaked[rng.integers(0, size, 3)] = [8.0, 6.0, 4.0]
    rows.append(peaked)
    late = peaked.copy()  # the floor's first entries far from the row's start: found piece by piece
    late[: size // 2] = -1.0
    rows.append(late)
    for row in rows:
        assert top_indices(row, k) == reference(row, k)


def test_top_k_skips_banned_tokens_and_keeps_the_probabilities() -> None:
    rng = np.random.default_rng(7)
    row = softmax(rng.normal(0.0, 3.0, 21128).astype(np.float32))
    banned = np.sort(np.argsort(-row)[:3])  # the three most probable tokens are banned
    candidates = top_k(row, 5, banned, str)
    assert [c.token_id for c in candidates] == reference(
        np.where(np.isin(np.arange(row.size), banned), -1.0, row), 5
    )
    assert all(c.score == row[c.token_id] for c in candidates)
    assert not set(banned) & {c.token_id for c in candidates}


@pytest.mark.parametrize("k", [97, 100, 25000])
def test_a_top_k_past_the_allowed_tokens_gives_every_allowed_token_and_no_banned_one(
    k: int,
) -> None:
    """Settings(max_top_k=30000) let top_k=25000 through, and the answer held [PAD], [CLS] and
    [unused3]: the banned ids came back once the others ran out."""
    rng = np.random.default_rng(3)
    row = softmax(rng.normal(0.0, 3.0, 100).astype(np.float32))
    banned = np.array([0, 1, 50])
    best = allowed_top(row, k, banned)
    assert len(best) == min(k, 97) and len(set(best)) == len(best)
    assert not set(best) & set(banned.tolist())
    assert best == [i for i in reference(row, 100) if i not in {0, 1, 50}][: len(best)]


@pytest.mark.parametrize("where", ["top", "tie", "elsewhere", "none"])
def test_top_k_without_a_copy_of_the_row_equals_the_banned_row_sorted(where: str) -> None:
    rng = np.random.default_rng(11)
    row = softmax(rng.normal(0.0, 3.0, 21128).astype(np.float32))
    order = np.argsort(-row, kind="stable")
    banned = {
        "top": order[[0, 4]],  # banned tokens among the best five: ranked again without them
        "tie": order[[6]],  # banned, and made as probable as the fifth below
        "elsewhere": order[100:200],  # banned tokens below the best five: the row's own top
        "none": np.array([], dtype=np.int64),
    }[where]
    if where == "tie":
        row[banned] = row[order[4]]
    masked = np.where(np.isin(np.arange(row.size), banned), -1.0, row)
    assert [c.token_id for c in top_k(row, 5, np.sort(banned), str)] == reference(masked, 5)


@pytest.mark.parametrize("size", [5, 64, 4096, 21128])
@pytest.mark.parametrize("k", [1, 5, 50])
def test_allowed_top_passes_over_banned_ids_on_every_kind_of_row(size: int, k: int) -> None:
    """The lowest ids banned (as bert-base-chinese's [PAD] [unusedN] [UNK]...), or the row's
    best, or both: the same indices as sorting the row with them below every entry, and
    leaving them out."""
    rng = np.random.default_rng(size + k)
    peaked = np.zeros(size)  # the fake engine's rows: the ties at the floor start at id 0
    peaked[rng.integers(0, size, 3)] = [8.0, 6.0, 4.0]
    rows = [
        softmax(rng.normal(0.0, 3.0, size).astype(np.float32)),
        rng.integers(0, 4, size).astype(np.float64),
        np.zeros(size),
        peaked,
    ]
    for row in rows:
        best = np.argsort(-row, kind="stable")[: min(3, size - 1)]
        tail = np.arange(size - size % 64, size)  # past the last whole group of 64
        for banned in (np.arange(min(105, size - 1)), best, np.arange(size // 2), tail):
            banned = np.unique(np.concatenate([banned, best[:1]]))
            masked = np.where(np.isin(np.arange(size), banned), -1.0, row)
            # past the allowed ids nothing: a banned id never comes back
            expected = [i for i in reference(masked, k) if i not in set(banned.tolist())]
            assert allowed_top(row, k, banned) == expected, (row[:8], banned[:8])
    if size > 2 * 105:  # the fake engine's row is ranked once: its banned floor passed over
        assert len(top_indices(peaked, k, np.arange(105))) == k


def test_softmax_may_overwrite_the_logits_it_owns() -> None:
    """``overwrite`` gives the same probabilities in the caller's own array; an array that may
    not be written is left as it was."""
    logits = np.random.default_rng(3).normal(0.0, 3.0, (4, 21128)).astype(np.float32)
    expected = softmax(logits)
    owned = logits.copy()
    probabilities = softmax(owned, overwrite=True)
    assert probabilities is owned
    np.testing.assert_array_equal(probabilities, expected)
    frozen = logits.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(softmax(frozen, overwrite=True), expected)
    np.testing.assert_array_equal(frozen, logits)


def test_constrained_top_k_never_returns_a_token_outside_allowed() -> None:
    """Allowed tokens that score 0 tie with every other 0; the lowest ids (the specials) won
    the tie before."""
    row = np.zeros(64, dtype=np.float32)
    row[[3, 9]] = [0.7, 0.3]
    allowed = np.zeros(64, dtype=bool)
    allowed[[20, 41]] = True
    chosen = top_k_constrained(row, 5, allowed, str)
    assert [c.token_id for c in chosen] == [20, 41]
    allowed[9] = True
    assert [c.token_id for c in top_k_constrained(row, 2, allowed, str)] == [9, 20]


def test_a_constraint_entry_never_lists_a_word_piece() -> None:
    """## alone is the vocabulary's empty word piece: an allowed ## answered '' beside #."""
    vocab = {"#": 0, "##": 1, "好": 2, "##好": 3}
    assert sorted(ids_of(("##",), vocab)) == [0]
    assert sorted(ids_of(("好",), vocab)) == [2]


def test_restrict_keeps_a_row_whose_allowed_tokens_all_underflow_at_zero() -> None:
    """Its floor, 1e-300, was 0 in float32: 0 / 0 printed "score": NaN (a verifying review)."""
    from tiankong.core.decoding import restrict

    row = np.array([[0.7, 0.3, 0.0, 0.0]], dtype=np.float32)
    allowed = np.array([False, False, True, True])
    assert restrict(row, allowed).tolist() == [[0.0, 0.0, 0.0, 0.0]]
    some = restrict(np.array([[0.5, 0.25, 0.25, 0.0]], dtype=np.float32), allowed)
    assert some.tolist() == [[0.0, 0.0, 1.0, 0.0]]
