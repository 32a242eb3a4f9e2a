"""The request, decided once.

``prepare_request`` validates a text with its options, tokenizes it and decides its path, and
every entry point (``FillMasker.predict`` and ``predict_batch``, ``tiankong fill``, ``tiankong
eval``, the HTTP routes, the Hugging Face route, Ray) starts from the ``PreparedRequest`` it
returns. No other module asks "is this a plain request?".

Two paths:

* **plain** (one mode, no constraints, no ``[BLANK]``): one forward row per text, so many
  texts share one engine call (the server's dynamic batcher, ``fill``'s length-sorted batches);
* **search** (whole word, candidates, ``[BLANK]``, constraints): several engine calls per text
  (``core/modes.py`` over ``core/beam_search.py``), run one text at a time.

Two seams are left for later stages, with no-op defaults:

* ``forward_rows`` estimates the engine work a request asks for (the server's cost cap and
  its queue count it), and the search path takes the ``RowScorer`` that runs its engine calls
  (``ScheduledScorer``): the server's sends each call through its batcher as one step and
  checks the request's deadline and client before it;
* ``ResultStep``: a step after the model's softmax that may adjust per-candidate scores (a
  corpus-index memory), run by ``FillMasker.finish`` on every path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal, Protocol

import numpy as np

from tiankong.core.memory import PROPOSALS
from tiankong.core.options import PredictOptions, check_blank, one_blank
from tiankong.core.results import FillResult
from tiankong.core.script import (
    NO_HAN_WARNING,
    TO_SIMPLIFIED,
    Script,
    convert,
    has_han,
    may_be_traditional,
    script_of,
    written_in,
)
from tiankong.core.text import (
    BLANK,
    MASK,
    PreparedText,
    check_unicode,
    mask_runs,
    normalize_masks,
)

Path = Literal["plain", "search"]
# What a request asks for, decided once by ``request_kind``: the search modes, the cost
# (``forward_rows``) and the result cache all read it, and none of them looks at the text again.
Kind = Literal["plain", "whole_word", "candidates", "blank", "constrained"]


def request_kind(text: str, options: PredictOptions) -> Kind:
    """The one rule: what ``text`` (masks normalised) with validated ``options`` asks for.
    Candidates rank options for the one blank (a [BLANK] or a run of [MASK]s); a [BLANK]
    otherwise is a fill of unknown length; whole word is a joint fill of the masks;
    constraints alone are one forward pass with a restricted top-k."""
    if options.mode == "candidates":
        return "candidates"
    if BLANK in text:
        return "blank"
    if options.mode == "whole_word":
        return "whole_word"
    if options.constraints is not None:
        return "constrained"
    return "plain"


def needs_search(text: str, options: PredictOptions) -> bool:
    """Does ``text`` (masks normalised) with ``options`` take the search path?"""
    return request_kind(text, options) != "plain"


@dataclass(frozen=True)
class PreparedRequest:
    """One validated, tokenized text with its validated options and its kind."""

    raw_text: str  # as given (the token cache's key)
    text: str  # masks normalised
    options: PredictOptions
    # plain: the text itself; search: its shortest fill ([BLANK] as one [MASK]), so the text's
    # limits are checked before any engine work
    prepared: PreparedText
    kind: Kind
    # traditional input converted to simplified for the model and the index (core/script.py):
    # the answer is written back in the user's script; None: the text is used as typed
    script: Script | None = None
    typed_options: tuple[str, ...] = ()  # the candidates as typed, when converted
    template: str = ""  # candidates: the text with its one blank written as [BLANK]
    indexed: bool = False  # the corpus index takes part (its searches score rows of their own)

    @property
    def plain(self) -> bool:
        return self.kind == "plain"

    @property
    def path(self) -> Path:
        return "plain" if self.plain else "search"

    def forward_rows(self) -> int:
        """An estimate of the engine work, in forward rows (one row: one text window through the
        model), an upper bound of what the search does: a beam step scores one row per beam,
        a candidate one row per character, plus one row for the per-mask lists. A batch of
        requests costs the sum; the server's cost cap and queue weigh it."""
        options = self.options
        if self.kind == "candidates":  # one chain per option, one row per character
            return 1 + sum(len(option.strip()) for option in options.candidates)
        # with the index: its fills of a blank scored as chains (``PROPOSALS`` of each length);
        # several blanks: each read in each joint fill's context, and the fill of the mixed
        # rows' best as a chain (``SearchModes.ground_blanks``)
        proposed = PROPOSALS if self.indexed else 0
        if self.kind == "blank":  # a beam search for each length 1..max_blank_length
            lengths = range(1, options.max_blank_length + 1)
            return 1 + sum(length * (options.beam_width + proposed) for length in lengths)
        if self.kind == "whole_word":
            masks = self.prepared.mask_indices
            blanks = len(mask_runs(masks))
            if not self.indexed:
                extra = 0
            elif blanks == 1:
                extra = proposed * len(masks)
            else:
                extra = (options.beam_width + 1) * blanks + len(masks)
            return 1 + len(masks) * options.beam_width + extra
        return 1  # plain, or constraints alone: one forward pass, a restricted top-k


