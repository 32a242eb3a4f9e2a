"""[BLANK] fills of idioms' tails with the default install (the bundled model and index).

    python scripts/blank_tails.py --out after.json [--against before.json] [--seed 7 --idioms 150]

Draws ``--idioms`` four-character idioms at random (``--seed``) from the bundled idiom list and
asks for each one's tail as a [BLANK]: the last character or the last two at the text's end
(守株待[BLANK], 守株[BLANK]) and in the middle of a sentence (他说这叫守株待[BLANK]，没错。).
Prints top-1 per kind and writes every answer to ``--out``; ``--against`` a file an earlier
tree wrote (``PYTHONPATH=OLD/src``) counts the items turned from right to wrong and back
(docs/INDEX.md, "A fill that runs on past where passages end").
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
from pathlib import Path

from tiankong import FillMasker
from tiankong.core.models import BUNDLED_ROOT

KINDS = {  # name: (characters in the blank, the text around the idiom's head)
    "end1": (1, "{head}[BLANK]"),
    "end2": (2, "{head}[BLANK]"),
    "mid1": (1, "他说这叫{head}[BLANK]，没错。"),
    "mid2": (2, "他说这叫{head}[BLANK]，没错。"),
}


def idioms(count: int, seed: int) -> list[str]:
    path = BUNDLED_ROOT / "corpus" / "idioms.txt.xz"
    with lzma.open(path, "rt", encoding="utf-8") as lines:
        words = lines.read().split()
    four = sorted({w for w in words if len(w) == 4 and all("\u4e00" <= c <= "\u9fff" for c in w)})
    return random.Random(seed).sample(four, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--idioms", type=int, default=150)
    args = parser.parse_args()
    sample = idioms(args.idioms, args.seed)
    masker = FillMasker.load()
    answers: dict[str, list[str | None]] = {}
    for kind, (size, template) in KINDS.items():
        got = answers.setdefault(kind, [])
        for word in sample:
            fills = masker.predict(template.format(head=word[:-size])).sequences
            got.append(fills[0].fill if fills else None)
        right = sum(g == w[-size:] for g, w in zip(got, sample, strict=True))
        line = f"{kind}: {right} / {len(sample)} top-1"
        if args.against:
            before = json.loads(args.against.read_text(encoding="utf-8"))[kind]
            gold = [w[-size:] for w in sample]
            lost = sum(b == t != g for b, g, t in zip(before, got, gold, strict=True))
            won = sum(g == t != b for b, g, t in zip(before, got, gold, strict=True))
            line += f"; right -> wrong {lost}, wrong -> right {won}"
        print(line, flush=True)
    args.out.write_text(json.dumps(answers, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
