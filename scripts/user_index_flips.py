"""What a user's own index does to running text it doesn't hold: right answers turned wrong.

    python scripts/user_index_flips.py CORPUS_DIR [--lines 150] [--show 10]

Builds an index of CORPUS_DIR's modern.heldout and classical.heldout (the shape of a company's
own reviews and texts), takes ``--lines`` lines of 10 to 60 characters of modern.txt that the
index does not hold (the first 5,000 such lines, shuffled with seed 0), masks each Han character
in turn and fills it with the bundled model, with and without the index. Prints top-1 both ways
and the blanks the index turns from right to wrong and from wrong to right (docs/INDEX.md,
"What they don't catch"); ``--show N`` lists the first N right-to-wrong blanks with the index's
answer, its score, the model's score for it and its 出处.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import tempfile
from pathlib import Path

from tiankong import FillMasker
from tiankong.index import build_index

BATCH = 64


def is_han(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff"


def unseen_lines(corpus: Path, count: int) -> list[str]:
    with lzma.open(corpus / "modern.heldout.txt.xz", "rt", encoding="utf-8") as handle:
        held = set(handle.read().splitlines())
    lines: list[str] = []
    with lzma.open(corpus / "modern.txt.xz", "rt", encoding="utf-8") as handle:
        for raw in handle:
            line = raw.strip()
            if 10 <= len(line) <= 60 and line not in held:
                lines.append(line)
            if len(lines) >= 5000:
                break
    random.Random(0).shuffle(lines)
    return lines[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--lines", type=int, default=150)
    parser.add_argument("--show", type=int, default=0)
    args = parser.parse_args()
    lines = unseen_lines(args.corpus, args.lines)
    items = [
        (f"{line[:at]}[MASK]{line[at + 1 :]}", char)
        for line in lines
        for at, char in enumerate(line)
        if is_han(char)
    ]
    with tempfile.TemporaryDirectory() as folder:
        sources = [args.corpus / f"{name}.heldout.txt.xz" for name in ("modern", "classical")]
        build_index(sources, Path(folder) / "idx", progress=False)
        masker = FillMasker.load(index=str(Path(folder) / "idx"))
        right = {"on": 0, "off": 0}
        turned: dict[str, list[tuple[object, ...]]] = {"rw": [], "wr": []}
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            texts = [text for text, _ in chunk]
            grounded = masker.predict_batch(texts, top_k=1)
            alone = masker.predict_batch(texts, top_k=1, index=False)
            for (text, answer), on, off in zip(chunk, grounded, alone, strict=True):
                best, own = on.masks[0][0], off.masks[0][0].token
                right["on"] += best.token == answer
                right["off"] += own == answer
                if (own == answer) != (best.token == answer):
                    key = "rw" if own == answer else "wr"
                    turned[key].append(
                        (text, answer, best.token, best.score, best.model_score, best.memory)
                    )
    print(
        json.dumps(
            {
                "lines": len(lines),
                "blanks": len(items),
                "top1_index_off": right["off"],
                "top1_index_on": right["on"],
                "right_to_wrong": len(turned["rw"]),
                "wrong_to_right": len(turned["wr"]),
            }
        )
    )
    for item in turned["rw"][: args.show]:
        print(json.dumps(item, ensure_ascii=False))


if __name__ == "__main__":
    main()
