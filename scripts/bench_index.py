"""Time opening an index and looking up blanks (p50/p90 per blank).

    nice -n 10 python scripts/bench_index.py INDEX_DIR|bundled TEXT_FILE... [--blanks 1000]

Blanks are one masked Han character in random lines of TEXT_FILE, with up to 30 characters
either side (cut as scripts/fit_index_weight.py cuts its items). A fresh process: the first
lookups also pay for page faults, as a server's first requests do.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
from fit_index_weight import cut_items, read_lines  # scripts/ is on sys.path when run directly

from tiankong.core.text import MASK
from tiankong.index import BlankLookup, default_tokenizer, open_index, tokenizer_fingerprint
from tiankong.index.bundled import open_bundled_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index", help="an index folder, or 'bundled'")
    parser.add_argument("text", type=Path, nargs="+")
    parser.add_argument("--blanks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tokenizer = default_tokenizer()
    started = time.perf_counter()
    if args.index == "bundled":
        index = open_bundled_index(progress=True)
    else:
        index = open_index(args.index, tokenizer_fingerprint(tokenizer))
    opened = time.perf_counter() - started
    lookup = BlankLookup(index, tokenizer)
    items = cut_items(read_lines(args.text), args.blanks, random.Random(args.seed))
    contexts: list[tuple[list[int], list[int]]] = []
    for text, _ in items:
        left, right = text.split(MASK)
        contexts.append(
            (
                tokenizer.encode(left, add_special_tokens=False).ids,
                tokenizer.encode(right, add_special_tokens=False).ids,
            )
        )
    times, matched = [], 0
    for left_ids, right_ids in contexts:
        start = time.perf_counter()
        match = lookup.lookup(left_ids, right_ids, 1)
        times.append(time.perf_counter() - start)
        matched += match is not None
    ms = np.array(times) * 1000
    print(
        json.dumps(
            {
                "index_tokens": index.size,
                "open_s": round(opened, 4),
                "blanks": len(ms),
                "matched": matched,
                "lookup_ms_p50": round(float(np.percentile(ms, 50)), 3),
                "lookup_ms_p90": round(float(np.percentile(ms, 90)), 3),
                "lookup_ms_p99": round(float(np.percentile(ms, 99)), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
