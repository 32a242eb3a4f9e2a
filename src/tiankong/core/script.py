"""The user's own script: traditional input is predicted and looked up in simplified form and
answered in traditional characters (OpenCC, the ``opencc`` package's own data).

``script_of(text)`` decides once per request:

* **traditional**: converting the text to simplified changes it, and one of OpenCC's
  simplified -> traditional conversions (Taiwan ``s2tw``, Hong Kong ``s2hk``, then ``s2t``,
  whose 喫 and 裏 few users write) gives the typed text back exactly. The answer is written
  with that same conversion;
* **mixed** (some characters typed traditional, some simplified: 欲穷千里目，更上一層[MASK]。):
  converted to simplified as well, so the model and the index read one script, and each
  blank's fill is written in traditional characters only where the characters typed around
  it lean that way (``neighbours_traditional``, the rule proofreading's fixes follow): 樓
  there, 鸟 in 春眠不觉晓，处处闻啼[MASK]。 with 處處 typed on another line. The rest of the
  answer's text is the text as typed;
* anything else (simplified text, text with no Han characters, or a mix whose conversion
  changes its length) stays **as typed**: nothing is converted.

A text with no Han character at all gets a warning: the models are Chinese models.

``standard(text)`` is the one text normaliser of the corpus index, applied to every passage
when an index is built and to every request that uses the index: OpenCC's t2s, then the
variant characters of ``resources/variants.tsv`` (隣 -> 邻; made from OpenCC's tables by
``scripts/clean_sources.py variants``) folded to their standard simplified form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import Any

from tiankong.core.decoding import is_han
from tiankong.core.models import PACKAGE_ROOT
from tiankong.core.options import one_blank
from tiankong.core.results import CandidateScore, FillResult, Memory, SequenceFill, TokenScore
from tiankong.core.text import BLANK, MASK, fill_text

VARIANTS_FILE = PACKAGE_ROOT / "resources" / "variants.tsv"
TO_SIMPLIFIED = "t2s"
TO_TRADITIONAL = ("s2tw", "s2hk", "s2t")  # tried in this order: the first that round-trips
NO_HAN_WARNING = (
    "The text has no Chinese (Han) character: this model is for Chinese, so its answers here "
    "mean little."
)


@cache
def converter(config: str) -> Any:
    import opencc  # the official OpenCC package (Apache-2.0)

    return opencc.OpenCC(config)


def convert(text: str, config: str) -> str:
    return str(converter(config).convert(text))


@cache
def variant_table() -> dict[int, str]:
    table = {}
    for line in VARIANTS_FILE.read_text("utf-8").splitlines():
        if line and not line.startswith("#"):
            variant, standard_form = line.split("\t")
            table[ord(variant)] = standard_form
    return table


@cache
def variant_pattern() -> re.Pattern[str]:
    """One character class of every variant: a regex scan finds the few to replace, where
    ``str.translate`` looked each character up in the table (2.16 s against 0.11 s for 200,000
    classical passages)."""
    return re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(variant_table())) + "]")


def fold_variants(text: str) -> str:
    """``text`` with each variant of the table written in its standard form."""
    table = variant_table()
    return variant_pattern().sub(lambda found: table[ord(found.group())], text)


def standard(text: str) -> str:
    """``text`` in standard simplified characters: OpenCC t2s, then the variant table."""
    return fold_variants(convert(text, TO_SIMPLIFIED))


STANDARD_CHUNK = 20_000  # passages per OpenCC call in ``standard_lines``


def standard_lines(lines: Sequence[str]) -> list[str]:
    """``standard`` of each of ``lines`` (none may hold a newline), converted a chunk at a time:
    one OpenCC call per 20,000 lines instead of one per line, 4.5 s against 6.4 s for the
    bundled corpus's 384,659 passages (the same output; OpenCC never matches across a newline)."""
    done: list[str] = []
    for first in range(0, len(lines), STANDARD_CHUNK):
        chunk = lines[first : first + STANDARD_CHUNK]
        converted = standard("\n".join(chunk)).split("\n")
        if len(converted) != len(chunk):
            raise ValueError("standard_lines was given a line holding a newline.")
        done += converted
    return done


