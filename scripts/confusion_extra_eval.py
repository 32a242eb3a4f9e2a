"""What tiankong's own confusion groups (tasks/check/data/confusion_extra.txt) do to proofreading.

    python scripts/confusion_extra_eval.py CORPUS_DIR [--per-pair 8] [--split dev|test]

For every ordered pair (a, b) of a group, held-out sentences holding a (the modern and
wiki_dialogue held-out files: reviews, news, Wikipedia and dialogue; never training text) are
checked as written (a clean item) and with their first a typed as b (an error item whose fix is
a). The checker runs with pycorrector's sets alone and with the groups added (the default
install's model, FP32); per group it prints the error items fixed, the clean items and error
items given a wrong edit, and the totals. Sentences alternate between two splits by their
order: ``--split dev`` chooses which groups to keep, ``--split test`` reports
(docs/PROOFREADING.md, "Confusable characters the sets miss"). The items are made here and
never written out: the reviews and news have no stated licence.
"""

from __future__ import annotations

import argparse
import lzma
import random
import re
from collections import Counter
from pathlib import Path

from tiankong import FillMasker, Settings
from tiankong.tasks.check import ConfusionSets, Proofreader
from tiankong.tasks.check.confusion import DATA

SOURCES = ("modern.heldout.txt.xz", "wiki_dialogue.heldout.txt.xz")
SENTENCE = re.compile(r"[^。！？!?；;\n]+[。！？!?；;]?")
HAN = re.compile(r"[\u4e00-\u9fff]")


def sentences(corpus: Path) -> list[str]:
    found = []
    for name in SOURCES:
        with lzma.open(corpus / name, "rt", encoding="utf-8") as handle:
            for line in handle:
                for match in SENTENCE.finditer(line.strip()):
                    text = match.group(0).strip()
                    if 8 <= len(text) <= 60 and len(HAN.findall(text)) >= 6:
                        found.append(text)
    return found


def groups() -> list[list[str]]:
    found = []
    for line in (DATA / "confusion_extra.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            found.append(line.split("\t")[1:])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--per-pair", type=int, default=8)
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    args = parser.parse_args()
    pool = sentences(args.corpus)[(0 if args.split == "dev" else 1) :: 2]
    rng = random.Random(27)
    items: list[tuple[str, str, str, int | None]] = []  # group, text, gold, error position
    for group in groups():
        name = "".join(group)
        for right in group:
            holding = [text for text in pool if right in text]
            for text in rng.sample(holding, min(args.per_pair, len(holding))):
                items.append((name, text, text, None))
                for wrong in group:
                    if wrong != right:
                        at = text.index(right)
                        items.append((name, text[:at] + wrong + text[at + 1 :], text, at))
    masker = FillMasker.load(settings=Settings(precision="fp32"))
    texts = [text for _, text, _, _ in items]
    runs = {
        extra: Proofreader(masker, confusion=ConfusionSets.shipped(extra)).check_batch(texts)
        for extra in (False, True)
    }
    tally: dict[tuple[str, bool], Counter[str]] = {}
    for number, (name, _text, gold, at) in enumerate(items):
        for extra, results in runs.items():
            result = results[number]
            counts = tally.setdefault((name, extra), Counter())
            if at is None:
                counts["clean"] += 1
                counts["clean with an edit"] += bool(result.edits)
            else:
                counts["errors"] += 1
                counts["fixed"] += result.corrected == gold
                wrong = [edit for edit in result.edits if gold[edit.start] != edit.suggestion]
                counts["errors with a wrong edit"] += bool(wrong)
    keys = ("errors", "fixed", "errors with a wrong edit", "clean", "clean with an edit")
    print(f"{args.split}: {len(items)} items from {len(pool)} held-out sentences")
    print("| group | " + " | ".join(f"{key}: sets / +groups" for key in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    totals = {extra: Counter() for extra in (False, True)}
    for name in dict.fromkeys(name for name, *_ in items):
        cells = []
        for key in keys:
            before, after = tally[(name, False)][key], tally[(name, True)][key]
            cells.append(str(before) if key in ("errors", "clean") else f"{before} / {after}")
        for extra in (False, True):
            totals[extra].update(tally[(name, extra)])
        print(f"| {name} | " + " | ".join(cells) + " |")
    cells = [
        str(totals[False][key])
        if key in ("errors", "clean")
        else f"{totals[False][key]} / {totals[True][key]}"
        for key in keys
    ]
    print("| **all** | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
