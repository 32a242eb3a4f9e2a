"""Proofreading (校对): find wrong characters and propose the fix, with the model and the index.

The task's three steps, over the masker's shared parts (tokenizer, engine, corpus index):

1. **prepare** (``request.prepare_check``): validate, take the form to check (``checked_form``:
   traditional or variant characters in standard simplified), tokenize with character offsets,
   cut into windows; the checkable positions are the Han characters.
2. **forward**, two passes for any number of texts, each through the ``RowScorer`` it is given
   (the library's scores on the calling thread, the server's through its batcher):
   * one *unmasked* row per window, read at every checkable position, scored one engine
     call's windows at a time (``FillMasker.call_slices``) so that only one call's
     distributions are held while they are read. A character is a
     *suspect* when the model gives one of its confusion-set characters (same sound or shape)
     at least ``suspect_ratio`` times its own probability there; the ``suspects`` likeliest
     per window are kept, and every position where a four-character window is one character
     off an idiom (``idioms.IdiomLexicon``) is added;
   * one *masked* row per suspect: the model's distribution with the character hidden.
   Meanwhile, on the check's lookup thread, the corpus index looks each position up with its
   character as a blank (``BlankLookup.lookup``; ``may_match`` skips the hopeless ones).
3. **decode**: a position gets at most one edit, the first rule that gives one:
   * *index*: the index matched at least ``index_context`` tokens around it, the written
     character occurs there at most 1/``index_ratio`` as often as another one (never, for a
     memorised line with one character off), the other character being in the confusion set
     (or any character once the context is ``index_any_context`` tokens long, when that is
     on: off by default, its edits were edition variants, 春风又绿 → 自); a context of
     ``index_short_context`` counts when the masked model agrees (``index_model_ratio``), and
     the match holds the text's context on both sides where it has some
     (``index_both_sides``). The index's evidence is the edit's ``memory`` (出处);
   * *idioms*: a known misspelling of an idiom (画龙点晴), or a window one character off an
     idiom when the masked model prefers the idiom's character by ``idiom_model_ratio`` (300:
     死新搭地 -> 心, 666x), or gives a confusable of the written one a share of its probability
     (``idiom_confusable_ratio``);
   * *model*: the masked model gives a confusion-set character at least ``min_ratio`` times
     the written one's probability, and at least ``min_probability``.
   The thresholds were chosen for precision on the dev split (docs/PROOFREADING.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from tiankong.core.beam_search import RowScorer
from tiankong.core.decoding import is_han
from tiankong.core.script import between, has_han, memory_in, neighbours_traditional
from tiankong.core.text import has_blank
from tiankong.errors import BadOptionError, each_text
from tiankong.host import process_thread
from tiankong.index.grounding import CorpusMemory
from tiankong.service import FillMasker
from tiankong.tasks.check.confusion import ConfusionSets
from tiankong.tasks.check.idioms import IdiomLexicon
from tiankong.tasks.check.request import (
    CheckRequest,
    Window,
    fold_radicals,
    prepare_check,
    radical_table,
)
from tiankong.tasks.check.results import Alternative, CheckResult, Edit, apply_edits

ALTERNATIVES = 3  # other characters listed with an edit
LOOKUP_WINDOWS = 8  # a check's windows looked up in one turn of the lookup thread
NO_HAN_TO_CHECK = "The text has no Chinese (Han) character: only Chinese characters are checked."
BLANK_IN_CHECK = (
    "The text has a blank ([MASK] or [BLANK]): proofreading checks the characters as typed "
    "and leaves a blank alone; to fill it, use predict (POST /predict, the page's 单字 mode)."
)


NOTHING_CHECKED = (
    "None of the text's Chinese characters is one the model reads (each is outside its "
    "vocabulary), so nothing was checked."
)
SOME_UNREAD = (
    "Some of the text's Chinese characters are outside the model's vocabulary, so they were "
    "not checked."
)
# fixes in a sentence whose other suspects were passed over (``suspects``) from which its
# answer says more may remain (MORE_MAY_REMAIN): one, chosen on check_dev (two sentences warned,
# both still wrong after their fixes; at two or three fixes none was). Three left a review's
# sentence of seven typos with two fixes, unsaid, its 我门 fixed once and left twice
CROWDED_EDITS = 1
MORE_MAY_REMAIN = (
    "A sentence had more suspect characters than one check looks at; check it again once "
    "its fixes are accepted, as more may remain."
)


def check_warnings(text: str, checked: int, crowded: bool = False) -> list[str]:
    """What a check's answer says besides its edits: no Chinese character to check, none the
    model reads (𠮷𠮷 came back clean with no word: ``checked``, the characters checked, was
    0), a fill blank typed where the text is proofread (守株待[MASK] came back "no errors
    found"), or (``crowded``) a sentence with ``CROWDED_EDITS`` fixes or more whose other
    suspects were passed over, where more may remain (a review's sentence of seven typos:
    three fixed, then "every fix accepted")."""
    warnings = [] if has_han(text) else [NO_HAN_TO_CHECK]
    if not warnings and not checked:
        warnings.append(NOTHING_CHECKED)
    elif not warnings and checked < sum(map(is_han, text)):
        # a model of a small vocabulary checked 5 of 15 and said "no errors found" (a review)
        warnings.append(SOME_UNREAD)
    if has_blank(text):
        warnings.append(BLANK_IN_CHECK)
    if crowded:
        warnings.append(MORE_MAY_REMAIN)
    return warnings


@dataclass(frozen=True)
class CheckMethod:
    """The proofreader's knobs; the defaults are the ones measured in docs/PROOFREADING.md."""

    detect: str = "unmasked"  # "unmasked": one row picks the suspects; "masked": every one
    suspects: int = 4  # most masked rows per window (besides idiom positions)
    suspect_ratio: float = 1e-3
    min_ratio: float = 100.0
    min_probability: float = 0.05
    use_index: bool = True
    index_context: int = 4
    # any character, not only a confusion-set one, once the context is this long (0: never).
    # Off: at 8 its edits on the dev split were 0 right and 2 wrong, all edition variants of a
    # poem line (docs/PROOFREADING.md)
    index_any_context: int = 0
    index_ratio: float = 3.0  # >0: also when the written one occurs, this many times rarer
    # the match holds some of the text's context on each side that has Han characters
    # (BlankMatch.sides; a matched punctuation mark counts):
    # a context on one side only (，大家都 for 吃鱼，大家都) made 吃语 of a right sentence.
    # On the dev split: false alarms 5.1% -> 2.8%, correction F1 0.538 -> 0.533
    index_both_sides: bool = True
    # a mark (，。；！？、) right next to the character matches any of them in the corpus
    # (BlankLookup.lookup's edge_marks; 地上箱， against 床前明月光's 地上霜。). Dev: no sentence
    # changed; test: 1 wrong -> right, false alarms the same (docs/PROOFREADING.md)
    index_edge_marks: bool = True
    # a shorter context (an idiom's three other characters) counts when the masked model
    # also prefers the index's character over the written one by this factor (0: never)
    index_short_context: int = 3
    index_model_ratio: float = 1.0
    # where the model did not suspect the character (no masked row), the index needs a match
    # of this many context tokens, or of the text's whole sentence (天涯若比林), 0: no more
    # than any index edit: a passage of older vernacular, 着他悄悄的走了罢, made 的 of a right
    # 地 at score 1.00 in 她悄悄地走了出去 (docs/PROOFREADING.md)
    index_unsuspected_context: int = 8
    # a four-character window one character off an idiom (tasks/check/idioms.py) is fixed
    # when the masked model prefers the idiom's character by this factor (0: no lexicon).
    # At 1.0 a character outside the confusion sets turned sense around (一丝不拘 was made
    # 一丝不挂, 令人不齿 令人切齿, at 14-22x and 3-7x). Dev split, GPU-trained model: 1, 3, 10,
    # 30, 100 and 300 the same figures (F1 0.751 at 0.6% false alarms), 1000 F1 0.750 (死新搭地
    # -> 心 lost: 新/心 are in no confusion set); 300 is the largest with dev's best
    idiom_model_ratio: float = 300.0
    # ... or by this factor when the idiom's character is a confusable of the written one
    # (same sound or shape: 亡羊补劳 -> 牢), the commonest way an idiom is mistyped. Dev split,
    # GPU-trained model: 1.0 F1 0.724, 0.3 0.732, 0.1 0.750, 0.03 and 0.01 0.754, false alarms
    # 0.6% at each; 0.1 is the largest within one item of the best (docs/PROOFREADING.md)
    idiom_confusable_ratio: float = 0.1

    def validated(self) -> CheckMethod:
        """The method as given, or a ``BadOptionError`` naming the first knob out of range (a
        negative ratio or a fractional count was taken, and quietly changed what was fixed)."""
        if self.detect not in ("unmasked", "masked"):
            raise BadOptionError("detect takes unmasked or masked.")
        for name, value in vars(self).items():
            kind = type(getattr(CheckMethod, name))
            if kind is bool and not isinstance(value, bool):
                raise BadOptionError(f"{name} must be true or false, not {value!r}.")
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadOptionError(f"{name} must be a whole number, not {value!r}.")
            if kind is float and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise BadOptionError(f"{name} must be a number, not {value!r}.")
        if self.suspects < 1 or self.index_context < 1 or self.min_ratio <= 0:
            raise BadOptionError("suspects, index_context and min_ratio must be positive.")
        if not (self.suspect_ratio > 0 and 0 <= self.min_probability <= 1):
            raise BadOptionError("suspect_ratio must be positive, min_probability from 0 to 1.")
        unsigned = (
            "index_any_context", "index_ratio", "index_short_context", "index_model_ratio",
            "index_unsuspected_context", "idiom_model_ratio", "idiom_confusable_ratio",
        )  # fmt: skip
        for name in unsigned:
            if getattr(self, name) < 0:
                raise BadOptionError(f"{name} must be 0 or more, not {getattr(self, name)!r}.")
        return self


@dataclass(frozen=True)
class Suspect:
    window: int  # the window's number in the request
    slot: int  # the position's number in that window


# Han characters an index match must read past a known misspelling's four to hold it as
# written: a quotation of the older text, not one character that happens to match
QUOTED = 2

# slot -> the idioms a four-character window is one character off there: (the idiom's token
# id at the slot, the idiom, whether the window is a known misspelling of it)
Near = dict[int, list[tuple[int, str, bool]]]


def idiom_run(chars: str, slot: int, suggestion: str, idiom: str) -> range:
    """The slots of the four characters that ``suggestion`` at ``slot`` makes ``idiom``."""
    for first in range(max(0, slot - len(idiom) + 1), slot + 1):
        end = first + len(idiom)
        if end <= len(chars) and chars[first:slot] + suggestion + chars[slot + 1 : end] == idiom:
            return range(first, end)
    return range(slot, slot + 1)


class Proofreader:
    """Check Chinese text for wrong characters with a ``FillMasker``'s model and index.

    >>> checker = Proofreader(FillMasker.load())                        # doctest: +SKIP
    >>> checker.check("画龙点晴").corrected                             # doctest: +SKIP
    '画龙点睛'
    """

    # a request over the server's cost cap (``core.task.Task``; ``serving/tasks.py``)
    over_cost = (
        "Checking this would cost {cost:,} forward rows, over this server's limit of {cap:,} "
        "(max_request_cost); send shorter or fewer texts."
    )
    less_work = "shorter or fewer texts"

    def __init__(
        self,
        masker: FillMasker,
        method: CheckMethod | None = None,
        confusion: ConfusionSets | None = None,
        idioms: IdiomLexicon | None = None,
    ) -> None:
        if not isinstance(masker, FillMasker):  # None was a bare AttributeError
            raise BadOptionError(
                f"Proofreader takes a loaded FillMasker (FillMasker.load()), not "
                f"{type(masker).__name__}."
            )
        given = (("method", method, CheckMethod), ("confusion", confusion, ConfusionSets))
        for name, value, kind in (*given, ("idioms", idioms, IdiomLexicon)):
            if value is not None and not isinstance(value, kind):  # a str was an AttributeError
                article = "an" if kind.__name__[0] in "AEIOU" else "a"
                raise BadOptionError(
                    f"Proofreader's {name} is {article} {kind.__name__} (or None for the "
                    f"default), not {type(value).__name__}."
                )
        self.masker = masker
        self.method = (method or CheckMethod()).validated()
        self.confusion = confusion or ConfusionSets.shipped()
        self.idioms = idioms or (IdiomLexicon.bundled() if self.method.idiom_model_ratio else None)
        self.memory: CorpusMemory | None = masker.index.memory if self.method.use_index else None
        self.id_to_char: Callable[[int], str] = masker.encoder.token_string

    @cached_property
    def candidates(self) -> dict[int, tuple[int, ...]]:
        """Token id -> its confusion-set characters' token ids."""
        return self.confusion.token_candidates(self.masker.encoder.vocab)

    def prepare(self, text: object) -> CheckRequest:
        return prepare_check(text, self.masker.encoder, self.masker.settings.max_check_chars)

    def forward_rows(self, request: CheckRequest) -> int:
        """The engine work ``run`` does for ``request`` at most, in forward rows: one unmasked
        row per window and a masked row per suspect (the server's cost cap counts it)."""
        if self.method.detect == "masked":
            return request.positions
        return sum(
            1 + min(len(window.positions), self.method.suspects + len(self.near_idioms(window)))
            for window in request.windows
        )

    def check(self, text: str) -> CheckResult:
        return self.run([self.prepare(text)])[0]

    def check_batch(self, texts: Sequence[str]) -> list[CheckResult]:
        return self.run(each_text(texts, self.prepare, "check"))

    def run(
        self, requests: Sequence[CheckRequest], score_rows: RowScorer | None = None
    ) -> list[CheckResult]:
        """Every request's result, in order: the two passes for all of them together, through
        ``score_rows`` (default: the masker's, on this thread; every call cut into engine calls
        at the batch limits): the unmasked rows one engine call's worth at a time, then the
        suspects' masked rows in one call."""
        started = time.perf_counter()
        score = score_rows or self.masker.score_rows
        windows = [window for request in requests for window in request.windows]
        # a server's step scorer can say its request has gone (``StepScorer.check`` raises)
        looked_up = self.start_lookups(windows, getattr(score, "check", None))
        near = [self.near_idioms(window) for window in windows]
        suspects, passed_over = self.find_suspects(windows, near, score)
        masked = self.score_masked(windows, suspects, score, near)
        found = looked_up()
        edits = [
            self.decide(window, masked.get(number, {}), found[number], near[number])
            for number, window in enumerate(windows)
        ]
        latency = (time.perf_counter() - started) * 1000 / max(1, len(requests))
        results, number = [], 0
        for request in requests:
            its = edits[number : number + len(request.windows)]
            mine = [
                typed
                for window_edits in its
                for edit in window_edits
                if (typed := in_typed_script(edit, request)) is not None
            ]
            mine = sorted([*mine, *radical_edits(request, mine)], key=lambda e: e.start)
            crowded = any(
                number + k in passed_over and len(window_edits) >= CROWDED_EDITS
                for k, window_edits in enumerate(its)
            )
            number += len(request.windows)
            results.append(
                CheckResult(
                    request.text,
                    apply_edits(request.text, mine),
                    mine,
                    self.masker.model.name,
                    round(latency, 2),
                    # a radical is checked as its character: ⼀ alone was "no Chinese"
                    check_warnings(fold_radicals(request.text), request.checked, crowded),
                    request.checked,
                )
            )
        return results

    def near_idioms(self, window: Window) -> Near:
        """slot -> [(the idiom's token id, the idiom, whether the window is a known
        misspelling)] where a four-character window is one character off an idiom: several
        where it is one off several at that slot (再接再厉, 再接再砺; ``decide`` asks the model),
        those of the first such window."""
        if self.idioms is None:
            return {}
        vocab = self.masker.encoder.vocab
        near: Near = {}
        for first in window.runs(4):
            chars = window.chars[first : first + 4]
            known = self.idioms.known_misspelling(chars)
            found: Near = {}
            for offset, char, idiom in [known] if known else self.idioms.near(chars):
                if char in vocab:
                    found.setdefault(first + offset, []).append(
                        (vocab[char], idiom, known is not None)
                    )
            for slot, options in found.items():
                near.setdefault(slot, options)
        return near

    def in_idioms(self, window: Window) -> set[int]:
        """The slots inside a four-character run that is a known idiom as written (来龙去脉,
        亡羊补牢): the model made 亡羊不牢 of one, and the one-off rule 来说去脉 of another,
        whose 说来龙去 is one character off 说来说去."""
        if self.idioms is None:
            return set()
        return {
            first + offset
            for first in window.runs(4)
            if self.idioms.as_written(window.chars[first : first + 4])
            for offset in range(4)
        }

    def find_suspects(
        self,
        windows: Sequence[Window],
        near: Sequence[Near],
        score: RowScorer,
    ) -> tuple[list[Suspect], set[int]]:
        """The suspects of every window, and the windows whose suspects beyond ``suspects``
        were passed over (``ranked_suspects``)."""
        if self.method.detect == "masked":
            return [
                Suspect(number, slot)
                for number, window in enumerate(windows)
                for slot in range(len(window.positions))
                if owns(window, slot)
                and (
                    window.input_ids[window.positions[slot]] in self.candidates
                    or slot in near[number]
                )
            ], set()
        read = [(n, w) for n, w in enumerate(windows) if w.positions]
        rows, asked = [w.input_ids for _, w in read], [w.positions for _, w in read]
        suspects: list[Suspect] = []
        passed_over: set[int] = set()
        # one engine call's windows at a time: each window asks for every checkable character's
        # distribution, and only a few of each row's probabilities are read
        for start, end in self.masker.call_slices(rows, asked):
            scored = score(rows[start:end], asked[start:end])
            for (number, window), row in zip(read[start:end], scored, strict=True):
                ranked = self.ranked_suspects(window, row)
                # an idiom's position is masked anyway: past the first few it passes nothing
                # over (a sentence of five idiom typos, all five fixed, said more may remain)
                if any(slot not in near[number] for slot in ranked[self.method.suspects :]):
                    passed_over.add(number)
                chosen = set(ranked[: self.method.suspects]) | set(near[number])
                suspects += [Suspect(number, slot) for slot in sorted(chosen) if owns(window, slot)]
        return suspects, passed_over

    def likeliest_suspects(self, window: Window, row: np.ndarray) -> set[int]:
        """The ``suspects`` slots of ``window`` that ``ranked_suspects`` ranks first."""
        return set(self.ranked_suspects(window, row)[: self.method.suspects])

    def ranked_suspects(self, window: Window, row: np.ndarray) -> list[int]:
        """The slots of ``window`` where the unmasked ``row`` gives a confusion-set character
        at least ``suspect_ratio`` times the written one, the highest ratio first."""
        ranked: list[tuple[float, int]] = []
        for slot, position in enumerate(window.positions):
            token = window.input_ids[position]
            others = self.candidates.get(token)
            if not others or not owns(window, slot):  # the overlapping window's to pick
                continue
            ratio = float(row[slot, list(others)].max()) / max(float(row[slot, token]), 1e-12)
            if ratio >= self.method.suspect_ratio:
                ranked.append((ratio, slot))
        ranked.sort(reverse=True)
        return [slot for _, slot in ranked]

    def score_masked(
        self,
        windows: Sequence[Window],
        suspects: Sequence[Suspect],
        score: RowScorer,
        near: Sequence[Near] = (),
    ) -> dict[int, dict[int, np.ndarray]]:
        """window number -> slot -> the masked distribution at that position. A position one
        character off an idiom is masked with the window's other positions off the same idiom:
        the model copied one typo into the other (亡羊补劳，亡羊补劳。 had its second 劳 fixed,
        他们再接再励，我们也再接再励。 neither). A position off another idiom stays as context (a
        review: masked too, 专心至志 beside 守株待免 lost 免's fix), and so does a suspect of the
        same character (masked too, 博得's right 得 beside a wrong one lost its fix; 我门…我门
        is still left: the unmasked row's ratios, 0.04 and 0.02 for the two 门, 0.014 and
        0.003 for the wrong 得 and 博得's, tell no repeated typo from a right copy)."""
        if not suspects:
            return {}
        mask_id = self.masker.encoder.mask_id
        rows, asked = [], []
        for suspect in suspects:
            window = windows[suspect.window]
            position = window.positions[suspect.slot]
            row = list(window.input_ids)
            idiom_slots = near[suspect.window] if near else {}
            idioms = {idiom for _, idiom, _ in idiom_slots.get(suspect.slot, ())}
            for slot, options in idiom_slots.items():  # the same idiom, off again
                if idioms & {idiom for _, idiom, _ in options}:
                    row[window.positions[slot]] = mask_id
            row[position] = mask_id
            rows.append(row)
            asked.append([position])
        masked: dict[int, dict[int, np.ndarray]] = {}
        for suspect, probabilities in zip(suspects, score(rows, asked), strict=True):
            masked.setdefault(suspect.window, {})[suspect.slot] = probabilities[0]
        return masked

    def start_lookups(
        self, windows: Sequence[Window], still_wanted: Callable[[], None] | None = None
    ) -> Callable[[], list[dict[int, Any]]]:
        """The index's match for every checkable position, on the check's lookup thread
        (beside the forward passes); window number -> slot -> BlankMatch. ``still_wanted`` is
        called before each window and raises once the request is gone or past its deadline, so
        its lookups stop with it instead of holding the thread for the checks queued behind."""
        memory = self.memory
        if memory is None:
            return lambda: [{} for _ in windows]

        # ， next to the blank matches the corpus's 。 there (地上箱，举头 -> 地上霜。举头)
        edge_marks = memory.lookup.edge_marks if self.method.index_edge_marks else frozenset()

        found: list[dict[int, Any]] = [{} for _ in windows]
        done = threading.Event()
        failed: list[BaseException] = []

        def find(start: int) -> None:
            """Windows ``start`` to ``start + LOOKUP_WINDOWS``, then the next piece queued at the
            back of the thread's queue, behind what other checks queued meanwhile: a
            one-sentence /check behind a /batch_check of 64 long texts waited 27 s for all of
            that request's lookups, on the one thread."""
            try:
                for number in range(start, min(start + LOOKUP_WINDOWS, len(windows))):
                    if still_wanted is not None:
                        still_wanted()
                    found[number] = self.window_matches(memory, windows[number], edge_marks)
                if start + LOOKUP_WINDOWS < len(windows):
                    self.lookup_thread.submit(find, start + LOOKUP_WINDOWS)
                    return
            except BaseException as error:  # the request went, or the thread shut down
                failed.append(error)
            done.set()

        def result() -> list[dict[int, Any]]:
            done.wait()
            if failed:
                raise failed[0]
            return found

        if windows:
            self.lookup_thread.submit(find, 0)
        else:
            done.set()
        return result

    def window_matches(
        self, memory: CorpusMemory, window: Window, edge_marks: frozenset[int]
    ) -> dict[int, Any]:
        """slot -> the index's match there, for the slots whose context the index may hold."""
        ids = window.input_ids
        matches = {}
        for slot, position in enumerate(window.positions):
            if not self.may_match(memory, ids, position):
                continue
            match = memory.lookup.lookup(ids[:position], ids[position + 1 :], 1, edge_marks)
            if match is not None and match.context_length >= self.shortest_context:
                matches[slot] = match
            # the GIL, handed over after each lookup: the event loop's thread waited up to the
            # 5 ms switch interval each time it asked, and a plain request that came in beside
            # a /batch_check of 64 texts took 300-480 ms
            time.sleep(0)
        return matches

    def may_match(self, memory: CorpusMemory, ids: list[int], position: int) -> bool:
        """A cheap filter before a lookup (a few binary searches instead of one lookup's
        enumeration): a context of ``index_context`` tokens or more around ``position`` has at
        least ``index_context - 1`` of them on one side (but for a split down the middle), so
        when neither side's ``index_context - 1`` tokens occur in the index, the lookup can't
        give an edit. (The split case, two and two, is left out: measured in PROOFREADING.md.)"""
        side = max(1, self.shortest_context - 1)
        left = ids[max(1, position - side) : position]
        right = ids[position + 1 : position + 1 + side]
        index = memory.index
        return (len(left) == side and index.count(left) > 0) or (
            len(right) == side
            and right[-1] != self.masker.encoder.sep_id
            and index.count(right) > 0
        )

    @property
    def lookup_thread(self) -> ThreadPoolExecutor:
        """The check's own lookup thread (a long text's lookups never hold up /predict's), one
        per process, a forked one too."""
        return process_thread(self, "tiankong-check-index")

    @property
    def shortest_context(self) -> int:
        method = self.method
        if method.index_model_ratio > 0:
            return min(method.index_context, method.index_short_context)
        return method.index_context

    def decide(
        self,
        window: Window,
        masked: dict[int, np.ndarray],
        matches: dict[int, Any],
        near: Near,
    ) -> list[Edit]:
        edits = []
        attested = self.in_idioms(window)
        for slot in sorted(set(masked) | set(matches)):
            if slot in attested:  # 亡羊补牢 as written: no rule may break a known idiom
                continue
            if not owns(window, slot):
                continue  # the overlapping window's to edit (request.windows_of)
            if (
                slot in matches
                and self.index_confirms(window, slot, matches[slot])
                and not self.only_the_misspelling(window, slot, matches[slot], near.get(slot))
            ):
                continue  # 月落乌啼霜满天: the corpus holds 霜 there, so the model's 雨 is wrong
            edit = (
                self.index_edit(window, slot, matches[slot], masked.get(slot))
                if slot in matches
                else None
            )
            if edit is None and slot in near and slot in masked:
                row = masked[slot]
                # one off several idioms here (再接再厉, 再接再砺): the one the model likes best,
                # of those whose character is a confusable of the written one where there are
                # some (一丝不狗: 苟, the same sound, not 一丝不挂's 挂, which the model liked)
                written = window.input_ids[window.positions[slot]]
                alike = self.candidates.get(written, ())
                options = [o for o in near[slot] if o[0] in alike] or near[slot]
                option = max(options, key=lambda near_idiom: float(row[near_idiom[0]]))
                edit = self.idiom_edit(window, slot, option, row, matches.get(slot), options)
            if edit is None and slot in masked:
                edit = self.model_edit(window, slot, masked[slot])
            if edit is not None:
                edits.append(edit)
        return self.confirmed(window, self.idiom_repeats(window, edits, near), near, matches)

    def idiom_repeats(self, window: Window, edits: list[Edit], near: Near) -> list[Edit]:
        """``edits``, and where a fix made an idiom of four characters one off it (by any rule),
        the same fix at each other place the same four characters are written: 守株待免的人和守
        株待免的事。 had the first fixed and the second left, with no word (a review). The same
        four characters are the same word, mistyped the same way; the copy is the idioms
        rule's, with the first fix's score and 出处."""
        done = {window.slot_of(edit.start) for edit in edits}
        added: list[Edit] = []
        for edit in edits:
            slot = window.slot_of(edit.start)
            made = {i for t, i, _ in near.get(slot, ()) if self.id_to_char(t) == edit.suggestion}
            for idiom in sorted(made):
                written = [
                    window.chars[s] for s in idiom_run(window.chars, slot, edit.suggestion, idiom)
                ]
                for other, options in near.items():
                    tokens = [t for t, i, _ in options if i == idiom]
                    if other in done or not tokens:
                        continue
                    again = idiom_run(window.chars, other, edit.suggestion, idiom)
                    if [window.chars[s] for s in again] == written:
                        added.append(
                            self.edit(
                                window, other, tokens[0], edit.score, edit.alternatives,
                                edit.memory, "idioms",
                            )
                        )  # fmt: skip
                        done.add(other)
        return sorted([*edits, *added], key=lambda edit: edit.start)

    def confirmed(
        self,
        window: Window,
        edits: list[Edit],
        near: Near,
        matches: dict[int, Any],
    ) -> list[Edit]:
        """A fix with evidence holds the characters its evidence reads as written: an idiom's
        four, the corpus match's context. The model may not edit one of them (亡羊补劳 was
        fixed to 亡羊不牢: the model's 补 -> 不 beside 劳 -> 牢, whose 出处 reads 亡羊补牢). An
        idiom's four, and the other three of a known misspelling's, hold against the index's
        edits too (一厢情原 became 一相情愿: the index's 厢 -> 相, from the list's own misspelt
        entry 一相情原, beside 原 -> 愿)."""
        held: set[int] = set()  # against the model's edits
        idiom_held: set[int] = set()  # against the index's too
        for slot, options in near.items():
            for token, idiom, known in options:
                if known:  # a known misspelling (一厢情原): only its one character is wrong
                    others = set(idiom_run(window.chars, slot, self.id_to_char(token), idiom))
                    held |= others - {slot}
                    idiom_held |= others - {slot}
        for edit in edits:
            slot = window.slot_of(edit.start)
            if edit.source == "idioms":
                [idiom] = [i for t, i, _ in near[slot] if self.id_to_char(t) == edit.suggestion]
                run = set(idiom_run(window.chars, slot, edit.suggestion, idiom))
                held |= run
                idiom_held |= run - {slot}
            elif edit.source == "index":
                match, at = matches[slot], window.positions[slot]
                low, high = at - len(match.left), at + len(match.right)
                held |= {other for other, p in enumerate(window.positions) if low <= p <= high}
        return [
            edit
            for edit in edits
            if not (edit.source == "model" and window.slot_of(edit.start) in held)
            and not (edit.source == "index" and window.slot_of(edit.start) in idiom_held)
        ]

    def index_confirms(self, window: Window, slot: int, match: Any) -> bool:
        """Whether the index holds the character as written at ``slot``: a match of
        ``index_context`` or more characters, with context on both sides, where the written
        character is the commonest fill. No rule edits such a character (a famous line, 月落乌啼
        霜满天, was fixed to 雨 by the model while the index matched ten characters around 霜)."""
        if match.context_length < self.method.index_context or not all(match.sides):
            return False
        written = written_count(match, window.input_ids[window.positions[slot]])
        return written > 0 and written >= max(match.fills.values())

    def only_the_misspelling(
        self,
        window: Window,
        slot: int,
        match: Any,
        options: list[tuple[int, str, bool]] | None,
    ) -> bool:
        """Whether the index's match for the written character at ``slot`` reads fewer than
        ``QUOTED`` Han characters outside a known misspelling's four (a mark beside them may
        count): then it attests an older spelling (中庸's 半涂而废, a classical passage's 道听涂
        说), not the user's sentence, and the list's fix stands. 他做事半涂而废，让人失望。 was "no
        errors found", where without the comma it was fixed, and one character more that
        happened to match (流言蜚语，道听涂说 against the corpus's 狂言诈语，道听涂说) held it too
        (a review); a quotation that goes on past the four (君子遵道而行，半涂而废) is confirmed
        as written."""
        known = [(token, idiom) for token, idiom, is_known in options or () if is_known]
        if not known:
            return False
        token, idiom = known[0]
        run = set(idiom_run(window.chars, slot, self.id_to_char(token), idiom))
        at = window.positions[slot]
        low, high = at - len(match.left), at + len(match.right)
        read = {other for other, p in enumerate(window.positions) if low <= p <= high}
        return len(read - run) < QUOTED

    def index_edit(
        self, window: Window, slot: int, match: Any, row: np.ndarray | None
    ) -> Edit | None:
        if self.method.index_both_sides and not all(match.sides):
            return None
        if all(match.contradicted):
            # its passages read on otherwise on both sides: no evidence by the index's own rule
            # (``holds_evidence``), and it was shown as the 出处 of a fix at 100%: 高兴得合不拢嘴
            # -> 地 from 比喻高兴地合不上嘴 (a review)
            return None
        if (
            row is None
            and match.context_length < self.method.index_unsuspected_context
            and not match.whole
        ):
            return None
        token = window.input_ids[window.positions[slot]]
        short = match.context_length < self.method.index_context
        written = written_count(match, token)
        if written and not self.method.index_ratio:
            return None
        others = self.candidates.get(token, ())
        ranked = sorted(match.fills.items(), key=lambda item: (-item[1], item[0]))
        commonest = ranked[0][1]
        for fill, count in ranked:
            suggestion = fill[0]
            if suggestion == token or count < self.method.index_ratio * written:
                continue
            if count < commonest:
                break  # the index holds another character there more often (不可胜计 -> 纪, 0.17)
            if short and (
                row is None
                or row[suggestion] < self.method.index_model_ratio * max(row[token], 1e-12)
            ):
                continue
            any_context = self.method.index_any_context
            if suggestion in others or 0 < any_context <= match.context_length:
                assert self.memory is not None
                evidence = self.memory.lookup.evidence(match, fill)
                alternatives = [
                    Alternative(self.id_to_char(other[0]), round(match.probability(other), 4))
                    for other, _ in ranked
                    if other not in (fill, (token,))  # not the written one (守株待免: 免)
                ][:ALTERNATIVES]
                return self.edit(
                    window,
                    slot,
                    suggestion,
                    match.probability(fill),
                    alternatives,
                    evidence,
                    "index",
                )
        return None

    def idiom_edit(
        self,
        window: Window,
        slot: int,
        near: tuple[int, str, bool],
        row: np.ndarray,
        match: Any,
        weighed: Sequence[tuple[int, str, bool]] = (),
    ) -> Edit | None:
        """The fix to ``near``'s idiom. ``weighed``: the idioms one character off here that it
        was chosen from; the others are its alternatives, and their model scores count against
        its own (一丝不荀: 荀 is a confusable of neither 苟 nor 挂, and 一丝不挂 was the one
        fix, at 0.9999, with no 一丝不苟 offered)."""
        token = window.input_ids[window.positions[slot]]
        suggestion, idiom, known = near
        original = max(float(row[token]), 1e-12)
        confusable = suggestion in self.candidates.get(token, ())
        ratio = (
            min(self.method.idiom_model_ratio, self.method.idiom_confusable_ratio)
            if confusable
            else self.method.idiom_model_ratio
        )
        if not known and float(row[suggestion]) < ratio * original:
            return None
        run = idiom_run(window.chars, slot, self.id_to_char(suggestion), idiom)
        if not known and glued(window, slot, run):
            # the character ends the four and a Han character follows (or it begins them and
            # one precedes): it may be the next word's (我们一点半开会 was made 一点半点会, 开会);
            # then only a confusable character, or one the index holds there, is a fix
            grounded = (
                match is not None and all(match.sides) and match.fills.get((suggestion,), 0) > 0
            )
            if not confusable and not grounded:
                return None
        evidence = None
        if match is not None and self.memory is not None:
            if not known and match.fills.get((suggestion,), 0) < match.fills.get((token,), 0):
                return None  # the index has the written form more often
            evidence = self.memory.lookup.evidence(match, (suggestion,))
            if evidence is not None and idiom not in str(evidence["example"]):
                evidence = None  # 好景不常在 -> 长 quoted 算好春长在，好花长见: not the idiom
        memory = evidence or {"count": 1, "match": idiom, "example": idiom}
        others = sorted(
            {other for other, _, _ in weighed if other not in (suggestion, token)},
            key=lambda other: (-float(row[other]), other),
        )
        # each a share of the written character's score and the idioms' (one idiom: as before)
        total = original + float(row[suggestion]) + sum(float(row[other]) for other in others)
        score = 1.0 if known else float(row[suggestion]) / total
        alternatives = [
            Alternative(self.id_to_char(other), round(float(row[other]) / total, 4))
            for other in others[:ALTERNATIVES]
        ]
        return self.edit(window, slot, suggestion, score, alternatives, memory, "idioms")

    def model_edit(self, window: Window, slot: int, row: np.ndarray) -> Edit | None:
        token = window.input_ids[window.positions[slot]]
        others = self.candidates.get(token)
        if not others:
            return None
        original = max(float(row[token]), 1e-12)
        scores = row[list(others)]
        order = np.argsort(-scores)
        best = float(scores[order[0]])
        if best < self.method.min_probability or best / original < self.method.min_ratio:
            return None
        alternatives = [
            Alternative(
                self.id_to_char(others[i]), round(float(scores[i] / (scores[i] + original)), 4)
            )
            for i in order[1 : 1 + ALTERNATIVES]
        ]
        return self.edit(
            window, slot, others[order[0]], best / (best + original), alternatives, None, "model"
        )

    def edit(
        self,
        window: Window,
        slot: int,
        suggestion: int,
        score: float,
        alternatives: list[Alternative],
        memory: Any,
        source: str,
    ) -> Edit:
        start, end = window.spans[slot]
        return Edit(
            start,
            end,
            self.id_to_char(window.input_ids[window.positions[slot]]),
            self.id_to_char(suggestion),
            round(float(score), 4),
            alternatives,
            memory,
            source,
        )


def radical_edits(request: CheckRequest, edits: Sequence[Edit]) -> list[Edit]:
    """A radical typed for a character (⼀ for 一: ``request.radical_table``) is a wrong
    character of its own: its fix, at every place no other rule fixed, source "unicode", in
    the text's script (⿓ is 龍 in 傳人's text, 龙 in 传人's: ``in_typed_script``)."""
    table = radical_table()
    taken = {edit.start for edit in edits}
    checked = request.script.simplified if request.script is not None else request.text
    found = (
        in_typed_script(Edit(at, at + 1, char, checked[at], 1.0, source="unicode"), request)
        for at, char in enumerate(request.text)
        if ord(char) in table and at not in taken
    )
    return [edit for edit in found if edit is not None]


def in_typed_script(edit: Edit, request: CheckRequest) -> Edit | None:
    """``edit`` (found on the checked form) on the text as typed: its original the typed
    characters; in a text with traditional characters, its suggestion and alternatives in
    that script, converted among their neighbours (``core.script.between``), unless a simplified
    form was typed at the place and around it (``core.script.neighbours_traditional``), and its
    evidence too; None where the suggestion, so written, is what was typed."""
    original = request.text[edit.start : edit.end]
    script = request.script
    if script is None:
        return replace(edit, original=original)
    checked = script.simplified
    left, right = checked[: edit.start], checked[edit.end :]
    # a wrong character says little of the script (一層搂: 搂 is simplified, its neighbours are
    # not; 我門 in a simplified paragraph: 門 is traditional, the paragraph is not, and the fix
    # was 們, a review), its neighbours as typed do, then its line's characters and the whole
    # text's (the wrong one among them); the whole text converted once: OpenCC converts some
    # words as pairs (了解 -> 瞭解), which a slice of four characters cuts in half
    whole = script.back(checked)
    as_typed = script.to_typed is not None and neighbours_traditional(
        request.text, checked, whole, edit.start, edit.end
    )

    def written(fill: str) -> str:
        if not as_typed:
            return fill
        return between(left, fill, right, script.back)

    suggestion = written(edit.suggestion)
    if suggestion == original:
        return None
    return replace(
        edit,
        original=original,
        suggestion=suggestion,
        alternatives=[replace(a, suggestion=written(a.suggestion)) for a in edit.alternatives],
        # the 出处 in the script the fix is written in (畫龍點睛 for 画龙点晴 in a text with 頭髮)
        memory=memory_in(edit.memory, script.back, script.typed_forms) if as_typed else edit.memory,
    )


def written_count(match: Any, token: int) -> int:
    """How often the index holds the written character in ``match``'s context, its passages
    that read differently from the text included (``BlankMatch.misread``): no evidence for a
    fill, but a right character they hold is not "never written there"."""
    return int(match.fills.get((token,), 0) or match.misread.get((token,), 0))


def glued(window: Window, slot: int, run: range) -> bool:
    """Whether ``slot`` is an end of ``run`` with a Han character right beside it outside."""
    before = slot == run.start and slot > 0 and window.adjacent(slot - 1)
    after = slot == run.stop - 1 and slot + 1 < len(window.spans) and window.adjacent(slot)
    return before or after


def owns(window: Window, slot: int) -> bool:
    """Whether ``window`` edits ``slot`` (``Window.owned``; overlapping windows share some)."""
    return window.owned is None or slot in window.owned
