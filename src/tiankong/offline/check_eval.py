"""`tiankong eval --task check`: SIGHAN-style sentence-level scores for a proofreader.

The file is JSONL, one ``{"text", "correct"}`` object a line (``category`` optional), where
``correct`` is ``text`` with its wrong characters fixed (the same length: one character for
one). Per sentence, as in the SIGHAN bake-offs:

* **detection** is right when the positions the checker edits are exactly the wrong ones;
* **correction** is right when the corrected sentence equals ``correct``;
* precision counts over the sentences the checker edited, recall over the sentences with an
  error; the **false-alarm rate** is the share of correct sentences that got any edit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tiankong.config import Settings
from tiankong.core.text import check_unicode
from tiankong.errors import BadDataFileError, BadInputError
from tiankong.index.sources import json_value
from tiankong.offline.files import TOTAL_ROW, item_category, open_text, require_input
from tiankong.tasks.check import CheckResult, Proofreader
from tiankong.tasks.check.request import check_text

BATCH = 16  # sentences per run of the proofreader (its two passes for all of them)


@dataclass(frozen=True)
class CheckItem:
    line: int
    text: str
    correct: str
    category: str = "all"

    @property
    def wrong_positions(self) -> set[int]:
        return {i for i, (a, b) in enumerate(zip(self.text, self.correct, strict=True)) if a != b}


@dataclass
class Scores:
    """Counts and the figures of one group of sentences."""

    category: str
    sentences: int = 0
    with_errors: int = 0
    edited: int = 0
    detected: int = 0  # edited positions == wrong positions, on a sentence with errors
    corrected: int = 0  # corrected == correct, on a sentence with errors
    false_alarms: int = 0  # a correct sentence that got an edit

    def add(self, item: CheckItem, result: CheckResult) -> None:
        self.sentences += 1
        wrong = item.wrong_positions
        edited = {edit.start for edit in result.edits}
        self.with_errors += bool(wrong)
        self.edited += bool(edited)
        if wrong:
            self.detected += edited == wrong
            self.corrected += result.corrected == item.correct
        else:
            self.false_alarms += bool(edited)

    @staticmethod
    def f1(precision: float, recall: float) -> float:
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    def figures(self) -> dict[str, float]:
        clean = self.sentences - self.with_errors
        out: dict[str, float] = {}
        for name, hits in (("detection", self.detected), ("correction", self.corrected)):
            precision = hits / self.edited if self.edited else 0.0
            recall = hits / self.with_errors if self.with_errors else 0.0
            out[f"{name}_precision"] = precision
            out[f"{name}_recall"] = recall
            out[f"{name}_f1"] = self.f1(precision, recall)
        out["false_alarm_rate"] = self.false_alarms / clean if clean else 0.0
        return out


@dataclass
class CheckReport:
    file: str
    model: str
    engine: str
    precision: str
    index: str
    overall: Scores
    categories: list[Scores]
    sentences_per_s: float
    misses: list[dict[str, Any]] = field(default_factory=list)
    # every sentence with its fixes, so the figures can be recomputed and two runs compared
    # sentence by sentence (the report held only the totals: a review)
    items: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def row(scores: Scores) -> dict[str, Any]:
            return {**asdict(scores), **scores.figures()}

        return {
            "file": self.file,
            "model": self.model,
            "engine": self.engine,
            "precision": self.precision,
            "index": self.index,
            "overall": row(self.overall),
            "categories": [row(scores) for scores in self.categories],
            "sentences_per_s": self.sentences_per_s,
            "items": self.items,
        }


def read_check_items(path: Path, max_chars: int = Settings.max_check_chars) -> list[CheckItem]:
    """The file's items; a ``BadDataFileError`` (exit 2) naming the first bad line, before the
    model loads: a text proofreading would refuse (over ``max_chars``, ``max_check_chars``; a
    lone surrogate) stopped the run mid-way with a sentence that named no line."""
    require_input(path, "Evaluation file")
    items = []
    with open_text(path, "Evaluation file") as handle:
        # the file's own lines: str.splitlines also cut a text at U+2028 or U+0085
        for number, line in enumerate(handle, 1):
            if line.strip():
                items.append(check_item(line, number, path.name, max_chars))
    if not items:
        raise BadDataFileError(f"'{path.name}' holds no items.")
    return items


def check_item(line: str, number: int, name: str, max_chars: int) -> CheckItem:
    where = f"Line {number} of '{name}'"
    try:
        record = json_value(line)
        text, correct = record["text"], record["correct"]
        assert isinstance(text, str) and isinstance(correct, str)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise BadDataFileError(
            f'{where} is not a JSON object with string fields "text" and "correct".'
        ) from None
    if not text.strip():
        raise BadDataFileError(f'{where}: "text" is empty.')
    if len(text) != len(correct):
        raise BadDataFileError(
            f'{where}: "correct" must have as many characters as "text" (one character fixed '
            "for one)."
        )
    try:  # what proofreading refuses, refused here with the line, before the model loads
        check_text(text, max_chars)
        check_unicode(correct)
    except BadInputError as error:
        raise BadDataFileError(f"{where}: {error.message}") from None
    category = item_category(record, where)
    return CheckItem(number, text, correct, category)


def require_checkable(checker: Proofreader, items: Sequence[CheckItem], file: str) -> None:
    """Refuse, with its line, a sentence of which the model checks no character (no Chinese it
    reads): it was counted as a clean pass, a false-alarm rate of 0% of 1 for "hello world",
    where ``tiankong check`` warns that nothing was checked (a review)."""
    name = Path(file).name if file else "the file"
    for item in items:
        if checker.prepare(item.text).checked == 0:
            raise BadDataFileError(
                f"Line {item.line} of '{name}': the model checks none of its characters (no "
                "Chinese character it reads), so the item tests nothing; leave it out."
            )


def evaluate_check(checker: Proofreader, items: Sequence[CheckItem], file: str = "") -> CheckReport:
    require_checkable(checker, items, file)
    overall = Scores(TOTAL_ROW)
    by_category: dict[str, Scores] = {}
    described: list[dict[str, Any]] = []
    started = time.perf_counter()
    for first in range(0, len(items), BATCH):
        chunk = items[first : first + BATCH]
        results = checker.check_batch([item.text for item in chunk])
        for item, result in zip(chunk, results, strict=True):
            overall.add(item, result)
            by_category.setdefault(item.category, Scores(item.category)).add(item, result)
            described.append(
                {
                    "line": item.line,
                    "category": item.category,
                    "text": item.text,
                    "correct": item.correct,
                    "corrected": result.corrected,
                    "edits": [
                        {
                            "start": e.start,
                            "original": e.original,
                            "suggestion": e.suggestion,
                            "source": e.source,
                            "score": e.score,
                        }
                        for e in result.edits
                    ],
                }
            )
    misses = [entry for entry in described if entry["corrected"] != entry["correct"]]
    elapsed = time.perf_counter() - started
    masker = checker.masker
    return CheckReport(
        file=file,
        model=masker.model.name,
        engine=masker.engine.name,
        precision=masker.engine.precision,
        index=checker.memory.name if checker.memory is not None else "none",
        overall=overall,
        categories=[by_category[name] for name in sorted(by_category)],
        sentences_per_s=len(items) / elapsed if elapsed else 0.0,
        misses=[{key: entry[key] for key in MISS_KEYS} for entry in misses],
        items=described,
    )


MISS_KEYS = ("line", "category", "text", "correct", "corrected")
