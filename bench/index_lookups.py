"""Time the bundled index's blank lookups on a fixed set of queries, and check that a change to
the lookup code gives the same matches.

    python -m bench.index_lookups --save /tmp/matches.pkl     # before the change
    python -m bench.index_lookups --compare /tmp/matches.pkl  # after it: every match equal?

The queries (about 2,800, the same on every run): 400 bench sentences (``bench/sentences.py``)
with one character blanked; every item of ``data/eval/public_cloze.jsonl``; 300 lines of each
bundled corpus file (poems, idioms, xiehouyu) with blanks of 1, 2 and 4 tokens; and a few edge
cases (one side empty, special tokens, long repeated contexts). ``--compare`` exits 1 when any
``BlankMatch`` differs (fills, counts, positions, back-off, evidence fields). The figure is
microseconds a lookup, after 200 warm-up lookups.
"""

from __future__ import annotations

import argparse
import json
import lzma
import pickle
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.models import REPO_ROOT
from bench.sentences import sentence

CORPUS = REPO_ROOT / "src" / "tiankong" / "bundled" / "corpus"
CLOZE = REPO_ROOT / "data" / "eval" / "public_cloze.jsonl"
Query = tuple[list[int], list[int], int]


def queries(tokenizer: Any) -> list[Query]:
    rng = random.Random(7)
    found: list[Query] = []

    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    def blank_in(text: str, length: int) -> None:
        tokens = ids(text)
        if len(tokens) > length:
            start = rng.randrange(0, len(tokens) - length + 1)
            found.append((tokens[:start], tokens[start + length :], length))

    for number in range(400):
        blank_in(sentence(number * 37).replace("[MASK]", "x"), 1)
    for line in CLOZE.read_text(encoding="utf-8").splitlines():
        left, _, right = json.loads(line)["text"].partition("[MASK]")
        found.append((ids(left), ids(right.replace("[MASK]", "。")), 1))
    for name in ("classical", "idioms", "xiehouyu"):
        with lzma.open(CORPUS / f"{name}.txt.xz", "rt", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        for line in rng.sample(lines, 300):
            for length in (1, 2, 4):
                blank_in(line[:80], length)
    found += [
        ([], ids("天高任鸟飞"), 1),
        (ids("海阔凭鱼"), [], 1),
        ([101, *ids("春眠不觉晓，处处闻啼")], [511, 102], 1),
        (ids("一" * 40), ids("的" * 40), 1),
        (ids("，" * 30), ids("。" * 30), 2),
    ]
    return found


def main() -> None:
    from tiankong.index import BlankLookup, default_tokenizer
    from tiankong.index.bundled import open_bundled_index

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write the matches here")
    parser.add_argument("--compare", type=Path, help="the matches --save wrote before")
    args = parser.parse_args()
    tokenizer = default_tokenizer()
    lookup = BlankLookup(open_bundled_index(progress=False), tokenizer)
    asked = queries(tokenizer)
    for query in asked[:200]:
        lookup.lookup(*query)
    started = time.perf_counter()
    matches = [lookup.lookup(*query) for query in asked]
    per_lookup = (time.perf_counter() - started) / len(asked) * 1e6
    matched = sum(match is not None for match in matches)
    print(f"{len(asked)} lookups, {matched} matched: {per_lookup:.1f} us a lookup")
    if args.save:
        args.save.write_bytes(pickle.dumps((asked, matches)))
    if args.compare:
        before_asked, before = pickle.loads(args.compare.read_bytes())
        if before_asked != asked:
            sys.exit("The saved queries are not this run's; save them again with this code.")
        differ = [n for n, (old, new) in enumerate(zip(before, matches, strict=True)) if old != new]
        print(f"matches that differ from {args.compare}: {len(differ)} of {len(asked)}")
        if differ:
            sys.exit(1)


if __name__ == "__main__":
    main()
