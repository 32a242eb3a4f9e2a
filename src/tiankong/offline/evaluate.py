"""`tiankong eval`: cloze accuracy by category (top-1, top-5, MRR, latency).

Reads two formats:
- tiankong JSONL: ``{"category", "text", "answers"[, "candidates"]}``; ``text`` has [MASK]s;
  ``answers`` lists accepted fills (a whole word for several masks).
- ChID / CLUE-CHID JSON lines: ``{"content": "...#idiom#...", "candidates": [...],
  "groundTruth": [...]}`` (or ``"answer"``); each ``#idiom#`` (or ``#idiom123#``) placeholder
  becomes one item, category ``chid``, with the other placeholders hidden as [UNK]. Without
  candidates the placeholder becomes one [MASK] per character of its answer (an idiom's four).

An item that could never be scored right is refused with its line, as a malformed one is: an
answer that is not a string, answers none of which is among the candidates, or (with no
candidates and no [BLANK]) answers none of which is as many tokens long as the text has masks,
or each of which holds a token no result holds ([SEP]) (``check_scorable``, once the model's
tokenizer is known).

How an item is scored: with ``candidates`` the options are ranked (exact chain probability,
length-normalised); one mask uses the per-mask ranking; several masks use joint (whole-word)
decoding; with ``blank=True`` the masks become one [BLANK] of unknown length.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tiankong.core.options import MASK_RUN, PredictOptions, check_blank, check_candidates
from tiankong.core.text import BLANK, MASK, normalize_masks
from tiankong.errors import BadDataFileError, BadOptionError, TiankongError
from tiankong.index.sources import json_value, not_json
from tiankong.offline.files import TOTAL_ROW, item_category, open_text, require_input
from tiankong.service import FillMasker

RANK_DEPTH = 50  # MRR counts answers found within this many predictions
CHID_PLACEHOLDER = re.compile(r"#idiom\d*#")


@dataclass(frozen=True)
class ClozeItem:
    category: str
    text: str
    answers: tuple[str, ...]
    candidates: tuple[str, ...] = ()
    line: int = 0


@dataclass
class ItemOutcome:
    item: ClozeItem
    ranked: list[str]  # predicted fills, best first
    rank: int | None  # 1-based rank of the first accepted answer, None if not found
    latency_ms: float
    error: str | None = None


@dataclass
class CategoryReport:
    category: str
    items: int = 0
    top1: float = 0.0
    top5: float = 0.0
    mrr: float = 0.0
    mean_latency_ms: float = 0.0
    errors: int = 0


@dataclass
class EvalReport:
    model: str
    engine: str
    precision: str
    mode: str
    index: str = "none"  # the corpus index used: none, bundled or its folder
    categories: list[CategoryReport] = field(default_factory=list)
    overall: CategoryReport = field(default_factory=lambda: CategoryReport(TOTAL_ROW))
    failures: list[dict[str, Any]] = field(default_factory=list)
    # every item with its rank (null: not within the item's depth) and its top five, so the
    # figures can be recomputed and two runs compared item by item (paired tests)
    items: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_items(path: Path) -> list[ClozeItem]:
    """Read tiankong JSONL or ChID lines; bad lines raise with their line number."""
    require_input(path, "Evaluation file")
    items: list[ClozeItem] = []
    with open_text(path, "Evaluation file") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json_value(line)
            except ValueError as error:
                raise BadDataFileError(f"{path.name} line {number}: {not_json(error)}.") from None
            if not isinstance(record, dict):
                raise BadDataFileError(f"{path.name} line {number}: expected a JSON object.")
            items += list(parse_record(record, number, path.name))
    if not items:
        raise BadDataFileError(f"Evaluation file '{path.name}' has no items.")
    return items


def parse_record(record: dict[str, Any], number: int, name: str) -> Iterator[ClozeItem]:
    if "content" in record:
        yield from parse_chid(record, number, name)
        return
    text, answers = record.get("text"), record.get("answers")
    if not isinstance(text, str) or not isinstance(answers, list):
        proofreading = "answers" not in record and "correct" in record  # a check_*.jsonl
        raise BadDataFileError(
            f"{name} line {number}: needs 'text' (a string with [MASK]) and 'answers' (a list)"
            + ("; it reads as a proofreading file: add --task check." if proofreading else ".")
        )
    if not answers:  # a list, so "needs 'answers' (a list)" was no help (a review)
        raise BadDataFileError(
            f"{name} line {number}: 'answers' is empty; list at least one right fill."
        )
    if not is_strings(answers) or not all(answer.strip() for answer in answers):
        raise BadDataFileError(
            f"{name} line {number}: 'answers' must be a list of strings, each a fill "
            "(not null, a number or empty)."
        )
    candidates = record.get("candidates")
    if candidates is None:
        candidates = []
    elif not is_strings(candidates) or not candidates:  # "", false, {} and 0 were ignored
        raise BadDataFileError(
            f"{name} line {number}: 'candidates' must be a list of strings, at least one (or "
            "leave it out)."
        )
    category = item_category(record, f"{name} line {number}")
    marked = normalize_masks(text)
    if MASK not in marked and BLANK not in marked:  # it was scored, as an error, every time
        raise BadDataFileError(
            f"{name} line {number}: the text has no [MASK] (or [BLANK]), so it can never be "
            "scored right; mark the blank."
        )
    if BLANK in marked:  # the text's own rule, before the model loads: it was scored wrong
        try:  # at every run, exit 0 (a review)
            check_blank(marked)
        except BadOptionError as error:
            raise BadDataFileError(f"{name} line {number}: {error.message}") from None
    # as the fills are compared: " 聊" was never counted right, where its length was checked
    answers = [answer.strip() for answer in answers]
    candidates = [candidate.strip() for candidate in candidates]
    require_among(answers, candidates, f"{name} line {number}")
    yield ClozeItem(category, text, tuple(answers), tuple(candidates), number)


def is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def require_among(answers: Sequence[str], candidates: Sequence[str], where: str) -> None:
    """Refuse an item whose candidates hold none of its answers, or break the candidates' own
    rules (an empty one, one given twice: counted as an error at every run, exit 0, a
    review): it could never be right."""
    if candidates:
        try:
            check_candidates(tuple(candidates))
        except BadOptionError as error:
            said = error.message.removesuffix(".")
            raise BadDataFileError(
                f"{where}: {said}, so the item can never be scored right."
            ) from None
    if candidates and not set(answers) & set(candidates):
        quoted = ", ".join(repr(answer) for answer in answers)
        which = f"{quoted} is not" if len(answers) == 1 else f"none of the answers {quoted} is"
        raise BadDataFileError(
            f"{where}: {which} among the candidates, so the item can never be scored right."
        )


def parse_chid(record: dict[str, Any], number: int, name: str) -> Iterator[ClozeItem]:
    content = record["content"]
    if not isinstance(content, str):
        raise BadDataFileError(
            f"{name} line {number}: ChID 'content' must be a string with #idiom# placeholders."
        )
    truths = record.get("groundTruth") or record.get("answer")
    placeholders = CHID_PLACEHOLDER.findall(content)
    if isinstance(truths, str):
        truths = [truths]
    if not placeholders or not isinstance(truths, list) or len(truths) != len(placeholders):
        raise BadDataFileError(
            f"{name} line {number}: ChID items need one groundTruth per #idiom# placeholder."
        )
    if not is_strings(truths) or not all(truth.strip() for truth in truths):
        raise BadDataFileError(f"{name} line {number}: each ChID groundTruth must be an idiom.")
    given = record.get("candidates")
    per_blank = chid_options([] if given is None else given, len(placeholders))
    if per_blank is None:
        raise BadDataFileError(
            f"{name} line {number}: ChID 'candidates' must be a list of idioms, or one such "
            "list per #idiom# placeholder."
        )
    for index, truth in enumerate(truths):
        options = per_blank[index]
        require_among([truth], options, f"{name} line {number}")
        # with options, one blank they are ranked in; without, a [MASK] per character, as a
        # cloze item of the idiom would have (one [MASK] for four characters: never right)
        blank = MASK if options else MASK * len(truth)
        pieces = CHID_PLACEHOLDER.split(content)
        fills = [blank if slot == index else "[UNK]" for slot in range(len(placeholders))]
        text = pieces[0] + "".join(f + piece for f, piece in zip(fills, pieces[1:], strict=True))
        yield ClozeItem("chid", text, (truth,), options, number)


def chid_options(candidates: Any, blanks: int) -> list[tuple[str, ...]] | None:
    """Each placeholder's options: one list shared by all, or one list each (CLUE-CHID);
    None when ``candidates`` is neither."""
    if isinstance(candidates, list) and not candidates:
        return [()] * blanks
    if is_strings(candidates):
        return [tuple(candidates)] * blanks
    lists = isinstance(candidates, list) and len(candidates) == blanks
    if lists and all(is_strings(options) for options in candidates):
        return [tuple(options) for options in candidates]
    return None


def check_scorable(masker: FillMasker, items: Sequence[ClozeItem], blank: bool, name: str) -> None:
    """Refuse, with its line, an item none of whose answers is as many tokens long as its text
    has masks: a fill has one token per mask, so it could never be right. Items with candidates
    or a [BLANK] (or every item, with ``blank``) take fills of any length; a text that can't be
    read is left to the run, which counts it as an error."""
    unknown = masker.encoder.vocab.get("[UNK]")
    for item in items:  # a candidate read as [UNK] has no honest score (POST /'s targets)
        for candidate in item.candidates:
            if not answer_ids(masker, candidate):  # \u200b: an item error at every run
                raise BadDataFileError(
                    f"{name} line {item.line}: the candidate {candidate!r} has no character the "
                    "model reads, so the item can never be scored right."
                )
            if unknown in answer_ids(masker, candidate):
                vocab = masker.encoder.vocab
                shown = ", ".join(sorted({c for c in candidate if c not in vocab}) or [candidate])
                raise BadDataFileError(
                    f"{name} line {item.line}: the candidate '{candidate}' holds a character "
                    f"this model's vocabulary doesn't have ({shown}), so it has no honest "
                    "score; leave it out for this model."
                )
    if blank:
        return
    for item in items:
        if item.candidates or BLANK in normalize_masks(item.text):
            continue
        try:
            masks = len(masker.prepare(item.text).mask_indices)
        except TiankongError:
            continue
        answers = [answer_ids(masker, answer) for answer in item.answers]
        lengths = [len(ids) for ids in answers]
        fitting = [ids for ids in answers if len(ids) == masks]
        if fitting and all(unknown in ids for ids in fitting):
            # a character the model's vocabulary lacks reads as [UNK]: said so, where the
            # sentence blamed [SEP] and [PAD] and the data file (a review, with a model of its
            # own vocabulary)
            vocab = masker.encoder.vocab
            missing = sorted({c for answer in item.answers for c in answer if c not in vocab})
            shown = ", ".join(missing or item.answers)
            raise BadDataFileError(
                f"{name} line {item.line}: every answer of its length holds a character this "
                f"model's vocabulary doesn't have ({shown}), so it can never be scored right; "
                "leave the item out for this model."
            )
        if fitting and all(masker.banned_in(ids) for ids in fitting):
            raise BadDataFileError(
                f"{name} line {item.line}: every answer of its length holds a token that never "
                f"appears in results ({', '.join(item.answers)}: [SEP], [PAD] and the like), "
                "so it can never be scored right."
            )
        if masks not in lengths:
            raise BadDataFileError(
                f"{name} line {item.line}: the text has {masks} [MASK]"
                f"{'s' if masks != 1 else ''} and no answer is {masks} token"
                f"{'s' if masks != 1 else ''} long ({', '.join(item.answers)}), so it can "
                "never be scored right; give one [MASK] per character of the answer, or "
                "[BLANK] for a fill of any length."
            )


def as_read(masker: FillMasker, fill: str) -> str:
    """A fill or an answer as the model's tokenizer reads it, spaces left out: its normalizer
    (an uncased vocabulary lower-cases C, which the model fills as c, never counted right; a
    review) and no space between characters (an answer 一 层 for 一层 never matched)."""
    normalizer = masker.encoder.tokenizer.normalizer
    read = normalizer.normalize_str(fill) if normalizer is not None else fill
    return "".join(read.split())


def answer_ids(masker: FillMasker, answer: str) -> list[int]:
    return list(masker.encoder.tokenizer.encode(answer.strip(), add_special_tokens=False).ids)


def predicted_fills(
    masker: FillMasker, item: ClozeItem, options: PredictOptions, blank: bool
) -> list[str]:
    """The model's fills for one item, best first."""
    if item.candidates:
        result = masker.predict(
            item.text, options=PredictOptions(candidates=item.candidates, index=options.index)
        )
        return [candidate.option for candidate in result.candidates]
    if blank or BLANK in normalize_masks(item.text):
        text = MASK_RUN.sub(BLANK, normalize_masks(item.text))
        result = masker.predict(
            text, options=replace(options, top_k=10, length_alpha=options.length_alpha)
        )
        return [fill.fill for fill in result.sequences]
    prepared = masker.prepare(item.text)
    if len(prepared.mask_indices) == 1:
        result = masker.predict(item.text, top_k=RANK_DEPTH, index=options.index)
        return [candidate.token for candidate in result.masks[0]]
    result = masker.predict(
        item.text,
        options=PredictOptions(
            top_k=10,
            mode="whole_word",
            beam_width=options.beam_width,
            order=options.order,
            index=options.index,
        ),
    )
    return [fill.fill for fill in result.sequences]


