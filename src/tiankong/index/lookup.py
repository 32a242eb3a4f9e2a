"""Lookup for one blank: the fills between the longest left and right contexts that match.

For a blank of ``fill_length`` tokens with left context L and right context R (token ids):
  1. On each side, back off to the shortest context whose occurrences number at most
     ``OCCURRENCE_LIMIT`` (L's suffixes, R's prefixes), so every occurrence with a longer match
     on that side is enumerated exactly.
  2. Every occurrence gives a fill f and how far it matches to the left (a) and right (b).
  3. The context is the (a, b) with the longest a + b (ties: more occurrences) -- infini-gram's
     rule, on both sides -- and n(f) counts the occurrences of L[-a:] f R[:b] for each f.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from tokenizers import Tokenizer

from tiankong.core.decoding import is_han
from tiankong.core.text import mask_runs
from tiankong.index.store import CorpusIndex, SearchRange
from tiankong.index.tokens import SEPARATOR, default_tokenizer

MAX_CONTEXT = 24  # tokens used on each side: longer matches add no information for a fill
SENTENCE_ENDS = ("。", "！", "？", "；", "!", "?", ";")  # a context never reaches past one
# ASCII marks typed for full-width ones right after a Chinese character (床前明月光,疑是地上箱.
# found nothing to fix, where the poem's ，and 。 did): the corpus writes them full-width, so a
# query's is read as its full-width form there (``BlankLookup.widened``); 3.14 is left alone
WIDE_MARKS = {",": "，", ".": "。", ";": "；", ":": "：", "!": "！", "?": "？"}
# Marks a lookup may take as one another right next to the blank (``edge_marks``, the check
# path: 地上箱， against the corpus's 地上霜。); never inside the context (docs/INDEX.md)
EDGE_MARKS = ("，", "。", "；", "！", "？", "、")
OCCURRENCE_LIMIT = 512  # occurrences read on each side: bounds the time per blank
EXAMPLE_CHARS = 60  # the example line is trimmed to about this many characters
# Pseudo-occurrences lent by the next shorter context to the fills of the best one: a
# tie-breaker, small enough that one more real occurrence always outweighs it
# (docs/INDEX.md, "Ties").
BACKOFF_PRIOR = 0.1
PREFIX_SLACK = 32  # characters beyond twice the tokens needed when tokenizing a passage's start
# The most characters of a passage kept as text that evidence tokenizes (from its start): a
# match deeper in such a passage shows no evidence, so one long line can't stall a request.
VERBATIM_PREFIX = 8192


@dataclass(frozen=True)
class BlankMatch:
    """What the index knows about one blank: counts of fills in the best-matching context."""

    left: tuple[int, ...]  # the matched left context L[-a:]
    right: tuple[int, ...]  # the matched right context R[:b]
    # n(f) for every fill seen in that context, but those whose own passages read differently
    # from the text (``grounded_fills``)
    fills: dict[tuple[int, ...], int]
    positions: dict[tuple[int, ...], int]  # one token position of each fill (for its example)
    exact: bool  # False when both sides were too common to enumerate (a sample was counted)
    # Occurrences of the context with any fill, when ``fills`` holds only some of them (the
    # match of one option, tiankong.index.options; fills dropped by ``grounded_fills``);
    # None: ``fills`` holds them all.
    context_count: int | None = None
    # n'(f) in the context one token shorter (its outer token on the longer side dropped), for
    # the fills of ``fills``: breaks ties between fills that the best context counts equally.
    backoff: dict[tuple[int, ...], int] | None = None
    # Han characters among the matched context tokens (left + right), and whether the match
    # holds the query's whole context (both sides up to the text's ends, not another blank):
    # what the evidence rule (``holds_evidence``) reads.
    context_han: int = 0
    whole: bool = False
    # per side (left, right): whether the match holds a Han character of the query's context
    # there, or all of it, or the query has no Han character there; whole fills need both
    # (tiankong.index.combine.spans_blank)
    sides: tuple[bool, bool] = (True, True)
    # per side (left, right): past the match, within the clause the match is in (no
    # punctuation matched on that side yet), the query goes on, with a Han character or a
    # punctuation mark, and every occurrence's passage goes on there with a Han character of
    # its own (not the query's, or the side would match): the passages read differently from
    # the text there (书名之行，始于东夷 for 千里之行，始于[MASK]下。; 可怜见子母每天翻地覆 for
    # 他每天[MASK]地铁去公司; 匹夫有获万口称 for 天下兴亡，匹夫有[MASK]。). What it costs the match
    # is the evidence rule's (``holds_evidence``).
    contradicted: tuple[bool, bool] = (False, False)
    # n(f) of the fills ``grounded_fills`` took out of ``fills`` (their own passages read
    # differently from the text): no evidence for themselves, but the proofreader's count of
    # the character as written (a right 地 dropped so was "fixed" to 的 from one passage)
    misread: dict[tuple[int, ...], int] = field(default_factory=dict)

    @cached_property
    def backoff_total(self) -> int:
        return sum(self.backoff.values()) if self.backoff else 0

    @property
    def total(self) -> int:
        return self.context_count if self.context_count is not None else sum(self.fills.values())

    @property
    def context_length(self) -> int:
        return len(self.left) + len(self.right)

    def probability(self, fill: Sequence[int]) -> float:
        """The index's estimate n(f) / n(context), with BACKOFF_PRIOR pseudo-occurrences shared
        among the seen fills by their counts in the next shorter context:
        (n(f) + β n'(f) / Σ n') / (n(context) + β). Sums to 1 over ``fills`` when they hold
        every occurrence (not past ``grounded_fills``, whose dropped fills keep their share of
        ``context_count``)."""
        key = tuple(fill)
        count = self.fills.get(key, 0)
        if count == 0:
            return 0.0
        if not self.backoff:
            return count / self.total
        lent = BACKOFF_PRIOR * self.backoff.get(key, 0) / self.backoff_total
        return (count + lent) / (self.total + BACKOFF_PRIOR)


# The evidence rule (``holds_evidence``; docs/INDEX.md, "When the index may move an answer at
# all"): Han characters of the query's context that the match must hold...
MIN_CONTEXT_HAN = 3
# ... and where its passages read differently from the text on one side (chosen on running
# text of the dev split, docs/INDEX.md "Passages that read differently")
MIN_CONTRADICTED_HAN = 4
# classical Chinese's sentence-final particles: a passage that goes on with one where the text
# ends its clause with a mark ends there too (三人行，必有我师焉 for 三人行，必有我[MASK]。)
FINAL_PARTICLES = "也矣焉哉乎耳兮欤邪耶"


def holds_evidence(match: BlankMatch | None) -> bool:
    """THE evidence rule (``combine`` mixes only where it holds; ``BlankLookup.lookup`` falls
    back to a passage's whole clause where the longest match fails it): at least
    MIN_CONTEXT_HAN Han characters of the query's own context beside the fill, or the query's
    whole context, and the passages do not read differently
    from the text (``BlankMatch.contradicted``) on a side where the match holds none of the
    text (书名之行，始于东夷 is no evidence for 东 in 千里之行，始于[MASK]下。), on both sides
    (可怜见子母每天翻地覆 for 他每天[MASK]地铁), on one side of a match of fewer than
    MIN_CONTRADICTED_HAN Han characters (欲到仙都有底难 for …方便，到[MASK]都有地铁站), or on
    one side for a fill of several tokens (书名之行，始于东夷 for 千里之行，始于[MASK][MASK]。).
    Nothing else shows ``memory``."""
    if match is None or not (match.context_han >= MIN_CONTEXT_HAN or match.whole):
        return False
    left, right = match.contradicted
    # a fill of several tokens read differently on a side is no evidence at any length:
    # 书名之行，始于东夷 made 千里之行，始于[MASK][MASK]。 东夷 at 0.64 (the model's 1e-5)
    several = (left or right) and len(next(iter(match.fills), ())) > 1
    return not (
        several
        or (left and not match.left)
        or (right and not match.right)
        or (left and right)
        or ((left or right) and match.context_han < MIN_CONTRADICTED_HAN)
    )


class BlankLookup:
    """Blank lookups on one opened index."""

    def __init__(self, index: CorpusIndex, tokenizer: Tokenizer | None = None) -> None:
        self.index = index
        self.tokens = index.tokens
        self.tokenizer = tokenizer or default_tokenizer()
        vocab = self.tokenizer.get_vocab()
        # [UNK], [MASK], [CLS]...: a context stops there (an [UNK] is not a known character).
        self.stop_ids = frozenset(
            [SEPARATOR, *(i for t, i in vocab.items() if t.startswith("[") and t.endswith("]"))]
        )
        self.han_ids = frozenset(i for t, i in vocab.items() if len(t) == 1 and is_han(t))
        # a context that stops at one of these has more of the text beyond it (``stops_short``)
        self.short_ids = frozenset(vocab[t] for t in ("[UNK]", "[MASK]") if t in vocab)
        self.unknown_id = vocab.get("[UNK]")
        # A context also ends at a sentence's end mark, which it keeps (a fill before 。 is
        # told from one that goes on): the next sentence is not this blank's context
        # (他很开[MASK]。欲穷千里目… matched 黄河入海流。欲穷千里目… and gave 流).
        self.sentence_ends = frozenset(vocab[mark] for mark in SENTENCE_ENDS if mark in vocab)
        self.punctuation_ids = frozenset(
            i for t, i in vocab.items() if len(t) == 1 and unicodedata.category(t)[0] == "P"
        )
        self.edge_marks = frozenset(vocab[mark] for mark in EDGE_MARKS if mark in vocab)
        self.wide = {
            vocab[ascii]: vocab[wide]
            for ascii, wide in WIDE_MARKS.items()
            if ascii in vocab and wide in vocab
        }
        # the stop ids as a table over every id the index's token type can hold (an index of
        # another tokenizer is refused on open, but a fill is never out of the table's range)
        held = np.iinfo(self.tokens.dtype).max + 1
        self.is_stop = np.zeros(max(held, len(vocab), max(self.stop_ids) + 1), dtype=bool)
        self.is_stop[list(self.stop_ids)] = True
        # a passage's end or punctuation: where the corpus ends a fill (``boundary``)
        self.is_boundary = self.is_stop.copy()
        self.is_boundary[list(self.punctuation_ids)] = True
        self.is_han = np.zeros_like(self.is_stop)  # ``han_ids`` as a table, as ``is_stop``
        self.is_han[list(self.han_ids)] = True
        self.is_particle = np.zeros_like(self.is_stop)
        self.is_particle[[vocab[c] for c in FINAL_PARTICLES if c in vocab]] = True
        # the passages kept as text longer than VERBATIM_PREFIX bytes, deep inside which no
        # evidence is quoted (``quotable``): an occurrence there is not counted either
        kept = np.asarray(index.verbatim_passages, dtype=np.int64)
        kept_starts = np.asarray(index.verbatim_bytes, dtype=np.int64)[: len(kept)]  # ([0]: none)
        kept_ends = np.append(kept_starts[1:] - 1, len(index.text))[: len(kept)]
        too_long = (kept_ends - kept_starts) > VERBATIM_PREFIX
        self.long_passages = kept[too_long]

    def quotable(self, starts: np.ndarray, reach: int) -> np.ndarray:
        """Per occurrence (the context's first token at each of ``starts``, ``reach`` tokens
        long): can ``evidence`` quote its passage there? Not past what it tokenizes of a
        passage kept as text of more than VERBATIM_PREFIX characters (``quoted_tokens``): such
        an occurrence moved a score with ``memory`` null (a review: one digit in an
        8,000-character record; a rule by tokens alone missed passages of long words)."""
        quotable = np.ones(len(starts), dtype=bool)
        if not self.long_passages.size:  # the usual index: nothing to look up
            return quotable
        numbers = np.searchsorted(self.index.passage_tokens, starts, "right") - 1
        long = np.isin(numbers, self.long_passages)
        for number in np.unique(numbers[long]).tolist():
            limit = self.quoted_tokens(number)
            if limit is None:
                continue
            mine = numbers == number
            depth = starts[mine] + reach - int(self.index.passage_tokens[number])
            quotable[mine] = depth <= limit
        return quotable

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one per opened index, kept for its life
    def quoted_tokens(self, number: int) -> int | None:
        """The tokens of kept passage ``number`` that ``evidence`` can quote: those whole in
        its first VERBATIM_PREFIX characters, or None (all) for a passage no longer."""
        line = self.index.verbatim_text(number)
        if line is None or len(line) <= VERBATIM_PREFIX:
            return None
        return len(self.token_offsets(line, VERBATIM_PREFIX))

    def boundary(self, position: int) -> bool:
        """Whether the corpus has a passage's end or punctuation at ``position`` (outside the
        tokens: the corpus's own ends)."""
        if position < 0 or position >= len(self.tokens):
            return True
        token = int(self.tokens[position])
        if token == self.unknown_id:
            return not self.rare_han(np.asarray([position]), np.asarray([token]))[0]
        return bool(self.is_boundary[token])

    def ends_at(self, positions: np.ndarray) -> np.ndarray:
        """``boundary`` at each of ``positions``, as one array: an [UNK] that spells a Han
        character is not one (``rare_han``)."""
        inside = (positions >= 0) & (positions < len(self.tokens))
        tokens = self.tokens.take(positions, mode="clip").astype(np.int64)
        ends = ~inside | self.is_boundary[tokens]
        if self.unknown_id is not None and self.unknown_id in tokens:  # rare: looked up then
            ends &= ~self.rare_han(positions, tokens)
        return ends

    def rare_han(self, positions: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Which of ``positions`` (holding ``tokens``) hold a Han character the vocabulary
        lacks: an [UNK] the index spells as one. The passage reads on there, as at any other
        character: 焉知非[MASK]。 took 骅 for a whole fill from 焉知非骅骝, with that line as
        its 出处, because the [UNK] of 骝 was read as the passage's end."""
        rare = np.zeros(len(positions), dtype=bool)
        spelled_at = self.index.spelling_positions
        unknown = np.flatnonzero(tokens == self.unknown_id)
        if self.unknown_id is None or not unknown.size or not len(spelled_at):
            return rare
        # searched in the table's own type: another one made numpy copy the whole table first
        at = positions[unknown].astype(spelled_at.dtype)
        found = np.minimum(np.searchsorted(spelled_at, at), len(spelled_at) - 1)
        chars = self.index.spelling_chars[found]
        rare[unknown] = (spelled_at[found] == at) & np.fromiter(
            (is_han(chr(int(char))) for char in chars), dtype=bool, count=len(chars)
        )
        return rare

    def han_in(self, *parts: Sequence[int]) -> int:
        """How many of the tokens in ``parts`` are Han characters."""
        return sum(int(token) in self.han_ids for part in parts for token in part)

    def followers(self, context: Sequence[int], longest: int = 8) -> dict[int, int]:
        """What follows the longest suffix of ``context`` (at most ``longest`` tokens) that the
        corpus holds: token id -> occurrences, a passage's end (a stop id) included."""
        for size in range(min(len(context), longest), 0, -1):
            found = self.index.search(list(context[len(context) - size :]))
            if found.count == 0:
                continue
            after = self.index.positions(found, OCCURRENCE_LIMIT).astype(np.int64) + size
            after = after[after < len(self.tokens)]
            ids, counts = np.unique(np.asarray(self.tokens[after]), return_counts=True)
            return dict(zip(ids.tolist(), counts.tolist(), strict=True))
        return {}

    def side_occurrences(
        self, context: Sequence[int], from_end: bool
    ) -> tuple[np.ndarray, int, bool]:
        """Positions where the context part (a suffix of L, or a prefix of R) starts, for the
        shortest length with at most OCCURRENCE_LIMIT hits (the longest part that occurs at
        all, when every part that occurs has more); returns (positions, length, exact).

        Counts only fall as the part grows, so the parts are searched from one token up, and
        the search stops at the first part with few enough hits: most stop at two or three
        tokens. A prefix of R is searched within the rows of the prefix one token shorter."""
        hits: SearchRange | None = None
        length = 0
        for size in range(1, len(context) + 1):
            part = context[len(context) - size :] if from_end else context[:size]
            found = self.index.search(part, within=None if from_end else hits)
            if found.count == 0:
                break
            hits, length = found, size
            if found.count <= OCCURRENCE_LIMIT:
                break
        if hits is None:
            return np.zeros(0, dtype=np.int64), 0, True
        return (
            self.index.positions(hits, OCCURRENCE_LIMIT).astype(np.int64),
            length,
            hits.count <= OCCURRENCE_LIMIT,
        )

    def lookup(
        self,
        left: Sequence[int],
        right: Sequence[int],
        fill_length: int,
        edge_marks: AbstractSet[int] = frozenset(),
    ) -> BlankMatch | None:
        """The fills of ``fill_length`` tokens between the longest matching contexts, or None
        when no occurrence matches at least one context token. ``edge_marks``: a mark of these
        right next to the blank in the query matches any of them in the corpus there (the
        check path: ``EDGE_MARKS``); the occurrences are still found from the exact parts, so
        such a side's count is not called exact."""
        # an [UNK] right past a side's context: the text goes on with a word there (AI, “)
        outward = (list(left)[::-1], list(right))
        left, right, cut = self.contexts(left, right)
        unknown_past = (
            self.unknown_past(outward[0], left[::-1]),
            self.unknown_past(outward[1], right),
        )
        left_hits, left_length, left_exact = self.side_occurrences(left, from_end=True)
        right_hits, right_length, right_exact = self.side_occurrences(right, from_end=False)
        loose_left = bool(left) and left[-1] in edge_marks
        loose_right = bool(right) and right[0] in edge_marks
        starts = np.sort(np.concatenate([left_hits + left_length, right_hits - fill_length]))
        starts = starts[np.append(True, starts[1:] != starts[:-1])[: len(starts)]]  # np.unique
        starts = starts[(starts > 0) & (starts + fill_length < len(self.tokens))]
        if len(starts) == 0:
            return None
        offsets = np.arange(fill_length)
        fills = np.asarray(self.tokens[starts[:, None] + offsets[None, :]]).astype(np.int64)
        keep = ~self.is_stop[fills].any(axis=1)
        starts, fills = starts[keep], fills[keep]
        if len(starts) == 0:
            return None
        left_match = self.edge_lengths(starts - 1, left[::-1], -1, edge_marks, loose_left)
        right_match = self.edge_lengths(starts + fill_length, right, 1, edge_marks, loose_right)

        def choose(
            left_match: np.ndarray, right_match: np.ndarray, starts: np.ndarray, fills: np.ndarray
        ) -> BlankMatch | None:
            total = left_match + right_match
            best = int(total.max())
            if best == 0:
                return None
            # The contexts (a, b) of the best total length; ties go to the one with more Han
            # characters (what the evidence rule counts: a punctuation mark is weak context), then
            # to more occurrences.
            at_best = total == best
            candidates = set(
                zip(left_match[at_best].tolist(), right_match[at_best].tolist(), strict=True)
            )
            a, b = max(
                candidates,
                key=lambda pair: (
                    self.han_in(left[len(left) - pair[0] :] if pair[0] else (), right[: pair[1]]),
                    covering(left_match, right_match, pair),
                    pair,
                ),
            )
            chosen = (left_match >= a) & (right_match >= b)
            if self.long_passages.size:  # the usual index has none: nothing to look up
                chosen &= self.quotable(starts - a, a + fill_length + b)
                if not chosen.any():
                    return None
            reads = self.reads_differently(
                left, right, a, b, starts[chosen], fill_length, unknown_past
            )
            counts: Counter[tuple[int, ...]] = Counter()
            positions: dict[tuple[int, ...], int] = {}
            # per fill, per side: every occurrence of it reads differently from the text there
            misread: dict[tuple[int, ...], list[bool]] = {}
            found = zip(map(tuple, fills[chosen].tolist()), starts[chosen], *reads, strict=True)
            for fill, start, reads_left, reads_right in found:
                counts[fill] += 1
                positions.setdefault(fill, int(start))
                sides = misread.setdefault(fill, [True, True])
                sides[0] &= bool(reads_left)
                sides[1] &= bool(reads_right)
            exact = (left_exact and not loose_left and a >= left_length > 0) or (
                right_exact and not loose_right and b >= right_length > 0
            )
            # The next shorter context: drop the outer token of the longer side (left on a tie).
            shorter_a, shorter_b = (a - 1, b) if a >= b else (a, b - 1)
            wider = (left_match >= shorter_a) & (right_match >= shorter_b)
            seen = Counter(map(tuple, fills[wider].tolist()))
            backoff = {fill: n for fill, n in seen.items() if fill in counts}
            matched_left = tuple(left[len(left) - a :]) if a else ()
            match = BlankMatch(
                left=matched_left,
                right=tuple(right[:b]),
                fills=dict(counts),
                positions=positions,
                exact=bool(exact),
                backoff=backoff,
                context_han=self.han_in(matched_left, right[:b]),
                whole=not cut and a == len(left) and b == len(right),
                sides=self.sides(
                    left, right, a, b, self.bounded(starts[chosen], fill_length, a, b)
                ),
                contradicted=every_side(reads),
            )
            return grounded_fills(match, misread)

        match = choose(left_match, right_match, starts, fills)
        if match is None or holds_evidence(match):
            return match
        # The longest match is no evidence (its passages read differently from the text, say:
        # 两脚踏实地，风雨 for 做事要脚踏[MASK]地，不要): the occurrences whose passage has a
        # boundary right past their own match on both sides (a clause the text holds whole:
        # the idiom line 脚踏实地) may be, and were shadowed by it.
        bounded = self.ends_at(starts - left_match - 1) & self.ends_at(
            starts + fill_length + right_match
        )
        if bounded.any() and not bounded.all():
            clause = choose(
                left_match[bounded], right_match[bounded], starts[bounded], fills[bounded]
            )
            if clause is not None and holds_evidence(clause):
                return clause
        return match

    def contexts(
        self, left: Sequence[int], right: Sequence[int]
    ) -> tuple[list[int], list[int], bool]:
        """The blank's left and right contexts as a lookup reads them (``clean_context``, each
        ending at a sentence's end mark), and whether either was cut there with more of the
        text beyond it, at a character the vocabulary doesn't know ([UNK]: “, —, an emoji) or at
        another blank: the match can then never hold the query's whole context (老师[MASK]“春眠
        不觉晓 held two characters, 老师, and 老师一句扑不破 was shown as the 出处 of 一; in 今天
        [MASK]天气[MASK]很[MASK][MASK] the last blank's context, 很, was taken for the whole
        text, and 罪龙尤很多望风雷 was shown as the 出处 of 多望)."""
        left, right = self.widened(left, right)
        kept_left = clean_context(left, self.stop_ids, from_end=True, ends=self.sentence_ends)
        kept_right = clean_context(right, self.stop_ids, from_end=False, ends=self.sentence_ends)
        outward_left, outward_right = list(left)[::-1], list(right)
        cut = (
            self.goes_on(outward_left, kept_left)
            or self.goes_on(outward_right, kept_right)
            or self.stops_short(outward_left, kept_left)
            or self.stops_short(outward_right, kept_right)
        )
        return kept_left, kept_right, cut

    def widened(self, left: Sequence[int], right: Sequence[int]) -> tuple[list[int], list[int]]:
        """The blank's sides with each ASCII mark of ``WIDE_MARKS`` that follows a Chinese
        character, or the blank itself (the first on the right), read as its full-width form."""
        wide = self.wide
        left = [int(token) for token in left]
        right = [int(token) for token in right]
        for side, after_blank in ((left, False), (right, True)):
            for at, token in enumerate(side):
                if token in wide and (side[at - 1] in self.han_ids if at else after_blank):
                    side[at] = wide[token]
        return left, right

    def unknown_past(self, outward: list[int], kept: list[int]) -> bool:
        """Whether a context read outwards from the blank stops at an [UNK] right past what
        the lookup keeps of it (``kept``, read outwards too: ``contexts``): a word the
        vocabulary lacks (Latin letters in a cased one, a rare sign), so the text goes on with
        a word there."""
        return self.stops_short(outward, kept) and int(outward[len(kept)]) == self.unknown_id

    def stops_short(self, context: list[int], kept: list[int]) -> bool:
        """Whether ``context`` (read outwards) stops at an [UNK] or another blank's [MASK]
        right past ``kept`` (not past a sentence end that ``kept`` ends with: 好。” holds its
        sentence whole, as 好。[MASK] does)."""
        if kept and kept[-1] in self.sentence_ends:
            return False
        return len(kept) < len(context) and int(context[len(kept)]) in self.short_ids

    def goes_on(self, context: list[int], kept: list[int]) -> bool:
        """Whether ``context`` (read outwards from the blank) goes on past a sentence end that
        ``kept`` stopped at: another sentence's Han characters before the next stop id (a
        closing quote or a second mark after the end, 好。” or ？！, is not another sentence)."""
        if not kept or len(kept) >= len(context):
            return False
        if int(context[len(kept) - 1]) not in self.sentence_ends:
            return False
        beyond = clean_context(context[len(kept) :], self.stop_ids, from_end=False)
        return self.han_in(beyond) > 0

    def bounded(self, starts: np.ndarray, fill_length: int, a: int, b: int) -> tuple[bool, bool]:
        """Per side, whether some occurrence (its fill at ``starts``) has a boundary right past
        its matched context: 地上霜。 for the user's 地上箱！, whose ！ the corpus doesn't hold."""
        return (
            any(self.boundary(int(start) - a - 1) for start in starts),
            any(self.boundary(int(start) + fill_length + b) for start in starts),
        )

    def reads_differently(
        self,
        left: Sequence[int],
        right: Sequence[int],
        a: int,
        b: int,
        starts: np.ndarray,
        fill_length: int,
        unknown_past: tuple[bool, bool] = (False, False),
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per side, per occurrence (its fill at ``starts``): it goes on with a word (a Han
        character, digits, letters) just past the match where the query goes on with a word or
        a mark of its own (or, past the whole context, with an [UNK]: ``unknown_past``), and
        the match does not end at a mark on that side (past a shared mark, the next clause may
        differ: 不龟手药，或 holds the user's 不龟手药，说 whole). A match that crossed a mark and
        went on into the next clause reads differently within that clause where it stops: 之行，
        始于 of 书名之行，始于东夷 against the user's 千里之行，始于 (it counted as holding the
        clause, as any mark inside the match did)."""
        none = np.zeros(len(starts), dtype=bool)

        def differs(
            context: Sequence[int], matched: int, next_to: np.ndarray, unknown: bool
        ) -> np.ndarray:
            if matched > len(context) or (matched == len(context) and not unknown):
                return none
            if matched and self.is_boundary[int(context[matched - 1])]:
                return none
            following = int(context[matched]) if matched < len(context) else self.unknown_id
            ends_clause = following in self.punctuation_ids
            # a mark where the passage goes on counts right next to the blank only (匹夫有[MASK]。
            # against 匹夫有获万口称), and not against a sentence-final particle: 三人行，必有我
            # 师焉 ends where 三人行，必有我[MASK]。 does
            # a word goes on: a Han character, digits, letters, or an [UNK] of its own (价格是
            # [MASK]9元 took 30 from 价格是30元。, 负责[MASK]AI项目 took 后 from 负责后端开发: a
            # review)
            word = not self.is_boundary[following] or following == self.unknown_id
            if not (word or (ends_clause and matched == 0)):
                return none
            inside = (next_to >= 0) & (next_to < len(self.tokens))
            tokens = self.tokens.take(next_to, mode="clip").astype(np.int64)
            reads_on = inside & ~self.is_boundary[tokens]
            if self.unknown_id is not None and self.unknown_id in tokens:
                reads_on |= inside & self.rare_han(next_to, tokens)
            if ends_clause:
                reads_on &= ~self.is_particle[tokens]
            return np.asarray(reads_on, dtype=bool)

        return (
            differs(list(left)[::-1], a, starts - a - 1, unknown_past[0]),
            differs(list(right), b, starts + fill_length + b, unknown_past[1]),
        )

    def sides(
        self,
        left: Sequence[int],
        right: Sequence[int],
        a: int,
        b: int,
        passage_ends: tuple[bool, bool] = (False, False),
    ) -> tuple[bool, bool]:
        """Per side: does the match (a tokens of ``left``, b of ``right``) hold the query's
        context there? It does when the query has none there, when the match holds some of it,
        or when the query has only punctuation there and the corpus passage ends there or has
        punctuation of its own (an idiom-list line, 哭笑不得, for the user's 哭笑不得。; 地上霜。
        for 地上箱！)."""

        def held(context: Sequence[int], matched: int, passage_end: bool) -> bool:
            return not context or matched > 0 or (passage_end and self.han_in(context) == 0)

        return held(left, a, passage_ends[0]), held(right, b, passage_ends[1])

    def match_lengths(self, begin: np.ndarray, context: Sequence[int], step: int) -> np.ndarray:
        """How many tokens of ``context`` the corpus repeats from ``begin`` on, going ``step``.

        Compared in blocks of 4, 8, 16... tokens, each only for the positions that matched all
        of the blocks before: most stop within the first few tokens. A read past either end of
        the corpus reads the end token there (``take``'s clip)."""
        lengths = np.zeros(len(begin), dtype=np.int64)
        wanted = np.asarray(context, dtype=np.int64)
        rows = np.arange(len(begin))  # the positions still matching, as rows of ``lengths``
        positions = np.asarray(begin, dtype=np.int64)
        done, block = 0, 4
        while rows.size and done < len(wanted):
            width = min(block, len(wanted) - done)
            where = positions[:, None] + np.arange(done, done + width) * step
            differs = self.tokens.take(where, mode="clip") != wanted[done : done + width]
            first = differs.argmax(axis=1)  # the first difference, or 0 when there is none
            stopped = differs[np.arange(rows.size), first]
            lengths[rows] = done + np.where(stopped, first, width)
            rows, positions = rows[~stopped], positions[~stopped]
            done += width
            block *= 2
        return lengths

    def edge_lengths(
        self,
        begin: np.ndarray,
        context: Sequence[int],
        step: int,
        marks: AbstractSet[int],
        loose: bool,
    ) -> np.ndarray:
        """``match_lengths``, where (``loose``) the context's first token, a mark of ``marks``,
        matches any of ``marks`` in the corpus; the rest of the context matches exactly."""
        if not loose:
            return self.match_lengths(begin, context, step)
        inside = (begin >= 0) & (begin < len(self.tokens))
        edge = inside & np.isin(self.tokens.take(begin, mode="clip"), list(marks))
        lengths = np.zeros(len(begin), dtype=np.int64)
        lengths[edge] = 1 + self.match_lengths(begin[edge] + step, context[1:], step)
        return lengths

    def evidence(self, match: BlankMatch, fill: Sequence[int]) -> dict[str, object] | None:
        """The per-candidate ``memory``: ``{"count", "match", "example"}``, or None when the
        fill does not occur in the matched context.

        Only a window of the passage around the match is read: in a passage of one token a
        character (nearly all Chinese text), token i is character i, so the window is spelled
        from its tokens and nothing is tokenized; a passage kept as text (letters, digits) is
        tokenized from its start, at most VERBATIM_PREFIX characters of it (past that, no
        evidence is shown rather than one that could be misplaced). A passage of millions of
        characters thus costs what a short one does (docs/INDEX.md, "Evidence")."""
        key = tuple(int(token) for token in fill)
        count = match.fills.get(key, 0)
        if count == 0:
            return None
        start = match.positions[key] - len(match.left)
        end = match.positions[key] + len(key) + len(match.right)
        number, first, last = self.index.passage_span(start)
        line = self.index.verbatim_text(number)
        if line is None:
            # the example's trim reaches at most EXAMPLE_CHARS past the match on either side,
            # so it cuts the window exactly as it would cut the whole passage
            begin, stop = max(first, start - 2 * EXAMPLE_CHARS), min(last, end + 2 * EXAMPLE_CHARS)
            window = self.index.spell(begin, stop)
            char_start, char_end, line = start - begin, end - begin, window
        else:
            if not self.quotable(np.asarray([start]), end - start)[0]:
                return None  # counted by no match (``choose``): the same rule
            offsets = self.token_offsets(line, end - first)
            if end - first > len(offsets) and len(line) > VERBATIM_PREFIX:
                offsets = self.token_offsets(line, VERBATIM_PREFIX)  # long words: all it quotes
            if end - first > len(offsets):  # the stored passage and the tokenizer disagree
                return None
            char_start, char_end = offsets[start - first][0], offsets[end - first - 1][1]
        return {
            "count": count,
            "match": line[char_start:char_end],
            "example": trim(line, char_start, char_end),
        }

    def token_offsets(self, line: str, needed: int) -> list[tuple[int, int]]:
        """Character offsets of at least the first ``needed`` tokens of ``line``. A passage
        can be a whole long poem, so a prefix is tokenized first; its last word may be cut, so
        only the tokens before that word count. Falls back to the whole line, if it has at most
        VERBATIM_PREFIX characters."""
        cut = 2 * needed + PREFIX_SLACK
        if len(line) > VERBATIM_PREFIX:
            cut = min(cut, VERBATIM_PREFIX)  # never more of a long passage (``quoted_tokens``)
        if len(line) > cut:
            encoding = self.tokenizer.encode(line[:cut], add_special_tokens=False)
            words = encoding.word_ids
            last = words[-1] if words else None
            pairs = zip(encoding.offsets, words, strict=True)
            settled = [offset for offset, word in pairs if word != last]
            if len(settled) >= needed or len(line) > VERBATIM_PREFIX:
                return settled  # never the whole of a long passage (too few: no evidence)
        return list(self.tokenizer.encode(line, add_special_tokens=False).offsets)


def every_side(reads: tuple[np.ndarray, np.ndarray]) -> tuple[bool, bool]:
    """``BlankMatch.contradicted`` from ``reads_differently``: per side, every occurrence."""
    return bool(reads[0].size and reads[0].all()), bool(reads[1].size and reads[1].all())


def grounded_fills(match: BlankMatch, misread: dict[tuple[int, ...], list[bool]]) -> BlankMatch:
    """``match`` without the fills whose own passages read differently from the text
    (``misread``: per fill and side, every occurrence of it does): the evidence rule judged
    per fill, where the match as a whole holds it because another fill's passage ends its
    clause (每天翻地覆 beside 每天扫地 for 他每天[MASK]地铁: 翻's every passage reads on). Where
    every fill is dropped, the match is kept and marked so (``contradicted`` on both sides), so
    that it is no evidence and the lookup may fall back to a clause the text holds whole."""
    if not holds_evidence(match):
        return match
    kept = {
        fill
        for fill, (left, right) in misread.items()
        if holds_evidence(replace(match, contradicted=(left, right)))
    }
    if len(kept) == len(match.fills):
        return match
    if not kept:
        return replace(match, contradicted=(True, True))
    return replace(
        match,
        context_count=match.total,
        misread={fill: n for fill, n in match.fills.items() if fill not in kept},
        fills={fill: n for fill, n in match.fills.items() if fill in kept},
        positions={fill: at for fill, at in match.positions.items() if fill in kept},
        backoff=None
        if match.backoff is None
        else {fill: n for fill, n in match.backoff.items() if fill in kept},
    )


def trim(line: str, start: int, end: int, width: int = EXAMPLE_CHARS) -> str:
    """``line`` cut to about ``width`` characters centred on [start, end); "…" marks a cut."""
    room = max(0, width - (end - start)) // 2
    cut_start = max(0, start - room)
    cut_end = min(len(line), max(end + room, cut_start + width))
    cut_start = max(0, min(cut_start, cut_end - width))
    prefix = "…" if cut_start > 0 else ""
    suffix = "…" if cut_end < len(line) else ""
    return prefix + line[cut_start:cut_end] + suffix


def covering(left_match: np.ndarray, right_match: np.ndarray, pair: tuple[int, int]) -> int:
    return int(np.count_nonzero((left_match >= pair[0]) & (right_match >= pair[1])))


def clean_context(
    context: Sequence[int],
    stop_ids: frozenset[int],
    from_end: bool,
    ends: frozenset[int] = frozenset(),
) -> list[int]:
    """At most MAX_CONTEXT tokens next to the blank, ending before the first stop id (another
    mask, [UNK], a special token), which never stands for corpus text, and after the first of
    ``ends`` (a sentence's end mark: ``BlankLookup.sentence_ends``)."""
    tokens = list(context)[::-1] if from_end else list(context)
    kept: list[int] = []
    for token in tokens[:MAX_CONTEXT]:
        if int(token) in stop_ids:
            break
        kept.append(int(token))
        if int(token) in ends:
            break
    return kept[::-1] if from_end else kept


@dataclass(frozen=True)
class Blank:
    """A run of consecutive masks in a tokenized input: one blank of ``length`` tokens."""

    first: int  # index of its first mask in the input ids
    length: int
    left: list[int]
    right: list[int]


def blanks_of(input_ids: Sequence[int], mask_indices: Sequence[int]) -> list[Blank]:
    """Group masks into blanks (consecutive masks are one whole fill, e.g. 充电) with their
    contexts; the contexts stop at the neighbouring blanks and specials in ``lookup``."""
    blanks = []
    for run in mask_runs(mask_indices):
        first, last = mask_indices[run[0]], mask_indices[run[-1]]
        blanks.append(Blank(first, len(run), list(input_ids[:first]), list(input_ids[last + 1 :])))
    return blanks
