"""The corpus index in the decode stage: ``CorpusMemory`` implements ``core.memory.FillMemory``,
and ``choose_memory`` decides, once per process, which index (if any) a model uses.

``--index``/``TIANKONG_INDEX`` (``Settings.index``):
  * ``auto`` (the default): the bundled index for a bundled model, whose tokenizer is the
    index's by construction; no index for any other model, so a user's own model gives the
    model's own numbers (transformers' pipeline within 1e-4) unless an index is asked for;
  * ``bundled``: the bundled index, for any model with the same tokenizer (else an error);
  * ``none``: no index;
  * a folder: an index built by ``tiankong index build`` (checked against the model's tokenizer).
An index asked for by name or folder that can't be used is an error (exit 3 / the server
refuses to start), never a silent fallback.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from tiankong.config import INDEX_KEYWORDS
from tiankong.core.memory import PROPOSALS, Grounding, MixedRows
from tiankong.core.models import ResolvedModel
from tiankong.core.results import Memory
from tiankong.errors import BadOptionError, IndexTokenizerMismatchError
from tiankong.index.combine import (
    FITTED_WEIGHT,
    Run,
    combine_distribution,
    combine_score,
    kept_fills,
    model_share,
    supports,
)
from tiankong.index.lookup import Blank, BlankLookup, BlankMatch, blanks_of
from tiankong.index.options import option_match, spanning_fills
from tiankong.index.store import CorpusIndex, check_recorded_sources
from tiankong.index.tokens import tokenizer_fingerprint


def is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


Found = list[tuple[Blank, BlankMatch]]  # CorpusMemory.find: the blanks that matched


class CorpusMemory:
    """One opened index with its lookup; shared by every request of a process (read-only)."""

    def __init__(self, index: CorpusIndex, name: str, tokenizer: Tokenizer | None = None) -> None:
        self.index = index
        self.name = name  # "bundled" or the folder's name, for /info and the result cache key
        self.lookup = BlankLookup(index, tokenizer)
        vocab = self.lookup.tokenizer.get_vocab()
        self.punctuation = np.array(
            sorted(i for t, i in vocab.items() if len(t) == 1 and is_punctuation(t)), dtype=np.int64
        )
        self.punctuation_ids = frozenset(int(i) for i in self.punctuation)
        self.mask_id = vocab.get("[MASK]")

    @cached_property
    def key(self) -> str:
        """The index's identity, what the result cache and a resumed run's checkpoint key on:
        its name and its content (each source's sha256, the counts, the recipe and the
        tokenizer's fingerprint). It read a build time the manifest doesn't hold, so an index
        rebuilt in place from a text of the same counts (a typo fixed) was the same index, and
        a resumed fill mixed the two builds' answers (a review)."""
        manifest = self.index.manifest
        content = [
            [source["sha256"] for source in manifest["sources"]],  # store.check_fields
            manifest.get("counts"),
            manifest.get("recipe"),
            manifest["tokenizer"]["fingerprint"],
        ]
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode())
        return f"{self.name}:{digest.hexdigest()[:16]}"

    def find(self, input_ids: Sequence[int], mask_indices: Sequence[int]) -> Found:
        """Each blank's match: needs only the token ids, so it can run beside the engine."""
        found = []
        for blank in blanks_of(input_ids, mask_indices):
            match = self.lookup.lookup(blank.left, blank.right, blank.length)
            if match is not None:
                found.append((blank, match))
        return found

    def mix(
        self,
        input_ids: Sequence[int],
        mask_indices: Sequence[int],
        probabilities: np.ndarray,
        found: object = None,
        open_ended: bool = False,
    ) -> MixedRows:
        rows = probabilities
        # mask number -> (match, its position in the blank, the blank's mask numbers, its rows)
        matches: dict[int, tuple[BlankMatch, int, list[int], Run]] = {}
        number_of = {index: number for number, index in enumerate(mask_indices)}
        if found is None:
            found = self.find(input_ids, mask_indices)
        assert isinstance(found, list)
        for blank, found_match in found:
            # the one-character reading of an open-ended blank: its fills as [BLANK]'s are
            match = (
                spanning_fills(self.lookup, found_match, blank.left, blank.right)
                if open_ended
                else found_match
            )
            if match is None:
                continue
            numbers = [number_of[blank.first + position] for position in range(blank.length)]
            run = Run.of([probabilities[number] for number in numbers], self.punctuation_ids)
            for position, number in enumerate(numbers):
                row = rows[number]  # (a new view object on every indexing: compare this one)
                # the corpus's punctuation where the user typed a character is its line
                # breaks, not a fill: the index proposes none (docs/INDEX.md, "Running text")
                mixed = combine_distribution(
                    row, match, FITTED_WEIGHT, position, self.punctuation_ids, run
                )
                if mixed is not row:
                    if rows is probabilities:
                        rows = probabilities.copy()  # never write into the model's array
                    if blank.length == 1 and self.ends_text(blank):
                        mixed = self.without_punctuation(mixed)
                    rows[number] = mixed
                    matches[number] = (match, position, numbers, run)
        if not matches:
            return MixedRows(probabilities)
        # the answer shown at each mask of a run (its mixed row's best), for its evidence below
        shown = {
            number: int(rows[number].argmax())
            for _, _, numbers, _ in matches.values()
            if len(numbers) > 1
            for number in numbers
        }

        def evidence(number: int, token_id: int) -> Memory:
            found = matches.get(number)
            if found is None:
                return None
            match, position, numbers, run = found
            kept = kept_fills(probabilities[number], match, position, self.punctuation_ids, run)
            # only what the index moved has evidence (combine.index_row, the same fills)
            counts = {fill: match.fills[fill] for fill in kept if fill[position] == token_id}
            if not counts:
                return None

            # of a run's fills, the passage that reads as the answer shows the run's other
            # masks first (画蛇添[MASK][MASK] answered 足悟 and showed 画蛇添足岂 for 足)
            def agrees(fill: tuple[int, ...]) -> int:
                pairs = enumerate(zip(fill, numbers, strict=True))
                return sum(t == shown[other] for p, (t, other) in pairs if p != position)

            best = max(counts, key=lambda fill: (agrees(fill), counts[fill]))
            return self.lookup.evidence(match, best)

        return MixedRows(rows, evidence)

    def ends_text(self, blank: Blank) -> bool:
        """A blank with nothing but the text's end after it (special tokens, no other mask)."""
        return all(t in self.lookup.stop_ids and t != self.mask_id for t in blank.right)

    def without_punctuation(self, row: np.ndarray) -> np.ndarray:
        """A text-final blank that the index holds evidence for: the user wants a character
        there, so punctuation is no fill; the rest is renormalised (docs/INDEX.md)."""
        rest = 1.0 - float(row[self.punctuation].sum())
        if rest <= 0.0:
            return row
        row = row / rest
        row[self.punctuation] = 0.0
        return row

    def ground(
        self,
        input_ids: Sequence[int],
        first: int,
        fill_ids: Sequence[int],
        model_score: float,
        best_model_score: float | None = None,
        joint_over: int | None = None,
        open_ended: bool = False,
    ) -> Grounding:
        if self.punctuation_ids.intersection(fill_ids):
            return Grounding(model_score, None)  # the corpus's line breaks are not a fill
        left = list(input_ids[:first])
        right = list(input_ids[first + len(fill_ids) :])
        if self.ends_passage(right) and self.runs_on(left, fill_ids):
            return Grounding(model_score, None)
        match = option_match(self.lookup, left, right, fill_ids, open_ended)
        length = len(fill_ids) if joint_over is None else joint_over
        if not supports(match, model_score, best_model_score, length, len(fill_ids)):
            return Grounding(model_score, None)
        assert match is not None
        score = combine_score(model_score, match, fill_ids)  # the rules held above
        return Grounding(score, self.lookup.evidence(match, fill_ids), model_share(match))

    def ends_passage(self, right: Sequence[int]) -> bool:
        """Nothing but punctuation and the text's end after a blank (no character, no mask)."""
        return all(
            t != self.mask_id and (t in self.lookup.stop_ids or t in self.punctuation_ids)
            for t in right
        )

    def runs_on(self, left: list[int], fill_ids: Sequence[int]) -> bool:
        """Whether a fill at the text's end runs on past where the corpus's passages end: after
        some first part of it, the corpus more often has punctuation than the fill's next token
        (守株待[BLANK] -> 兔亡机变: 守株待兔 is followed by ， or 。 in every passage but the one
        that reads 守株待兔亡机变). With nothing on the right to hold it, such a fill is one
        passage running on, not the answer, and the index does not ground it (docs/INDEX.md)."""
        while left and left[0] in self.lookup.stop_ids:  # [CLS] would hold passages' starts
            left = left[1:]
        ends = self.punctuation_ids | self.lookup.stop_ids
        for cut in range(1, len(fill_ids)):
            after = self.lookup.followers([*left, *fill_ids[:cut]])
            ended = sum(n for token, n in after.items() if token in ends)
            if ended > after.get(int(fill_ids[cut]), 0):
                return True
        return False

    def propose(self, input_ids: Sequence[int], first: int, length: int) -> list[list[int]]:
        left = list(input_ids[:first])
        right = list(input_ids[first + length :])
        match = self.lookup.lookup(left, right, length)
        if match is None:
            return []
        # a fill running across the corpus's punctuation (守株待[BLANK] -> 兔，白鹭) is no fill
        fills = [fill for fill in match.fills if not self.punctuation_ids.intersection(fill)]
        ranked = sorted(fills, key=lambda fill: (-match.fills[fill], fill))
        return [list(fill) for fill in ranked[:PROPOSALS]]

    def describe(self) -> dict[str, Any]:
        # no folder: /info's client is not the operator, and was shown the server's paths
        return {"name": self.name, **self.index.describe()}


