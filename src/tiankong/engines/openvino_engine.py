"""The OpenVINO engine: the same FP32 mask-gather ONNX graph as the ONNX engine, compiled by
OpenVINO's CPU plugin, in FP32 or in bfloat16 (``INFERENCE_PRECISION_HINT``).

OpenVINO is an optional extra (``pip install 'tiankong[openvino]'``), imported only here and only
when this engine is made, so serving with ONNX Runtime never imports it. bf16 pays on CPUs with
bfloat16 matrix units (AVX512-BF16, AMX); elsewhere the plugin runs FP32 whatever the hint
says, so ``OpenVinoEngine`` refuses bf16 where the compiled model reports another precision
rather than calling FP32 bf16. It is given its file, like the ONNX engine: ``--precision auto``
decides on it by measurement when the export is made (``precision_choice``). INT8 here is an
OpenVINO IR that NNCF quantized from the FP32 export (``export/openvino_int8``); only that
measured choice serves it, as its file lives in the ``auto`` cache entry.

>>> engine = OpenVinoEngine(Path("model.onnx"), "bf16", threads=2)  # doctest: +SKIP
>>> engine.name, engine.precision  # doctest: +SKIP
('openvino', 'bf16')
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiankong.config import Settings
from tiankong.core.models import ResolvedModel
from tiankong.engines.base import EncodedBatch
from tiankong.errors import BadOptionError, ModelUnavailableError

if TYPE_CHECKING:
    from tiankong.engines.onnx_engine import FindExport

OPENVINO_PRECISIONS = ("fp32", "bf16")  # what --engine openvino serves when asked by name
MEASURED_PRECISIONS = ("int8",)  # served only as --precision auto's choice (an IR it made)
HINTS = {"fp32": "f32", "bf16": "bf16"}  # tiankong's names -> OpenVINO's element types
INSTALL_HINT = "pip install 'tiankong[openvino]'"


def has_openvino() -> bool:
    """Whether the optional ``openvino`` package is installed (found, not imported)."""
    return importlib.util.find_spec("openvino") is not None


def openvino_version() -> str | None:
    if not has_openvino():
        return None
    import importlib.metadata

    try:
        return importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        return None


class OpenVinoEngine:
    """OpenVINO's CPU plugin on an FP32 ONNX export; one infer request, which a lock keeps to
    one call at a time: the server calls it from its engine thread only, but a ``FillMasker``
    shared by a user's threads called it at once ("Infer Request is busy", 289 of 300 calls
    on 6 threads), where ONNX Runtime and torch serve such calls side by side.

    ``threads`` is the plugin's thread count (0: the plugin's pick); one stream, the latency
    hint, as ORT's session runs one batch at a time on its intra-op pool.
    """

    name = "openvino"
    device = "cpu"
    device_reason: str | None = None

    def __init__(
        self,
        model_file: Path,
        precision: str = "fp32",
        threads: int = 1,
        quality: dict[str, Any] | None = None,
    ) -> None:
        if precision not in (*OPENVINO_PRECISIONS, *MEASURED_PRECISIONS):
            raise BadOptionError(
                f"The openvino engine runs {' or '.join(OPENVINO_PRECISIONS)}, not '{precision}'."
            )
        if threads < 0:
            raise BadOptionError(f"threads must be 0 (automatic) or more; got {threads}.")
        if not has_openvino():
            raise BadOptionError(f"The openvino engine needs OpenVINO: {INSTALL_HINT}.")
        import openvino as ov

        config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
        if precision in HINTS:  # an INT8 IR keeps the plugin's default for what stays float
            config["INFERENCE_PRECISION_HINT"] = HINTS[precision]
        if threads:
            config["INFERENCE_NUM_THREADS"] = str(threads)
        try:
            compiled = ov.Core().compile_model(str(model_file), "CPU", config)
        except Exception as error:  # a graph OpenVINO's ONNX reader or CPU plugin can't take
            # its own words' last line (OpenVINO's first ones name its source files): the type
            # alone left a failure seen once in a test run (RuntimeError) with nothing to go on
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            said = lines[-1][:300] if lines else ""
            raise ModelUnavailableError(
                f"OpenVINO could not compile the export '{model_file.parent.name}' "
                f"({type(error).__name__}{': ' + said if said else ''}); use --engine onnx."
            ) from None
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")  # an ov.Type: "f32", "bf16"
        effective = hint.to_string() if hasattr(hint, "to_string") else str(hint)
        if precision in HINTS and effective != HINTS[precision]:
            raise BadOptionError(
                f"OpenVINO runs '{effective}' on this CPU, not {precision}: bf16 needs "
                "AVX512-BF16 or AMX; use --precision fp32 or auto."
            )
        self.precision = precision
        self.model_file = model_file  # the FP32 ONNX export, or the INT8 IR
        self.quality: dict[str, Any] = quality or {}
        self.input_names = [port.get_any_name() for port in compiled.inputs]
        self.request = compiled.create_infer_request()
        self.lock = threading.Lock()  # the request and its output buffer: one call at a time

    @classmethod
    def create(
        cls, model: ResolvedModel, settings: Settings, find_export: FindExport
    ) -> OpenVinoEngine:
        """``--engine openvino``: the FP32 export from the cache, at ``settings.precision``
        (``auto`` is FP32, which runs on every CPU; bf16 is asked for by name, or chosen by
        ``--engine auto --precision auto`` where it measures fastest)."""
        if settings.device == "cuda":
            raise BadOptionError("The openvino engine runs on the CPU; use --device cpu or auto.")
        precision = "fp32" if settings.precision == "auto" else settings.precision
        if precision not in OPENVINO_PRECISIONS:
            measured = (
                " when asked by name: its INT8 (NNCF) serves only as --engine auto --precision "
                "auto's measured choice"
                if precision in MEASURED_PRECISIONS
                else ""
            )
            raise BadOptionError(
                f"The openvino engine runs {' or '.join(OPENVINO_PRECISIONS)}, not "
                f"'{precision}'{measured}."
            )
        if not has_openvino():  # before an export is made for an engine that can't start
            raise BadOptionError(f"The openvino engine needs OpenVINO: {INSTALL_HINT}.")
        export = find_export(model, "fp32", settings)
        return cls(export.onnx_file, precision, settings.threads)

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        feed = batch.feed(self.input_names)
        with self.lock:
            self.request.infer(feed)
            # copied: the request's output buffer is reused by the next call
            return np.array(self.request.get_output_tensor(0).data, dtype=np.float32)
