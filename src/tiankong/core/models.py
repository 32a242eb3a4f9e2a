"""The model registry, as data: the bundled models, the files a model folder holds, and
``ResolvedModel``, what every stage downstream of a model source receives (a local directory with
``config.json`` and a tokenizer). Finding a source (a bundled name, a folder, the hub) is
``tiankong/model_sources.py``, outside this pure layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).parent.parent
BUNDLED_ROOT = PACKAGE_ROOT / "bundled"
BUNDLED_CORPUS = BUNDLED_ROOT / "corpus"  # the bundled index's text (its README: sources, licences)
VOCAB_FILE = PACKAGE_ROOT / "resources" / "vocab.txt"
DEFAULT_HUB_MODEL = "google-bert/bert-base-chinese"

# The files that make a model: fetched from the hub, and hashed to key the ONNX export cache.
MODEL_FILE_PATTERNS = (
    "config.json",
    "*.safetensors",
    "pytorch_model.bin",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
MASKED_LM_SUFFIXES = ("ForMaskedLM", "ForPreTraining")


@dataclass(frozen=True)
class BundledModel:
    """One entry of the bundled-model registry."""

    name: str
    folder: str
    summary: str


# The registry is data: add an entry here when a new model is bundled.
BUNDLED_MODELS: tuple[BundledModel, ...] = (
    BundledModel(
        name="tiankong-mini-zh",
        folder="tiankong-mini-zh",
        summary=(
            "Demo-quality 4-layer Chinese BERT trained by `tiankong train` on public poetry, "
            "classics, reviews and news. Use bert-base-chinese via --model for production."
        ),
    ),
)
DEFAULT_MODEL = BUNDLED_MODELS[0].name


@dataclass(frozen=True)
class ResolvedModel:
    """A model source resolved to a local folder."""

    name: str
    path: Path
    kind: str  # "bundled" | "local" | "hub"
    summary: str = ""

    @property
    def card_path(self) -> Path:
        return self.path / "MODEL_CARD.md"


def bundled_names() -> list[str]:
    return [entry.name for entry in BUNDLED_MODELS]