@cache
def normaliser_key() -> str:
    """What ``standard`` does, for index manifests and the bundled index's cache key."""
    import hashlib
    from importlib.metadata import version

    digest = hashlib.sha256(VARIANTS_FILE.read_bytes()).hexdigest()[:16]
    return f"opencc {version('opencc')} t2s + variants.tsv {digest}"


@cache
def written_otherwise() -> frozenset[str]:
    """The Han characters (``is_han``) OpenCC's t2s writes otherwise, each taken alone (about
    5,100; made on first use in about 60 ms, one OpenCC call among them)."""
    chars = [char for char in map(chr, range(0x3400, 0x2FA20)) if is_han(char)]
    converted = convert("\n".join(chars), TO_SIMPLIFIED).split("\n")
    return frozenset(char for char, done in zip(chars, converted, strict=True) if char != done)


def may_be_traditional(text: str) -> bool:
    """Whether ``text`` holds a character t2s writes otherwise: a set lookup (under 1 µs) where
    ``script_of`` converts the text (25 µs a request in a served one: the index-off request
    path's warning step measured so). A phrase rule alone can change a character unchanged
    alone (看著 -> 看着): a text whose only traditional trait is such a phrase reads as not."""
    return not written_otherwise().isdisjoint(text)


def has_han(text: str) -> bool:
    """Whether ``text`` has a Chinese character (``decoding.is_han``: compatibility ideographs
    and the supplementary planes count, where a text of 𠀀 or 﨑 was told it had none)."""
    return any(map(is_han, text))


@dataclass(frozen=True)
class Script:
    """How a request's text is written: ``to_typed`` is the OpenCC conversion that writes an
    answer in the user's script (None: the text is used as typed)."""

    typed: str  # the text as typed (masks normalised)
    simplified: str  # what the model and the index see
    to_typed: str | None = None
    # the text mixes the scripts: each blank is written in traditional characters only where
    # its place leans so (``neighbours_traditional``), and the rest stays as typed
    mixed: bool = False

    @property
    def converted(self) -> bool:
        """Whether the model and the index see another text than the typed one."""
        return self.simplified != self.typed

    def back(self, text: str) -> str:
        """``text`` (simplified, from the model or the index) in the user's script."""
        return convert(text, self.to_typed) if self.to_typed else text

    @cached_property
    def typed_forms(self) -> dict[str, str]:
        """Each Han character of ``simplified`` and the form it was typed in, where the text
        typed it in one form only, one that traditional text writes too, and the two texts keep
        their places: 欲 -> 欲 in 路上行人欲斷魂, which OpenCC's s2t writes 慾 (its word for
        "lust"); not 层 typed in a traditional line (更上一层樓), which a quotation in traditional
        writes 層. Evidence uses them."""
        if len(self.simplified) != len(self.typed):
            return {}
        forms: dict[str, set[str]] = {}
        for simple, typed in zip(self.simplified, self.typed, strict=True):
            if is_han(simple) and not simplified_only(typed):
                forms.setdefault(simple, set()).add(typed)
        return {simple: typed.pop() for simple, typed in forms.items() if len(typed) == 1}


def script_of(text: str) -> Script:
    """Traditional (converted) or as typed; see the module docstring."""
    if not has_han(text):
        return Script(text, text)
    simplified = convert(text, TO_SIMPLIFIED)
    folded = fold_variants(simplified)
    if simplified == text:
        return Script(text, folded)  # simplified already (its variants folded)
    for config in TO_TRADITIONAL:
        if convert(simplified, config) == text:
            return Script(text, folded, config)
    if len(folded) == len(text):  # a mix, character for character: converted, placed per blank
        return Script(text, folded, TO_TRADITIONAL[0], mixed=True)
    return Script(text, text)  # unclear: as typed


