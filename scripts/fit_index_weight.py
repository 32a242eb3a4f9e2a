"""Fit the index weight (tiankong.index.combine.FITTED_WEIGHT) on cloze items cut from text.

    nice -n 10 python scripts/fit_index_weight.py --new CORPUS/classical.heldout.txt.xz \
        CORPUS/modern.heldout.txt.xz [--items 1500] [--index DIR]

Items: one Han character masked in a random line, half from lines IN the index (memorised
text: by default the bundled index and its shipped text) and half from --new files (text the
index has not seen). Never an evaluation set. The model is the bundled one (FillMasker.load()).
Matches that fail the evidence rule (tiankong.index.lookup.holds_evidence) count as no match,
as in the product. Method: maximise the mean log-probability of the masked character under
(1 - w) p_model + w p_index over w = sigmoid(bias + per_token * tokens + per_log_count * ln n),
by gradient ascent, on even-numbered items; the odd-numbered items report the held-out figures.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from tiankong import FillMasker
from tiankong.core.text import MASK
from tiankong.index.bundled import bundled_sources, open_bundled_index
from tiankong.index.combine import CONTEXT_CAP, FITTED_WEIGHT, IndexWeight, holds_evidence
from tiankong.index.lookup import BlankLookup, blanks_of
from tiankong.index.store import CorpusIndex
from tiankong.training import train_data


def is_han(char: str) -> bool:
    return 0x4E00 <= ord(char) <= 0x9FFF


def read_lines(paths: list[Path]) -> list[str]:
    """Every non-empty, stripped line of ``paths`` (.txt or .txt.xz), in order."""
    return [line for path in paths for line in train_data.read_lines(path)]


def cut_items(lines: list[str], count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``(text with one [MASK], answer)`` from ``count`` random lines, window ~60 chars."""
    items: list[tuple[str, str]] = []
    while len(items) < count:
        line = rng.choice(lines)
        spots = [i for i, c in enumerate(line) if is_han(c)]
        if not spots:
            continue
        spot = rng.choice(spots)
        start = max(0, spot - 30)
        text = line[start:spot] + MASK + line[spot + 1 : spot + 31]
        items.append((text, line[spot]))
    return items


def collect(fm: FillMasker, lookup: BlankLookup, items: list[tuple[str, str]]) -> list[dict]:
    """Per item: the model's p(answer), its best allowed token, and the index match."""
    rows: list[dict] = []
    prepared = [fm.prepare(text) for text, _ in items]
    probabilities = fm.mask_probabilities(prepared)
    for (_, answer), item, probs in zip(items, prepared, probabilities, strict=True):
        row = probs[0].copy()
        answer_id = fm.encoder.vocab.get(answer)
        if answer_id is None:
            continue
        row[fm.banned] = -1.0
        blank = blanks_of(item.input_ids, item.mask_indices)[0]
        match = lookup.lookup(blank.left, blank.right, 1)
        if not holds_evidence(match):
            match = None  # the evidence rule: the product never mixes such a match in
        record: dict[str, Any] = {
            "answer": answer_id,
            "model_answer": float(probs[0][answer_id]),
            "model_top": int(row.argmax()),
            "model_top_p": float(row.max()),
            "match": None,
        }
        if match is not None:
            record["match"] = {
                "tokens": min(match.context_length, CONTEXT_CAP),
                "log_n": float(np.log(match.total)),
                "index_answer": match.probability([answer_id]),
                "fills": {f[0]: match.probability(f) for f in match.fills},
                "model_fills": {f[0]: float(probs[0][f[0]]) for f in match.fills},
            }
        rows.append(record)
    return rows


def weight_of(theta: np.ndarray, features: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(features @ theta)))


def fit(rows: list[dict], steps: int = 20_000, rate: float = 0.05) -> np.ndarray:
    matched = [row for row in rows if row["match"]]
    x = np.array([[1.0, r["match"]["tokens"], r["match"]["log_n"]] for r in matched])
    pm = np.array([r["model_answer"] for r in matched])
    pi = np.array([r["match"]["index_answer"] for r in matched])
    scale = np.array([1.0, CONTEXT_CAP, max(1.0, x[:, 2].max())])
    xs = x / scale
    theta = np.zeros(3)
    for _ in range(steps):
        w = weight_of(theta, xs)
        mix = (1 - w) * pm + w * pi + 1e-12
        gradient = (((pi - pm) / mix) * w * (1 - w)) @ xs / len(xs)
        theta += rate * gradient / max(1e-3, np.abs(gradient).max()) * 0.1
    return theta / scale


def evaluate(rows: list[dict], weight: IndexWeight | None) -> dict[str, float]:
    """Top-1 accuracy and mean log-probability of the answer, model alone or with the index."""
    top1, logp = [], []
    for row in rows:
        match = row["match"]
        w = 0.0
        if match is not None and weight is not None:
            z = (
                weight.bias
                + weight.per_token * match["tokens"]
                + weight.per_log_count * match["log_n"]
            )
            w = 1.0 / (1.0 + np.exp(-z))
        p_answer = (1 - w) * row["model_answer"] + (w * match["index_answer"] if match else 0.0)
        scores = {row["model_top"]: (1 - w) * row["model_top_p"]}
        if match and w > 0:
            for fill, share in match["fills"].items():
                scores[fill] = (1 - w) * match["model_fills"][fill] + w * share
        top1.append(max(scores, key=scores.__getitem__) == row["answer"])
        logp.append(np.log(max(p_answer, 1e-12)))
    return {"top1": float(np.mean(top1)), "mean_log_p": float(np.mean(logp)), "items": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description="Fit the corpus-index weight.")
    parser.add_argument("--new", type=Path, nargs="+", required=True, help="held-out text files")
    parser.add_argument("--index", type=Path, help="an index folder (default: the bundled one)")
    parser.add_argument("--memorised", type=Path, nargs="*", help="the index's own text files")
    parser.add_argument("--items", type=int, default=1500, help="items per group")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    index = CorpusIndex.open(args.index) if args.index else open_bundled_index()
    memorised_files = args.memorised or bundled_sources()
    fm = FillMasker.load()
    lookup = BlankLookup(index)
    groups = {
        "memorised": collect(fm, lookup, cut_items(read_lines(memorised_files), args.items, rng)),
        "new": collect(fm, lookup, cut_items(read_lines(args.new), args.items, rng)),
    }
    train = [row for rows in groups.values() for row in rows[0::2]]
    theta = fit(train)
    fitted = IndexWeight(
        bias=float(theta[0]), per_token=float(theta[1]), per_log_count=float(theta[2])
    )
    report: dict[str, object] = {"fitted": fitted.__dict__, "in_package": FITTED_WEIGHT.__dict__}
    for name, rows in groups.items():
        test = rows[1::2]
        report[name] = {
            "matched": float(np.mean([row["match"] is not None for row in test])),
            "model": evaluate(test, None),
            "model+index (fitted)": evaluate(test, fitted),
            "model+index (in package)": evaluate(test, FITTED_WEIGHT),
        }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
