"""The user's own script: traditional input is predicted and looked up in simplified form and
answered in traditional characters (OpenCC, the ``opencc`` package's own data).

``script_of(text)`` decides once per request:

* **traditional**: converting the text to simplified changes it, and one of OpenCC's
  simplified -> traditional conversions (Taiwan ``s2tw``, Hong Kong ``s2hk``, then ``s2t``,
  whose 喫 and 裏 few users write) gives the typed text back exactly. The answer is written
  with that same conversion;
* anything else (simplified text, text with no Han characters, or a mix that no conversion
  reproduces) stays **as typed**: nothing is converted.

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
from functools import cache, partial
from typing import Any

from tiankong.core.decoding import is_han
from tiankong.core.models import PACKAGE_ROOT
from tiankong.core.options import one_blank
from tiankong.core.results import CandidateScore, FillResult, Memory, SequenceFill, TokenScore
from tiankong.core.text import BLANK, MASK

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

    @property
    def converted(self) -> bool:
        """Whether the model and the index see another text than the typed one."""
        return self.simplified != self.typed

    def back(self, text: str) -> str:
        """``text`` (simplified, from the model or the index) in the user's script."""
        return convert(text, self.to_typed) if self.to_typed else text


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
    return Script(text, text)  # mixed or unclear: as typed


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

    def option_as_typed(candidate: CandidateScore) -> CandidateScore:
        typed = typed_of.get(candidate.option, [])
        option = typed.pop(0) if typed else back(candidate.option)
        text = back(candidate.text)
        end = before_blank + len(candidate.option)
        if len(text) == len(candidate.text) and len(option) == len(candidate.option):
            text = text[:before_blank] + option + text[end:]  # the fill as typed
        return replace(candidate, option=option, text=text, memory=memory(candidate.memory))

    memory = partial(memory_in, back=back)

    def written(mask: int, candidate: TokenScore) -> TokenScore:
        token = in_context(result.text, mask, candidate.token, back)
        token_id = (vocab or {}).get(token, candidate.token_id)
        return replace(candidate, token=token, token_id=token_id, memory=memory(candidate.memory))

    def sequence_as_typed(sequence: SequenceFill) -> SequenceFill:
        text = back(sequence.text)
        fills = fills_in(text, result.text, sequence.fills)
        if fills is None:
            fills = tuple(back(fill) for fill in sequence.fills)
        return replace(
            sequence, fill="".join(fills), text=text, fills=fills, memory=memory(sequence.memory)
        )

    candidates = [option_as_typed(c) for c in result.candidates]
    return replace(
        result,
        text=script.typed,
        # candidates mode's answer is its best option's sentence, with the option as typed
        sequence=candidates[0].text if candidates else back(result.sequence),
        masks=[[written(m, c) for c in candidates] for m, candidates in enumerate(result.masks)],
        sequences=[sequence_as_typed(s) for s in result.sequences],
        candidates=candidates,
    )


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


def memory_in(found: Memory, back: Callable[[str], str]) -> Memory:
    """Evidence (出处) with its strings written by ``back``."""
    if found is None:
        return None
    return {**found, "match": back(found["match"]), "example": back(found["example"])}