def written_in(
    result: FillResult,
    script: Script,
    typed_options: Sequence[str] = (),
    vocab: Mapping[str, int] | None = None,
) -> FillResult:
    """``result`` (of the simplified text) with every string the user reads in their script:
    the text as typed, candidates, sequences, options (as typed) and the evidence. A candidate
    token written in another form takes that form's id in ``vocab`` (its ``token_id`` named the
    simplified token: 髮 came with 发's id); where the vocabulary lacks the form, the id stays
    the one the model scored."""
    back = script.back
    # options by their simplified form, each typed one once: 发, 髮 and 發 are one simplified
    # option (the same score) but three rows, each labelled and filled as it was typed
    typed_of: dict[str, list[str]] = {}
    for option in typed_options:
        typed_of.setdefault(convert(option.strip(), TO_SIMPLIFIED), []).append(option.strip())
    before_blank = len(one_blank(result.text).split(BLANK)[0]) if result.candidates else 0

    def evidence(found: Memory, lean: Callable[[str], str], filled: Filled | None) -> Memory:
        """The 出处 in the script ``lean`` writes the fill in. A mixed text's is the corpus
        line in that one script, never with the user's own characters put in it: 欲穷千里目，
        更上一層[MASK]。 quoted 白日依山盡，黃河入海流。欲穷千里目，更上一層樓。, a line no edition
        has (a review); only forms that traditional text writes too (欲, not 慾) are kept."""
        if script.mixed:
            return memory_in(found, lean, script.typed_forms if lean is back else None)
        return memory_in(found, lean, script.typed_forms, filled)

    def option_as_typed(candidate: CandidateScore) -> CandidateScore:
        """The option as typed, its text and its 出处, whose fill is the corpus's own written by
        the script around it, never the option as typed: 鳥 offered in a simplified line was
        quoted 处处闻啼鳥, 發 in 白[MASK]三千丈 白發三千丈, lines the corpus does not hold
        (reviews); OpenCC reads the words around a fill (白发: 白髮)."""
        typed = typed_of.get(candidate.option, [])

        def corpus_fill(lean: Callable[[str], str]) -> str:
            written = lean(candidate.text)
            if len(written) != len(candidate.text):
                return lean(candidate.option)
            return written[before_blank : before_blank + len(candidate.option)]

        if script.mixed:  # the typed text around the option, written as its blank leans
            lean = back_at(0)
            option = typed.pop(0) if typed else lean(candidate.option)
            text = fill_text(one_blank(script.typed), [option], BLANK)
            quoted = fill_text(one_blank(script.typed), [corpus_fill(lean)], BLANK)
            filled = Filled(candidate.text, quoted, before_blank)
            found = evidence(candidate.memory, lean, filled)
            return replace(candidate, option=option, text=text, memory=found)
        text = back(candidate.text)
        end = before_blank + len(candidate.option)
        fitting = text[before_blank:end] if len(text) == len(candidate.text) else None
        if fitting in typed[1:]:  # of forms that tie, the sentence's own first: 鳥 before 鸟
            typed.remove(fitting)  # in 處處聞啼[MASK]。, so the answer is 處處聞啼鳥。
            typed.insert(0, fitting)
        option = typed.pop(0) if typed else back(candidate.option)
        quoted = text  # the corpus's fill, written by the sentence's script around it
        if len(text) == len(candidate.text) and len(option) == len(candidate.option):
            text = text[:before_blank] + option + text[end:]  # the fill as typed
        filled = Filled(candidate.text, quoted, before_blank)
        return replace(
            candidate,
            option=option,
            text=text,
            memory=evidence(candidate.memory, back, filled),
        )

    # each blank's own conversion: the script's everywhere, or in a mixed text where its place
    # leans traditional, else none (the fill as the model wrote it)
    marker = BLANK if BLANK in result.text else MASK
    places = blank_places(script.typed, marker)
    if script.mixed:
        whole = back(script.simplified)
        placed = [
            back if neighbours_traditional(script.typed, script.simplified, whole, *place)
            else same
            for place in places
        ]  # fmt: skip
    else:
        placed = [back] * len(places)

    def back_at(blank: int) -> Callable[[str], str]:
        return placed[blank] if blank < len(placed) else (placed[0] if placed else back)

    # candidates mode's per-mask list reads its blank as one [MASK], however many the run has
    # (畫龍[MASK][MASK] with options had one list for two masks: an IndexError, a review)
    rows_text, rows_script = result.text, script
    if result.candidates:
        rows_text = one_mask(result.text)
        rows_script = replace(
            script, typed=one_mask(script.typed), simplified=one_mask(script.simplified)
        )

    # each mask is written, and its evidence placed, in the sentence read with the other masks'
    # best fills: 出發之前，他理了理[MASK][MASK] wrote its second mask 發 beside a [MASK], where
    # its sequence read 頭髮 (a review)
    tops = [found[0].token if found else MASK for found in result.masks]

    def in_sentence(mask: int, fill: str) -> str:
        left = tops[:mask].count(MASK)  # masks before it with no fill are still [MASK]s
        return in_context(others_filled(rows_text, mask, tops), left, fill, back_at(mask))

    written_tops = [in_sentence(mask, top) for mask, top in enumerate(tops)]

    def written(mask: int, candidate: TokenScore) -> TokenScore:
        token = in_sentence(mask, candidate.token)
        token_id = (vocab or {}).get(token, candidate.token_id)
        filled = filled_at(rows_script, mask, tops, written_tops, candidate.token, token)
        found = evidence(candidate.memory, back_at(mask), filled)
        return replace(candidate, token=token, token_id=token_id, memory=found)

    def sequence_as_typed(sequence: SequenceFill) -> SequenceFill:
        if script.mixed:
            parts = result.text.split(marker)
            placed_fills = [
                between(marker.join(parts[: i + 1]), fill, marker.join(parts[i + 1 :]), back_at(i))
                for i, fill in enumerate(sequence.fills)
            ]
            text = fill_text(script.typed, placed_fills, marker)
            fills: tuple[str, ...] | None = tuple(placed_fills)
        else:
            text = back(sequence.text)
            fills = fills_in(text, result.text, sequence.fills)
        if fills is None:
            fills = tuple(back(fill) for fill in sequence.fills)
        filled = Filled(sequence.text, text, result.text.find(marker))
        found = evidence(sequence.memory, back_at(0), filled)
        return replace(sequence, fill="".join(fills), text=text, fills=fills, memory=found)

    masks = [[written(m, c) for c in candidates] for m, candidates in enumerate(result.masks)]
    sequences = [sequence_as_typed(s) for s in result.sequences]
    candidates = [option_as_typed(c) for c in result.candidates]
    # candidates mode's answer is its best option's sentence, with the option as typed
    if candidates:
        sequence = candidates[0].text
    elif not script.mixed:
        sequence = back(result.sequence)
    elif sequences:
        sequence = sequences[0].text
    elif marker == MASK and all(masks):
        sequence = fill_text(script.typed, [found[0].token for found in masks])
    else:
        sequence = script.typed
    return replace(
        result,
        text=script.typed,
        sequence=sequence,
        masks=masks,
        sequences=sequences,
        candidates=candidates,
    )