@dataclass(frozen=True)
class MemoryChoice:
    """Which index a model uses and why: /info, the server log and ``tiankong predict``."""

    setting: str  # what was asked: auto, bundled, none or a folder
    memory: CorpusMemory | None
    reason: str

    def describe(self) -> dict[str, Any]:
        # a folder is named by its own name, as a model's folder is (``CorpusMemory.name``)
        setting = self.setting if self.setting in INDEX_KEYWORDS else "folder"
        info: dict[str, Any] = {"setting": setting, "used": self.used, "reason": self.reason}
        if self.memory is not None:
            info.update(self.memory.describe())
        return info

    @property
    def used(self) -> str:
        return self.memory.name if self.memory is not None else "none"


def check_index_setting(setting: str) -> str:
    """``auto``, ``bundled``, ``none`` or a folder path; a bad value is a BadOptionError."""
    if not isinstance(setting, str) or not setting.strip():
        raise BadOptionError("--index takes auto, bundled, none or an index folder.")
    return setting.strip()


def without_index(setting: str, model: ResolvedModel) -> str | None:
    """Why ``setting`` gives ``model`` no index, before anything loads (``choose_memory``'s
    rule; ``tiankong eval --compare-index`` asks it first), or None where it names one."""
    setting = check_index_setting(setting)
    if setting == "none":
        # not "no index was asked for": the warning to a request that asked for one read
        # "index was asked for, but ... no index was asked for" (a review)
        return "--index is none"
    if setting == "auto" and model.kind != "bundled":
        return (
            f"'{model.name}' is not a bundled model, so its own numbers are served; "
            "use --index bundled or --index DIR to ground it"
        )
    return None


