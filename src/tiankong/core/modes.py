"""Prediction modes beyond per-mask lists: whole-word (joint) decoding, candidate ranking,
unknown-length blanks and vocabulary constraints: the search path of ``core/request.py``.
Orchestrates ``beam_search`` over a ``Scorer`` (a FillMasker); the math lives in
``beam_search`` and ``decoding``."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from tiankong.config import Settings
from tiankong.core.beam_search import ORDERS, Hypothesis, beam_search, score_chains
from tiankong.core.decoding import PRESETS, Constraints
from tiankong.core.memory import FillMemory
from tiankong.core.results import CandidateScore, FillResult, Memory, SequenceFill
from tiankong.core.text import BLANK, MASK, PreparedText, TextEncoder, fill_text, normalize_masks
from tiankong.errors import BadOptionError

MODES = ("single", "whole_word", "candidates")
MAX_CANDIDATES = 50
MAX_OPTION_CHARS = 8
MASK_RUN = re.compile(r"(?:\[MASK\])+")


@dataclass(frozen=True)
class PredictOptions:
    """Everything that shapes one prediction; hashable, so it can key a result cache."""

    top_k: int = Settings.default_top_k
    mode: str = "single"  # single | whole_word | candidates
    beam_width: int = 8
    order: str = "left_to_right"  # left_to_right | confident_first
    candidates: tuple[str, ...] = ()
    constraints: Constraints | None = None
    max_blank_length: int = 4  # for [BLANK]: try fills of 1..this many characters
    length_alpha: float = 1.0  # rank [BLANK] fills by log P / length ** alpha
    index: bool = True  # mix in the corpus index, when the model has one (False: the model's own)

    def validated(self) -> PredictOptions:
        options = self
        if options.candidates and options.mode == "single":
            options = replace(options, mode="candidates")
        if options.candidates and options.mode == "whole_word":
            raise BadOptionError("Candidates rank options for one blank; drop mode 'whole_word'.")
        if options.mode not in MODES:
            raise BadOptionError(f"Unknown mode '{options.mode}'; use one of {', '.join(MODES)}.")
        if options.order not in ORDERS:
            raise BadOptionError(f"Unknown order '{options.order}'; use {' or '.join(ORDERS)}.")
        if not 1 <= options.beam_width <= 64:
            raise BadOptionError("beam_width must be from 1 to 64.")
        if not 1 <= options.max_blank_length <= 4:
            raise BadOptionError("max_blank_length must be from 1 to 4.")
        if not isinstance(options.index, bool):
            raise BadOptionError("index must be true or false.")
        if not 0.0 <= options.length_alpha <= 2.0:
            raise BadOptionError("length_alpha must be from 0 to 2.")
        if options.mode == "candidates":
            check_candidates(options.candidates)
        preset = options.constraints.preset if options.constraints else None
        if preset is not None and preset not in PRESETS:
            raise BadOptionError(
                f"Unknown constraints preset '{preset}'; use one of {', '.join(PRESETS)}."
            )
        if options.constraints is not None and not options.constraints.active:
            options = replace(options, constraints=None)
        return options


def check_candidates(candidates: tuple[str, ...]) -> None:
    if not candidates:
        raise BadOptionError("Candidate mode needs at least one option in 'candidates'.")
    if len(candidates) > MAX_CANDIDATES:
        raise BadOptionError(f"At most {MAX_CANDIDATES} candidates; got {len(candidates)}.")
    for option in candidates:
        if not isinstance(option, str) or not option.strip():
            raise BadOptionError("Every candidate must be a non-empty string.")
        if len(option.strip()) > MAX_OPTION_CHARS:
            raise BadOptionError(
                f"Candidate '{option[:20]}' is longer than {MAX_OPTION_CHARS} characters."
            )
        if MASK in normalize_masks(option) or BLANK in normalize_masks(option):
            raise BadOptionError("A candidate can't contain [MASK] or [BLANK].")


class Grounded(NamedTuple):
    """A joint fill with the corpus index mixed in: ``hypothesis.log_prob`` is the combined
    score's log, ``model_log_prob`` the model's own, ``memory`` the index's evidence."""

    hypothesis: Hypothesis
    model_log_prob: float
    memory: Memory


class Scorer(Protocol):
    """What the search modes need from a model (``FillMasker`` is one): tokenize, score rows of
    token ids at their mask indices, and decode one text's probabilities."""

    encoder: TextEncoder
    banned: np.ndarray
    memory: FillMemory | None  # the corpus index, if the model has one

    def prepare(self, text: str) -> PreparedText: ...

    def score_rows(
        self, rows: Sequence[list[int]], asked: Sequence[list[int]]
    ) -> list[np.ndarray]: ...

    def mask_probabilities(self, prepared: Sequence[PreparedText]) -> list[np.ndarray]: ...

    def decode(
        self,
        item: PreparedText,
        probabilities: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
        use_index: bool = True,
    ) -> FillResult: ...

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray: ...

    def banned_in(self, token_ids: Sequence[int]) -> bool: ...