def same(text: str) -> str:
    return text


def one_mask(text: str) -> str:
    """The text with its one blank (a run of [MASK]s or a [BLANK]) as a single [MASK]."""
    return one_blank(text).replace(BLANK, MASK)


def others_filled(text: str, mask: int, fills: Sequence[str], fill: str = MASK) -> str:
    """``text`` with each [MASK] but the ``mask``-th holding its ``fills`` entry, and the
    ``mask``-th ``fill`` (left a [MASK] by default)."""
    parts = text.split(MASK)
    return parts[0] + "".join(
        (fill if index == mask else fills[index]) + part for index, part in enumerate(parts[1:])
    )


def filled_at(
    script: Script,
    mask: int,
    tops: Sequence[str],
    written_tops: Sequence[str],
    fill: str,
    written: str,
) -> Filled | None:
    """The sentence with its ``mask``-th [MASK] holding ``fill`` and the others their best
    fills (``tops``), simplified and as the user reads it (``written``, ``written_tops``), as
    ``Filled``; None where the typed text and the simplified one don't keep their places."""
    if len(script.simplified) != len(script.typed):
        return None
    parts = script.simplified.split(MASK)
    at = len(parts[0]) + sum(len(tops[i]) + len(parts[i + 1]) for i in range(mask))
    return Filled(
        others_filled(script.simplified, mask, tops, fill),
        others_filled(script.typed, mask, written_tops, written),
        at,
    )


