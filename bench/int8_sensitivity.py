"""Where INT8 loses top-1 agreement: each linear (and each layer) of an export kept in FP32 in
turn, and how close FP32's two best tokens were where INT8 changed the first.

    python -m bench.int8_sensitivity FP32_EXPORT_DIR CORPUS_DIR [--model MODEL] [--weights s8]
        [--no-sweep]

Measured on held-out text, not on the guard's sentences alone, so that no choice is fitted to
the 95 masks that decide: one Han character masked at random (seed 0) in up to 500 modern, 300
classical and 200 wiki_dialogue lines of 8–60 characters from CORPUS_DIR's ``*.heldout.txt.xz``
(the training corpus's held-out part). Every run quantizes with the first recipe of a chain
(``--weights s8``: the VNNI/AMX one; ``u8``: the no-VNNI one), per-channel, the rescored head,
plus the named nodes in FP32; it prints the held-out and the guard's top-1 agreement.
"""

from __future__ import annotations

import argparse
import logging
import lzma
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import tiankong.export.quantize as quantize
from tiankong.core.decoding import banned_token_ids, softmax
from tiankong.core.text import PreparedText
from tiankong.engines.base import pad_prepared
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.export.export import read_config
from tiankong.export.int8_recipe import ALL_OP_TYPES, Int8Recipe
from tiankong.export.quality_guard import (
    GUARD_BATCH,
    GuardReference,
    model_encoder,
    prepare_to_fit,
)
from tiankong.model_sources import resolve_model

HELD_OUT = (("modern", 500), ("classical", 300), ("wiki_dialogue", 200))
NEAR = (0.5, 0.8, 0.9)  # FP32's runner-up as a share of its best token's probability


def held_out_texts(corpus: Path, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for name, wanted in HELD_OUT:
        with lzma.open(corpus / f"{name}.heldout.txt.xz", "rt", encoding="utf-8") as lines:
            kept = [line.strip() for line in lines if 8 <= len(line.strip()) <= 60]
        rng.shuffle(kept)
        taken = 0
        for line in kept:
            han = [index for index, char in enumerate(line) if "\u4e00" <= char <= "\u9fff"]
            if not han:
                continue
            at = rng.choice(han)
            texts.append(f"{line[:at]}[MASK]{line[at + 1 :]}")
            taken += 1
            if taken == wanted:
                break
    return texts


def probabilities(
    engine: OnnxEngine, prepared: Sequence[PreparedText], pad_id: int, banned: np.ndarray
) -> np.ndarray:
    rows = []
    for start in range(0, len(prepared), GUARD_BATCH):
        chunk = softmax(
            engine.mask_logits(pad_prepared(prepared[start : start + GUARD_BATCH], pad_id))
        )
        chunk[:, banned] = -1.0  # never an answer
        rows.append(chunk)
    return np.concatenate(rows)


def linears(fp32_file: Path) -> list[str]:
    import onnx

    graph = onnx.load(str(fp32_file), load_external_data=False).graph
    weights = {tensor.name for tensor in graph.initializer}
    return [
        node.name
        for node in graph.node
        if node.op_type in ("MatMul", "Gemm", "Attention") and node.input[1] in weights
    ]


def layer_of(name: str, last: int) -> str:
    for index in range(last):
        if f"layer.{index}/" in name or name == f"Attention_{index}":
            return f"layer {index}"
    return "head" if name.startswith("/cls/") else f"layer {last} (at the masks)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp32_export", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--model", default=None)
    parser.add_argument("--weights", choices=("s8", "u8"), default="s8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-sweep", action="store_true", help="the whole recipe only")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    fp32_file = args.fp32_export / "model.onnx"
    folder = resolve_model(args.model).path
    config = read_config(folder)
    encoder = model_encoder(folder)
    prepared = prepare_to_fit(encoder, held_out_texts(args.corpus))
    banned = banned_token_ids(encoder.vocab)
    reference_engine = OnnxEngine(fp32_file, "cpu", "fp32", args.threads)
    reference = probabilities(reference_engine, prepared, encoder.pad_id, banned)
    guard = GuardReference(reference_engine, folder)
    best = np.sort(reference, axis=1)[:, -2:]
    closeness = best[:, 0] / best[:, 1]  # FP32's runner-up over its best
    kept: set[str] = set()
    plain = quantize.gemms_to_fused_matmul

    def with_kept(model: object, names: set[str]) -> None:
        names |= kept  # quantize_int8 excludes what this set holds
        plain(model, names)

    quantize.gemms_to_fused_matmul = with_kept
    recipe = Int8Recipe(args.weights, False, True, ALL_OP_TYPES)
    print(f"{recipe.name}; {len(reference)} held-out masks; FP32 kept for:")

    with tempfile.TemporaryDirectory() as temp:

        def measure(label: str, names: Sequence[str], near: bool = False) -> None:
            kept.clear()
            kept.update(names)
            out = Path(temp) / "candidate.onnx"
            quantize.quantize_int8(
                fp32_file, out, config["vocab_size"], config["hidden_size"], recipe
            )
            engine = OnnxEngine(out, "cpu", "int8", args.threads)
            flipped = probabilities(engine, prepared, encoder.pad_id, banned).argmax(1) != (
                reference.argmax(1)
            )
            guarded = guard.compare(engine)
            print(
                f"  {label}: held-out top-1 {1 - flipped.mean():.1%} ({int(flipped.sum())} "
                f"changed), guard {guarded['top1_agreement']:.1%} of {guarded['masks']}"
            )
            for share in NEAR if near else ():
                close = closeness >= share
                print(
                    f"    FP32 runner-up >= {share:.0%} of its best: {close.mean():.1%} of the "
                    f"masks, {int((flipped & close).sum())} of the changes"
                )

        measure("nothing", [], near=True)
        if args.no_sweep:
            return
        names = linears(fp32_file)
        for name in names:
            measure(name, [name])
        last = int(config["num_hidden_layers"]) - 1
        layers: dict[str, list[str]] = {}
        for name in names:
            layers.setdefault(layer_of(name, last), []).append(name)
        for layer, members in layers.items():
            measure(layer, members)


if __name__ == "__main__":
    main()
