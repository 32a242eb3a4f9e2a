"""Make a multi-mask cloze file from the corpus's held-out text, for `tiankong eval`.

Each item hides a run of 2, 3 or 4 consecutive Han characters in a held-out line (category
``span2`` … ``span4``); the answer is the hidden text. The lines never appear in training, so
this measures joint decoding on unseen text. The data stays out of the repository: write it
under runs/.

    python scripts/heldout_cloze.py runs/heldout_cloze.jsonl --corpus CORPUS_DIR

CORPUS_DIR holds the ``*.heldout.txt.xz`` files of the training corpus (docs/TRAINING.md).
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import re
from pathlib import Path

HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")


def spans(line: str, length: int) -> list[int]:
    """Start offsets of every all-Han window of ``length`` characters in ``line``."""
    return [
        match.start() + offset
        for match in HAN_RUN.finditer(line)
        for offset in range(len(match.group()) - length + 1)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", type=Path, required=True, help="folder of *.heldout.txt.xz")
    parser.add_argument("--per-length", type=int, default=150)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lines: list[str] = []
    for path in sorted(args.corpus.glob("*.heldout.txt.xz")):
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            lines += [line.strip() for line in handle if 8 <= len(line.strip()) <= 100]
    if not lines:
        parser.error(f"no *.heldout.txt.xz lines of 8 to 100 characters in {args.corpus}")
    items = []
    for length in (2, 3, 4):
        for line in rng.sample(lines, len(lines)):
            if sum(item["category"] == f"span{length}" for item in items) >= args.per_length:
                break
            starts = spans(line, length)
            if not starts:
                continue
            start = rng.choice(starts)
            text = line[:start] + "[MASK]" * length + line[start + length :]
            answer = line[start : start + length]
            items.append({"category": f"span{length}", "text": text, "answers": [answer]})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"wrote {len(items)} items to {args.out}")


if __name__ == "__main__":
    main()
