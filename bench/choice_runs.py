"""``--precision auto``'s measurement, run several times on one model, to show how often each
choice comes out on this machine (the export makes it once and keeps it).

    python -m bench.choice_runs MODEL [--runs 3] [--threads 2]

MODEL is a model folder or bundled name. Each run builds every candidate, runs the guard on the
OpenVINO ones and times them (``tiankong.export.precision_choice.measure``) into a temporary
entry, then prints the choice's line and each candidate's batch-1 and full-batch milliseconds.
The FP32 and INT8 exports come from the export cache (made there once if missing).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tiankong import Settings
from tiankong.export import precision_choice
from tiankong.export.export_cache import ensure_export
from tiankong.export.int8_recipe import cpu_kind
from tiankong.model_sources import resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    model = resolve_model(args.model)
    settings = Settings(threads=args.threads)
    fp32, int8 = (ensure_export(model, precision, settings) for precision in ("fp32", "int8"))
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as entry:
            choice, _ = precision_choice.measure(
                model.path, fp32.onnx_file, int8.onnx_file, int8.quality, args.threads,
                settings.int8_min_agreement, cpu_kind(), Path(entry),
            )  # fmt: skip
        print(f"run {run}: {choice.line()}", flush=True)
        for candidate in choice.candidates:
            if not candidate.missing:
                print(
                    f"    {candidate.key}: batch 1 {candidate.b1_ms:.2f} ms, batch "
                    f"{precision_choice.FULL_BATCH} {candidate.batch_ms:.2f} ms, agreement "
                    f"{100 * candidate.top1_agreement:.1f}%",
                    flush=True,
                )


if __name__ == "__main__":
    main()
