"""Two INT8 recipes that leave the encoder's activations alone, against the held-out masks and the
guard: the head alone in INT8 (rescored, the encoder FP32), and ONNX Runtime's weight-only
block-wise quantization (``MatMulNBits``: 8- or 4-bit weights in blocks along the inputs, and at
``accuracy_level`` 4 the activations quantized per block of each row, not per tensor).

    python -m bench.int8_weight_only FP32_EXPORT_DIR CORPUS_DIR [--model MODEL] [--threads 2]

The bundled model's INT8 fails the guard because its dynamic per-tensor activation scales flip
near-ties (docs/PERFORMANCE.md, "Why the GPU-trained bundled model fails the guard"); these
recipes ask whether finer scales, or INT8 only where the bytes are (the head), keep the answers
and still pay. The masks are ``bench.int8_sensitivity``'s (held-out text, not the guard's);
each recipe is timed at batch 1 and 16 on the first 300 of them, the engines taking turns.
``MatMulNBitsQuantizer`` imports ``onnx-ir``, which tiankong's locks leave out:
``pip install onnx-ir`` first.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import tiankong.export.quantize as quantize
from bench.int8_sensitivity import held_out_texts, linears, probabilities
from tiankong.core.decoding import banned_token_ids
from tiankong.engines.base import pad_prepared
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.export.export import read_config
from tiankong.export.int8_recipe import ALL_OP_TYPES, Int8Recipe
from tiankong.export.quality_guard import GuardReference, model_encoder, prepare_to_fit
from tiankong.model_sources import resolve_model

WEIGHT_ONLY = ((8, 32), (8, 128), (4, 32))  # (bits, block size), accuracy level 4
TIMED = 300
ROUNDS = 2


def head_only(fp32_file: Path, out: Path, config: dict[str, int]) -> None:
    """The chain's first recipe with every linear but the head kept in FP32."""
    import onnx

    graph = onnx.load(str(fp32_file), load_external_data=False)
    vocab, hidden = config["vocab_size"], config["hidden_size"]
    heads = quantize.linears_mapping(graph, lambda rows, cols: (rows, cols) == (hidden, vocab))
    encoder_linears = {name for name in linears(fp32_file) if name not in heads}
    plain = quantize.gemms_to_fused_matmul

    def keep_encoder(model: object, names: set[str]) -> None:
        names |= encoder_linears  # quantize_int8 excludes what this set holds
        plain(model, names)

    quantize.gemms_to_fused_matmul = keep_encoder
    try:
        quantize.quantize_int8(
            fp32_file, out, vocab, hidden, Int8Recipe("s8", False, True, ALL_OP_TYPES)
        )
    finally:
        quantize.gemms_to_fused_matmul = plain


def weight_only(fp32_file: Path, out: Path, bits: int, block: int) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=block, is_symmetric=True, accuracy_level=4, bits=bits
    )
    quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32_file)), algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(out), use_external_data_format=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp32_export", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    fp32_file = args.fp32_export / "model.onnx"
    folder = resolve_model(args.model).path
    config = read_config(folder)
    encoder = model_encoder(folder)
    prepared = prepare_to_fit(encoder, held_out_texts(args.corpus))
    banned = banned_token_ids(encoder.vocab)
    reference_engine = OnnxEngine(fp32_file, "cpu", "fp32", args.threads)
    reference = probabilities(reference_engine, prepared, encoder.pad_id, banned).argmax(1)
    guard = GuardReference(reference_engine, folder)
    engines = {"FP32": reference_engine}
    print(f"{len(reference)} held-out masks")
    with tempfile.TemporaryDirectory() as temp:
        made: list[tuple[str, Path]] = []
        out = Path(temp) / "head-only.onnx"
        head_only(fp32_file, out, config)
        made.append(("u8s8 head only (rescored), encoder FP32", out))
        for bits, block in WEIGHT_ONLY:
            out = Path(temp) / f"nbits{bits}-{block}.onnx"
            weight_only(fp32_file, out, bits, block)
            made.append((f"MatMulNBits {bits}-bit, block {block}, accuracy level 4", out))
        for label, path in made:
            engine = OnnxEngine(path, "cpu", "int8", args.threads)
            changed = probabilities(engine, prepared, encoder.pad_id, banned).argmax(1) != reference
            guarded = guard.compare(engine)
            print(
                f"{label}: held-out top-1 {1 - changed.mean():.1%} ({int(changed.sum())} changed), "
                f"guard {guarded['top1_agreement']:.1%} of {guarded['masks']}"
            )
            engines[label] = engine
        rows = prepared[:TIMED]
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(ROUNDS):
            for label, engine in engines.items():
                for size in (1, 16):
                    for start in range(0, len(rows) - size + 1, size):
                        batch = pad_prepared(rows[start : start + size], encoder.pad_id)
                        began = time.perf_counter()
                        engine.mask_logits(batch)
                        times.setdefault((label, size), []).append(time.perf_counter() - began)
        print(
            f"ms per engine call, median (mean), {args.threads} threads, "
            f"{ROUNDS} rounds taking turns:"
        )
        for label in engines:
            cells = [
                f"batch {size} {statistics.median(times[label, size]) * 1e3:.2f} "
                f"({statistics.fmean(times[label, size]) * 1e3:.2f})"
                for size in (1, 16)
            ]
            print(f"  {label}: {', '.join(cells)}")


if __name__ == "__main__":
    main()
