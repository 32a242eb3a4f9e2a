"""Export a Hugging Face masked-LM folder to an optimised ONNX graph (INT8: ``export/quantize.py``).

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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiankong.core.decoding import NOT_NUMBERS
from tiankong.core.models import require_masked_lm_type, require_trained, unloadable_weights
from tiankong.errors import EngineUnavailableError, ModelUnavailableError

if TYPE_CHECKING:
    pass

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
# Above this, the optimised graph is not the model any more (fusion or export bug): refuse it.
MAX_EXPORT_DIFF = 1e-3


def recipe(
    precision: str,
    cpu: str | None = None,
    min_agreement: float | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """The export settings that shape the graph, as JSON-ready data (part of the cache key).

    For INT8 that is the recipe chain for the ``cpu`` kind and the guard's threshold, which
    together decide the recipe kept (``int8_recipe``); both default to this machine and Settings.
    ``auto`` (``precision_choice``: the measured choice) adds what its timings depend on: the
    threads, OpenVINO's version and whether the CPU has bf16 units, what shapes the INT8 IR
    that NNCF may make for it (``openvino_int8.recipe``: NNCF's version, the calibration), the
    split's rule and whether the timed ONNX Runtime sessions spin after a run.
    """
    from tiankong.engines.openvino_engine import openvino_version
    from tiankong.export import openvino_int8, precision_choice
    from tiankong.export.int8_recipe import cpu_has_bf16, int8_plan

    described: dict[str, Any] = {
        "opset": OPSET,
        "inputs": list(INPUT_NAMES),
        "attention": "eager",
        "last_layer": "at the mask rows for BERT's own layer, else every row",
        "optimizer": "onnxruntime.transformers bert, python fusions only",
    }
    if precision in ("int8", "auto"):
        described["int8"] = int8_plan(cpu, min_agreement)
    if precision == "auto":
        described["auto"] = {
            "threads": threads,
            "openvino": openvino_version(),
            "bf16_units": cpu_has_bf16(),
            "full_batch": precision_choice.FULL_BATCH,
            "rounds": {str(size): rounds for size, rounds in precision_choice.ROUNDS.items()},
            "turns": precision_choice.TURNS,
            "settle_calls": precision_choice.SETTLE_CALLS,
            "settle_ms": precision_choice.SETTLE_MS,
            "quiet_ms": precision_choice.QUIET_MS,
            "split": {
                "rule": precision_choice.SPLIT_RULE,
                "gain": precision_choice.SPLIT_GAIN,
                "rounds": {str(size): n for size, n in precision_choice.SPLIT_SIZES.items()},
            },
            "onnx_spin_after_run": precision_choice.TIMED_SPIN_AFTER_RUN,
            "openvino_int8": openvino_int8.recipe(),
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
        if not np.isfinite(expected).all():  # its NaN diff passed the check below: exit 0
            raise ModelUnavailableError(NOT_NUMBERS)
        # a second copy, since the faster wrapper takes the last layer out of its encoder
        faster = masks_only_last_layer(load_masked_lm(folder))
        report: dict[str, Any] = {}
        if faster is not None:
            try:
                report = export_checked(faster, out_file, model.config, check_inputs, expected, 1)
            except Exception as error:
                # MobileBERT's and I-BERT's layers pass the structural check (query, key,
                # value) but compute otherwise, and the hand-written last layer failed in the
                # trace; the whole-sequence graph exports them (6e-6 and 3e-5 from torch)
                log.warning(
                    "The ONNX graph with the last layer at the masks could not be made (%s); "
                    "exporting the whole-sequence graph instead.",
                    type(error).__name__,
                )
            if report and report["max_abs_diff_vs_torch"] > MAX_EXPORT_DIFF:
                log.warning(
                    "The ONNX graph with the last layer at the masks differs from torch by %.2g; "
                    "exporting the whole-sequence graph instead.",
                    report["max_abs_diff_vs_torch"],
                )
                report = {}
            if report:
                report["last_layer"] = "at_masks"
        if not report:
            report = export_checked(reference, out_file, model.config, check_inputs, expected)
            report["last_layer"] = "every_row"
    finally:
        torch.set_num_threads(previous_threads)
    if report["max_abs_diff_vs_torch"] > MAX_EXPORT_DIFF:
        raise EngineUnavailableError(
            f"The ONNX export of '{folder.name}' differs from the torch model by "
            f"{report['max_abs_diff_vs_torch']:.2g}; the torch engine (--engine torch) can run it."
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


def load_masked_lm(folder: Path) -> Any:
    from transformers import AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    require_masked_lm_type(folder)
    try:
        # Eager attention exports as the MatMul/Softmax pattern ORT fuses into one Attention op.
        model, loading = AutoModelForMaskedLM.from_pretrained(
            folder, attn_implementation="eager", output_loading_info=True, trust_remote_code=False
        )
    except Exception as error:
        raise unloadable_weights(folder.name, error, " for export") from None
    require_trained(model, loading, folder.name)
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
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    # ERNIE 3.0's task-type embedding (use_task_id) is a third embedding the fused
    # EmbedLayerNormalization drops: the export differed from torch by 15 and was refused
    options.enable_embed_layer_norm = not getattr(config, "use_task_id", False)
    optimized = optimize_model(
        str(raw_file),
        model_type="bert",
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
        hidden_size=int(getattr(config, "hidden_size", 0) or 0),
        optimization_options=options,
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
