"""Quantize an optimised FP32 export to INT8: the recipe chain's attempts under the quality
guard (``export_int8``) and one recipe's graph (``quantize_int8``).

onnx and onnxruntime's quantization are imported inside the functions that need them, and
``export_worker`` runs those in a child process, so serving never imports them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiankong.export.export import graph_report, read_config

if TYPE_CHECKING:
    from tiankong.export.int8_recipe import Int8Recipe

# Dynamic INT8 for the encoder's MatMuls and fused Attention (``int8_recipe`` picks the settings
# and the fallbacks by CPU). The embeddings stay FP32. The head (the vocabulary projection at the
# mask rows) is INT8 too, and its best ``RESCORED`` columns per mask are scored again in FP32
# (``rescore_head_in_fp32``), so the answer's order and top scores are an FP32 head's; a recipe
# with ``HEAD`` in ``fp32_parts`` keeps the head FP32 instead (int8_recipe's docstring says why).
# CPU features that decide the INT8 recipe or its speed, recorded with an INT8 export.
REPORTED_CPU_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")


def export_int8(
    folder: Path, fp32_file: Path, out_file: Path, threads: int, cpu: str, min_agreement: float
) -> dict[str, Any]:
    """Quantize ``fp32_file`` by each recipe of the ``cpu`` kind's chain until one reaches
    ``min_agreement`` top-1 agreement with FP32 on the guard sentences; write it to ``out_file``.

    Returns the graph report and ``quality``: the guard's figures for the recipe kept, whether it
    passed, the recipe, the CPU kind and flags, and every attempt. Computed here, once per
    export, and stored in its manifest; the engine, /info, the model card and the bench read it.
    """
    from tiankong.engines.onnx_engine import OnnxEngine
    from tiankong.export.int8_recipe import choose_recipe, cpu_flags, recipe_chain
    from tiankong.export.quality_guard import GuardReference

    config = read_config(folder)
    # DistilBERT names its width "dim" (a KeyError here stopped its INT8 export)
    vocab_size, hidden = int(config["vocab_size"]), int(config.get("hidden_size") or config["dim"])
    guard = GuardReference(OnnxEngine(fp32_file, "cpu", "fp32", threads), folder)
    chain = recipe_chain(cpu)
    candidates: dict[str, Path] = {}

    def measure(step: Int8Recipe) -> dict[str, Any]:
        candidate = out_file.with_name(f"candidate-{len(candidates)}.onnx")
        candidates[step.name] = candidate
        quantize_int8(fp32_file, candidate, vocab_size, hidden, step)
        return guard.compare(OnnxEngine(candidate, "cpu", "int8", threads))

    choice = choose_recipe(chain, measure, min_agreement)
    candidates.pop(choice.recipe.name).rename(out_file)
    for leftover in candidates.values():
        leftover.unlink()
    flags = sorted(flag for flag in cpu_flags() if flag in REPORTED_CPU_FLAGS)
    quality = {
        **choice.figures,
        "min_agreement": min_agreement,
        "passed": choice.passed,
        "recipe": choice.recipe.describe(),
        "cpu": {"kind": cpu, "flags": flags},
        "attempts": choice.attempts,
    }
    return {"graph": graph_report(out_file, vocab_size, hidden), "quality": quality}


def quantize_int8(
    fp32_file: Path, out_file: Path, vocab_size: int, hidden: int, step: Int8Recipe
) -> dict[str, Any]:
    """Dynamic INT8 quantization of an optimised FP32 export by ``step``; returns its graph
    report. ``python -m bench.int8_variants`` calls it with recipes outside the chains too.

    The parts ``step`` keeps in FP32 are found by their weights' shapes, not their names (the
    last encoder layer, exported at the mask rows only, names its linears ``/output/dense_1``
    and the like): the FFN output maps another width to ``hidden``; the head maps ``hidden`` to
    ``vocab_size``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tiankong.export.int8_recipe import FFN_OUTPUT, HEAD

    graph = onnx.load(str(fp32_file))
    heads = linears_mapping(graph, lambda rows, cols: (rows, cols) == (hidden, vocab_size))
    kept: set[str] = set()
    if FFN_OUTPUT in step.fp32_parts:
        kept |= set(linears_mapping(graph, lambda rows, cols: rows != hidden and cols == hidden))
    if HEAD in step.fp32_parts:
        kept |= set(heads)
    head_nodes = [  # the heads to rescore: Gemms on the ``[vocab, hidden]`` matrix as it is
        onnx.NodeProto.FromString(node.SerializeToString())
        for node in graph.graph.node
        if node.name in heads and node.name not in kept and node.op_type == "Gemm"
    ]
    head_inputs = {name for node in head_nodes for name in node.input[1:]}
    fp32_weights = [  # the FP32 matrices and biases the rescoring reads, copied before quantizing
        onnx.TensorProto.FromString(tensor.SerializeToString())
        for tensor in graph.graph.initializer
        if tensor.name in head_inputs
    ]
    gemms_to_fused_matmul(graph, kept)
    with without_preprocessing_hint():
        quantize_dynamic(
            graph,
            out_file,
            op_types_to_quantize=list(step.op_types),
            nodes_to_exclude=sorted(kept),
            per_channel=step.per_channel,
            reduce_range=step.reduce_range,
            weight_type=QuantType.QInt8 if step.weights == "s8" else QuantType.QUInt8,
            # Shape inference can't see through ORT's fused contrib ops; their outputs are float.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    if head_nodes and step.head_rescored:
        quantized = onnx.load(str(out_file))
        for head in head_nodes:
            rescore_head_in_fp32(quantized, head, fp32_weights, step.head_rescored)
        onnx.save(quantized, str(out_file))
    return graph_report(out_file, vocab_size, hidden)


def rescore_head_in_fp32(model: Any, head: Any, fp32_weights: list[Any], top: int) -> None:
    """Score the ``top`` best columns per mask of a quantized head again in FP32, in the graph.

    ``head`` is the head's node as the FP32 graph had it: a Gemm ``y = x @ E^T + b`` on the
    tied ``[vocab, hidden]`` matrix E. The quantized graph still computes ``y`` (8-bit); after
    it, TopK picks each row's best ``top`` columns, Gather takes their rows of the FP32 E and
    their biases, a batched MatMul with ``x`` scores them exactly, and ScatterElements writes
    those scores over the 8-bit ones. E is read ``top`` rows at a time, not whole. If the
    quantizer dropped E (a head not tied to the embedding), it is put back from
    ``fp32_weights`` (the FP32 graph's initializers, taken before quantizing).
    """
    from onnx import helper, numpy_helper

    x, weight, bias = head.input[0], head.input[1], head.input[2] if len(head.input) > 2 else ""
    (y,) = head.output
    graph = model.graph
    approximate = f"{y}_int8"
    for node in graph.node:  # the quantized head's last node now writes the approximate scores
        node.output[:] = [approximate if name == y else name for name in node.output]
    present = {tensor.name for tensor in graph.initializer}
    for tensor in fp32_weights:
        if tensor.name in (weight, bias) and tensor.name not in present:
            graph.initializer.append(tensor)
    name = head.name or y
    k = f"{name}_rescore_k"
    graph.initializer.append(numpy_helper.from_array(np.array([top], dtype=np.int64), k))
    axes = f"{name}_rescore_axes"
    graph.initializer.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), axes))

    def out(suffix: str) -> str:
        return f"{name}_rescore_{suffix}"

    nodes = [
        # min(top, vocab) is not needed: vocab >> top for any masked LM this serves
        helper.make_node("TopK", [approximate, k], [out("values"), out("columns")], axis=-1),
        helper.make_node("Gather", [weight, out("columns")], [out("rows")], axis=0),
        helper.make_node("Unsqueeze", [x, axes], [out("x")]),  # [masks, hidden, 1]
        helper.make_node("MatMul", [out("rows"), out("x")], [out("products")]),
        helper.make_node("Squeeze", [out("products"), axes], [out("exact_no_bias")]),
    ]
    exact = out("exact_no_bias")
    if bias:
        nodes += [
            helper.make_node("Gather", [bias, out("columns")], [out("biases")], axis=0),
            helper.make_node("Add", [exact, out("biases")], [out("exact")]),
        ]
        exact = out("exact")
    nodes.append(
        helper.make_node("ScatterElements", [approximate, out("columns"), exact], [y], axis=1)
    )
    for index, node in enumerate(nodes):
        node.name = f"{name}_rescore_{index}"
    graph.node.extend(nodes)


