"""Export a Hugging Face masked-LM folder to an optimised ONNX graph, and quantize it to INT8.

The graph takes ``input_ids`` and ``attention_mask`` (int64 ``[batch, sequence]``) and
``mask_positions`` (int64 ``[masks]``, flat indices into ``batch * sequence``, as
``EncodedBatch`` builds them). It runs the encoder, gathers the hidden states at the masks and
only then applies the MLM head, so the vocabulary projection costs ``masks x vocab`` instead of
``tokens x vocab``. Output: ``logits``, float32 ``[masks, vocab]``. All three axes are dynamic.

Only the masks need the last encoder layer's query, attention output and FFN (its keys and values
need every row): for BERT's own layer (absolute positions, no cross-attention) the graph computes
that layer at the mask rows only (``masks_only_last_layer``), which saves about a fifth of a
4-layer model's batched time and ~7% of bert-base's at the same outputs (docs/PERFORMANCE.md). A
layer of another shape keeps the whole-sequence graph (``mask_gather_module``).

``token_type_ids`` is not an input: tiankong always encodes a single segment, so the wrapper feeds
zeros, exactly what transformers does when the argument is left out.

Torch, transformers and onnx are imported inside the functions that need them, and
``export_worker`` runs those in a child process, so serving never imports them.
"""

from __future__ import annotations

import inspect
import json
import logging
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiankong.errors import EngineError, ModelUnavailableError

if TYPE_CHECKING:
    from tiankong.export.int8_recipe import Int8Recipe

log = logging.getLogger(__name__)

OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "mask_positions")
OUTPUT_NAME = "logits"
DYNAMIC_AXES = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
    "mask_positions": {0: "masks"},
    OUTPUT_NAME: {0: "masks"},
}
# Ops the ORT transformer optimizer fuses BERT into; counted into the export's metadata.
FUSED_OP_TYPES = (
    "Attention",
    "QAttention",  # Attention after INT8 quantization
    "EmbedLayerNormalization",
    "SkipLayerNormalization",
    "BiasGelu",
)
# Dynamic INT8 for the encoder's MatMuls and fused Attention (``int8_recipe`` picks the settings
# and the fallbacks by CPU). The MLM head (Gemm) and the embeddings always stay FP32: the head is
# ~1% of the FLOPs at a few masks, keeping it FP32 keeps the ranking at the mask sharp, and the
# tied embedding/decoder matrix stays stored once.
# CPU features that decide the INT8 recipe or its speed, recorded with an INT8 export.
REPORTED_CPU_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")
# Above this, the optimised graph is not the model any more (fusion or export bug): refuse it.
MAX_EXPORT_DIFF = 1e-3


def recipe(
    precision: str, cpu: str | None = None, min_agreement: float | None = None
) -> dict[str, Any]:
    """The export settings that shape the graph, as JSON-ready data (part of the cache key).

    For INT8 that is the recipe chain for the ``cpu`` kind and the guard's threshold, which
    together decide the recipe kept (``int8_recipe``); both default to this machine and Settings.
    """
    from tiankong.config import Settings
    from tiankong.export.int8_recipe import cpu_kind, recipe_chain
    from tiankong.export.quality_guard import guard_file_sha256

    described: dict[str, Any] = {
        "opset": OPSET,
        "inputs": list(INPUT_NAMES),
        "attention": "eager",
        "last_layer": "at the mask rows for BERT's own layer, else every row",
        "optimizer": "onnxruntime.transformers bert, python fusions only",
    }
    if precision == "int8":
        kind = cpu or cpu_kind()
        threshold = Settings.int8_min_agreement if min_agreement is None else min_agreement
        described["int8"] = {
            "cpu": kind,
            "chain": [step.describe() for step in recipe_chain(kind)],
            "min_agreement": threshold,
            "guard_sentences_sha256": guard_file_sha256(),
        }
    return described


