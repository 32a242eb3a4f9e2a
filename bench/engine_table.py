"""Engines side by side on one CPU: ORT FP32 and INT8 (tiankong's exports), OpenVINO FP32 and
bf16 on the same FP32 graph, and OpenVINO INT8 quantized by NNCF, engine-only (no server), at
batch 1 and batch 16, with top-1 agreement against ORT FP32 on the INT8 guard's sentences.

    python -m bench.engine_table [--models bundled,random-base] [--threads 2] [--no-nncf]

OpenVINO and NNCF are optional: a missing one is a row that says so (NNCF is in no extra:
``pip install 'tiankong[nncf]'``). NNCF quantizes twice: with its transformer defaults, and
as ``--precision auto``'s ``openvino int8`` candidate does (``tiankong.export.openvino_int8``:
SmoothQuant off); its models compile with OpenVINO's default inference precision, which is bf16
for what stays unquantized on a CPU with bf16 units. Both calibrate on that module's
training-side text (its own sentences and the bundled corpus's lines, one [MASK] each), never on
the guard's sentences they are then judged on, nor on any eval set. The
engines take turns round by round, so a change in the machine's load falls on all of them; the
header gives the load before and after. Markdown to stdout, JSON to ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.models import resolve
from bench.sentences import sentence
from tiankong import Settings
from tiankong.core.text import TextEncoder, TextLimits
from tiankong.engines.base import EncodedBatch, Engine, pad_prepared
from tiankong.engines.openvino_engine import HINTS, OpenVinoEngine, has_openvino
from tiankong.export import openvino_int8
from tiankong.export.export_cache import ensure_export
from tiankong.export.int8_recipe import cpu_flags, cpu_has_bf16, cpu_kind
from tiankong.export.precision_choice import time_in_turns, timed_onnx_engine
from tiankong.export.quality_guard import GuardReference
from tiankong.model_sources import resolve_model

ROUNDS = {1: 30, 16: 5}  # timed rounds per batch size, after one warm-up call each
SHOWN_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


class NncfEngine:
    """OpenVINO INT8 by NNCF's defaults for a transformer (SmoothQuant on), calibrated on
    ``calibration`` batches: the row beside tiankong's own (SmoothQuant off), for comparison."""

    name = "openvino"
    device = "cpu"
    precision = "int8"
    device_reason: str | None = None

    def __init__(self, onnx_file: Path, threads: int, calibration: list[EncodedBatch]) -> None:
        import nncf
        import openvino as ov

        core = ov.Core()
        model = core.read_model(str(onnx_file))
        names = [port.get_any_name() for port in model.inputs]
        dataset = nncf.Dataset(calibration, lambda batch: batch.feed(names))
        quantized = nncf.quantize(
            model, dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration)
        )
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
        config["INFERENCE_NUM_THREADS"] = str(threads)
        self.names = names
        self.request = core.compile_model(quantized, "CPU", config).create_infer_request()

    def mask_logits(self, batch: EncodedBatch) -> Any:
        import numpy as np

        self.request.infer(batch.feed(self.names))
        return np.array(self.request.get_output_tensor(0).data, dtype=np.float32)


def batches(encoder: TextEncoder, texts: list[str], size: int) -> list[EncodedBatch]:
    prepared = [encoder.prepare(text) for text in texts]
    return [
        pad_prepared(prepared[start : start + size], encoder.pad_id)
        for start in range(0, len(prepared), size)
    ]