def choose_memory(
    setting: str, model: ResolvedModel, tokenizer: Tokenizer, progress: bool = True
) -> MemoryChoice:
    """Open the index ``setting`` names for ``model`` (typed IndexUnavailableError if it
    can't be used); ``auto`` decides by the model's kind, as the module docstring says."""
    from tiankong.index.bundled import ensure_bundled_index

    setting = check_index_setting(setting)
    unused = without_index(setting, model)
    if unused is not None:
        return MemoryChoice(setting, None, unused)
    fingerprint = tokenizer_fingerprint(tokenizer)
    # a folder by its path: its name alone was read as a hub id (offline: exit 3)
    given = model.name if model.kind in ("bundled", "hub") else str(model.path)
    rebuild = (
        "build one for it with `tiankong index build FILES -o DIR --model "
        f"{shlex.quote(given)}` and pass --index DIR"
    )
    if setting in ("auto", "bundled"):
        try:
            index = CorpusIndex.open(ensure_bundled_index(progress=progress), fingerprint)
        except IndexTokenizerMismatchError:
            raise IndexTokenizerMismatchError(
                f"The bundled index reads its text with bert-base-chinese's tokenizer, and "
                f"model '{model.name}' reads text differently (another vocabulary, or letters "
                f"lower-cased); {rebuild}."
            ) from None
        why = "a bundled model uses the bundled index" if setting == "auto" else "asked for"
        return MemoryChoice(setting, CorpusMemory(index, "bundled", tokenizer), why)
    try:
        index = CorpusIndex.open(Path(setting).expanduser(), fingerprint)
        check_recorded_sources(index.folder, index.manifest)  # a user's corpus, edited since
    except IndexTokenizerMismatchError:
        raise IndexTokenizerMismatchError(
            f"The index {setting} was built with another tokenizer than model '{model.name}' "
            f"reads text with (another vocabulary, or letters lower-cased); {rebuild}."
        ) from None
    # the folder's own name, as a model's folder is named: /info showed its whole path
    name = index.folder.resolve().name or "index"
    return MemoryChoice(setting, CorpusMemory(index, name, tokenizer), "asked for")
