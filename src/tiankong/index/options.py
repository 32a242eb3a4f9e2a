"""Counting a whole option in its context: L[-a:] + option + R[:b], for candidates, whole-word
fills (充电) and [BLANK] fills of each length.

Unlike ``BlankLookup.lookup``, which picks the one context that matches longest whatever the
fill, each option gets the longest context in which *it* occurs. Its index probability is
n(L[-a:] option R[:b]) / n(L[-a:] <any fill of its length> R[:b]), so options of one blank
are each judged by their own best evidence.

An **open-ended** blank ([BLANK], whose length is the user's question, and a candidate of any
length) must be spanned: a fill that matches context on one side only, where the corpus
passage reads on with other characters on the other (白日依[BLANK]，黄河入海流。 -> 尽, from
白日依山尽), or at the text's edge (春眠 -> 眠 for [BLANK]不觉晓), is a piece of a longer
corpus fill, not this blank's answer (``spanning``; docs/INDEX.md, "Spans"). The per-mask
row of such a request (its one-character reading) keeps only the lookup's fills that span it
(``spanning_fills``), by the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from tiankong.index.lookup import (
    OCCURRENCE_LIMIT,
    BlankLookup,
    BlankMatch,
    every_side,
    holds_evidence,
)
from tiankong.index.store import SearchRange


def option_match(
    lookup: BlankLookup,
    left: Sequence[int],
    right: Sequence[int],
    option: Sequence[int],
    open_ended: bool = False,
) -> BlankMatch | None:
    """The longest context around ``option`` that occurs, with counts; None when the option
    never occurs next to at least one context token, or, for an ``open_ended`` blank, in no
    context that spans it (``spanning``)."""
    option = [int(token) for token in option]
    if not option or lookup.stop_ids.intersection(option):
        return None
    match = longest_option_match(lookup, left, right, option, open_ended)
    if match is None or holds_evidence(match):
        return match
    # Its longest context is no evidence (逍遥自在， in a poem line that reads on differently
    # for 他说这叫逍遥自[BLANK]，没错。): the blank's own lookup, which falls back to a clause the
    # text holds whole (the idiom line 逍遥自在), may hold the option as evidence.
    blank = lookup.lookup(left, right, len(option))
    key = tuple(option)
    if blank is None or key not in blank.fills or not holds_evidence(blank):
        return match
    if open_ended:  # the spanning rule holds for it too (a [BLANK]'s or a candidate's fill)
        cleaned_left, cleaned_right, _ = lookup.contexts(left, right)
        found = lookup.index.search([*blank.left, *option, *blank.right])
        at = (len(blank.left), len(blank.right))
        if spanning(lookup, found, option, *at, cleaned_left, cleaned_right) is None:
            return match
    return replace(
        blank,
        fills={key: blank.fills[key]},
        positions={key: blank.positions[key]},
        context_count=blank.total,
        backoff=None,
    )


def longest_option_match(
    lookup: BlankLookup,
    left: Sequence[int],
    right: Sequence[int],
    option: list[int],
    open_ended: bool,
) -> BlankMatch | None:
    """``option_match``'s first try: the longest context around ``option`` that occurs."""
    left, right, cut = lookup.contexts(left, right)
    index = lookup.index

    def occurs(a: int, b: int) -> bool:
        return index.count([*left[len(left) - a :], *option, *right[:b]]) > 0

    tried = []
    for right_first in (True, False):
        if right_first:
            b = longest(len(right), lambda n: occurs(0, n))
            a = longest(len(left), lambda n, b=b: occurs(n, b))  # type: ignore[misc]
        else:
            a = longest(len(left), lambda n: occurs(n, 0))
            b = longest(len(right), lambda n, a=a: occurs(a, n))  # type: ignore[misc]
        if a + b > 0:
            tried.append((a, b))
    position: int | None = None
    for a, b in sorted(tried, key=lambda pair: -sum(pair)):  # the longer first (right on a tie)
        found = index.search([*left[len(left) - a :], *option, *right[:b]])
        position = int(index.positions(found, 1)[0]) + a
        if open_ended:
            position = spanning(lookup, found, option, a, b, left, right)
        if position is not None:
            break
    if position is None:
        return None
    matched_left, matched_right = left[len(left) - a :], right[:b]
    total, exact = context_count(lookup, matched_left, matched_right, len(option))
    # the passages of this option's context, read past it as the lookup reads its own (the
    # evidence rule's ``contradicted``): whole fills, [BLANK]s and candidates showed 翻 from
    # 可怜见子母每天翻地覆 for 他每天[MASK]地铁 after one [MASK] stopped doing so
    starts = lookup.index.positions(found, OCCURRENCE_LIMIT).astype(np.int64) + a
    return BlankMatch(
        left=tuple(matched_left),
        right=tuple(matched_right),
        fills={tuple(option): found.count},
        positions={tuple(option): position},
        exact=exact,
        context_count=max(total, found.count),
        context_han=lookup.han_in(matched_left, matched_right),
        whole=not cut and a == len(left) and b == len(right),
        sides=lookup.sides(left, right, a, b, passage_ends(lookup, position, len(option), a, b)),
        contradicted=every_side(lookup.reads_differently(left, right, a, b, starts, len(option))),
    )


