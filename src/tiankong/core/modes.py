"""Prediction modes beyond per-mask lists: whole-word (joint) decoding, candidate ranking,
unknown-length blanks and vocabulary constraints: the search path of ``core/request.py``.
Orchestrates ``beam_search`` over a ``Scorer`` (a FillMasker); the math lives in
``beam_search`` and ``decoding``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import NamedTuple, Protocol
from weakref import WeakKeyDictionary

import numpy as np

from tiankong.core.beam_search import Hypothesis, RowScorer, beam_search, score_chains
from tiankong.core.decoding import Constraints
from tiankong.core.memory import FillMemory, Grounding
from tiankong.core.options import PredictOptions
from tiankong.core.request import PreparedRequest
from tiankong.core.results import CandidateScore, FillResult, Memory, SequenceFill
from tiankong.core.text import BLANK, MASK, PreparedText, TextEncoder, fill_text, mask_runs


class Weighed(Protocol):
    """A fill's evidence and the share of its score that is the model's (``Grounding``,
    ``Grounded``)."""

    @property
    def memory(self) -> Memory: ...

    @property
    def model_share(self) -> float: ...


def unsupported_share(fills: Iterable[Weighed]) -> float:
    """What one blank's fills that the index does not support are weighed by: the least model
    share among those it does (the strongest match's ``1 - w``), as ``FillMemory.mix`` weighs
    a mask's whole row; 1 where it supports none. Otherwise the index only ever added to the
    supported fills and took nothing from the rest, so an unsupported fill kept its whole score
    against a supported one's discounted model part (whole-word, [BLANK] and candidates put
    凤 over the supported 睛 in 画龙点[MASK], which one mask answers 睛). A [BLANK]'s fills of
    every length are one blank: weighed together, or the index reordered the lengths it
    supports none of."""
    return min((fill.model_share for fill in fills if fill.memory is not None), default=1.0)


class Grounded(NamedTuple):
    """A joint fill with the corpus index mixed in: ``hypothesis.log_prob`` is the combined
    score's log, ``model_log_prob`` the model's own, ``memory`` the index's evidence,
    ``model_share`` the share of the score that is the model's (``Grounding``)."""

    hypothesis: Hypothesis
    model_log_prob: float
    memory: Memory
    model_share: float = 1.0


def weighed(grounded: list[Grounded], share: float | None = None) -> list[Grounded]:
    """One blank's fills with the unsupported ones weighed by ``share`` (default: theirs,
    ``unsupported_share``), best first."""
    share = unsupported_share(grounded) if share is None else share
    if share < 1.0:
        grounded = [
            item
            if item.memory is not None
            else item._replace(
                hypothesis=Hypothesis(
                    item.hypothesis.token_ids, item.hypothesis.log_prob + math.log(share)
                )
            )
            for item in grounded
        ]
    return sorted(grounded, key=lambda item: -item.hypothesis.log_prob)


def rank_score(item: Grounded, length: int, alpha: float) -> float:
    """What a [BLANK]'s fills of every length are ranked by: the model's part of the score,
    length-normalised (its joint probability to the power 1 / length ** ``alpha``), plus the
    index's part as it is. The index's part, ``w * n(f) / n(context)``, is already a share of
    the blank's fills, not a product of per-character probabilities, so normalising it too
    lifted long corpus fragments the model finds absurd: 叶公好[BLANK] ranked 画真龙出 (the
    model's 7e-13) over 龙, and 一[BLANK]千金 一篇诗律抵千金 over every short fill. ``alpha`` 0
    ranks by the combined joint score itself."""
    joint = math.exp(item.hypothesis.log_prob)
    if alpha == 0.0:
        return joint
    # the model's weight: 1 - w where the index supports the fill, else the share the
    # unsupported fills are weighed by (``weighed``)
    model_weight = (
        item.model_share
        if item.memory is not None
        else math.exp(item.hypothesis.log_prob - item.model_log_prob)
    )
    index_part = max(0.0, joint - model_weight * math.exp(item.model_log_prob))
    return model_weight * math.exp(item.model_log_prob / length**alpha) + index_part


