"""The model registry, as data: the bundled models, the files a model folder holds, and
``ResolvedModel``, what every stage downstream of a model source receives (a local directory with
``config.json`` and a tokenizer). Finding a source (a bundled name, a folder, the hub) is
``tiankong/model_sources.py``, outside this pure layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).parent.parent
BUNDLED_ROOT = PACKAGE_ROOT / "bundled"
BUNDLED_CORPUS = BUNDLED_ROOT / "corpus"  # the bundled index's text (its README: sources, licences)
VOCAB_FILE = PACKAGE_ROOT / "resources" / "vocab.txt"
DEFAULT_HUB_MODEL = "google-bert/bert-base-chinese"

# The files that make a model: fetched from the hub, and hashed to key the ONNX export cache.
MODEL_FILE_PATTERNS = (
    "config.json",
    "*.safetensors",
    "pytorch_model*.bin",  # one file, or shards with the index below
    "*.index.json",  # a sharded model's map of its weights to its shards
    "added_tokens.json",  # the tokens a vocab.txt-only tokenizer adds past its vocabulary
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
MASKED_LM_SUFFIXES = ("ForMaskedLM", "ForPreTraining")


def require_trained(model: Any, loading: Mapping[str, Any], folder: str) -> None:
    """Refuse a masked LM (loaded with transformers' ``output_loading_info``) whose weight
    matrices were made up: missing from the files and so initialised at random (a bias or a
    norm that starts at 0 or 1 is no answer made up). An ELECTRA discriminator
    (``*ForPreTraining``) has no generator head: transformers builds a random one, and its
    answers were random. The one check of both load paths (the torch engine, the export)."""
    from tiankong.errors import ModelUnavailableError

    dims = {name: tensor.dim() for name, tensor in model.state_dict().items()}
    made_up = [name for name in loading["missing_keys"] if dims.get(name, 0) >= 2]
    if made_up:
        raise ModelUnavailableError(
            f"Model '{folder}' has no trained masked-LM head ({made_up[0]} is not in its "
            "weights): it was not trained to fill blanks (an ELECTRA discriminator, say; use "
            "its generator)."
        )


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
