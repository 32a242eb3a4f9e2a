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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np

from tiankong.core.beam_search import RowScorer
from tiankong.core.decoding import Constraints
from tiankong.core.memory import FillMemory
from tiankong.core.modes import PredictOptions, Scorer, check_blank, one_blank
from tiankong.core.results import FillResult
from tiankong.core.script import TO_SIMPLIFIED, Script, convert, script_of
from tiankong.core.text import BLANK, MASK, PreparedText, TextEncoder, normalize_masks

Path = Literal["plain", "search"]


def needs_search(text: str, options: PredictOptions) -> bool:
    """The one rule: does ``text`` (masks normalised) with ``options`` take the search path?"""
    return options.mode != "single" or options.constraints is not None or BLANK in text


@dataclass(frozen=True)
class PreparedRequest:
    """One validated, tokenized text with its validated options and its path."""

    raw_text: str  # as given (the token cache's key)
    text: str  # masks normalised
    options: PredictOptions
    # plain: the text itself; search: its shortest fill ([BLANK] as one [MASK]), so the text's
    # limits are checked before any engine work
    prepared: PreparedText
    path: Path
    # traditional input converted to simplified for the model and the index (core/script.py):
    # the answer is written back in the user's script; None: the text is used as typed
    script: Script | None = None
    typed_options: tuple[str, ...] = ()  # the candidates as typed, when converted

    @property
    def plain(self) -> bool:
        return self.path == "plain"

    def forward_rows(self) -> int:
        """An estimate of the engine work, in forward rows (one row: one text window through the
        model), an upper bound of what the search does: a beam step scores one row per beam,
        a candidate one row per character, plus one row for the per-mask lists. A batch of
        requests costs the sum; the server's cost cap and queue weigh it."""
        options = self.options
        if self.plain:
            return 1
        if options.mode == "candidates":  # one chain per option, one row per character
            return 1 + sum(len(option.strip()) for option in options.candidates)
        if BLANK in self.text:  # a beam search for each length 1..max_blank_length
            lengths = range(1, options.max_blank_length + 1)
            return 1 + sum(length * options.beam_width for length in lengths)
        if options.mode == "whole_word":
            return 1 + len(self.prepared.mask_indices) * options.beam_width
        return 1  # constraints alone: one forward pass, a restricted top-k


def prepare_request(
    text: str,
    options: PredictOptions,
    prepare: Callable[[str], PreparedText],
    convert_script: bool = False,
) -> PreparedRequest:
    """Validate ``text`` and ``options`` and decide the path; typed errors (400 / exit 2) for bad
    input, before anything is queued. ``prepare`` tokenizes (the server passes its cached one).
    ``convert_script``: traditional input is converted to simplified (the request uses the
    corpus index, which holds simplified text; ``core/script.py``)."""
    options = options.validated()
    if not isinstance(text, str):
        prepare(text)  # raises the typed error for a non-string
    normalised = normalize_masks(text)
    script, typed_options = None, options.candidates
    if convert_script:
        found = script_of(normalised)
        if found.converted:
            script, text, normalised = found, found.simplified, found.simplified
            options = in_simplified(options)
    if not needs_search(normalised, options):
        return PreparedRequest(
            text, normalised, options, prepare(text), "plain", script, typed_options
        )
    prepared = prepare(normalised.replace(BLANK, MASK))
    if BLANK in normalised:
        check_blank(normalised)
    if options.mode == "candidates":
        one_blank(normalised)
    return PreparedRequest(text, normalised, options, prepared, "search", script, typed_options)


def in_simplified(options: PredictOptions) -> PredictOptions:
    """The options of a converted text, with its candidates and constraints converted too."""

    def simplified(words: Sequence[str]) -> tuple[str, ...]:
        return tuple(convert(word, TO_SIMPLIFIED) for word in words)

    constraints = options.constraints
    if constraints is not None:
        constraints = replace(
            constraints,
            allowed=simplified(constraints.allowed),
            exclude=simplified(constraints.exclude),
        )
    return replace(options, candidates=simplified(options.candidates), constraints=constraints)


class ResultStep(Protocol):
    """Runs after the model's softmax on every path and may adjust a result's per-candidate
    scores. The seam for a corpus-index memory: its results would keep the model's own score
    as ``model_score`` beside the adjusted one and say what the memory added."""

    def __call__(self, request: PreparedRequest, result: FillResult) -> FillResult: ...


class ScheduledScorer:
    """A Scorer whose engine calls go to ``score_rows`` (each call one search step), so whoever
    schedules the engine decides when each step runs and may stop the search between steps
    by raising from ``score_rows``."""

    def __init__(self, scorer: Scorer, score_rows: RowScorer) -> None:
        self.scorer = scorer
        self.score_rows = score_rows
        self.encoder: TextEncoder = scorer.encoder
        self.banned: np.ndarray = scorer.banned
        self.memory: FillMemory | None = scorer.memory

    def prepare(self, text: str) -> PreparedText:
        return self.scorer.prepare(text)

    def mask_probabilities(self, prepared: Sequence[PreparedText]) -> list[np.ndarray]:
        return self.score_rows(
            [item.input_ids for item in prepared], [item.mask_indices for item in prepared]
        )

    def decode(
        self,
        item: PreparedText,
        probabilities: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
        use_index: bool = True,
    ) -> FillResult:
        return self.scorer.decode(item, probabilities, k, allowed, use_index)

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray:
        return self.scorer.allowed_tokens(constraints)

    def banned_in(self, token_ids: Sequence[int]) -> bool:
        return self.scorer.banned_in(token_ids)