def blank_places(text: str, marker: str) -> list[tuple[int, int]]:
    """For each ``marker`` in ``text``, left to right, the (start, end) of the run of markers it
    stands in: the characters around a word's [MASK][MASK] are the run's, so both of its
    characters are written alike (each read the other's marker letters, which say nothing, and
    更上一[MASK][MASK]樓 came back 层層)."""
    places: list[tuple[int, int]] = []
    at = text.find(marker)
    while at >= 0:
        end = at
        while text.startswith(marker, end):
            end += len(marker)
        places += [(at, end)] * ((end - at) // len(marker))
        at = text.find(marker, end)
    return places


NEIGHBOURS = 16  # characters either side of a fill that its conversion reads (OpenCC phrases)


def in_context(text: str, mask: int, fill: str, back: Callable[[str], str]) -> str:
    """``fill`` as ``back`` writes it in place of the ``mask``-th [MASK] of ``text``
    (``between``)."""
    parts = text.split(MASK)
    return between(MASK.join(parts[: mask + 1]), fill, MASK.join(parts[mask + 1 :]), back)


def between(left: str, fill: str, right: str, back: Callable[[str], str]) -> str:
    """``fill`` as ``back`` writes it between ``left`` and ``right``: OpenCC picks a character
    by its neighbours (发 is 髮 in 头发 and 發 in 出发), so a fill converted alone could disagree
    with the sentence converted whole. ``NEIGHBOURS`` characters either side are converted with
    it, not the whole text (one conversion per candidate). Where the conversion changes their
    length, the places can't be matched, and the fill is converted alone."""
    left, right = left[-NEIGHBOURS:], right[:NEIGHBOURS]
    whole = back(left + fill + right)
    if len(whole) != len(left) + len(fill) + len(right):
        return back(fill)
    return whole[len(left) : len(left) + len(fill)]


def fills_in(filled: str, template: str, fills: Sequence[str]) -> tuple[str, ...] | None:
    """Each blank's part of ``filled`` (``template`` with ``fills`` in its [MASK]s or its
    [BLANK], then converted), cut where the unconverted fills lay, so each is written as the
    sentence converted whole writes it (头发 is 頭髮, where 发 alone is 發); None where the
    conversion changed the length and the places can't be matched."""
    segments = template.split(MASK if MASK in template else BLANK)
    lengths = [len(fill) for fill in fills]
    if len(segments) != len(fills) + 1 or len(filled) != sum(map(len, segments)) + sum(lengths):
        return None
    pieces, at = [], len(segments[0])
    for length, segment in zip(lengths, segments[1:], strict=True):
        pieces.append(filled[at : at + length])
        at += length + len(segment)
    return tuple(pieces)


LINE = re.compile(r"[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+")  # str.splitlines's breaks
AROUND = 4  # characters each side of a place whose typed script decides how a fill is written


def line_of(text: str, at: int) -> slice:
    """The line of ``text`` that holds the character at ``at`` (line breaks as ``LINE``'s)."""
    for line in LINE.finditer(text):
        if line.start() <= at < line.end():
            return slice(line.start(), line.end())
    return slice(at, at + 1)


def neighbours_traditional(typed: str, simplified: str, whole: str, start: int, end: int) -> bool:
    """Whether a fill of ``typed[start:end]`` is written in traditional characters, by how the
    characters around the place were typed: the one rule of proofreading's fixes and of the
    blanks of a text that mixes the scripts. ``simplified`` is ``typed`` in standard simplified
    form and ``whole`` that converted back to traditional, all three of one length. The
    ``AROUND`` characters either side, within the place's own line (each line is checked on its
    own: 臺灣 on the line before made 考律再三 on a simplified line 考慮), decide where they were
    typed as ``whole`` writes them; where they are the same in both scripts (天涯若比林) they say
    nothing, and the line's characters that the scripts write apart do, then the whole text's:
    traditional where more of them were typed traditional (於小明 in a simplified sentence was
    answered 鄰)."""
    if not len(typed) == len(simplified) == len(whole):
        return False
    line = line_of(typed, start)
    around = (
        slice(max(line.start, start - AROUND), start),
        slice(end, min(line.stop, end + AROUND)),
    )
    near = "".join(typed[part] for part in around)
    leaning = script_leaning(
        near, "".join(simplified[part] for part in around), "".join(whole[part] for part in around)
    )
    if leaning == 0:  # the same in both scripts (天涯若比林): the line's say, then the text's,
        # each without the place itself, which says the least (我門 on a line of its own in a
        # simplified text was fixed 們: a verifying review); where nothing else does, it does
        for part in (line, slice(0, len(typed))):
            texts = (typed, simplified, whole)
            leaning = script_leaning(*(outside(text, part, start, end) for text in texts))
            if leaning:
                break
        else:
            leaning = script_leaning(typed[start:end], simplified[start:end], whole[start:end])
    return leaning > 0


def outside(text: str, part: slice, start: int, end: int) -> str:
    """``text[part]`` without ``text[start:end]``."""
    return text[part.start : max(part.start, start)] + text[min(part.stop, end) : part.stop]


def script_leaning(typed: str, simplified: str, traditional: str) -> int:
    """How many more of ``typed``'s characters that the two scripts write apart were typed in
    the traditional form than in the simplified one (> 0: mostly traditional). A character
    typed as its simplified form counts as simplified only where that form is not also the
    traditional one: 欲 in 路上行人欲 is traditional too, though OpenCC writes 人欲 as 人慾 (the
    blank of 清明時節雨紛紛，路上行人欲[MASK]魂 was answered 断, not 斷)."""
    as_traditional = sum(t != s for t, s in zip(typed, simplified, strict=True))
    as_simplified = sum(
        t == s != c and simplified_only(t)
        for t, s, c in zip(typed, simplified, traditional, strict=True)
    )
    return as_traditional - as_simplified


@cache
def simplified_only(character: str) -> bool:
    """Whether ``character`` is written otherwise in traditional text (国, not 欲 or 天)."""
    return all(convert(character, config) != character for config in TO_TRADITIONAL)


def memory_in(
    found: Memory,
    back: Callable[[str], str],
    forms: Mapping[str, str] | None = None,
    filled: Filled | None = None,
) -> Memory:
    """Evidence (出处) with its strings written by ``back``, and its match (the user's text
    around the fill, as the index found it) written as the user reads it: where ``filled``
    (``Filled``: the filled sentence simplified, and as the user reads it) holds the match at
    the fill, the match is that span of the user's sentence, character for character, and so
    is its place in the example; else the characters the user typed in one form are put back
    in it (``forms``, ``Script.typed_forms``). A quotation converted by OpenCC alone misquoted
    the user's own words (路上行人欲斷魂 came back 路上行人慾斷魂); one form per character
    applied to the whole match misquoted the answer (出發之前，他理了理頭[MASK] answered 髮 with
    the 出处 頭發: a review). The rest of the example is OpenCC's conversion of the corpus text.

    >>> memory_in({"match": "欲断魂", "example": "行人欲断魂。"}, lambda t: t.replace("欲", "慾"),
    ...           {"欲": "欲"})
    {'match': '欲断魂', 'example': '行人欲断魂。'}
    >>> memory_in({"match": "出发头发", "example": "出发头发。"}, lambda t: t,
    ...           filled=Filled("出发头发", "出發頭髮", 3))
    {'match': '出發頭髮', 'example': '出發頭髮。'}
    """
    if found is None:
        return None
    match, example = found["match"], found["example"]
    written_match = filled.span_of(match) if filled is not None else None
    if written_match is None:
        written_match = as_typed(match, back(match), forms)
    written_example = back(example)
    at = example.find(match)
    if at >= 0 and len(written_example) == len(example):
        written_example = written_example[:at] + written_match + written_example[at + len(match) :]
    return {**found, "match": written_match, "example": written_example}


@dataclass(frozen=True)
class Filled:
    """A filled sentence as the model and the index read it (simplified) and as the user reads
    it (``written``: their text as typed, the fill in their script), and where the fill starts
    in it: the two keep their places where their lengths agree."""

    simplified: str
    written: str
    at: int

    def span_of(self, match: str) -> str | None:
        """The user's own characters where ``match`` stands over the fill in the simplified
        sentence (the index's match is the text around the fill); None where it can't be
        placed (the conversion changed the length, or the match is not there)."""
        if len(self.simplified) != len(self.written) or not match:
            return None
        start = self.simplified.find(match)
        while start >= 0:
            if start <= self.at < start + len(match):
                return self.written[start : start + len(match)]
            start = self.simplified.find(match, start + 1)
        return None


def as_typed(simplified: str, written: str, forms: Mapping[str, str] | None) -> str:
    """``written`` (``simplified`` converted) with each character the user typed in one form
    put back in that form, where the conversion kept the places."""
    if not forms or len(written) != len(simplified):
        return written
    return "".join(
        forms.get(simple, char) for simple, char in zip(simplified, written, strict=True)
    )
