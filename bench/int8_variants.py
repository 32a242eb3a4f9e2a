"""Which layers make INT8 disagree with FP32: quantize one FP32 export several ways and run the
INT8 quality guard on each.

    python -m bench.int8_variants FP32_EXPORT_DIR [--model MODEL]

FP32_EXPORT_DIR is a cached FP32 export (``<onnx cache>/<model>-fp32-<key>/``, made by any
command that serves the model with ``--precision fp32``); MODEL is the model it was exported from
(default: the bundled model), whose tokenizer the guard needs.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import onnx

from tiankong.build.export import quantize_int8
from tiankong.build.quality_guard import compare_engines
from tiankong.core.models import resolve_model
from tiankong.engines.onnx_engine import OnnxEngine


def linear_names(graph: Any, part: str) -> list[str]:
    """The encoder MatMuls of one kind in every layer, e.g. ``output/dense`` (FFN output)."""
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and "/attention/" not in node.name and f"/{part}/" in node.name
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp32_export", type=Path)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    fp32_file = args.fp32_export / "model.onnx"
    folder = resolve_model(args.model).path
    reference = OnnxEngine(fp32_file, "cpu", "fp32", 0)
    graph = onnx.load(str(fp32_file)).graph
    variants: dict[str, tuple[list[str], list[str]]] = {
        "shipped (MatMul + Attention)": (["MatMul", "Attention"], []),
        "MatMul only (attention FP32)": (["MatMul"], []),
        "FFN output projections FP32": (
            ["MatMul", "Attention"],
            linear_names(graph, "output/dense"),
        ),
        "FFN input projections FP32": (
            ["MatMul", "Attention"],
            linear_names(graph, "intermediate/dense"),
        ),
    }
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    for name, (op_types, excluded) in variants.items():
        out = Path(f"/tmp/tiankong-int8-variant-{len(excluded)}-{len(op_types)}.onnx")
        quantize_int8(
            fp32_file, out, config["vocab_size"], config["hidden_size"], op_types, excluded
        )
        figures = compare_engines(reference, OnnxEngine(out, "cpu", "int8", 0), folder)
        print(
            f"{name}: top-1 agreement {figures['top1_agreement']:.1%}, "
            f"top-5 overlap {figures['top5_overlap']:.1%} on {figures['masks']} masks"
        )


if __name__ == "__main__":
    main()