def read_config(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def export_fp32(folder: Path, out_file: Path, threads: int) -> dict[str, Any]:
    """Export ``folder`` to ``out_file`` (optimised FP32 ONNX); returns ``{"graph": report}``.

    The graph report holds fused-op counts, how many ``[vocab, hidden]`` matrices the file
    stores and the largest difference from torch on a check batch shaped unlike the traced one.
    """
    import torch

    previous_threads = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        model = load_masked_lm(folder)
        vocab = vocab_of(model)
        reference = mask_gather_module(model)
        check_inputs = sample_batch(batch=3, seq_len=11, masks=[2, 11, 20, 24], vocab=vocab)
        with torch.inference_mode():
            expected = reference(*(torch.from_numpy(array) for array in check_inputs)).numpy()
        # a second copy, since the faster wrapper takes the last layer out of its encoder
        faster = masks_only_last_layer(load_masked_lm(folder))
        report: dict[str, Any] = {}
        if faster is not None:
            report = export_checked(faster, out_file, model.config, check_inputs, expected, 1)
            report["last_layer"] = "at_masks"
            if report["max_abs_diff_vs_torch"] > MAX_EXPORT_DIFF:
                log.warning(
                    "The ONNX graph with the last layer at the masks differs from torch by %.2g; "
                    "exporting the whole-sequence graph instead.",
                    report["max_abs_diff_vs_torch"],
                )
                report = {}
        if not report:
            report = export_checked(reference, out_file, model.config, check_inputs, expected)
            report["last_layer"] = "every_row"
    finally:
        torch.set_num_threads(previous_threads)
    if report["max_abs_diff_vs_torch"] > MAX_EXPORT_DIFF:
        raise EngineError(
            f"The ONNX export of '{folder.name}' differs from the torch model by "
            f"{report['max_abs_diff_vs_torch']:.2g}; use --engine torch for this model."
        )
    return {"graph": report}


def export_checked(
    wrapper: Any,
    out_file: Path,
    config: Any,
    check_inputs: tuple[np.ndarray, np.ndarray, np.ndarray],
    expected: np.ndarray,
    unfused_layers: int = 0,
) -> dict[str, Any]:
    """Trace ``wrapper`` to ``out_file`` (optimised) and report its graph and its largest
    difference from ``expected`` (the whole model's logits) on ``check_inputs``, a batch shaped
    unlike the traced one."""
    import torch

    raw_file = out_file.with_name("raw.onnx")
    trace_inputs = sample_batch(batch=2, seq_len=8, masks=[1, 3, 9], vocab=config.vocab_size)
    with torch.inference_mode(), warnings.catch_warnings():
        # The tracer warns about values the trace freezes: a KV-cache padding branch that an
        # encoder never takes, and index ops whose indices are never negative here. The
        # check batch, shaped unlike the traced one, is what proves the graph general.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index operator")
        # The TorchScript exporter is deprecated, but the dynamo exporter's graph (torch 2.13,
        # transformers 5.24) defeats ORT's Attention and EmbedLayerNormalization fusions.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            wrapper,
            tuple(torch.from_numpy(array) for array in trace_inputs),
            str(raw_file),
            dynamo=False,  # the TorchScript exporter gives the graph ORT's BERT fusions match
            opset_version=OPSET,
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=DYNAMIC_AXES,
        )
    optimize_graph(raw_file, out_file, config, unfused_layers)
    raw_file.unlink()
    report = graph_report(out_file, config.vocab_size, config.hidden_size)
    report["max_abs_diff_vs_torch"] = float(
        np.abs(run_graph(out_file, check_inputs) - expected).max()
    )
    return report


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
    vocab_size, hidden = int(config["vocab_size"]), int(config["hidden_size"])
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


def load_masked_lm(folder: Path) -> Any:
    from transformers import AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        # Eager attention exports as the MatMul/Softmax pattern ORT fuses into one Attention op.
        model = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager")
    except Exception as error:
        raise ModelUnavailableError(
            f"The model weights in '{folder.name}' could not be loaded for export "
            f"({type(error).__name__}); the files may be missing, truncated or corrupt."
        ) from None
    return model.float().eval()


def vocab_of(model: Any) -> int:
    return int(model.config.vocab_size)


def mask_gather_module(model: Any) -> Any:
    """Wrap ``model``: encoder, gather at ``mask_positions``, then the MLM head."""
    import torch

    from tiankong.engines.torch_engine import mlm_head

    head = mlm_head(model)
    hidden_states = hidden_states_of(model.base_model)

    class MaskGatherMLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            mask_positions: torch.Tensor,
        ) -> torch.Tensor:
            if head is None:  # unfamiliar head: full logits, then gather (slower, still right)
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
                return logits.reshape(-1, logits.shape[-1]).index_select(0, mask_positions)
            hidden = hidden_states(input_ids, attention_mask)
            return head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, mask_positions))

    return MaskGatherMLM().eval()


def hidden_states_of(encoder: Any) -> Callable[[Any, Any], Any]:
    """The encoder's last hidden states for one segment: zeros for ``token_type_ids`` when it
    takes them, exactly what transformers does when the argument is left out."""
    import torch

    takes_segments = "token_type_ids" in inspect.signature(encoder.forward).parameters

    def run(input_ids: Any, attention_mask: Any) -> Any:
        segments = {"token_type_ids": torch.zeros_like(input_ids)} if takes_segments else {}
        return encoder(
            input_ids=input_ids, attention_mask=attention_mask, **segments
        ).last_hidden_state

    return run


