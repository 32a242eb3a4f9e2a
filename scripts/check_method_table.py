"""The proofreading method table in docs/PROOFREADING.md: each variant on one eval file.

    python scripts/check_method_table.py data/eval/check_dev.jsonl

The thresholds (the defaults of ``CheckMethod``) were chosen on the dev split; the test split
is only reported. Prints one markdown row per variant: sentence-level correction P/R/F1,
detection F1, false alarms on clean sentences and sentences per second.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tiankong import FillMasker
from tiankong.offline.check_eval import evaluate_check, read_check_items
from tiankong.tasks.check import CheckMethod, Proofreader

NO_IDIOMS = {"idiom_model_ratio": 0.0}
VARIANTS: list[tuple[str, dict[str, object]]] = [
    ("model, every position masked", {"detect": "masked", "use_index": False, **NO_IDIOMS}),
    ("model, unmasked pass picks suspects", {"use_index": False, **NO_IDIOMS}),
    ("+ idiom list", {"use_index": False}),
    ("+ corpus index (the default)", {}),
    ("default, any character at 8 context tokens", {"index_any_context": 8}),
    ("default, every position masked", {"detect": "masked"}),
    ("default, 8 suspects at ratio 1e-4", {"suspects": 8, "suspect_ratio": 1e-4}),
    ("default, min_ratio 30", {"min_ratio": 30.0}),
    ("default, index context 3 with the model", {"index_context": 3}),
    ("default, index context on one side enough", {"index_both_sides": False}),
    (
        "default, a confusable idiom character needs the model's preference too",
        {"idiom_confusable_ratio": 1.0},
    ),
]


def main() -> None:
    path = Path(sys.argv[1])
    items = read_check_items(path)
    masker = FillMasker.load()
    print(f"`{path}` ({len(items)} sentences), {masker.engine.name} {masker.engine.precision}\n")
    print("| variant | cor P | cor R | cor F1 | det F1 | false alarms | sentences/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, changes in VARIANTS:
        checker = Proofreader(masker, CheckMethod(**changes))  # type: ignore[arg-type]
        report = evaluate_check(checker, items, str(path))
        f = report.overall.figures()
        print(
            f"| {name} | {f['correction_precision']:.3f} | {f['correction_recall']:.3f} | "
            f"**{f['correction_f1']:.3f}** | {f['detection_f1']:.3f} | "
            f"{f['false_alarm_rate']:.1%} | {report.sentences_per_s:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
