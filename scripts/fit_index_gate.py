"""Measure the index's rules (index.lookup.MIN_CONTEXT_HAN, index.combine.MIN_MODEL_RATIO) on
items cut from text, through the product's own predict, index on and off.

    nice -n 10 python scripts/fit_index_gate.py --new CORPUS/modern.heldout.txt.xz \
        CORPUS/classical.heldout.txt.xz [--items 40] [--out docs/index_gate.json]

Items, per group: ``memorised`` (lines of the bundled index's own shipped text) and ``new``
(the --new held-out files, which the index does not hold; where the right weight is near zero):
one Han character as [MASK]; a run of 2-4 Han characters as that many [MASK]s (whole_word);
the same run as [BLANK]. Never an evaluation set. Each setting is scored by top-1 and by how many
items the index turned right->wrong and wrong->right against the model alone. The model's
engine calls are memoised, so each setting costs only the lookups and the mixing.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

import tiankong.index.combine as combine
import tiankong.index.lookup as lookup
from tiankong import FillMasker
from tiankong.core.decoding import is_han
from tiankong.core.text import BLANK, MASK
from tiankong.index.bundled import bundled_sources
from tiankong.training import train_data


def read_lines(paths: list[Path]) -> list[str]:
    """Every non-empty, stripped line of ``paths`` (.txt or .txt.xz), in order."""
    return [line for path in paths for line in train_data.read_lines(path)]


def cut(lines: list[str], count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` items of each kind: char, word (2-4 [MASK]s) and blank ([BLANK])."""
    items: list[dict[str, Any]] = []
    for kind in ("char", "word", "blank"):
        made = 0
        while made < count:
            line = rng.choice(lines)
            length = 1 if kind == "char" else rng.randint(2, 4)
            spots = [
                i
                for i in range(len(line) - length + 1)
                if all(is_han(c) for c in line[i : i + length])
            ]
            if not spots:
                continue
            spot = rng.choice(spots)
            answer = line[spot : spot + length]
            hole = BLANK if kind == "blank" else MASK * length
            text = line[max(0, spot - 30) : spot] + hole + line[spot + length : spot + length + 30]
            items.append({"kind": kind, "text": text, "answer": answer})
            made += 1
    return items


def answer_of(fm: FillMasker, item: dict[str, Any], index: bool) -> str:
    if item["kind"] == "char":
        return fm.predict(item["text"], top_k=1, index=index).masks[0][0].token
    mode = "whole_word" if item["kind"] == "word" else "single"
    result = fm.predict(item["text"], top_k=1, mode=mode, index=index)
    return result.sequences[0].fill if result.sequences else ""


def memoise(fm: FillMasker) -> None:
    """The engine's answers for rows already seen (the model is deterministic)."""
    seen: dict[tuple[tuple[int, ...], tuple[int, ...]], np.ndarray] = {}
    score_rows = fm.score_rows

    def cached(rows: Any, asked: Any) -> list[np.ndarray]:
        keys = [(tuple(r), tuple(a)) for r, a in zip(rows, asked, strict=True)]
        missing = [i for i, key in enumerate(keys) if key not in seen]
        if missing:
            fresh = score_rows([rows[i] for i in missing], [asked[i] for i in missing])
            for i, value in zip(missing, fresh, strict=True):
                seen[keys[i]] = value
        return [seen[key] for key in keys]

    fm.score_rows = cached  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure the index's evidence and floor rules.")
    parser.add_argument("--new", type=Path, nargs="+", required=True, help="held-out text files")
    parser.add_argument("--items", type=int, default=40, help="items per kind and group")
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.0, 1e-6, 1e-4, 1e-3, 1e-2])
    parser.add_argument("--han", type=int, nargs="+", default=[3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    groups = {
        "memorised": cut(read_lines(bundled_sources()), args.items, rng),
        "new": cut(read_lines(args.new), args.items, rng),
    }
    fm = FillMasker.load()
    memoise(fm)
    alone = {
        name: [answer_of(fm, item, False) == item["answer"] for item in items]
        for name, items in groups.items()
    }
    report: dict[str, Any] = {"items_per_kind": args.items, "settings": []}
    for han in args.han:
        for ratio in args.ratios:
            lookup.MIN_CONTEXT_HAN, combine.MIN_MODEL_RATIO = han, ratio
            setting: dict[str, Any] = {"min_context_han": han, "min_model_ratio": ratio}
            for name, items in groups.items():
                for kind in ("char", "word", "blank"):
                    pairs = [
                        (alone[name][i], answer_of(fm, item, True) == item["answer"])
                        for i, item in enumerate(items)
                        if item["kind"] == kind
                    ]
                    setting[f"{name}/{kind}"] = {
                        "model": sum(a for a, _ in pairs),
                        "index": sum(b for _, b in pairs),
                        "right_to_wrong": sum(a and not b for a, b in pairs),
                        "wrong_to_right": sum(b and not a for a, b in pairs),
                    }
            print(json.dumps(setting), flush=True)
            report["settings"].append(setting)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
