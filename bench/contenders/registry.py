"""The contenders, as data: how each one is started and what it is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Contender:
    """One server to bench. ``module`` is a ``python -m`` target; ``tiankong`` serves through
    the ``tiankong serve`` CLI with ``engine`` and ``precision``."""

    key: str
    family: str  # pipeline | torchscript | optimum | tiankong
    precision: str
    description: str
    module: str = ""
    engine: str = ""
    # Thread counts tried in the calibration; the one with the lowest c=1 p50 is kept.
    # Empty: the server's own default (tiankong: physical cores).
    thread_options: tuple[int, ...] = ()

    @property
    def is_tiankong(self) -> bool:
        return self.family == "tiankong"

    @property
    def ready_path(self) -> str:
        return "/ready" if self.is_tiankong else "/health"


CONTENDERS: tuple[Contender, ...] = (
    Contender(
        "pipeline",
        "pipeline",
        "fp32",
        'transformers pipeline("fill-mask") in FastAPI',
        module="bench.contenders.pipeline_app",
        thread_options=(1, 2),
    ),
    Contender(
        "torchscript-fp32",
        "torchscript",
        "fp32",
        "BertForMaskedLM + TorchScript trace + softmax at the mask, in FastAPI",
        module="bench.contenders.torchscript_app",
        thread_options=(1, 2),
    ),
    Contender(
        "torchscript-int8",
        "torchscript",
        "int8",
        "the same with torch dynamic INT8 (Linear layers)",
        module="bench.contenders.torchscript_app",
        thread_options=(1, 2),
    ),
    Contender(
        "optimum-fp32",
        "optimum",
        "fp32",
        "optimum-onnx ORTModelForMaskedLM in FastAPI (own venv)",
        module="bench.contenders.optimum_app",
        thread_options=(1, 2),
    ),
    Contender(
        "optimum-int8",
        "optimum",
        "int8",
        "the same, quantized by ORTQuantizer (AVX2 dynamic, per channel)",
        module="bench.contenders.optimum_app",
        thread_options=(1, 2),
    ),
    Contender(
        "tiankong-onnx-int8",
        "tiankong",
        "int8",
        "tiankong serve --engine onnx --precision int8",
        engine="onnx",
    ),
    Contender(
        "tiankong-onnx-fp32",
        "tiankong",
        "fp32",
        "tiankong serve --engine onnx --precision fp32",
        engine="onnx",
    ),
    Contender(
        "tiankong-torch-fp32",
        "tiankong",
        "fp32",
        "tiankong serve --engine torch --precision fp32",
        engine="torch",
    ),
)


def select(spec: str) -> list[Contender]:
    """``spec``: comma-separated keys or families (``pipeline,tiankong``); ``all`` for all."""
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    if not wanted or wanted == ["all"]:
        return list(CONTENDERS)
    chosen = [c for c in CONTENDERS if c.key in wanted or c.family in wanted]
    unknown = [w for w in wanted if not any(c.key == w or c.family == w for c in CONTENDERS)]
    if unknown:
        names = ", ".join(c.key for c in CONTENDERS)
        raise SystemExit(f"unknown contender(s) {', '.join(unknown)}; choose from {names}")
    return chosen
