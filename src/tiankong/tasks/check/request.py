"""The check request, decided once: a text validated, tokenized with character offsets and cut
into windows the model can take, with the positions that may be checked.

Each line is checked on its own, and each sentence of a line (up to its end mark, 。！？；!?;,
or an ASCII full stop right after a Chinese character) on its own too. A window is at most
``max_length`` tokens ([CLS] and [SEP] included), so a longer sentence is cut into windows
that overlap, up to ``max_check_chars`` characters a text (a longer one is refused with the
limit named). A position is checked when its token is one Han character (letters, digits and
punctuation are never edited).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

from tiankong.core.script import (
    LINE,
    TO_SIMPLIFIED,
    TO_TRADITIONAL,
    Script,
    convert,
    fold_variants,
    script_of,
)
from tiankong.core.text import BLANK_VARIANTS, MASK_VARIANTS, TextEncoder, check_unicode
from tiankong.errors import BadInputError, EmptyTextError, TextTooLongError

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
SENTENCE_END = frozenset("。！？；!?;")


def ends_sentence(text: str, offsets: Sequence[tuple[int, int]], index: int) -> bool:
    """Whether token ``index`` ends a sentence: a ``SENTENCE_END`` mark, or an ASCII full stop
    right after a Chinese character (建康.我门…会仪… was one sentence, and two of its five
    typos were passed over: a review); 3.14 and Mr. are left alone."""
    mark = text[offsets[index][0] : offsets[index][1]]
    if mark in SENTENCE_END:
        return True
    return (
        mark == "."
        and index > 0
        and HAN.fullmatch(text[offsets[index - 1][0] : offsets[index - 1][1]]) is not None
    )


@dataclass(frozen=True)
class Window:
    """One model row: ``[CLS] tokens [SEP]`` and where each checked position sits."""

    input_ids: list[int]
    positions: list[int]  # indices into input_ids of the checkable tokens
    spans: list[tuple[int, int]]  # each position's characters in the input text
    chars: str  # the checkable characters, one per position
    # the slots whose edits this window gives: where windows overlap (a text cut without a
    # sentence end), each reads the shared tokens as context and edits its half of them
    owned: frozenset[int] | None = None  # None: every slot
    # whether each slot and the next are next to each other in the text, or apart by spaces and
    # invisible characters only (守 株 待 免, or a zero-width space pasted from a web page: the
    # model reads them together, and the idiom rules now do too); None: their spans touch
    joined: tuple[bool, ...] | None = None

    def adjacent(self, slot: int) -> bool:
        """Whether ``slot`` and ``slot + 1`` read as one run of characters (``joined``)."""
        if self.joined is not None:
            return self.joined[slot]
        return self.spans[slot][1] == self.spans[slot + 1][0]

    def slot_of(self, start: int) -> int:
        """The slot whose characters begin at ``start`` in the input text."""
        return next(slot for slot, span in enumerate(self.spans) if span[0] == start)

    def runs(self, length: int) -> list[int]:
        """The first slot of every ``length`` positions in a row that are adjacent in the
        text (a four-character window for the idiom lexicon)."""
        return [
            first
            for first in range(len(self.spans) - length + 1)
            if all(self.adjacent(k) for k in range(first, first + length - 1))
        ]


@dataclass(frozen=True)
class CheckRequest:
    """One text to proofread, prepared: its windows and its cost. ``script``: the text is
    checked in standard simplified form (``core.script``; traditional text, or variant
    characters) and its edits are written back in the typed script; None: as typed."""

    text: str
    windows: list[Window]
    script: Script | None = None

    @property
    def positions(self) -> int:
        return sum(len(window.positions) for window in self.windows)

    @property
    def checked(self) -> int:
        """The characters checked, each once (overlapping windows share some, each editing
        its own)."""
        return sum(
            len(window.positions) if window.owned is None else len(window.owned)
            for window in self.windows
        )


def prepare_check(text: object, encoder: TextEncoder, max_chars: int) -> CheckRequest:
    """Validate (``check_text``) and tokenize ``text``."""
    text = check_text(text, max_chars)
    script = checked_form(text)
    checked = script.simplified if script is not None else text
    windows: list[Window] = []
    # each line on its own windows: the tokenizer drops a line break, and a poem typed one
    # line a row ran together (床前明月光疑是地上箱), which left 箱 unfixed and 低 "fixed"
    for line in LINE.finditer(checked):
        encoding = encoder.tokenizer.encode(line.group(), add_special_tokens=False)
        ids, offsets = as_read(line.group(), encoding.ids, encoding.offsets, encoder)
        offsets = [(first + line.start(), last + line.start()) for first, last in offsets]
        for first, last in sentences(checked, offsets):
            made = windows_of(checked, ids[first:last], offsets[first:last], encoder)
            # a sentence of marks alone (！！！) has nothing to check: no row, and no cost
            windows += [window for window in made if window.positions]
    return CheckRequest(text, windows, script)


def as_read(
    line: str, ids: Sequence[int], offsets: Sequence[tuple[int, int]], encoder: TextEncoder
) -> tuple[list[int], list[tuple[int, int]]]:
    """The tokens of ``line`` as the check reads them:

    * each blank marker typed in it ([BLANK], 【mask】: any that ``normalize_masks`` reads) is
      one [MASK] token over the marker's characters, as a typed [MASK] is: its letters were
      read as [ [UNK] ], and the characters beside it lost their context (他说[BLANK]守株待免
      got no fix, where 他说[MASK]守株待免 got 免 -> 兔; a review);
    * a mark that is no character of its own (a combining accent, a variation selector: an
      [UNK] of ``unseen`` characters) is left out: the model read 建[UNK]康[UNK] for 建̇康̇,
      and "no errors found" came back where 建康 is fixed (a review)."""
    spans = [
        found.span()
        for pattern in (MASK_VARIANTS, BLANK_VARIANTS)
        for found in pattern.finditer(line)
    ]
    unknown = encoder.vocab.get("[UNK]", -1)
    kept_ids: list[int] = []
    kept_offsets: list[tuple[int, int]] = []
    started: set[tuple[int, int]] = set()
    for token, (start, end) in zip(ids, offsets, strict=True):
        span = next((span for span in spans if span[0] <= start < span[1]), None)
        if span is not None:
            if span not in started:
                started.add(span)
                kept_ids.append(encoder.mask_id)
                kept_offsets.append(span)
        elif not (token == unknown and unseen(line[start:end])):
            kept_ids.append(token)
            kept_offsets.append((start, end))
    return kept_ids, kept_offsets


def sentences(text: str, offsets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The token ranges of a line's sentences, each ending after its sentence end (。！？；):
    each is checked as a line of its own is, with its own suspects and context. A paragraph
    on one line was read as one window, where four model-found fixes at most were made and
    one sentence's typos misled the model on the next (a review's paragraph of six typos: 3
    fixed; the same sentences a line each: 6)."""
    found, first = [], 0
    for index in range(len(offsets)):
        if ends_sentence(text, offsets, index):
            found.append((first, index + 1))
            first = index + 1
    if first < len(offsets):
        found.append((first, len(offsets)))
    return found