class Scorer(Protocol):
    """What the search modes need from a model (``FillMasker`` is one): tokenize, score rows of
    token ids at their mask indices, and decode one text's probabilities."""

    encoder: TextEncoder
    banned: np.ndarray
    width: int  # the ids a row of scores holds (the model's vocab_size, at least the tokenizer's)
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
        *,
        open_ended: bool = False,
    ) -> FillResult: ...

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray: ...

    def banned_in(self, token_ids: Sequence[int]) -> bool: ...

    def option_tokens(self, option: str, name: str) -> list[int]: ...


# SearchModes.default_allowed, per tokenizer (its vocabulary and banned ids never change)
WORD_TOKENS: WeakKeyDictionary[TextEncoder, np.ndarray] = WeakKeyDictionary()


class SearchModes:
    """Runs the non-plain modes over one Scorer."""

    def __init__(self, masker: Scorer) -> None:
        self.masker = masker
        self.encoder = masker.encoder

    def predict(self, request: PreparedRequest) -> FillResult:
        """The search for one prepared request, by the kind its preparation decided: the text
        is not looked at again, and the request's tokenized form is the first row scored."""
        options = request.options
        if request.kind == "candidates":
            return self.rank_candidates(request.text, request.template, options)
        if request.kind == "blank":
            return self.unknown_length(request.text, options)
        prepared = request.prepared
        allowed = self.allowed(options)
        probabilities = self.masker.mask_probabilities([prepared])[0]
        result = self.masker.decode(prepared, probabilities, options.top_k, allowed, options.index)
        if options.mode != "whole_word":
            return result
        hypotheses = self.search(prepared.input_ids, prepared.mask_indices, options)
        grounded = self.ground(prepared, hypotheses, options, rows=probabilities)
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
        fills = self.allowed_fills(options, len(mask_indices))
        if fills == []:  # no allowed word of this length: nothing to search
            return []
        return beam_search(
            input_ids,
            mask_indices,
            self.masker.score_rows,
            allowed if allowed is not None else self.default_allowed,
            options.beam_width,
            options.order,
            renormalise=allowed is not None,
            fills=fills,
        )

    def allowed_fills(self, options: PredictOptions, length: int) -> list[tuple[int, ...]] | None:
        """The constraints' whole fills (``Constraints.allowed_fills``) of ``length`` tokens, as
        token ids, in a set order; None where the fills are not limited."""
        words = options.constraints.allowed_fills if options.constraints else frozenset()
        if not words:
            return None
        tokens = (tuple(self.masker.option_tokens(word, "allowed entry")) for word in sorted(words))
        return [ids for ids in tokens if len(ids) == length]

    @property
    def default_allowed(self) -> np.ndarray:
        """A joint fill's tokens without constraints: a word's characters, never punctuation
        (手机没电了，赶紧去[MASK][MASK]。 was answered 了。, and [BLANK] fills ran into the next
        clause: 画龙点[BLANK] -> 小，不错); ``allowed`` or a preset decide where given. Made once
        per tokenizer (a server makes a SearchModes per request)."""
        allowed = WORD_TOKENS.get(self.encoder)
        if allowed is None:
            allowed = np.zeros(self.masker.width, dtype=bool)
            for token, token_id in self.encoder.vocab.items():
                allowed[token_id] = any(char.isalnum() for char in token)
            allowed[self.masker.banned] = False
            allowed.flags.writeable = False
            WORD_TOKENS[self.encoder] = allowed
        return allowed

    def ground(
        self,
        prepared: PreparedText,
        hypotheses: list[Hypothesis],
        options: PredictOptions,
        open_ended: bool = False,
        weigh: bool = True,
        rows: np.ndarray | None = None,
    ) -> list[Grounded]:
        """The corpus index's part in a joint fill of ONE blank (a run of masks): the index's
        own fills of that length join the beam's (scored by the model as a chain), and each
        fill's joint probability is mixed with the count of left + fill + right; ``weigh``:
        then the unsupported ones weighed and all best first (``weighed``; a [BLANK] weighs
        its lengths' fills together). Several blanks: ``ground_blanks``, given the text's
        per-mask ``rows``. Without an index, the beam's fills as they are."""
        plain = [Grounded(h, h.log_prob, None) for h in hypotheses]
        memory = self.masker.memory
        masks = prepared.mask_indices
        if memory is None or not options.index or not masks:
            return plain
        first, length = masks[0], len(masks)
        if masks != list(range(first, first + length)):
            # several blanks: a joint fill isn't one corpus span
            if rows is None:
                return plain
            return self.ground_blanks(prepared, hypotheses, options, memory, rows)
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
        best = math.exp(max(h.log_prob for h in hypotheses)) if hypotheses else None
        grounded = []
        for hypothesis in hypotheses:
            grounding = memory.ground(
                prepared.input_ids,
                first,
                [int(token or 0) for token in hypothesis.token_ids],
                math.exp(hypothesis.log_prob),
                best,
                open_ended=open_ended,
            )
            combined = Hypothesis(hypothesis.token_ids, math.log(max(grounding.score, 1e-300)))
            grounded.append(
                Grounded(combined, hypothesis.log_prob, grounding.memory, grounding.model_share)
            )
        return weighed(grounded) if weigh else grounded

    def ground_blanks(
        self,
        prepared: PreparedText,
        hypotheses: list[Hypothesis],
        options: PredictOptions,
        memory: FillMemory,
        rows: np.ndarray,
    ) -> list[Grounded]:
        """Several blanks. No corpus span holds their joint fill, but each blank can be read as
        its list is, in the context of the fill's other blanks: for each joint fill and each
        blank, the text with the other blanks filled, this blank's row scored and mixed with
        the index (``FillMemory.mix``), and the fill's model probability weighed by its tokens'
        mixed probability there over the model's. The fill of each mask's mixed best joins the
        beam (scored by the model as a chain). No ``memory``: each blank's list shows its own.
        白日依山[MASK]，黄河入海[MASK]。 whole-word read 外边, the model's, under per-blank lists
        of 尽 (90%) and 流 (65%) with their 出处. Read with the other blank filled, 说的[MASK]是这
        个道理 keeps 就, where its list, whose context stops at the other blank, shows 不."""
        mixed = memory.mix(prepared.input_ids, prepared.mask_indices, rows).probabilities
        if mixed is rows:  # nothing matched
            return [Grounded(h, h.log_prob, None) for h in hypotheses]
        seen = {tuple(h.token_ids) for h in hypotheses}
        allowed = np.flatnonzero(self.default_allowed)
        best = tuple(int(allowed[np.argmax(row[allowed])]) for row in mixed)
        if best not in seen and options.constraints is None:  # constrained beams: renormalised
            [chain] = score_chains(
                [(prepared.input_ids, prepared.mask_indices, list(best))], self.masker.score_rows
            )
            hypotheses = [*hypotheses, Hypothesis(best, chain.log_prob)]
        masks = prepared.mask_indices
        runs = [tuple(run) for run in mask_runs(masks)]
        # per joint fill, each blank's context: the text with the fill's other blanks filled
        # (fills that differ only in this blank share it, and it is read once)
        contexts = [
            [(filled_except(prepared.input_ids, masks, h.token_ids, run), run) for run in runs]
            for h in hypotheses
        ]
        unique = list(dict.fromkeys(key for keys in contexts for key in keys))
        scored = self.masker.score_rows(
            [list(ids) for ids, _ in unique], [[masks[n] for n in run] for _, run in unique]
        )
        read = {
            key: (row, memory.mix(list(key[0]), [masks[n] for n in key[1]], row).probabilities)
            for key, row in zip(unique, scored, strict=True)
        }
        grounded = []
        for hypothesis, keys in zip(hypotheses, contexts, strict=True):
            weight = sum(
                log_ratio(*read[key], [int(hypothesis.token_ids[n] or 0) for n in key[1]])
                for key in keys
            )
            combined = Hypothesis(hypothesis.token_ids, min(0.0, hypothesis.log_prob + weight))
            grounded.append(Grounded(combined, hypothesis.log_prob, None))
        return sorted(grounded, key=lambda item: -item.hypothesis.log_prob)

    def sequences(
        self, text: str, grounded: list[Grounded], options: PredictOptions, alpha: float
    ) -> list[SequenceFill]:
        words = options.constraints.allowed_fills if options.constraints else frozenset()
        fills = []
        for item in grounded:
            hypothesis, model_log_prob, evidence = item.hypothesis, item.model_log_prob, item.memory
            pieces = [self.encoder.token_string(int(t or 0)) for t in hypothesis.token_ids]
            fill = "".join(pieces)
            if words and fill not in words:
                continue
            length = len(pieces)
            fills.append(
                SequenceFill(
                    fill=fill,
                    text=fill_text(text, pieces) if MASK in text else text.replace(BLANK, fill),
                    fills=tuple(pieces) if MASK in text else (fill,),
                    score=math.exp(hypothesis.log_prob),
                    normalised=math.exp(hypothesis.log_prob / length),
                    model_score=math.exp(model_log_prob),
                    memory=evidence,
                    rank_score=rank_score(item, length, alpha),
                )
            )
        return fills[: options.top_k] if alpha == 0.0 else fills

    def rank_candidates(self, text: str, template: str, options: PredictOptions) -> FillResult:
        """Score each option in the blank (``template``: the text with its one blank as
        [BLANK]) by its exact left-to-right chain probability."""
        items, known = [], []
        unknown = self.encoder.vocab.get("[UNK]")
        cut = False  # a longer option's text may be cut where the one-mask reading isn't
        for option in options.candidates:
            ids = self.masker.option_tokens(option, "candidate")
            known.append(unknown not in ids)
            prepared = self.masker.prepare(template.replace(BLANK, MASK * len(ids)))
            cut = cut or prepared.truncated
            items.append((prepared.input_ids, prepared.mask_indices, ids))
        chains = score_chains(items, self.masker.score_rows)
        memory = self.masker.memory if options.index else None
        best = max((math.exp(chain.normalised) for chain in chains), default=None)
        groundings: list[Grounding] = [
            memory.ground(
                input_ids,
                mask_indices[0],
                ids,
                math.exp(chain.normalised),
                best,
                1,
                open_ended=True,
            )
            if memory is not None and in_vocabulary
            else Grounding(math.exp(chain.normalised), None)
            for chain, in_vocabulary, (input_ids, mask_indices, ids) in zip(
                chains, known, items, strict=True
            )
        ]
        share = unsupported_share(groundings)
        scored_options = [
            CandidateScore(
                option=option.strip(),
                text=template.replace(BLANK, option.strip()),
                score=grounding.score * (share if grounding.memory is None else 1.0),
                joint=math.exp(chain.log_prob),
                in_vocabulary=in_vocabulary,
                model_score=math.exp(chain.normalised),
                memory=grounding.memory,
            )
            for option, chain, in_vocabulary, grounding in zip(
                options.candidates, chains, known, groundings, strict=True
            )
        ]
        scored = sorted(
            scored_options,
            # an option with a character the model doesn't know is scored through [UNK], which
            # says nothing about it: such options rank after every known one
            key=lambda candidate: (not candidate.in_vocabulary, -candidate.score),
        )
        single = self.masker.prepare(template.replace(BLANK, MASK))
        probabilities = self.masker.mask_probabilities([single])[0]
        # the per-mask rows read the blank as one character, which the user did not fix: the
        # index grounds them as it does the options (open-ended)
        base = self.masker.decode(
            single, probabilities, options.top_k, None, options.index, open_ended=True
        )
        return replace(
            base,
            text=text,
            sequence=scored[0].text,
            candidates=scored,
            truncated=base.truncated or cut,
        )

    def unknown_length(self, text: str, options: PredictOptions) -> FillResult:
        """Try every length 1..max_blank_length and rank fills by log P / length ** alpha."""
        lengths: list[list[Grounded]] = []
        best_prepared = None
        cut = False  # a longer fill's text may be cut where the one-character reading isn't
        for length in range(1, options.max_blank_length + 1):
            prepared = self.masker.prepare(text.replace(BLANK, MASK * length))
            best_prepared = best_prepared or prepared
            cut = cut or prepared.truncated
            hypotheses = self.search(prepared.input_ids, prepared.mask_indices, options)
            lengths.append(self.ground(prepared, hypotheses, options, True, weigh=False))
        # one blank, whatever its length: every length's unsupported fills weighed alike
        share = unsupported_share(item for grounded in lengths for item in grounded)
        pooled: list[SequenceFill] = []
        for grounded in lengths:
            fills = self.sequences(text, weighed(grounded, share), options, options.length_alpha)
            pooled += fills
        pooled.sort(key=lambda fill: -fill.rank_score)  # stable: a length's own order kept
        fills = pooled[: max(options.top_k, 1)]
        assert best_prepared is not None
        probabilities = self.masker.mask_probabilities([best_prepared])[0]
        base = self.masker.decode(  # the one-character reading: grounded as the fills are
            best_prepared,
            probabilities,
            options.top_k,
            self.allowed(options),
            options.index,
            open_ended=True,
        )
        return replace(
            base,
            text=text,
            sequence=fills[0].text if fills else text,
            sequences=fills,
            truncated=base.truncated or cut,
        )


