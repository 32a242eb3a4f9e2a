"""Make a multi-mask cloze file from the corpus's held-out text, for `tiankong eval`.

Each item hides a run of 2, 3 or 4 consecutive Han characters in a held-out line (category
``span2`` … ``span4``); the answer is the hidden text. The lines never appear in training, so
this measures joint decoding on unseen text. The data stays out of the repository: write it
under runs/.

    python scripts/heldout_cloze.py runs/heldout_cloze.jsonl --corpus CORPUS_DIR

With ``--words`` each item hides one whole word of 1 to 4 Han characters instead (jieba's
segmentation; categories ``word1`` … ``word4``), from the modern and wiki_dialogue held-out
files: what a ``[BLANK]`` is for, so ``tiankong eval FILE --blank --length-alpha A`` compares
the length normalisations on it (README, "Unknown-length blanks").

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
    parser.add_argument("--words", action="store_true", help="whole words of 1-4 characters")
    args = parser.parse_args()
    if args.words:
        write(args.out, word_items(args.corpus, args.per_length, random.Random(args.seed)))
        return
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
    write(args.out, items)


def word_items(corpus: Path, per_length: int, rng: random.Random) -> list[dict[str, object]]:
    """One jieba word of 1-4 Han characters blanked per modern or wiki_dialogue held-out line,
    ``per_length`` of each length."""
    import jieba

    lines: list[str] = []
    for name in ("modern.heldout.txt.xz", "wiki_dialogue.heldout.txt.xz"):
        with lzma.open(corpus / name, "rt", encoding="utf-8") as handle:
            lines += [line.strip() for line in handle if 8 <= len(line.strip()) <= 100]
    items: list[dict[str, object]] = []
    counts = dict.fromkeys(range(1, 5), 0)
    for line in rng.sample(lines, len(lines)):
        words, start = [], 0
        for word in jieba.lcut(line):
            if 1 <= len(word) <= 4 and HAN_RUN.fullmatch(word) and counts[len(word)] < per_length:
                words.append((start, word))
            start += len(word)
        if not words:
            continue
        at, word = rng.choice(words)
        counts[len(word)] += 1
        text = line[:at] + "[MASK]" * len(word) + line[at + len(word) :]
        items.append({"category": f"word{len(word)}", "text": text, "answers": [word]})
        if all(count >= per_length for count in counts.values()):
            break
    return items


def write(out: Path, items: list[dict[str, object]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"wrote {len(items)} items to {out}")


if __name__ == "__main__":
    main()