def check_text(text: object, max_chars: int) -> str:
    """``text`` if proofreading takes it, else a typed ``BadInputError`` (400 / exit 2): not a
    string, empty, over ``max_chars`` (``Settings.max_check_chars``), not Unicode. The one
    check of every surface's text, ``eval --task check``'s items too."""
    if not isinstance(text, str):
        raise BadInputError(f"The text must be a string, not {type(text).__name__}.")
    if not text.strip():
        raise EmptyTextError("The text is empty; send a sentence to check.")
    if len(text) > max_chars:
        raise TextTooLongError(
            f"The text has {len(text):,} characters; proofreading takes at most {max_chars:,} "
            "per text (max_check_chars): split it into parts."
        )
    check_unicode(text)  # before OpenCC reads it
    return text


# Kangxi radicals and the CJK radicals supplement: characters of their own that look like the
# Han characters they stand for (⼀ for 一, ⼈ for 人), which text copied from a PDF often holds.
# The tokenizer reads them as [UNK] (its NFD does not fold them: their mapping is a compatibility
# one), so ⼀丝不狗 came back "no errors found" (a review).
RADICAL_BLOCKS = ((0x2E80, 0x2EFF), (0x2F00, 0x2FDF))


@cache
def radical_table() -> dict[int, str]:
    """Each radical whose compatibility form (NFKC) is one Han character -> that character."""
    table = {}
    for first, last in RADICAL_BLOCKS:
        for code in range(first, last + 1):
            folded = unicodedata.normalize("NFKC", chr(code))
            if folded != chr(code) and len(folded) == 1 and HAN.fullmatch(folded):
                table[code] = folded
    return table


