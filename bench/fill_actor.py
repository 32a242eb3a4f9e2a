"""Rows a second through one ``fill --ray`` actor, called as Ray Data calls it (no Ray needed):
``FillActor`` on pyarrow tables of ``--batch-size`` texts, the default settings (the bundled
model, ``--precision auto``, its index) on one thread.

    python -m bench.fill_actor                                  # this code
    PYTHONPATH=/tmp/old/src:. python -m bench.fill_actor        # another tree, in turns

The texts: ``bench/sentences.py``'s sentences (one [MASK] each, as the load tests send).
"""

from __future__ import annotations

import argparse
import time

from bench.sentences import sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import pyarrow as pa

    from tiankong import Settings
    from tiankong.core.options import PredictOptions
    from tiankong.offline.ray_fill import FillActor

    actor = FillActor(Settings(threads=1), PredictOptions(), "text")
    rows = sentences(0, args.texts)
    size = args.batch_size
    actor(pa.table({"text": rows[:size]}))  # warm-up
    engine = actor.masker.engine
    for _ in range(args.rounds):
        started = time.perf_counter()
        for start in range(0, len(rows), size):
            actor(pa.table({"text": rows[start : start + size]}))
        rate = len(rows) / (time.perf_counter() - started)
        print(f"{rate:.1f} rows/s ({engine.name} {engine.precision}, {len(rows)} texts)")


if __name__ == "__main__":
    main()
