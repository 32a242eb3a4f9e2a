"""Whether a text's answer depends on the batch it lands in: each text checked alone, then the
same texts in batches, and the corrections that differ counted.

    python scripts/check_determinism.py data/eval/check_dev.jsonl data/eval/check_test.jsonl
    python scripts/check_determinism.py FILES... --split-engines   # --precision auto's split
    python scripts/check_determinism.py FILES... --precision bf16 --batch 16

A server batches whatever is in flight together, so a text met alone at a quiet moment and
among 15 others at a busy one must be answered alike. With one engine it is (padding aside,
the same arithmetic); under ``--split-engines`` a batch under the split's rows goes to one
engine and a larger batch to the other, which scores in another precision or library.
Prints the engine that served and the count of texts whose correction differed, with the first
few; exit 0 either way (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tiankong import FillMasker, Settings
from tiankong.engines.split import served_text
from tiankong.tasks.check.proofreader import Proofreader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="proofreading JSONL files (text)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--split-engines", action="store_true")
    parser.add_argument("--batch", type=int, default=16, help="texts per batch (default 16)")
    args = parser.parse_args()
    texts = [
        json.loads(line)["text"]
        for path in args.files
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    settings = Settings(precision=args.precision, split_engines=args.split_engines)
    checker = Proofreader(FillMasker.load(settings=settings))
    print(f"served: {served_text(checker.masker.engine)} ({checker.masker.engine.name})")
    started = time.perf_counter()
    alone = [checker.check(text).corrected for text in texts]
    batched = [
        result.corrected
        for first in range(0, len(texts), args.batch)
        for result in checker.check_batch(texts[first : first + args.batch])
    ]
    differ = [(one, many) for one, many in zip(alone, batched, strict=True) if one != many]
    seconds = time.perf_counter() - started
    print(
        f"{len(texts)} texts, alone against batches of {args.batch}: {len(differ)} corrected "
        f"differently ({seconds:.0f} s)"
    )
    for one, many in differ[:10]:
        print(f"  alone: {one}\n  batch: {many}")


if __name__ == "__main__":
    main()