def fold_radicals(text: str) -> str:
    """``text`` with each radical of ``radical_table`` written as the character it stands for
    (one character for one: offsets are kept)."""
    return text.translate(radical_table())


def checked_form(text: str) -> Script | None:
    """The form ``text`` is checked in, or None for as typed. Text with traditional or variant
    characters, all of them or a few, is checked in standard simplified form (``core.script``:
    t2s, then the variant table), as the model, the confusion sets and the corpus index hold it:
    checked as typed, every traditional character was a candidate "fix" to its simplified form.
    Only where the conversion keeps every character's place (almost always: OpenCC converts
    character for character), so that an edit's offsets are the typed text's. Fixes go back in
    traditional where any character was (``proofreader.in_typed_script``): in the conversion
    that reproduces the text if one does (Taiwan, Hong Kong, OpenCC's standard, in that
    order: ``core.script.TO_TRADITIONAL``), else Taiwan's. A radical (``radical_table``) is
    checked as the character it stands for, and is an edit of its own (``radical_edits``)."""
    unified = fold_radicals(text)
    simplified = convert(unified, TO_SIMPLIFIED)
    checked = fold_variants(simplified)
    if checked == text or len(checked) != len(text):
        return None
    to_typed = None
    if simplified != unified:
        to_typed = script_of(unified).to_typed or TO_TRADITIONAL[0]
    # typed with the radicals' characters: a quotation (出处) of 一丝不苟 read 一 as ⼀
    # (``typed_forms``: a review)
    return Script(unified, checked, to_typed)


def unseen(gap: str) -> bool:
    """Whether the text between two characters is nothing a reader sees between them: empty,
    spaces, control or format characters (a NUL, zero-width spaces and joiners, a BOM) or marks
    on the character before it (画\ufe00龙点晴 went unfixed: a variation selector is a mark, Mn,
    that picks a glyph; a combining accent, Mn, or an enclosing circle, Me, is drawn on it;
    画龙\x00点晴 went unfixed too, with "no errors found": a review)."""
    return all(char.isspace() or unicodedata.category(char) in UNSEEN for char in gap)


# control and format characters, marks drawn on another character
UNSEEN = frozenset({"Cc", "Cf", "Mn", "Me"})


# Tokens two windows share where a text without a sentence end is cut: each checks its half
# of them, so every character is checked with some context on both sides (画龙点晴 at the cut
# was not fixed).
SEAM_OVERLAP = 8


def windows_of(
    text: str,
    ids: Sequence[int],
    offsets: Sequence[tuple[int, int]],
    encoder: TextEncoder,
) -> list[Window]:
    room = max(2, encoder.limits.max_length - 2)
    overlap = min(SEAM_OVERLAP, room // 2)
    unknown = encoder.vocab.get("[UNK]", -1)
    windows: list[Window] = []
    start = checked = 0  # the window's first token, and the first token it checks
    while True:
        end = min(len(ids), start + room)
        last_checked = end
        if end < len(ids):  # cut after the last sentence end inside the window, if any
            for cut in range(end - 1, start, -1):
                if ends_sentence(text, offsets, cut):
                    end = last_checked = cut + 1
                    break
            else:  # no sentence end: the next window overlaps this one (SEAM_OVERLAP)
                last_checked = end - overlap // 2
        positions: list[int] = []
        spans: list[tuple[int, int]] = []
        owned: set[int] = set()
        for index in range(start, end):
            first, last = offsets[index]
            if last - first == 1 and HAN.match(text[first]) and ids[index] != unknown:
                if checked <= index < last_checked:
                    owned.add(len(positions))
                positions.append(index - start + 1)  # +1: [CLS]
                spans.append((first, last))
        body = list(ids[start:end])
        chars = "".join(text[first] for first, _ in spans)
        mine = None if len(owned) == len(positions) else frozenset(owned)
        joined = tuple(unseen(text[left[1] : right[0]]) for left, right in pairwise(spans))
        ids_in = [encoder.cls_id, *body, encoder.sep_id]
        window = Window(ids_in, positions, spans, chars, mine, joined)
        windows.append(window)
        if end >= len(ids):
            return windows
        checked = last_checked
        start = end if last_checked == end else end - overlap
