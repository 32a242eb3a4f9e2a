"""What the corpus index does to single-character answers in running text, per category.

    python scripts/index_flips.py data/eval/check_dev.jsonl [--show 20] [--at-end | --pairs]

Every Han character of each *clean* sentence of a proofreading split (``modern_clean``,
``classical_clean``, ``idiom_clean``, ``poem_clean``: sentences without errors) is masked in
turn and filled with the default install (the bundled model and index), with and without the
index. The masked character is the answer. Prints, per category, top-1 both ways, the items
the index turns from right to wrong and from wrong to right, and how many of the first answers
shown with an 出处 (the index's evidence) are the masked character; ``--show N`` lists the first N
right-to-wrong items with the evidence the index showed for its answer. ``--at-end`` masks
instead the last Han character of each clause, the text cut right after it (a blank at the text's
end with no mark after it: 他画的龙真是画龙点[MASK]); ``--pairs`` masks every two Han characters
in a row, each mask counted on its own (the per-mask answers of a run). The modern sentences
are dialogue the index does not hold (docs/INDEX.md, "Running text"); the dev split is where a
rule may be chosen, the test split only reported.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from tiankong import FillMasker

CLEAN = ("modern_clean", "classical_clean", "idiom_clean", "poem_clean")
BATCH = 64


def masked_items(split: Path) -> list[tuple[str, str, str]]:
    """(text with one [MASK], the masked character, category) for every Han character."""
    items = []
    for line in split.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["category"] not in CLEAN:
            continue
        text = item["text"]
        for at, char in enumerate(text):
            if "\u4e00" <= char <= "\u9fff":
                items.append((f"{text[:at]}[MASK]{text[at + 1 :]}", char, item["category"]))
    return items


def clause_ends(split: Path) -> list[tuple[str, str, str]]:
    """(text ending in its one [MASK], the masked character, category): each clause's last Han
    character of the clean sentences, the text cut right after it."""
    items = []
    for line in split.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["category"] not in CLEAN:
            continue
        text = item["text"]
        for at, char in enumerate(text):
            after = text[at + 1 : at + 2]
            if "\u4e00" <= char <= "\u9fff" and not ("\u4e00" <= after <= "\u9fff"):
                items.append((f"{text[:at]}[MASK]", char, item["category"]))
    return items


def runs_of_two(split: Path) -> list[tuple[str, str, str]]:
    """(text with two [MASK]s in a row, the two masked characters, category): every pair of
    Han characters in a row of the clean sentences."""
    items = []
    for line in split.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["category"] not in CLEAN:
            continue
        text = item["text"]
        for at in range(len(text) - 1):
            pair = text[at : at + 2]
            if all("\u4e00" <= char <= "\u9fff" for char in pair):
                items.append((f"{text[:at]}[MASK][MASK]{text[at + 2 :]}", pair, item["category"]))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split", type=Path)
    parser.add_argument("--show", type=int, default=0, help="right-to-wrong items to list")
    parser.add_argument("--at-end", action="store_true", help="each clause's last character")
    parser.add_argument("--pairs", action="store_true", help="two characters in a row masked")
    args = parser.parse_args()
    if args.pairs:
        items = runs_of_two(args.split)
    else:
        items = clause_ends(args.split) if args.at_end else masked_items(args.split)
    masker = FillMasker.load()
    counts: Counter[tuple[str, str]] = Counter()
    flips = []
    for start in range(0, len(items), BATCH):
        chunk = items[start : start + BATCH]
        texts = [text for text, _, _ in chunk]
        with_index = masker.predict_batch(texts, options=masker.options(1))
        alone = masker.predict_batch(texts, options=masker.options(1, index=False))
        for (text, answers, category), on, off in zip(chunk, with_index, alone, strict=True):
            for number, answer in enumerate(answers):  # one character, or --pairs' two
                best = on.masks[number][0]
                right_on, right_off = best.token == answer, off.masks[number][0].token == answer
                counts[category, "items"] += 1
                counts[category, "on"] += right_on
                counts[category, "off"] += right_off
                counts[category, "right_to_wrong"] += right_off and not right_on
                counts[category, "wrong_to_right"] += right_on and not right_off
                counts[category, "sourced"] += best.memory is not None
                counts[category, "sourced_right"] += best.memory is not None and right_on
                if right_off and not right_on:
                    flips.append((text, answer, best.token, best.memory))
    print(
        "| category | masked characters | top-1 | +index top-1 | right→wrong | wrong→right "
        "| first answers with an 出处: right |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for category in CLEAN:
        n = counts[category, "items"]
        if n:
            print(
                f"| {category} | {n:,} | {counts[category, 'off'] / n:.1%} | "
                f"{counts[category, 'on'] / n:.1%} | {counts[category, 'right_to_wrong']} | "
                f"{counts[category, 'wrong_to_right']} | "
                f"{counts[category, 'sourced_right']} of {counts[category, 'sourced']} |"
            )
    for text, answer, token, memory in flips[: args.show]:
        shown = json.dumps(memory, ensure_ascii=False) if memory else "no evidence shown"
        print(f"- {text}: {answer} → {token} ({shown})")


if __name__ == "__main__":
    main()