def masks_only_last_layer(model: Any) -> Any | None:
    """Wrap ``model`` like ``mask_gather_module``, with its last encoder layer computed at the
    mask rows only; None when that layer is not BERT's own (then the whole graph is exported).

    The layer's keys and values still see every row; its query, attention output and FFN run at
    the masks. This takes the last layer out of ``model``'s encoder, so pass a copy.
    """
    import torch

    from tiankong.engines.torch_engine import mlm_head

    head: Any = mlm_head(model)
    config = model.config
    bert = model.base_model
    layers = getattr(getattr(bert, "encoder", None), "layer", None)
    if head is None or not isinstance(layers, torch.nn.ModuleList) or len(layers) < 2:
        return None
    last: Any = layers[-1]
    attention: Any = getattr(getattr(last, "attention", None), "self", None)
    parts = ("query", "key", "value", "num_attention_heads", "attention_head_size")
    if (
        getattr(config, "position_embedding_type", "absolute") != "absolute"
        or getattr(config, "is_decoder", False)
        or getattr(last, "add_cross_attention", False)
        or attention is None
        or not all(hasattr(attention, part) for part in parts)
        or not all(hasattr(last, part) for part in ("intermediate", "output"))
        or not hasattr(last.attention, "output")
    ):
        return None
    heads, size = attention.num_attention_heads, attention.attention_head_size
    hidden_states = hidden_states_of(bert)
    bert.encoder.layer = torch.nn.ModuleList(list(layers)[:-1])

    class LastLayerAtMasks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.last = last

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            mask_positions: torch.Tensor,
        ) -> torch.Tensor:
            hidden = hidden_states(input_ids, attention_mask)
            batch, length, width = hidden.shape
            rows = hidden.reshape(-1, width).index_select(0, mask_positions)
            which = torch.div(mask_positions, length, rounding_mode="floor")  # each mask's text
            masks = rows.shape[0]
            query = attention.query(rows).view(masks, heads, 1, size)
            key = attention.key(hidden).view(batch, length, heads, size).transpose(1, 2)
            value = attention.value(hidden).view(batch, length, heads, size).transpose(1, 2)
            key, value = key.index_select(0, which), value.index_select(0, which)
            scores = torch.matmul(query, key.transpose(-1, -2)) * (size**-0.5)
            padding = 1.0 - attention_mask.index_select(0, which).to(scores.dtype)
            scores = scores + padding[:, None, None, :] * torch.finfo(scores.dtype).min
            context = torch.matmul(scores.softmax(-1), value).reshape(masks, width)
            attended = last.attention.output(context, rows)
            return head(last.output(last.intermediate(attended), attended))

    return LastLayerAtMasks().eval()


def optimize_graph(raw_file: Path, out_file: Path, config: Any, unfused_layers: int = 0) -> None:
    """ORT's transformer optimizer, Python fusions only (opt_level 0), so the file stays portable
    across providers; the session applies ORT's own graph optimisations at load.
    ``unfused_layers``: layers whose attention is written out by hand (the last one at the
    masks), which no fusion matches."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(raw_file),
        model_type="bert",
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
        hidden_size=int(getattr(config, "hidden_size", 0) or 0),
        opt_level=0,
        use_gpu=False,
    )
    fused = optimized.get_fused_operator_statistics()
    layers = int(getattr(config, "num_hidden_layers", 0) or 0) - unfused_layers
    if fused.get("Attention", 0) < layers:
        log.warning(
            "Only %d of %d attention layers were fused; the ONNX graph will run slower.",
            fused.get("Attention", 0),
            layers,
        )
    optimized.save_model_to_file(str(out_file), use_external_data_format=False)


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


def graph_report(onnx_file: Path, vocab_size: int, hidden: int) -> dict[str, Any]:
    """Node counts by op type, and how many ``[vocab, hidden]`` matrices the file stores: in
    FP32 (the tied embedding, stored once) and in 8 bits (an INT8 head's own copy)."""
    import onnx

    graph = onnx.load(str(onnx_file)).graph
    op_counts = Counter(node.op_type for node in graph.node)
    eight_bit = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    shaped = [t for t in graph.initializer if sorted(t.dims) == sorted([vocab_size, hidden])]
    return {
        "op_counts": dict(sorted(op_counts.items())),
        "fused_ops": {op: op_counts.get(op, 0) for op in FUSED_OP_TYPES},
        "vocab_matrices": sum(1 for tensor in shaped if tensor.data_type not in eight_bit),
        "vocab_matrices_int8": sum(1 for tensor in shaped if tensor.data_type in eight_bit),
        "nodes": sum(op_counts.values()),
    }


def sample_batch(
    batch: int, seq_len: int, masks: list[int], vocab: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A padded batch (the last row half padding) with masks at the given flat positions."""
    rng = np.random.default_rng(0)
    input_ids = rng.integers(100, min(vocab, 8000), size=(batch, seq_len), dtype=np.int64)
    attention_mask = np.ones((batch, seq_len), dtype=np.int64)
    attention_mask[-1, seq_len // 2 :] = 0
    input_ids[-1, seq_len // 2 :] = 0
    return input_ids, attention_mask, np.asarray(masks, dtype=np.int64)


def run_graph(onnx_file: Path, inputs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    from tiankong.engines.base import EncodedBatch
    from tiankong.engines.onnx_engine import OnnxEngine

    engine = OnnxEngine(onnx_file, device="cpu", precision="fp32", threads=1)
    return engine.mask_logits(EncodedBatch(*inputs))
