"""The ONNX Runtime engine: an exported mask-gather graph, FP32 or dynamic INT8.

Serving with it never imports torch or transformers. An engine is given its file: ``create``
asks the ``find_export`` it is handed (the export cache, ``export.export_cache.ensure_export``)
for the export it needs, and never starts an export itself.

>>> from tiankong import FillMasker, Settings
>>> fm = FillMasker.load(settings=Settings(engine="onnx"))  # doctest: +SKIP
>>> fm.engine.precision, fm.engine.quality["top1_agreement"]  # doctest: +SKIP
('int8', 0.98...)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tiankong.config import Settings
from tiankong.core.models import ResolvedModel
from tiankong.engines.base import EncodedBatch
from tiankong.errors import BadOptionError, ModelUnavailableError

log = logging.getLogger(__name__)

CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"
ONNX_PRECISIONS = ("auto", "fp32", "int8")
GRAPH_INPUTS = ("input_ids", "attention_mask", "mask_positions")  # as export.py writes them
# (model, precision, settings) -> an export with ``onnx_file`` and ``quality``
FindExport = Callable[[ResolvedModel, str, Settings], Any]


def build_session(
    onnx_file: Path,
    device: str,
    threads: int,
    cpu_fallback: bool = False,
    spin_after_run: bool = True,
) -> Any:
    """The one place an InferenceSession is made: explicit providers, threads and optimisation.

    ``threads`` is the intra-op pool size (0 lets ORT pick); inter-op parallelism is off because
    a BERT graph is one chain of ops, and a second pool would only oversubscribe the cores.
    When the CUDA provider was asked for but did not load (no GPU or driver, CUDA or cuDNN
    libraries missing), that is an error, unless ``cpu_fallback`` (``--device auto``) allows
    serving on the CPU with a warning. ``spin_after_run=False`` stops the pool's spinning at
    the end of each run (for a bench's comparison); served sessions spin, and so do the ones
    ``--precision auto`` times (``precision_choice.TIMED_SPIN_AFTER_RUN``).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # No CPU memory arena: ORT's keeps, for the process's life, the blocks it took for the most
    # memory any run needed, so an engine's memory stepped up with each new largest shape, and
    # long proofreading requests took the bundled server from 233 to 816 MiB and kept it. Freed
    # to the allocator instead, much of it goes back. Engine calls ran 0-8% slower alone, served
    # /predict a few percent either way, a long /check 10-18% slower (docs/PERFORMANCE.md,
    # "Memory that follows the work"). The CUDA provider's own arena is not this one.
    options.enable_cpu_mem_arena = False
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only; ORT's warnings are about its own internals
    # Spin between the ops of one run and, unless timed beside other engines, for a while after
    # it, as ONNX Runtime does by default: on a VM a sleeping thread's wake-up at the next run's
    # first op cost more (c=1 2x on amx) than the spinning takes from the event loop
    # (docs/PERFORMANCE.md, "Spinning").
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    if not spin_after_run:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    providers = [CUDA_PROVIDER, CPU_PROVIDER] if device == "cuda" else [CPU_PROVIDER]
    try:
        session = ort.InferenceSession(str(onnx_file), sess_options=options, providers=providers)
    except Exception as error:  # a file that passed its checksum but that ORT can't load
        raise ModelUnavailableError(
            f"ONNX Runtime could not load the export '{onnx_file.parent.name}' "
            f"({type(error).__name__}); delete it to have it rebuilt."
        ) from None
    loaded = session.get_providers()
    if device == "cuda" and loaded[0] != CUDA_PROVIDER and cpu_fallback:
        log.warning(
            "ONNX Runtime's CUDA provider did not load (no GPU, or CUDA/cuDNN libraries "
            "missing); serving on the CPU."
        )
    elif device == "cuda" and loaded[0] != CUDA_PROVIDER:
        raise ModelUnavailableError(
            "The CUDA provider of ONNX Runtime failed to load (CUDA or cuDNN libraries missing?); "
            "use --device cpu."
        )
    return session


def pick_onnx_device(requested: str) -> str:
    """``auto`` is CUDA when this onnxruntime build has the CUDA provider, else the CPU."""
    import onnxruntime as ort

    has_cuda = CUDA_PROVIDER in ort.get_available_providers()
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    if requested == "cuda" and not has_cuda:
        raise BadOptionError(
            "--device cuda was asked for, but this onnxruntime has no CUDA provider; "
            "install onnxruntime-gpu or use --device cpu."
        )
    if requested not in ("cpu", "cuda"):
        raise BadOptionError(f"Unknown device '{requested}'; use auto, cpu or cuda.")
    return requested


class OnnxEngine:
    """ONNX Runtime on an exported graph that returns logits only at the mask positions.

    ``quality`` holds the INT8 guard's figures (top-1 agreement and top-5 overlap with FP32 on
    fixed sentences) whenever INT8 was considered; it is empty for a plain FP32 engine.
    """

    name = "onnx"

    def __init__(
        self,
        onnx_file: Path,
        device: str = "cpu",
        precision: str = "fp32",
        threads: int = 1,
        quality: dict[str, Any] | None = None,
        cpu_fallback: bool = False,
        spin_after_run: bool = True,
    ) -> None:
        if threads < 0:
            raise BadOptionError(f"threads must be 0 (automatic) or more; got {threads}.")
        self.session = build_session(onnx_file, device, threads, cpu_fallback, spin_after_run)
        self.providers: list[str] = self.session.get_providers()
        self.device = "cuda" if self.providers[0] == CUDA_PROVIDER else "cpu"
        self.device_reason: str | None = None  # why --device auto serves on the CPU
        if cpu_fallback and self.device == "cpu":
            self.device_reason = (
                "ONNX Runtime's CUDA provider did not load (no GPU, or CUDA/cuDNN libraries "
                "missing)"
                if device == "cuda"
                else "this onnxruntime has no CUDA provider"
            )
        self.precision = precision
        self.onnx_file = onnx_file
        self.quality: dict[str, Any] = quality or {}
        self.input_names = [node.name for node in self.session.get_inputs()]
        self.output_name = self.session.get_outputs()[0].name
        unknown = set(self.input_names) - set(GRAPH_INPUTS)
        if unknown:
            raise ModelUnavailableError(
                f"The ONNX graph '{onnx_file.name}' wants inputs tiankong doesn't make: "
                f"{', '.join(sorted(unknown))}."
            )

    @classmethod
    def create(
        cls, model: ResolvedModel, settings: Settings, find_export: FindExport
    ) -> OnnxEngine:
        """Find or build the export ``settings`` asks for and start a session on it.

        ``precision="auto"``: FP32 on CUDA; on the CPU, ``create_engine`` decides by
        measurement (``measured_engine``) and calls this with the precision chosen. Asked for
        INT8, the guard's figures and verdict are logged at INFO (the server shows them; library
        and CLI stay quiet); INT8 asked for by name is served even when the guard failed.
        """
        ensure_export = find_export
        if settings.precision not in ONNX_PRECISIONS:
            raise BadOptionError(
                f"The onnx engine runs auto, fp32 or int8, not '{settings.precision}'; "
                "for fp16 on a GPU use --engine torch, for bf16 --engine openvino."
            )
        device = pick_onnx_device(settings.device)
        if settings.precision == "int8" and device == "cuda":
            raise BadOptionError(
                "INT8 ONNX models run on the CPU only; use --device cpu or --precision fp32."
            )
        quality: dict[str, Any] = {}
        if settings.precision == "auto" and device == "cpu":
            raise ValueError("--precision auto on the CPU is decided by create_engine")
        int8, passed = None, None
        if wants_int8(settings.precision, device):
            int8 = ensure_export(model, "int8", settings)
            passed = bool(int8.quality.get("passed"))
            quality = {**int8.quality, "int8_accepted": passed}
        precision = served_precision(settings.precision, device, passed)
        if int8 is not None:
            log.info("%s", guard_line(model.name, quality, precision))
        export = (
            int8
            if precision == "int8" and int8 is not None
            else ensure_export(model, precision, settings)
        )
        return cls(
            export.onnx_file,
            device,
            precision,
            settings.threads,
            quality,
            cpu_fallback=settings.device == "auto",
        )

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        (logits,) = self.session.run([self.output_name], batch.feed(self.input_names))
        return np.asarray(logits, dtype=np.float32)


def wants_int8(asked: str, device: str) -> bool:
    """Whether choosing the precision needs the INT8 export (and its guard's verdict)."""
    return asked == "int8" or (asked == "auto" and device != "cuda")


def served_precision(asked: str, device: str, int8_passed: bool | None) -> str:
    """The one rule for the precision an ONNX engine serves. ``auto``: FP32 on CUDA; on the
    CPU, INT8 when the export's recipe chain found a recipe that passed the quality guard
    (``int8_passed``, decided once when the export was made: ``export/int8_recipe``), else
    FP32. ``int8`` and ``fp32`` are served as asked (INT8 even when the guard failed)."""
    if asked != "auto":
        return asked
    if device == "cuda":
        return "fp32"
    return "int8" if int8_passed else "fp32"


def failed_guard(quality: dict[str, Any]) -> str:
    """How an INT8 export that failed its guard is said, by ``export`` and by every command
    that answers with it (``--precision int8`` keeps it as asked)."""
    return (
        f"failed its quality guard (top-1 agreement "
        f"{100 * float(quality['top1_agreement']):.1f}%, under the "
        f"{100 * float(quality.get('min_agreement', 0.0)):.0f}% it needs)"
    )


def guard_line(model_name: str, quality: dict[str, Any], served: str) -> str:
    """One line on what the INT8 guard found for this export, and the precision ``served``."""
    recipe = quality.get("recipe") or {}
    return (
        f"INT8 guard for '{model_name}': recipe '{recipe.get('name', '?')}' on a "
        f"'{(quality.get('cpu') or {}).get('kind', '?')}' CPU, top-1 agreement with FP32 "
        f"{100 * float(quality.get('top1_agreement', 0.0)):.1f}% (threshold "
        f"{100 * float(quality.get('min_agreement', 0.0)):.0f}%), top-5 overlap "
        f"{100 * float(quality.get('top5_overlap', 0.0)):.1f}% on {quality.get('masks', '?')} "
        f"masks; serving {served}."
    )
