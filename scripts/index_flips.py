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


Item = tuple[str, str, str]  # text with its [MASK]s, the masked characters, category


def is_han(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff"


def clean_sentences(split: Path) -> list[tuple[str, str]]:
    """(text, category) of the split's clean sentences."""
    items = [json.loads(line) for line in split.read_text(encoding="utf-8").splitlines()]
    return [(item["text"], item["category"]) for item in items if item["category"] in CLEAN]


def masked_items(split: Path) -> list[Item]:
    """Every Han character masked, one at a time."""
    return [
        (f"{text[:at]}[MASK]{text[at + 1 :]}", char, category)
        for text, category in clean_sentences(split)
        for at, char in enumerate(text)
        if is_han(char)
    ]


def clause_ends(split: Path) -> list[Item]:
    """Each clause's last Han character masked, the text cut right after it."""
    return [
        (f"{text[:at]}[MASK]", char, category)
        for text, category in clean_sentences(split)
        for at, char in enumerate(text)
        if is_han(char) and not is_han(text[at + 1 : at + 2] or " ")
    ]


def runs_of_two(split: Path) -> list[Item]:
    """Every two Han characters in a row masked together."""
    return [
        (f"{text[:at]}[MASK][MASK]{text[at + 2 :]}", text[at : at + 2], category)
        for text, category in clean_sentences(split)
        for at in range(len(text) - 1)
        if is_han(text[at]) and is_han(text[at + 1])
    ]


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
