"""Join the training records of a model trained in stages into the one its card is written from.

    python scripts/training_stages.py runs/b runs/c -o runs/c/training.json

Each folder holds the ``training.json`` of one `tiankong train` run (``scripts/train_gpu.py``
adds the machine and the command to its own); the last one's weights are the model's. The result
keeps the last run's ``summary`` and ``options`` at the top, as a single run's record has them,
and every run's record under ``stages`` ("Stage 1", "Stage 2", ...), which
``scripts/model_card.py`` describes one by one (docs/TRAINING.md, "The bundled model").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def joined(folders: list[Path]) -> dict:
    records = [json.loads((f / "training.json").read_text(encoding="utf-8")) for f in folders]
    stages: list[dict] = []
    seen: list[dict] = []
    for record in records:  # a record joined before brings its stages, renumbered
        for stage in record.get("stages") or [record]:
            bare = {key: value for key, value in stage.items() if key != "name"}
            if bare in seen:  # joined into its own input and joined again: once is enough
                continue
            seen.append(bare)
            stages.append({**bare, "name": f"Stage {len(stages) + 1}"})
    last = stages[-1]
    return {"summary": last["summary"], "options": last["options"], "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="the runs, first stage first")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    record = joined(args.folders)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {args.out}: {len(record['stages'])} stages")


if __name__ == "__main__":
    main()