class ScheduledScorer:
    """A Scorer whose engine calls go to ``score_rows`` (each call one search step), so whoever
    schedules the engine decides when each step runs and may stop the search between steps
    by raising from ``score_rows``."""

    def __init__(self, scorer: Scorer, score_rows: RowScorer) -> None:
        self.scorer = scorer
        self.score_rows = score_rows
        self.encoder: TextEncoder = scorer.encoder
        self.banned: np.ndarray = scorer.banned
        self.width: int = scorer.width
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
        *,
        open_ended: bool = False,
    ) -> FillResult:
        return self.scorer.decode(item, probabilities, k, allowed, use_index, open_ended=open_ended)

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray:
        return self.scorer.allowed_tokens(constraints)

    def banned_in(self, token_ids: Sequence[int]) -> bool:
        return self.scorer.banned_in(token_ids)

    def option_tokens(self, option: str, name: str) -> list[int]:
        return self.scorer.option_tokens(option, name)


def filled_except(
    input_ids: Sequence[int],
    masks: Sequence[int],
    token_ids: Sequence[int | None],
    run: tuple[int, ...],
) -> tuple[int, ...]:
    """``input_ids`` with every mask but those of ``run`` (mask numbers) filled by ``token_ids``."""
    ids = list(input_ids)
    for number, index in enumerate(masks):
        if number not in run:
            ids[index] = int(token_ids[number] or 0)
    return tuple(ids)


def log_ratio(model: np.ndarray, mixed: np.ndarray, tokens: Sequence[int]) -> float:
    """The log of ``tokens``' probability in the ``mixed`` rows over the ``model``'s, one row a
    token: what the index moved them by."""
    return sum(
        math.log(max(float(mixed[n, token]), 1e-300))
        - math.log(max(float(model[n, token]), 1e-300))
        for n, token in enumerate(tokens)
    )
