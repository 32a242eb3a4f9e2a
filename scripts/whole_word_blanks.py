"""Whole-word answers for several separate blanks, per category, with the corpus index.

    python scripts/whole_word_blanks.py data/eval/check_dev.jsonl [--gap 3] [--save FILE]
    PYTHONPATH=/tmp/base/src python scripts/whole_word_blanks.py ... --save base.json

In each clean sentence of a proofreading split (``scripts/index_flips.py``'s), every two Han
characters ``--gap`` apart are masked, two one-character blanks, and the text is filled in
whole-word mode with the default install (the bundled model and index). The answer is the
masked pair; top-1 is the best joint fill. ``--save`` writes each item's fill; ``--against``
reads another run's file and counts the items that turned from right to wrong and back. The
dev split is where a rule may be chosen, the test split only reported (docs/INDEX.md).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from index_flips import clean_sentences, is_han

from tiankong import FillMasker


def separate_blanks(split: Path, gap: int) -> list[tuple[str, str, str]]:
    """(text with two [MASK]s, the masked pair, category) for every pair ``gap`` apart."""
    return [
        (
            f"{text[:i]}[MASK]{text[i + 1 : i + gap]}[MASK]{text[i + gap + 1 :]}",
            char + text[i + gap],
            category,
        )
        for text, category in clean_sentences(split)
        for i, char in enumerate(text)
        if i + gap < len(text) and is_han(char) and is_han(text[i + gap])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split", type=Path)
    parser.add_argument("--gap", type=int, default=3)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--against", type=Path, help="another run's --save file")
    args = parser.parse_args()
    masker = FillMasker.load()
    items = separate_blanks(args.split, args.gap)
    fills = []
    for text, _, _ in items:
        found = masker.predict(text, mode="whole_word", top_k=1)
        fills.append(found.sequences[0].fill if found.sequences else "")
    if args.save:
        args.save.write_text(json.dumps(fills, ensure_ascii=False), encoding="utf-8")
    before = json.loads(args.against.read_text(encoding="utf-8")) if args.against else None
    count, right, flips = Counter[str](), Counter[str](), Counter[tuple[str, str]]()
    for number, ((_, answer, category), fill) in enumerate(zip(items, fills, strict=True)):
        count[category] += 1
        right[category] += fill == answer
        if before is not None and (before[number] == answer) != (fill == answer):
            flips[category, "wrong→right" if fill == answer else "right→wrong"] += 1
    print("| category | items | whole-word top-1 | right→wrong | wrong→right |")
    print("|---|---:|---:|---:|---:|")
    for category in count:
        wrong_now, right_now = flips[category, "right→wrong"], flips[category, "wrong→right"]
        shown = (wrong_now, right_now) if before is not None else ("", "")
        print(
            f"| {category} | {count[category]:,} | {right[category] / count[category]:.1%} "
            f"| {shown[0]} | {shown[1]} |"
        )


if __name__ == "__main__":
    main()
