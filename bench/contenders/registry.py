"""The contenders, as data: how each one is started and what it is."""

from __future__ import annotations

from dataclasses import dataclass

from bench.refusal import Refused


@dataclass(frozen=True)
class Contender:
    """One server to bench. ``module`` is a ``python -m`` target; ``tiankong`` serves through
    the ``tiankong serve`` CLI with ``engine`` and ``precision``."""

    key: str
    family: (
        str  # pipeline | torchscript | optimum | ort-recipe | openvino-recipe | floor | tiankong
    )
    precision: str
    description: str
    module: str = ""
    engine: str = ""
    # Peers run at every intra-op thread setting of ``thread_settings()`` and keep the best one
    # per phase (lowest c=1 p50, highest c=20 rate); tiankong and the floor run once, at
    # their own default (tiankong: the physical cores it may use, ``host.usable_cores``).
    tuned: bool = False
    # tiankong's --index: none where the peers look nothing up (the same work), bundled for the
    # one row that measures what the corpus index costs a request (issue 23's goal)
    index: str = "none"

    @property
    def is_tiankong(self) -> bool:
        return self.family == "tiankong"

    @property
    def role(self) -> str:
        """``peer`` (the goals' yardstick), ``tiankong`` (judged) or ``reference`` (the
        floor and the fake engine: the serving-overhead pair, never judged against peers)."""
        if self.family == "floor" or self.engine == "fake":
            return "reference"
        return "tiankong" if self.is_tiankong else "peer"

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
        tuned=True,
    ),
    Contender(
        "torchscript-fp32",
        "torchscript",
        "fp32",
        "BertForMaskedLM + TorchScript trace + softmax at the mask, in FastAPI",
        module="bench.contenders.torchscript_app",
        tuned=True,
    ),
    Contender(
        "torchscript-int8",
        "torchscript",
        "int8",
        "the same with torch dynamic INT8 (Linear layers)",
        module="bench.contenders.torchscript_app",
        tuned=True,
    ),
    Contender(
        "optimum-fp32",
        "optimum",
        "fp32",
        "optimum-onnx ORTModelForMaskedLM in FastAPI (own venv)",
        module="bench.contenders.optimum_app",
        tuned=True,
    ),
    Contender(
        "optimum-int8",
        "optimum",
        "int8",
        "the same, quantized by ORTQuantizer (AVX2 dynamic, per channel)",
        module="bench.contenders.optimum_app",
        tuned=True,
    ),
    Contender(
        "ort-recipe-fp32",
        "ort-recipe",
        "fp32",
        "hand-written ORT recipe: torch.onnx.export, BERT fusions, numpy softmax, def handler",
        module="bench.contenders.ort_recipe_app",
        tuned=True,
    ),
    Contender(
        "ort-recipe-int8",
        "ort-recipe",
        "int8",
        "the same, quantize_dynamic per-channel QInt8",
        module="bench.contenders.ort_recipe_app",
        tuned=True,
    ),
    Contender(
        "openvino-recipe",
        "openvino-recipe",
        "fp32",
        "hand-written OpenVINO recipe: the ORT recipe's FP32 graph, OpenVINO CPU defaults "
        "(bf16 where the CPU has it), one infer request per thread, def handler",
        module="bench.contenders.openvino_app",
        tuned=True,
    ),
    Contender(
        "floor",
        "floor",
        "fp32",
        "bare FastAPI: the same body validated by pydantic, a fixed five-candidate answer",
        module="bench.contenders.floor_app",
    ),
    Contender(
        "tiankong-fake",
        "tiankong",
        "fp32",
        "tiankong serve --engine fake (no model: tiankong's own serving cost)",
        engine="fake",
    ),
    Contender(
        "tiankong-auto",
        "tiankong",
        "auto",
        "tiankong serve with its defaults (--precision auto: the engine measured fastest here)",
        engine="auto",
    ),
    Contender(
        "tiankong-auto-index",
        "tiankong",
        "auto",
        "tiankong serve with its defaults and the bundled corpus index on (--index bundled)",
        engine="auto",
        index="bundled",
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


def thread_settings(cores: int) -> tuple[int, ...]:
    """The intra-op thread counts a peer is run with: 1, 2 and every core (c=1 usually wants
    every core; at c=20 a plain-``def`` handler runs several forwards at once, so fewer)."""
    return tuple(sorted({1, min(2, cores), cores}))


def select(spec: str) -> list[Contender]:
    """``spec``: comma-separated keys or families (``pipeline,tiankong``); ``all`` for all."""
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    if not wanted or wanted == ["all"]:
        return list(CONTENDERS)
    chosen = [c for c in CONTENDERS if c.key in wanted or c.family in wanted]
    unknown = [w for w in wanted if not any(c.key == w or c.family == w for c in CONTENDERS)]
    if unknown:
        names = ", ".join(c.key for c in CONTENDERS)
        raise Refused(f"bench: unknown contender(s) {', '.join(unknown)}; choose from {names}")
    return chosen