def make_engines(
    model_key: str, threads: int, nncf: bool
) -> tuple[dict[str, Engine], dict[str, str], Path, TextEncoder]:
    bench_model = resolve(model_key)
    if bench_model.path is None:
        raise SystemExit(f"bench: {bench_model.missing}")
    model = resolve_model(str(bench_model.path))
    settings = Settings(threads=threads)
    fp32 = ensure_export(model, "fp32", settings)
    int8 = ensure_export(model, "int8", settings)
    encoder = TextEncoder.from_folder(model.path, TextLimits())
    engines: dict[str, Engine] = {
        "ORT FP32": timed_onnx_engine(fp32.onnx_file, "fp32", threads),
        f"ORT INT8 ({int8.quality['recipe']['name']})": timed_onnx_engine(
            int8.onnx_file, "int8", threads
        ),
    }
    missing: dict[str, str] = {}
    attempts: dict[str, Callable[[], Engine]] = {
        "OpenVINO FP32": lambda: OpenVinoEngine(fp32.onnx_file, "fp32", threads),
        "OpenVINO bf16": lambda: OpenVinoEngine(fp32.onnx_file, "bf16", threads),
    }
    if nncf:
        calibration = openvino_int8.calibration_batches(encoder)
        attempts["OpenVINO INT8 (NNCF defaults)"] = lambda: NncfEngine(
            fp32.onnx_file, threads, calibration
        )
        ir_folder = Path(tempfile.mkdtemp(prefix="tiankong-engine-table-"))
        attempts["OpenVINO INT8 (tiankong's: NNCF, SmoothQuant off)"] = lambda: OpenVinoEngine(
            openvino_int8.quantize(fp32.onnx_file, model.path, ir_folder), "int8", threads
        )
    for label, build in attempts.items():
        if not has_openvino():
            missing[label] = "openvino is not installed"
            continue
        try:
            with contextlib.redirect_stdout(sys.stderr):  # NNCF's progress bars: not the table
                engines[label] = build()
        except ImportError as error:
            missing[label] = f"{error.name} is not installed"
        except Exception as error:
            missing[label] = str(getattr(error, "message", error))
    return engines, missing, model.path, encoder


def measure(model_key: str, threads: int, nncf: bool) -> dict[str, Any]:
    engines, missing, folder, encoder = make_engines(model_key, threads, nncf)
    guard = GuardReference(engines["ORT FP32"], folder)
    agreement = {name: guard.compare(engine) for name, engine in engines.items()}
    texts = [sentence(index) for index in range(16)]
    speed = {
        size: time_in_turns(engines, batches(encoder, texts[:size], size)[0], ROUNDS[size])
        for size in ROUNDS
    }
    rows = [
        {
            "engine": name,
            "b1_ms": round(speed[1][name], 2),
            "b16_ms": round(speed[16][name], 2),
            "top1_agreement": agreement[name]["top1_agreement"],
            "masks": agreement[name]["masks"],
        }
        for name in engines
    ]
    rows += [{"engine": name, "missing": why} for name, why in missing.items()]
    return {"model": model_key, "rows": rows}


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in ("onnxruntime", "openvino", "nncf"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"CPU kind `{report['cpu_kind']}` (flags: {', '.join(report['cpu_flags']) or 'none'}; "
        f"bf16 units: {'yes' if report['bf16'] else 'no'}), {report['threads']} threads, "
        f"{report['versions']}; {report['load_before']} before, {report['load_after']} after.",
        "",
    ]
    for model in report["models"]:
        lines += [
            f"**{model['model']}** (engine-only, median ms per call; agreement: top-1 with ORT "
            "FP32 on the guard's masks)",
            "",
            "| engine | b1 ms | b16 ms | b16 vs ORT INT8 | top-1 agreement |",
            "|---|---:|---:|---:|---:|",
        ]
        timed = [row for row in model["rows"] if "missing" not in row]
        int8 = next(row for row in timed if row["engine"].startswith("ORT INT8"))
        for row in timed:
            lines.append(
                f"| {row['engine']} | {row['b1_ms']:.2f} | {row['b16_ms']:.1f} | "
                f"{int8['b16_ms'] / row['b16_ms']:.2f}x | "
                f"{100 * row['top1_agreement']:.1f}% of {row['masks']} |"
            )
        lines += [
            f"| {row['engine']} | - | - | - | {row['missing']} |"
            for row in model["rows"]
            if "missing" in row
        ]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bundled,random-base")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-nncf", action="store_true", help="skip OpenVINO INT8 (NNCF)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "cpu_kind": cpu_kind(),
        "cpu_flags": sorted(flag for flag in cpu_flags() if flag in SHOWN_FLAGS),
        "bf16": cpu_has_bf16(),
        "threads": args.threads,
        "versions": versions(),
        "load_before": load(),
        "openvino_hints": HINTS,
    }
    report["models"] = [
        measure(key.strip(), args.threads, not args.no_nncf) for key in args.models.split(",")
    ]
    report["load_after"] = load()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.write(markdown(report) + "\n")


if __name__ == "__main__":
    main()