def prepare_request(
    text: str,
    options: PredictOptions,
    prepare: Callable[[str], PreparedText],
    indexed: bool = False,
) -> PreparedRequest:
    """Tokenize ``text`` and decide its kind; typed errors (400 / exit 2) for bad input, before
    anything is queued. ``options`` are validated already, once, where they entered
    (``FillMasker.options`` or ``FillMasker.prepare_request``). ``prepare`` tokenizes (the
    server passes its cached one). ``indexed``: the request uses the corpus index, so
    traditional input is converted to simplified (the index holds simplified text;
    ``core/script.py``), and its searches cost the index's rows too (``forward_rows``)."""
    if not isinstance(text, str):
        prepare(text)  # raises the typed error for a non-string
    check_unicode(text)  # before OpenCC converts it
    normalised = normalize_masks(text)
    script, typed_options = None, options.candidates
    if indexed:
        found, simplified_options = script_of(normalised), in_simplified(options)
        # a traditional option on a simplified text (鳥 for 处处闻啼[MASK]) is scored as its
        # simplified form, as on a traditional text, and shown as typed: the model read 鳥
        # in a simplified sentence as all but impossible, and 花 won
        if found.converted or simplified_options is not options:
            script, text, normalised = found, found.simplified, found.simplified
            options = simplified_options
    kind = request_kind(normalised, options)
    if kind == "plain":
        return PreparedRequest(
            text, normalised, options, prepare(text), kind, script, typed_options, indexed=indexed
        )
    prepared = prepare(normalised.replace(BLANK, MASK))
    if BLANK in normalised:
        check_blank(normalised)
    template = one_blank(normalised) if kind == "candidates" else ""
    return PreparedRequest(
        text, normalised, options, prepared, kind, script, typed_options, template, indexed
    )


@dataclass(frozen=True)
class PlainJob:
    """One plain text's engine work: a batcher item, answered with its ``FillResult``."""

    prepared: PreparedText
    top_k: int
    allowed: np.ndarray | None = None
    use_index: bool = True  # mix in the corpus index at decoding, when the model has one

    @property
    def row(self) -> list[int]:
        return self.prepared.input_ids


@dataclass(frozen=True)
class RowJob:
    """One row of a search step: token ids, and the indices whose distribution is wanted;
    answered with the probabilities at those indices."""

    row: list[int]
    asked: list[int]


# A batcher item: a plain text or a search step's row (``service.run_jobs`` runs a list of them).
EngineJob = PlainJob | RowJob


def plain_groups(requests: Sequence[PreparedRequest]) -> dict[tuple[int, bool], list[int]]:
    """The plain requests' positions, grouped by (top_k, index): each group shares engine calls
    (the library's ``run_requests`` and the server's ``Predictor.run_many``)."""
    groups: dict[tuple[int, bool], list[int]] = {}
    for position, request in enumerate(requests):
        if request.plain:
            groups.setdefault((request.options.top_k, request.options.index), []).append(position)
    return groups


def in_simplified(options: PredictOptions) -> PredictOptions:
    """The options of a converted text, with its candidates and constraints converted too;
    ``options`` itself where that changes nothing (a plain request's, or options already
    simplified), so that ``prepare_request`` tells by identity whether any was traditional."""
    if not options.candidates and options.constraints is None:
        return options

    def simplified(words: Sequence[str]) -> tuple[str, ...]:
        return tuple(convert(word, TO_SIMPLIFIED) for word in words)

    constraints = options.constraints
    if constraints is not None:
        constraints = replace(
            constraints,
            allowed=simplified(constraints.allowed),
            exclude=simplified(constraints.exclude),
        )
    converted = replace(options, candidates=simplified(options.candidates), constraints=constraints)
    return options if converted == options else converted


class ResultStep(Protocol):
    """Runs after decoding on every path (``FillMasker.finish``, in ``FillMasker.result_steps``
    order) and may rewrite the result: the answer written back in the user's script, the
    no-Chinese warning and the no-whole-fill warning are the steps every masker starts with."""

    def __call__(self, request: PreparedRequest, result: FillResult) -> FillResult: ...


