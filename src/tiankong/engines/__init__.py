"""Engine selection: the one place that maps --engine/--precision/--device to an implementation."""

from __future__ import annotations

import importlib.util

from tiankong.config import Settings
from tiankong.engines.base import EncodedBatch, Engine, pad_batch
from tiankong.errors import BadOptionError
from tiankong.models import ResolvedModel

__all__ = ["EncodedBatch", "Engine", "create_engine", "pad_batch"]
ENGINE_NAMES = ("auto", "torch", "onnx", "fake")


def create_engine(model: ResolvedModel, settings: Settings, vocab_size: int) -> Engine:
    """Build the engine that ``settings`` asks for. ``auto`` prefers ONNX Runtime when present."""
    name = settings.engine
    if name not in ENGINE_NAMES:
        raise BadOptionError(f"Unknown engine '{name}'; use one of {', '.join(ENGINE_NAMES)}.")
    if name == "fake":
        from tiankong.engines.fake import FakeEngine

        return FakeEngine(vocab_size)
    if name == "auto":
        name = "onnx" if has_module("onnxruntime") and has_onnx_engine() else "torch"
    if name == "onnx":
        from tiankong.engines.onnx_engine import OnnxEngine

        return OnnxEngine.create(model, settings)
    if not has_module("torch"):
        raise BadOptionError(
            "The torch engine needs PyTorch: pip install torch==2.13.0 'tiankong[torch]', "
            "or use --engine onnx."
        )
    from tiankong.engines.torch_engine import TorchEngine

    return TorchEngine(model.path, settings.device, settings.precision, settings.threads)


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def has_onnx_engine() -> bool:
    return importlib.util.find_spec("tiankong.engines.onnx_engine") is not None
