"""Single-mask top-1/top-5 per category: the bundled model alone vs model + corpus index.

    nice -n 10 python scripts/eval_index_public.py CLOZE.jsonl [--index DIR]

CLOZE.jsonl has {"category", "text", "answers"} per line; items with more than one [MASK] or
with candidates are left out (the whole-fill and candidate paths are wired in later). The
index defaults to the bundled one. Calls the library directly: FillMasker for the model's
distribution, BlankLookup + combine_distribution for the index.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from tiankong import FillMasker
from tiankong.index import BlankLookup, combine_distribution, open_index, tokenizer_fingerprint
from tiankong.index.bundled import open_bundled_index
from tiankong.index.lookup import blanks_of
from tiankong.text import MASK


def top(row: np.ndarray, banned: np.ndarray, k: int) -> list[int]:
    scores = row.copy()
    scores[banned] = -1.0
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cloze", type=Path)
    parser.add_argument("--index", type=Path)
    args = parser.parse_args()
    fm = FillMasker.load()
    index = (
        open_index(args.index, tokenizer_fingerprint(fm.encoder.tokenizer))
        if args.index
        else open_bundled_index()
    )
    lookup = BlankLookup(index)
    items = [json.loads(line) for line in args.cloze.read_text(encoding="utf-8").splitlines()]
    items = [i for i in items if i["text"].count(MASK) == 1 and not i.get("candidates")]
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for item in items:
        prepared = fm.prepare(item["text"])
        row = fm.mask_probabilities([prepared])[0][0]
        blank = blanks_of(prepared.input_ids, prepared.mask_indices)[0]
        match = lookup.lookup(blank.left, blank.right, 1)
        mixed = combine_distribution(row, match)
        answers = {fm.encoder.vocab.get(a) for a in item["answers"]}
        counts = tally[item["category"]]
        counts["items"] += 1
        counts["matched"] += match is not None
        for name, dist in (("model", row), ("index", mixed)):
            best = top(dist, fm.banned, 5)
            counts[f"{name}_top1"] += best[0] in answers
            counts[f"{name}_top5"] += bool(answers & set(best))
    print(
        "| category | items | matched | model top-1 | +index top-1 | model top-5 | +index top-5 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    total: dict[str, int] = defaultdict(int)
    for category, counts in [*sorted(tally.items()), ("all", total)]:
        if category != "all":
            for key, value in counts.items():
                total[key] += value
        c = counts
        print(
            f"| {category} | {c['items']} | {c['matched']} | {c['model_top1']} | "
            f"{c['index_top1']} | {c['model_top5']} | {c['index_top5']} |"
        )
    prepared = fm.prepare("画龙点[MASK]")
    blank = blanks_of(prepared.input_ids, prepared.mask_indices)[0]
    match = lookup.lookup(blank.left, blank.right, 1)
    mixed = combine_distribution(fm.mask_probabilities([prepared])[0][0], match)
    best = top(mixed, fm.banned, 3)
    print("画龙点[MASK]:")
    for token in best:
        memory = lookup.evidence(match, [token]) if match else None
        print(f"  {fm.encoder.token_string(token)} {mixed[token]:.4f} memory={memory}")


if __name__ == "__main__":
    main()
