"""Engine selection: the one place that maps --engine/--precision/--device to an implementation."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiankong.config import Settings
from tiankong.core.models import ResolvedModel
from tiankong.engines.base import EncodedBatch, Engine, engine_calls, pad_batch
from tiankong.host import MemoryLimit, memory_limit, require

if TYPE_CHECKING:
    from tiankong.engines.onnx_engine import FindExport

__all__ = ["EncodedBatch", "Engine", "create_engine", "engine_calls", "pad_batch"]
log = logging.getLogger(__name__)
NVIDIA_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl")
# A split's second engine may hold at most this share of the memory the server may use (the
# cgroup's limit, or the machine's memory): the rest is room for the first engine, OpenVINO's
# caches of batch shapes (which doubled a split server's memory under load on amx), the corpus
# index and the requests. Where it is over, the faster of the two serves alone.
SPLIT_MEMORY_SHARE = 0.1


def create_engine(
    model: ResolvedModel, settings: Settings, vocab_size: int, find_export: FindExport
) -> Engine:
    """Build the engine that ``settings`` asks for. ``auto`` prefers ONNX Runtime when present,
    except on a GPU that only torch can use (``gpu_needs_torch``), and is OpenVINO for bf16;
    with ``--precision auto`` on the CPU, the measured choice may serve OpenVINO too.
    ``find_export`` gives the ONNX and OpenVINO engines their file (the caller's export
    cache): engines never start an export."""
    name = settings.engine  # one of config.ENGINES (check_settings)
    if name == "fake":
        from tiankong.engines.fake import FakeEngine

        return FakeEngine(vocab_size)
    if name == "auto" and settings.precision == "bf16":
        name = "openvino"  # the one engine here that runs bf16
    elif name == "auto" and settings.precision == "fp16":
        name = "torch"  # the one that runs fp16 (on a GPU: it says so on the CPU), not onnx's
    elif name == "auto":
        onnx_ok = has_module("onnxruntime") and has_onnx_engine()
        if not onnx_ok and not has_module("torch"):  # a plain install of the wheel: no engine
            require("serving", ("onnxruntime",), "Filling with a model")
        name = "onnx" if onnx_ok and not gpu_needs_torch(settings.device) else "torch"
    if name == "onnx":
        require("serving", ("onnxruntime",), "The onnx engine")
        from tiankong.engines.onnx_engine import OnnxEngine, pick_onnx_device

        if settings.precision == "auto" and pick_onnx_device(settings.device) == "cpu":
            return measured_engine(model, settings, find_export)
        return OnnxEngine.create(model, settings, find_export)
    if name == "openvino":
        require("openvino", ("openvino",), "The openvino engine")
        from tiankong.engines.openvino_engine import OpenVinoEngine

        return OpenVinoEngine.create(model, settings, find_export)
    require(
        "torch",
        ("torch", "transformers"),
        "The torch engine",
        "; install torch==2.13.0 first, for its CPU wheel; or use --engine onnx",
    )
    from tiankong.engines.torch_engine import TorchEngine

    return TorchEngine(model.path, settings.device, settings.precision, settings.threads)


def measured_engine(model: ResolvedModel, settings: Settings, find_export: FindExport) -> Engine:
    """``--precision auto`` on the CPU: the engine and precision measured fastest here among
    those that pass the guard (``export/precision_choice``: measured once, kept in the export
    cache's ``auto`` entry). The decision and its reasons go to the log at INFO, to /info and
    to the server's startup line (``choice_line``)."""
    folder: Path | None = None  # the auto entry, which may hold a graph (OpenVINO's INT8 IR)
    try:
        auto = find_export(model, "auto", settings)
        choice: dict[str, Any] = auto.choice
        folder = auto.folder
    except OSError as error:  # e.g. a read-only container's cache: no lock, no new entry
        # Not a ModelUnavailableError: that is the model failing to export (corrupt weights,
        # no torch), and the guard-only path would build the same export again and fail the
        # same way, seconds later. A cache folder that can't be made fails the same way too.
        choice = guard_only_choice(model, settings, find_export, error)
    choice = within_engine(choice, settings.engine)
    choice = within_split(choice, settings.split_engines)
    choice = within_batch_cap(choice, settings.max_batch_size)
    choice = within_memory(choice, memory_limit())
    split = choice.get("split")
    engine = served_engine(model, settings, find_export, choice, folder, choice)
    if split:  # a second engine for small batches (precision_choice.split_pair)
        from tiankong.engines.split import SplitEngine

        lone = served_engine(model, settings, find_export, split, folder, choice)
        quality = {**getattr(engine, "quality", {}), **getattr(lone, "quality", {})}
        engine = SplitEngine(lone, engine, int(split["below_rows"]), quality)
    log.info("%s", choice_line(model.name, choice))
    return engine


def within_engine(choice: dict[str, Any], engine: str) -> dict[str, Any]:
    """``--engine onnx`` keeps ONNX Runtime: where the measurement (made once for every engine)
    serves OpenVINO, ONNX Runtime's own pick serves alone instead (``onnx_runtime``: the
    fastest of its measured candidates that passes the guard, ``PrecisionChoice.within``). It
    served OpenVINO bf16 under ``--engine onnx``, which refuses ``--precision bf16`` (a
    review). The line says so."""
    parts = [choice, *([choice["split"]] if choice.get("split") else [])]
    if engine != "onnx" or all(part["engine"] == "onnx" for part in parts):
        return choice
    precision = choice["onnx_runtime"]
    return {
        **choice,
        "engine": "onnx",
        "precision": precision,
        "file": None,
        "split": None,
        "line": f"{choice['line']}; --engine onnx keeps ONNX Runtime, so {precision} (onnx) serves",
    }


def within_split(choice: dict[str, Any], allowed: bool) -> dict[str, Any]:
    """A split serves only where ``--split-engines`` asks for it: its two engines score a text
    differently (another precision, another library), so the engine a text met depended on what
    else was in its batch, and a check's verdict at a threshold on the server's load (口传心受
    fixed in a busy server's batch, not alone: a review). Otherwise the one of the two that
    the measurement picked to serve alone (the split's ``alone``) serves. The line says so."""
    split = choice.get("split")
    if not split or allowed:
        return choice
    alone = keyed(choice, split).get(split.get("alone"), choice)  # none named: the full-batch
    why = "one engine serves unless --split-engines asks for two (a text's scores would depend"
    return serving_alone(choice, alone, f"{why} on its batch)")


def within_batch_cap(choice: dict[str, Any], max_batch_size: int) -> dict[str, Any]:
    """A split whose batch engine could never run, as ``--max-batch-size`` keeps every batch
    under its rows, serves its lone engine alone: the other would only hold memory. The line
    says so."""
    split = choice.get("split")
    if not split or max_batch_size >= int(split["below_rows"]):
        return choice
    why = f"--max-batch-size {max_batch_size} keeps every batch under {split['below_rows']} texts"
    return serving_alone(choice, split, why)


def within_memory(choice: dict[str, Any], limit: MemoryLimit | None) -> dict[str, Any]:
    """A split whose second engine would hold more than ``SPLIT_MEMORY_SHARE`` of ``limit``
    serves one engine: the one of the two that the measurement picked to serve alone (the
    split's ``alone``: the faster by the one-engine rule). The second engine is the other one,
    and its memory is what it added when it was measured (``Candidate.memory_mb``). Either way
    the line says what the second engine holds."""
    split = choice.get("split")
    if not split:
        return choice
    measured = {f"{c['engine']} {c['precision']}": c for c in choice.get("candidates", ())}
    parts = keyed(choice, split)
    alone = split.get("alone")
    second = next((measured.get(name) for name in parts if name != alone), None)
    if limit is None or alone not in parts or second is None or second["memory_mb"] is None:
        why = "this machine's memory is unknown"
        if limit is not None:
            why = "the second engine's memory was not measured"
        return {**choice, "line": f"{choice['line']}; the split serves: {why}"}
    held = (
        f"the second engine, {second['precision']} ({second['engine']}), holds "
        f"{second['memory_mb']:,.0f} MB, {100 * second['memory_mb'] / limit.mb:.1f}% of "
        f"{limit.mb:,.0f} MB ({limit.source})"
    )
    if second["memory_mb"] <= SPLIT_MEMORY_SHARE * limit.mb:
        return {**choice, "line": f"{choice['line']}; {held}"}
    over = f"{held}, over the {100 * SPLIT_MEMORY_SHARE:.0f}% a split may take"
    return serving_alone(choice, parts[alone], over)


def keyed(*parts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A choice's parts (itself, its split) by their candidate key, "onnx int8"."""
    return {f"{part['engine']} {part['precision']}": part for part in parts}


def serving_alone(choice: dict[str, Any], part: dict[str, Any], why: str) -> dict[str, Any]:
    """``choice`` with its split's ``part`` serving alone (the choice itself, or its split's
    lone engine), and its line saying why."""
    return {
        **choice,
        **{key: part[key] for key in ("engine", "precision", "file")},
        "split": None,
        "line": f"{choice['line']}; {why}, so {part['precision']} ({part['engine']}) serves alone",
    }


def served_engine(
    model: ResolvedModel,
    settings: Settings,
    find_export: FindExport,
    part: dict[str, Any],
    folder: Path | None,
    choice: dict[str, Any],
) -> Engine:
    """The engine that ``part`` of the measured ``choice`` names (its ``engine``, ``precision``
    and ``file``, a graph in the auto entry's ``folder``), with the choice in its quality."""
    from tiankong.engines.onnx_engine import OnnxEngine

    if part["engine"] == "openvino":
        from tiankong.engines.openvino_engine import OpenVinoEngine

        own = folder / part["file"] if folder is not None and part.get("file") else None
        graph = own or find_export(model, "fp32", settings).onnx_file
        return OpenVinoEngine(graph, part["precision"], settings.threads, {"choice": choice})
    chosen = settings.with_overrides(precision=part["precision"])
    onnx = OnnxEngine.create(model, chosen, find_export)
    onnx.quality = {**onnx.quality, "choice": choice}
    return onnx


def guard_only_choice(
    model: ResolvedModel, settings: Settings, find_export: FindExport, error: OSError
) -> dict[str, Any]:
    """When the choice can't be measured and kept (a read-only export cache, as in
    ``docker run --read-only``), the INT8 guard alone decides, as before measurement existed:
    INT8 when its export passed, else FP32; the line says so and why."""
    why = error.strerror
    from tiankong.engines.onnx_engine import served_precision

    passed = bool(find_export(model, "int8", settings).quality.get("passed"))
    precision = served_precision("auto", "cpu", passed)
    return {
        "engine": "onnx",
        "precision": precision,
        "line": f"{precision} (onnx) by the INT8 guard alone; the engines were not measured, "
        f"as the export cache could not keep the choice ({why or type(error).__name__})",
    }


def choice_line(model_name: str, choice: dict[str, Any]) -> str:
    return f"--precision auto for '{model_name}': {choice['line']}."


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def has_onnx_engine() -> bool:
    return importlib.util.find_spec("tiankong.engines.onnx_engine") is not None


def gpu_needs_torch(device: str) -> bool:
    """True when a GPU is wanted that only torch can drive: ``--engine auto`` then serves torch
    (FP16 on CUDA) instead of an onnxruntime that has no CUDA provider running on the CPU.

    ``--device auto`` looks for the NVIDIA driver's files rather than asking torch, so a CPU-only
    machine serving through ONNX Runtime never imports torch.
    """
    if device == "cpu" or not has_cuda_torch():
        return False
    if device == "auto" and not has_nvidia_driver():
        return False
    import onnxruntime

    return "CUDAExecutionProvider" not in onnxruntime.get_available_providers()


def has_nvidia_driver() -> bool:
    return any(Path(name).exists() for name in NVIDIA_DRIVER_FILES)


def has_cuda_torch() -> bool:
    """torch is installed and is not a CPU-only build (read from its metadata, not imported)."""
    try:
        return "+cpu" not in importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return False