def linears_mapping(model: Any, wanted: Callable[[int, int], bool]) -> list[str]:
    """The MatMul and Gemm nodes whose constant weight maps ``rows`` inputs to ``cols`` outputs
    with ``wanted(rows, cols)`` true (a Gemm with ``transB`` stores its weight ``[cols, rows]``)."""
    from onnx import helper

    dims = {tensor.name: list(tensor.dims) for tensor in model.graph.initializer}
    found = []
    for node in model.graph.node:
        shape = dims.get(node.input[1]) if node.op_type in ("MatMul", "Gemm") else None
        if shape is None or len(shape) != 2:
            continue
        transposed = node.op_type == "Gemm" and any(
            attribute.name == "transB" and helper.get_attribute_value(attribute)
            for attribute in node.attribute
        )
        rows, cols = reversed(shape) if transposed else shape
        if wanted(rows, cols):
            found.append(node.name)
    return found


@contextmanager
def without_preprocessing_hint() -> Iterator[None]:
    """Drop quantize_dynamic's root-logger hint to run its pre-processing first: that step's
    symbolic shape inference fails on the fused BERT graph, so the hint is noise here. A
    NullHandler stops the hint from configuring a bare root logger as a side effect."""
    root = logging.getLogger()
    placeholder = None if root.handlers else logging.NullHandler()
    if placeholder is not None:
        root.addHandler(placeholder)

    def drop_hint(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing")

    root.addFilter(drop_hint)
    try:
        yield
    finally:
        root.removeFilter(drop_hint)
        if placeholder is not None:
            root.removeHandler(placeholder)


def gemms_to_fused_matmul(model: Any, names: set[str]) -> None:
    """Turn the Gemms among ``names`` (the linears at the mask rows, which export as Gemm where
    the encoder's export as MatMul) into ORT's FusedMatMul with ``transB=1`` plus an Add, so
    they stay in FP32.

    quantize_dynamic rewrites every Gemm into a MatMul on a transposed *copy* of its weight and
    quantizes that; a Gemm kept in FP32 would keep the FP32 copy, and for the head that would be
    a second FP32 ``[vocab, hidden]`` matrix next to the tied embedding. FusedMatMul reads the
    matrix as it is, and the quantizer leaves it (and the Add) alone.
    """
    from onnx import helper

    nodes = []
    for node in model.graph.node:
        attributes = {
            attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute
        }
        plain = attributes.get("alpha", 1.0) == 1.0 and attributes.get("beta", 1.0) == 1.0
        chosen = node.op_type == "Gemm" and node.name in names
        if not chosen or not plain or attributes.get("transA", 0):
            nodes.append(node)
            continue
        product = f"{node.output[0]}_matmul" if len(node.input) > 2 else node.output[0]
        nodes.append(
            helper.make_node(
                "FusedMatMul",
                list(node.input[:2]),
                [product],
                name=f"{node.name}_FusedMatMul",
                domain="com.microsoft",
                transB=int(attributes.get("transB", 0)),
            )
        )
        if len(node.input) > 2:
            nodes.append(
                helper.make_node(
                    "Add", [product, node.input[2]], list(node.output), f"{node.name}_Add"
                )
            )
    del model.graph.node[:]
    model.graph.node.extend(nodes)