def spanning(
    lookup: BlankLookup,
    found: SearchRange,
    option: Sequence[int],
    a: int,
    b: int,
    left: Sequence[int],
    right: Sequence[int],
) -> int | None:
    """For an open-ended blank: the position of an occurrence of ``L[-a:] option R[:b]``
    (``found``) that spans the blank, or None when the match does not. On a side where the
    match holds none of the query's context, the query must have nothing or punctuation next
    to the blank (白日依 + 尽，黄河入海流。 is no evidence for 尽; 他说这叫惨雨酸 + 风 is, on
    the idiom list's 惨雨酸风 for the user's 风，没错。), and the corpus must end the fill there
    (a passage's end, punctuation)
    at least as often as it reads on with any one character (眠不觉晓 reads 春眠不觉晓: 眠 is
    part of a fill, not the blank's; 危言危行 ends twice and reads on with 古, 意 and 是 once
    each: a whole fill), as ``CorpusMemory.runs_on`` weighs a fill that runs on. The
    occurrence returned is one that ends it, so its example shows the fill as the answer."""
    starts = lookup.index.positions(found, OCCURRENCE_LIMIT).astype(np.int64) + a
    ends = np.ones(len(starts), dtype=bool)
    sides = ((a, left[-1:], starts - 1), (b, right[:1], starts + len(option)))
    for matched, neighbour, past in sides:
        if matched > 0:
            continue
        if neighbour and not lookup.is_boundary[neighbour[0]]:
            return None  # the user's own character there is not held
        ended = lookup.ends_at(past)
        _, read_on = np.unique(lookup.tokens.take(past[~ended], mode="clip"), return_counts=True)
        if read_on.size and int(read_on.max()) > int(np.count_nonzero(ended)):
            return None
        ends &= ended
    return int(starts[int(np.argmax(ends))]) if ends.any() else None


def spanning_fills(
    lookup: BlankLookup, match: BlankMatch, left: Sequence[int], right: Sequence[int]
) -> BlankMatch | None:
    """``match`` (``lookup.lookup``'s, one context for every fill) as an open-ended blank reads
    it: only the fills that span the blank in that context (``spanning``), each at an
    occurrence that ends it; None when no fill does. The fills kept keep their counts and
    their share of the context (``context_count``), so the share of the ones dropped goes back
    to the model in a mixed row (白日依[BLANK]，黄河入海流。: the per-mask row's 尽, from
    白日依山尽, is dropped as it is from the [BLANK] fills)."""
    left, right, _ = lookup.contexts(left, right)
    a, b = len(match.left), len(match.right)
    fills: dict[tuple[int, ...], int] = {}
    positions: dict[tuple[int, ...], int] = {}
    for fill, count in match.fills.items():
        found = lookup.index.search([*match.left, *fill, *match.right])
        position = spanning(lookup, found, fill, a, b, left, right)
        if position is not None and a and b:  # no side to end: the match's own occurrence
            position = match.positions.get(fill, position)  # (not one it passed over)
        if position is not None:
            fills[fill], positions[fill] = count, position
    if not fills:
        return None
    return replace(match, fills=fills, positions=positions, context_count=match.total)


def passage_ends(
    lookup: BlankLookup, position: int, length: int, a: int, b: int
) -> tuple[bool, bool]:
    """Whether one occurrence has a boundary (its passage's end, punctuation) right before
    its matched left context, and right after its matched right context."""
    return lookup.boundary(position - a - 1), lookup.boundary(position + length + b)


def longest(limit: int, occurs: Callable[[int], bool]) -> int:
    """The largest n in [0, limit] with occurs(n), given that occurs is monotone (and
    occurs(0) is checked like any other n)."""
    if not occurs(0):
        return 0
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if occurs(middle):
            low = middle
        else:
            high = middle - 1
    return low


def context_count(
    lookup: BlankLookup, left: Sequence[int], right: Sequence[int], fill_length: int
) -> tuple[int, bool]:
    """Occurrences of ``left`` + any ``fill_length`` tokens + ``right``: the rarer side's
    occurrences are checked against the other side; past OCCURRENCE_LIMIT, a sample is scaled
    up (then the count is not exact)."""
    index = lookup.index
    left_hits = index.search(left) if left else None
    right_hits = index.search(right) if right else None
    use_left = right_hits is None or (left_hits is not None and left_hits.count <= right_hits.count)
    hits = left_hits if use_left else right_hits
    assert hits is not None
    positions = index.positions(hits, OCCURRENCE_LIMIT).astype(np.int64)
    if use_left:
        starts = positions + len(left)
        ok = lookup.match_lengths(starts + fill_length, list(right), step=1) == len(right)
    else:
        starts = positions - fill_length
        ok = lookup.match_lengths(starts - 1, list(left)[::-1], step=-1) == len(left)
    inside = np.clip(starts[:, None] + np.arange(fill_length)[None, :], 0, len(lookup.tokens) - 1)
    clean = ~np.isin(np.asarray(lookup.tokens[inside]), list(lookup.stop_ids)).any(axis=1)
    good = int(np.count_nonzero(ok & clean & (starts > 0)))
    if hits.count <= OCCURRENCE_LIMIT:
        return good, True
    return round(good * hits.count / len(positions)), False