def in_users_script(
    request: PreparedRequest, result: FillResult, vocab: Mapping[str, int] | None = None
) -> FillResult:
    """A converted request's answer in the script it was typed in (``core/script.py``); each
    candidate's ``token_id`` then is its written form's, where ``vocab`` has that form."""
    if request.script is None:
        return result
    return written_in(result, request.script, request.typed_options, vocab)


def warn_without_han(request: PreparedRequest, result: FillResult) -> FillResult:
    """The warning for a text without a Chinese character, which the model can't fill well."""
    if has_han(request.raw_text):
        return result
    return replace(result, warnings=[*result.warnings, NO_HAN_WARNING])


TYPED_SCRIPT_WARNING = (
    "The text has traditional characters and no corpus index is used, so the model read it "
    "as typed: its answers are the characters it wrote, which may be simplified ones (with "
    "the index on, answers are written in the text's own script)."
)


def warn_script_as_typed(request: PreparedRequest, result: FillResult) -> FillResult:
    """Traditional text answered without the index is not written back in its script (the
    model's own tokens, as transformers' pipeline gives them): said, not silent (a review saw
    處處聞啼[MASK]。 answered 声 with the index off, and nothing said why)."""
    if request.indexed or not may_be_traditional(request.text):  # the cheap test first
        return result
    if script_of(request.text).to_typed is None:
        return result
    return replace(result, warnings=[*result.warnings, TYPED_SCRIPT_WARNING])


# What each kind of request reads of the search options (``SearchModes``): a beam search fills
# whole words and [BLANK]s, and only a [BLANK] tries several lengths.
READS_SEARCH_OPTIONS: dict[str, tuple[str, ...]] = {
    "whole_word": ("beam_width", "order"),
    "blank": ("beam_width", "order", "max_blank_length", "length_alpha"),
}
SEARCH_OPTIONS = ("beam_width", "order", "max_blank_length", "length_alpha")
NO_WHOLE_FILL_WARNING = (
    "No whole fill of the blank keeps to the constraints (allowed, exclude, preset), so there "
    "are no ranked fills; each position's own answers are shown."
)
WHY_UNUSED = {  # by the request's kind: why a search option did nothing for it
    "candidates": "candidate ranking scores each option whole",
    "whole_word": "max_blank_length and length_alpha are for a [BLANK], and this text has none",
}
WHY_UNUSED_ELSEWHERE = (
    "beam_width and order shape whole-word fills and [BLANK]s, max_blank_length and "
    "length_alpha a [BLANK], and this text asked for neither"
)


def warn_without_whole_fill(request: PreparedRequest, result: FillResult) -> FillResult:
    """Whole fills asked for (``whole_word``, a [BLANK]) and none kept to the constraints: a
    multi-character allowed word that fits no blank length left the fills empty, with no word
    of why."""
    if request.kind not in READS_SEARCH_OPTIONS or result.sequences:
        return result
    return replace(result, warnings=[*result.warnings, NO_WHOLE_FILL_WARNING])


def unused_options_warning(kind: str, options: PredictOptions) -> str | None:
    """The warning for search options set away from their defaults that ``kind`` of request
    does not read (they were accepted and silently did nothing); None where there are none."""
    read = READS_SEARCH_OPTIONS.get(kind, ())
    unused = [
        name
        for name in SEARCH_OPTIONS
        if name not in read and getattr(options, name) != getattr(PredictOptions, name)
    ]
    if not unused:
        return None
    listed = " and ".join(unused)
    verb = "was" if len(unused) == 1 else "were"
    return f"{listed} {verb} not used: {WHY_UNUSED.get(kind, WHY_UNUSED_ELSEWHERE)}."


def warn_unused_options(request: PreparedRequest, result: FillResult) -> FillResult:
    """Per text, since a file or a batch mixes texts with and without a [BLANK]."""
    warning = unused_options_warning(request.kind, request.options)
    return result if warning is None else replace(result, warnings=[*result.warnings, warning])


def result_steps(vocab: Mapping[str, int]) -> list[ResultStep]:
    """The steps every masker starts with, in order: the answer in the user's script (with
    ``vocab``'s ids for its written tokens), then the warnings: no Chinese, traditional text
    read as typed, no whole fill, options the text did not use."""
    return [
        partial(in_users_script, vocab=vocab),
        warn_without_han,
        warn_script_as_typed,
        warn_without_whole_fill,
        warn_unused_options,
    ]