def evaluate_items(
    masker: FillMasker, items: list[ClozeItem], options: PredictOptions, blank: bool = False
) -> tuple[EvalReport, list[ItemOutcome]]:
    """Score every item; ``options`` carries beam width, order, length_alpha and whether the
    masker's corpus index is used."""
    outcomes = []
    if items:  # one untimed call first: the run's first item paid the engine's warm-up, and
        # --compare-index's first run looked slower than the second (13.9 ms against 3.7 ms
        # on one idiom item: a review)
        with contextlib.suppress(TiankongError):
            predicted_fills(masker, items[0], options, blank)
    for item in items:
        started = time.perf_counter()
        try:
            ranked = predicted_fills(masker, item, options, blank)
            error = None
        except TiankongError as failure:
            ranked, error = [], failure.message
        latency = (time.perf_counter() - started) * 1000
        answers = {as_read(masker, answer) for answer in item.answers}
        rank = next(
            (i + 1 for i, fill in enumerate(ranked) if as_read(masker, fill) in answers), None
        )
        outcomes.append(ItemOutcome(item, ranked, rank, latency, error))
    engine = masker.engine
    mode_name = "blank" if blank else f"auto ({options.order}, beam {options.beam_width})"
    index = masker.index.used if options.index else "none"
    report = EvalReport(masker.model.name, engine.name, engine.precision, mode_name, index)
    by_category: dict[str, list[ItemOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_category[outcome.item.category].append(outcome)
    report.categories = [summarise(name, group) for name, group in by_category.items()]
    report.overall = summarise(TOTAL_ROW, outcomes)
    described = [
        {
            "line": outcome.item.line,
            "category": outcome.item.category,
            "text": outcome.item.text,
            "answers": list(outcome.item.answers),
            "predicted": outcome.ranked[:5],
            "error": outcome.error,
        }
        for outcome in outcomes
    ]
    report.failures = [
        entry for entry, outcome in zip(described, outcomes, strict=True) if outcome.rank != 1
    ]
    report.items = [
        {**entry, "rank": outcome.rank, "latency_ms": round(outcome.latency_ms, 2)}
        for entry, outcome in zip(described, outcomes, strict=True)
    ]
    return report, outcomes


def summarise(name: str, outcomes: list[ItemOutcome]) -> CategoryReport:
    count = len(outcomes)
    return CategoryReport(
        category=name,
        items=count,
        top1=sum(o.rank == 1 for o in outcomes) / count,
        top5=sum(o.rank is not None and o.rank <= 5 for o in outcomes) / count,
        mrr=sum(1.0 / o.rank for o in outcomes if o.rank is not None) / count,
        mean_latency_ms=sum(o.latency_ms for o in outcomes) / count,
        errors=sum(o.error is not None for o in outcomes),
    )


def agreement(first: list[ItemOutcome], second: list[ItemOutcome]) -> dict[str, float]:
    """Top-1 agreement and mean top-5 overlap between two runs over the same items."""
    pairs = [(a, b) for a, b in zip(first, second, strict=True) if a.ranked and b.ranked]
    if not pairs:
        return {"items": 0, "top1_agreement": 0.0, "top5_overlap": 0.0}
    top1 = sum(a.ranked[0] == b.ranked[0] for a, b in pairs) / len(pairs)
    overlap = sum(
        len(set(a.ranked[:5]) & set(b.ranked[:5])) / max(1, min(5, len(a.ranked), len(b.ranked)))
        for a, b in pairs
    ) / len(pairs)
    return {"items": len(pairs), "top1_agreement": top1, "top5_overlap": overlap}


def index_changes(without: list[ItemOutcome], grounded: list[ItemOutcome]) -> dict[str, dict]:
    """Per category (and overall): how many items the index turned from right to wrong and from
    wrong to right at top-1, over the same items run without and with it."""
    changes: dict[str, dict[str, int]] = {}
    for alone, mixed in zip(without, grounded, strict=True):
        for name in (alone.item.category, TOTAL_ROW):
            row = changes.setdefault(name, {"right_to_wrong": 0, "wrong_to_right": 0})
            row["right_to_wrong"] += alone.rank == 1 and mixed.rank != 1
            row["wrong_to_right"] += alone.rank != 1 and mixed.rank == 1
    return changes
