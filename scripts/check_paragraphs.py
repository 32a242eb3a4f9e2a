"""Proofreading a paragraph against its sentences one a line (docs/PROOFREADING.md, step 2).

    python scripts/check_paragraphs.py data/eval/check_dev.jsonl [--per-line 4] [--line-windows]

The split's items are checked one a line, then joined ``--per-line`` to a line (in file order,
clean and wrong ones alike) as a user pastes a paragraph. For each it prints the edits that fix
an error, the edits that don't (a right character changed, or a wrong one changed to another
wrong one) and the errors left, and the seconds the run took. ``--line-windows`` reads each line
as one window, as the checker did before each sentence became a window of its own. FP32, the
default install's model and index.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from tiankong import FillMasker, Settings
from tiankong.tasks.check import CheckResult, Proofreader
from tiankong.tasks.check import request as check_request


def tally(pairs: Sequence[tuple[str, str]], results: Sequence[CheckResult]) -> tuple[int, int, int]:
    """(right edits, wrong edits, errors left) over (text, correct) pairs."""
    right = wrong = left = 0
    for (text, correct), result in zip(pairs, results, strict=True):
        fixed = set()
        for edit in result.edits:
            if correct[edit.start] == edit.suggestion != text[edit.start]:
                right += 1
                fixed.add(edit.start)
            else:
                wrong += 1
        wrong_at = [at for at, (a, b) in enumerate(zip(text, correct, strict=True)) if a != b]
        left += sum(1 for at in wrong_at if at not in fixed)
    return right, wrong, left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split", type=Path)
    parser.add_argument("--per-line", type=int, default=4)
    parser.add_argument("--line-windows", action="store_true")
    args = parser.parse_args()
    if args.line_windows:  # the checker before: one window a line, its sentences together
        check_request.sentences = lambda text, offsets: [(0, len(offsets))] if offsets else []
    items = [json.loads(line) for line in args.split.read_text(encoding="utf-8").splitlines()]
    alone = [(item["text"], item["correct"]) for item in items]
    joined = [
        ("".join(text for text, _ in alone[k : k + args.per_line]),
         "".join(correct for _, correct in alone[k : k + args.per_line]))
        for k in range(0, len(alone), args.per_line)
    ]  # fmt: skip
    checker = Proofreader(FillMasker.load(settings=Settings(precision="fp32")))
    for name, pairs in (("one a line", alone), (f"{args.per_line} a line", joined)):
        started = time.perf_counter()
        results = checker.check_batch([text for text, _ in pairs])
        seconds = time.perf_counter() - started
        right, wrong, left = tally(pairs, results)
        print(f"{name}: right edits {right}, wrong edits {wrong}, errors left {left}", end=" ")
        print(f"({seconds:.1f} s)")


if __name__ == "__main__":
    main()
