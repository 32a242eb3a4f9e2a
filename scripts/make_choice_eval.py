"""Make the idiom-choice evaluation set (ChID-style) from the corpus's modern held-out text.

    python scripts/make_choice_eval.py CORPUS_DIR OUT.jsonl
    tiankong eval OUT.jsonl --compare-index

Each item is a held-out sentence that contains an idiom of the bundled idiom list, the idiom
replaced by one [MASK], and seven candidates: the idiom and six others, as CLUE's ChID does.
The six are drawn at random (seed 22) from the idioms that occur at least twice in the modern
training text, so a distractor is a real, common idiom and never a rarity that a model can
rule out by frequency alone.

The sentences come from the two modern held-out files: the reviews and news (no stated
licence) and wiki_dialogue (CC BY-SA and Apache-2.0). The reviews and news may be trained and
measured on but not shipped, so OUT must lie outside the repository: the set is made where the
corpus is, and the model card gives the figure with these two commands.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import re
from collections import Counter
from pathlib import Path

SEED = 22
OPTIONS = 7
CONTEXT = 48  # characters kept on each side of the idiom
HAN = re.compile(r"^[\u4e00-\u9fff]{4}$")
REPO = Path(__file__).resolve().parent.parent


def read_lines(path: Path) -> list[str]:
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def idiom_counts(idioms: set[str], lines: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in lines:
        for start in range(len(line) - 3):
            if line[start : start + 4] in idioms:
                counts[line[start : start + 4]] += 1
    return counts


def items(
    lines: list[str], idioms: set[str], pool: list[str], category: str, rng: random.Random
) -> list[dict[str, object]]:
    made = []
    for line in lines:
        found = [k for k in range(len(line) - 3) if line[k : k + 4] in idioms]
        if not found:
            continue
        start = rng.choice(found)  # one blank a sentence, so a long line doesn't count twice
        answer = line[start : start + 4]
        left = line[max(0, start - CONTEXT) : start]
        right = line[start + 4 : start + 4 + CONTEXT]
        options = rng.sample([idiom for idiom in pool if idiom != answer], OPTIONS - 1)
        options.insert(rng.randrange(OPTIONS), answer)
        made.append(
            {
                "category": category,
                "text": f"{left}[MASK]{right}",
                "answers": [answer],
                "candidates": options,
            }
        )
    return made


def write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    print(f"{path}: {len(rows)} items")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path, help="the JSONL to write, outside the repository")
    args = parser.parse_args()
    if args.out.resolve().is_relative_to(REPO):
        parser.error("OUT must lie outside the repository: the reviews and news have no licence")
    idioms = {
        line.strip()
        for line in read_lines(args.corpus / "idioms.txt.xz")
        if HAN.match(line.strip())
    }
    training = read_lines(args.corpus / "modern.txt.xz") + read_lines(
        args.corpus / "wiki_dialogue.txt.xz"
    )
    pool = sorted(idiom for idiom, count in idiom_counts(idioms, training).items() if count >= 2)
    rng = random.Random(SEED)
    rows = []
    for name in ("modern.heldout", "wiki_dialogue.heldout"):
        rows += items(read_lines(args.corpus / f"{name}.txt.xz"), idioms, pool, "idiom_choice", rng)
    write(args.out, rows)


if __name__ == "__main__":
    main()