class SearchModes:
    """Runs the non-plain modes over one Scorer."""

    def __init__(self, masker: Scorer) -> None:
        self.masker = masker
        self.encoder = masker.encoder

    def predict(self, raw_text: str, options: PredictOptions) -> FillResult:
        text = normalize_masks(raw_text) if isinstance(raw_text, str) else raw_text
        if isinstance(text, str) and BLANK in text:
            return self.unknown_length(text, options)
        if options.mode == "candidates":
            return self.rank_candidates(text, options)
        prepared = self.masker.prepare(text)
        allowed = self.allowed(options)
        probabilities = self.masker.mask_probabilities([prepared])[0]
        result = self.masker.decode(prepared, probabilities, options.top_k, allowed, options.index)
        if options.mode != "whole_word":
            return result
        hypotheses = self.search(prepared.input_ids, prepared.mask_indices, options)
        grounded = self.ground(prepared, hypotheses, options)
        fills = self.sequences(prepared.text, grounded, options, 0.0)
        # the best joint fill, not the per-mask argmax, is this mode's answer
        return replace(
            result, sequence=fills[0].text if fills else result.sequence, sequences=fills
        )

    def allowed(self, options: PredictOptions) -> np.ndarray | None:
        if options.constraints is None:
            return None
        return self.masker.allowed_tokens(options.constraints)

    def search(
        self, input_ids: list[int], mask_indices: list[int], options: PredictOptions
    ) -> list[Hypothesis]:
        allowed = self.allowed(options)
        return beam_search(
            input_ids,
            mask_indices,
            self.masker.score_rows,
            allowed if allowed is not None else self.default_allowed,
            options.beam_width,
            options.order,
            renormalise=allowed is not None,
        )

    @property
    def default_allowed(self) -> np.ndarray:
        allowed = np.ones(len(self.encoder.vocab), dtype=bool)
        allowed[self.masker.banned] = False
        return allowed

    def ground(
        self, prepared: PreparedText, hypotheses: list[Hypothesis], options: PredictOptions
    ) -> list[Grounded]:
        """The corpus index's part in a joint fill of ONE blank (a run of masks): the index's
        own fills of that length join the beam's (scored by the model as a chain), and each
        fill's joint probability is mixed with the count of left + fill + right. Best first.
        Without an index, or for several blanks, the beam's fills as they are."""
        plain = [Grounded(h, h.log_prob, None) for h in hypotheses]
        memory = self.masker.memory
        masks = prepared.mask_indices
        if memory is None or not options.index or not masks:
            return plain
        first, length = masks[0], len(masks)
        if masks != list(range(first, first + length)):
            return plain  # several blanks: a joint fill isn't one corpus span
        seen = {tuple(h.token_ids) for h in hypotheses}
        proposals = [
            ids
            for ids in memory.propose(prepared.input_ids, first, length)
            if tuple(ids) not in seen and not self.masker.banned_in(ids)
        ]
        if proposals and options.constraints is None:  # constrained beams are renormalised
            chains = score_chains(
                [(prepared.input_ids, masks, ids) for ids in proposals], self.masker.score_rows
            )
            hypotheses = hypotheses + [
                Hypothesis(tuple(ids), chain.log_prob)
                for ids, chain in zip(proposals, chains, strict=True)
            ]
        grounded = []
        best = math.exp(max(h.log_prob for h in hypotheses)) if hypotheses else None
        for hypothesis in hypotheses:
            ids = [int(token or 0) for token in hypothesis.token_ids]
            score, evidence = memory.ground(
                prepared.input_ids, first, ids, math.exp(hypothesis.log_prob), best
            )
            combined = Hypothesis(hypothesis.token_ids, math.log(max(score, 1e-300)))
            grounded.append(Grounded(combined, hypothesis.log_prob, evidence))
        grounded.sort(key=lambda item: -item.hypothesis.log_prob)
        return grounded

    def sequences(
        self, text: str, grounded: list[Grounded], options: PredictOptions, alpha: float
    ) -> list[SequenceFill]:
        words = options.constraints.allowed_words if options.constraints else frozenset()
        fills = []
        for hypothesis, model_log_prob, evidence in grounded:
            pieces = [self.encoder.token_string(int(t or 0)) for t in hypothesis.token_ids]
            fill = "".join(pieces)
            if words and fill not in words:
                continue
            length = len(pieces)
            fills.append(
                SequenceFill(
                    fill=fill,
                    text=fill_text(text, pieces) if MASK in text else text.replace(BLANK, fill),
                    score=math.exp(hypothesis.log_prob),
                    normalised=math.exp(hypothesis.log_prob / length),
                    model_score=math.exp(model_log_prob),
                    memory=evidence,
                )
            )
        return fills[: options.top_k] if alpha == 0.0 else fills

    def rank_candidates(self, text: str, options: PredictOptions) -> FillResult:
        """Score each option in the blank by its exact left-to-right chain probability."""
        template = one_blank(text)
        items, known = [], []
        for option in options.candidates:
            option = option.strip()
            ids = self.encoder.tokenizer.encode(option, add_special_tokens=False).ids
            if not ids:  # only characters the tokenizer drops (zero-width, control)
                raise BadOptionError(f"The candidate {option!r} has no character the model reads.")
            known.append(self.encoder.vocab.get("[UNK]") not in ids)
            prepared = self.masker.prepare(template.replace(BLANK, MASK * len(ids)))
            items.append((prepared.input_ids, prepared.mask_indices, ids))
        chains = score_chains(items, self.masker.score_rows)
        memory = self.masker.memory if options.index else None
        scored_options = []
        best = max((math.exp(chain.normalised) for chain in chains), default=None)
        for option, chain, in_vocabulary, (input_ids, mask_indices, ids) in zip(
            options.candidates, chains, known, items, strict=True
        ):
            model_score = math.exp(chain.normalised)
            score, evidence = model_score, None
            if memory is not None and in_vocabulary:
                score, evidence = memory.ground(
                    input_ids, mask_indices[0], ids, model_score, best, joint_over=1
                )
            scored_options.append(
                CandidateScore(
                    option=option.strip(),
                    text=template.replace(BLANK, option.strip()),
                    score=score,
                    joint=math.exp(chain.log_prob),
                    in_vocabulary=in_vocabulary,
                    model_score=model_score,
                    memory=evidence,
                )
            )
        scored = sorted(
            scored_options,
            # an option with a character the model doesn't know is scored through [UNK], which
            # says nothing about it: such options rank after every known one
            key=lambda candidate: (not candidate.in_vocabulary, -candidate.score),
        )
        single = self.masker.prepare(template.replace(BLANK, MASK))
        probabilities = self.masker.mask_probabilities([single])[0]
        base = self.masker.decode(single, probabilities, options.top_k, None, options.index)
        return replace(base, text=text, sequence=scored[0].text, candidates=scored)

    def unknown_length(self, text: str, options: PredictOptions) -> FillResult:
        """Try every length 1..max_blank_length and rank fills by log P / length ** alpha."""
        check_blank(text)
        if options.mode == "candidates":
            return self.rank_candidates(text, options)
        pooled: list[tuple[float, SequenceFill]] = []
        best_prepared = None
        for length in range(1, options.max_blank_length + 1):
            prepared = self.masker.prepare(text.replace(BLANK, MASK * length))
            best_prepared = best_prepared or prepared
            hypotheses = self.search(prepared.input_ids, prepared.mask_indices, options)
            grounded = self.ground(prepared, hypotheses, options)
            for fill in self.sequences(text, grounded, options, options.length_alpha):
                rank_score = math.log(max(fill.score, 1e-300)) / length**options.length_alpha
                pooled.append((rank_score, fill))
        pooled.sort(key=lambda pair: -pair[0])
        fills = [fill for _, fill in pooled][: max(options.top_k, 1)]
        assert best_prepared is not None
        probabilities = self.masker.mask_probabilities([best_prepared])[0]
        base = self.masker.decode(
            best_prepared, probabilities, options.top_k, self.allowed(options), options.index
        )
        return replace(
            base,
            text=text,
            sequence=fills[0].text if fills else text,
            sequences=fills,
        )


def check_blank(text: str) -> None:
    """A [BLANK] of unknown length is searched alone: one per text, and no [MASK] beside it."""
    if text.count(BLANK) != 1 or MASK in text:
        raise BadOptionError("Use exactly one [BLANK] per text, and no [MASK] beside it.")


def one_blank(text: str) -> str:
    """The text with its single blank (a [BLANK] or a run of [MASK]s) written as [BLANK]."""
    if BLANK in text:
        if text.count(BLANK) != 1 or MASK in text:
            raise BadOptionError("Candidate ranking takes exactly one blank.")
        return text
    runs = MASK_RUN.findall(text)
    if len(runs) != 1:
        raise BadOptionError(
            "Candidate ranking takes exactly one blank: one [MASK] (or one run of [MASK]s)."
        )
    return MASK_RUN.sub(BLANK, text)
