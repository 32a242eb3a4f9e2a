"""Does computing the last encoder layer only at the mask rows save time? A measurement.

    python -m bench.last_layer_at_masks MODEL_DIR [--threads N]

The last layer's keys and values need every row, but its query, attention output and FFN are
needed only where the MLM head looks: at the masks. This exports the model twice, as tiankong
did before (``export.mask_gather_module``) and as it does now for BERT's own layers, with the
last layer computed at the mask rows only (``export.masks_only_last_layer``),
checks both against torch FP32 (1e-4), quantizes both with the VNNI chain's recipes and times
them, taking turns, at batch 1 and batch 32.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench.int8_variants import timings
from tiankong.core.text import TextEncoder, TextLimits
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.export import export, quantize
from tiankong.export.int8_recipe import recipe_chain
from tiankong.export.precision_choice import timed_onnx_engine


def export_with(folder: Path, wrap: Any, out_file: Path) -> float:
    """Export ``wrap(model)`` as export.export_fp32 does; returns max |ONNX - torch FP32|."""
    import torch

    reference = export.mask_gather_module(export.load_masked_lm(folder))
    model = export.load_masked_lm(folder)
    wrapper = wrap(model)
    vocab = export.vocab_of(model)
    trace = export.sample_batch(batch=2, seq_len=8, masks=[1, 3, 9], vocab=vocab)
    raw = out_file.with_name(f"raw-{out_file.name}")
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            tuple(torch.from_numpy(array) for array in trace),
            str(raw),
            dynamo=False,
            opset_version=export.OPSET,
            input_names=list(export.INPUT_NAMES),
            output_names=[export.OUTPUT_NAME],
            dynamic_axes=export.DYNAMIC_AXES,
        )
    export.optimize_graph(raw, out_file, model.config, int(wrap is export.masks_only_last_layer))
    check = export.sample_batch(batch=3, seq_len=11, masks=[2, 11, 20, 24], vocab=vocab)
    with torch.inference_mode():
        expected = reference(*(torch.from_numpy(array) for array in check)).numpy()
    return float(np.abs(export.run_graph(out_file, check) - expected).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    config = export.read_config(args.model)
    encoder = TextEncoder.from_folder(args.model, TextLimits())
    engines: dict[str, OnnxEngine] = {}
    with tempfile.TemporaryDirectory() as temp:
        for name, wrap in (
            ("whole", export.mask_gather_module),
            ("last layer at masks", export.masks_only_last_layer),
        ):
            fp32 = Path(temp) / f"{len(engines)}.onnx"
            diff = export_with(args.model, wrap, fp32)
            fused = export.graph_report(fp32, config["vocab_size"], config["hidden_size"])
            print(
                f"{name}: max |ONNX FP32 - torch FP32| = {diff:.2e}; fused ops "
                f"{fused['fused_ops']}",
                flush=True,
            )
            engines[f"{name} FP32"] = timed_onnx_engine(fp32, "fp32", args.threads)
            for step in recipe_chain("vnni")[:2]:
                int8 = Path(temp) / f"{len(engines)}.onnx"
                quantize.quantize_int8(
                    fp32, int8, config["vocab_size"], config["hidden_size"], step
                )
                engines[f"{name} {step.name}"] = timed_onnx_engine(int8, "int8", args.threads)
        print("ms per call, median (min), engines taking turns:")
        for name, shown in timings(engines, encoder).items():
            print(f"{name}: batch 1 {shown[1]} ms, batch 32 {shown[32]} ms")


if __name__ == "__main__":
    main()
