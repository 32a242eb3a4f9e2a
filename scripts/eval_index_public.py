"""Single-mask top-1/top-5 per category: the bundled model alone vs model + corpus index.

    nice -n 10 python scripts/eval_index_public.py CLOZE.jsonl [--index DIR]

CLOZE.jsonl has {"category", "text", "answers"[, "candidates"]} per line. The index defaults to
the bundled one. Calls the library directly: FillMasker for the model, BlankLookup and
combine_distribution / combine_score for the index.
- one [MASK]: the vocabulary distribution, mixed (top-1 and top-5);
- several adjacent [MASK]s (a whole fill): the model's 10 best whole-word fills plus the
  index's fills of that length, each scored by the model (candidates mode, joint probability)
  and mixed by combine_score with option_match's count of left + fill + right (top-1 only);
- candidates: each option's model score (candidates mode, length-normalised) mixed the same
  way (top-1 only).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from tiankong import FillMasker
from tiankong.core.text import MASK
from tiankong.index import (
    BlankLookup,
    combine_distribution,
    combine_score,
    open_index,
    tokenizer_fingerprint,
)
from tiankong.index.bundled import open_bundled_index
from tiankong.index.lookup import blanks_of
from tiankong.index.options import option_match


def top(row: np.ndarray, banned: np.ndarray, k: int) -> list[int]:
    scores = row.copy()
    scores[banned] = -1.0
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def whole_fill(fm: FillMasker, lookup: BlankLookup, item: dict) -> tuple[str, str, bool]:
    """Best fill by the model alone and with the index, for a whole fill or candidates."""
    text = item["text"]
    single = re.sub(r"(\[MASK\])+", MASK, text)
    if item.get("candidates"):
        options = list(item["candidates"])
        use_joint = False
    else:
        fills = fm.predict(text, top_k=10, mode="whole_word").sequences
        options = [fill.fill for fill in fills]
        use_joint = True
    prepared = fm.prepare(text)
    blank = blanks_of(prepared.input_ids, prepared.mask_indices)[0]
    proposals = lookup.lookup(blank.left, blank.right, blank.length) if use_joint else None
    if proposals is not None:  # the index's own fills of that length join the model's
        for fill in sorted(proposals.fills, key=proposals.fills.__getitem__)[-10:]:
            options.append(fm.encoder.tokenizer.decode(list(fill)).replace(" ", ""))
    options = list(dict.fromkeys(options))
    ranked = fm.predict(single, top_k=5, candidates=tuple(options)).candidates
    model = {c.option: (c.joint if use_joint else c.score) for c in ranked}
    model_best = max(options, key=lambda o: model[o])
    mixed = {}
    matched = proposals is not None
    for option in options:
        ids = fm.encoder.tokenizer.encode(option, add_special_tokens=False).ids
        match = option_match(lookup, blank.left, blank.right, ids)
        mixed[option] = combine_score(model[option], match, ids)
        matched = matched or match is not None
    return model_best, max(options, key=lambda o: mixed[o]), matched


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
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for item in items:
        if item.get("candidates") or item["text"].count(MASK) > 1:
            model_best, index_best, matched = whole_fill(fm, lookup, item)
            counts = tally[item["category"]]
            counts["items"] += 1
            counts["matched"] += matched
            counts["model_top1"] += model_best in item["answers"]
            counts["index_top1"] += index_best in item["answers"]
            continue
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
            f"{c['index_top1']} | {c.get('model_top5', '–')} | {c.get('index_top5', '–')} |"
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
