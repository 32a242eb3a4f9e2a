"""The model registry, as data: the bundled models, the files a model folder holds, and
``ResolvedModel``, what every stage downstream of a model source receives (a local directory with
``config.json`` and a tokenizer). Finding a source (a bundled name, a folder, the hub) is
``tiankong/model_sources.py``, outside this pure layer.
"""

from __future__ import annotations

import json
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
# Model types whose position ids start at pad_token_id + 1 (transformers'
# create_position_ids_from_input_ids), so that many of their positions are never read.
# (Every masked-LM family of transformers that numbers its positions so; a review found
# Longformer, RoBERTa-PreLayerNorm, I-BERT and MPNet missing: a window they can't read passed
# the check and failed in the engine, with every request batched beside it.)
OFFSET_POSITIONS = (
    "roberta",
    "xlm-roberta",
    "xlm-roberta-xl",
    "camembert",
    "data2vec-text",
    "xmod",
    "longformer",
    "roberta-prelayernorm",
    "ibert",
    "mpnet",
    "luke",
    "esm",
)


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


def require_masked_lm_type(folder: Path) -> None:
    """Refuse a config whose ``model_type`` transformers has no masked-LM class for (GPT-2, a
    decoder): loading it fails as if the weights were bad, and the weights are not the fault."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    from tiankong.errors import ModelUnavailableError

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        model_type = config.get("model_type")
    except (OSError, ValueError, AttributeError):
        return  # the load below says what is wrong with the folder
    if isinstance(model_type, str) and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise ModelUnavailableError(
            f"Model '{folder.name}' is of type '{model_type}', which has no masked language "
            "model head to fill [MASK] with; tiankong needs a *ForMaskedLM model such as "
            "bert-base-chinese."
        )


def unloadable_weights(folder: str, error: BaseException, purpose: str = "") -> Exception:
    """transformers' failure to load a model's weights (``from_pretrained``: a truncated
    safetensors file, weights of another shape than config.json says) as one sentence, the
    same from every load path (the torch engine, the export, training's ``--init``)."""
    from tiankong.errors import ModelUnavailableError

    return ModelUnavailableError(
        f"The model weights in '{folder}' could not be loaded{purpose} "
        f"({type(error).__name__}); the files may be missing, truncated or corrupt, or not "
        "match its config.json."
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


def read_model_config(folder: Path) -> dict[str, Any]:
    """A model folder's config.json, or {} where it has none to read."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no config to read (resolve_model refuses such a folder)
        return {}
    return config if isinstance(config, dict) else {}


def model_outputs(folder: Path) -> int | None:
    """The scores a row of the model in ``folder`` has (its config's ``vocab_size``), or None
    where the config doesn't say."""
    outputs = read_model_config(folder).get("vocab_size")
    return outputs if isinstance(outputs, int) and not isinstance(outputs, bool) else None


@dataclass(frozen=True)
class Positions:
    """How long a row the model reads: ``usable`` tokens, [CLS] and [SEP] included; ``source``
    says how its config.json gives that figure, for messages."""

    usable: int
    source: str


def usable_positions(folder: Path) -> Positions | None:
    """The most tokens a row of the model in ``folder`` may hold (``max_position_embeddings``
    in its config.json), or None where the config does not say. The one rule for the server's
    window (``service.check_window``) and the export's guard and calibration rows: a longer row
    fails in the engine (ONNX Runtime: "input index out of range").

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(
    ...     '{"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}')
    >>> usable_positions(folder)
    Positions(usable=512, source='max_position_embeddings 514 less the 2 before')
    """
    config = read_model_config(folder)
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int) or isinstance(positions, bool):
        return None
    if config.get("model_type") in OFFSET_POSITIONS:
        # RoBERTa's positions start after its padding id: 514 of them read 512 tokens (a
        # window of 514 failed in the engine with an index error)
        offset = int(config.get("pad_token_id") or 0) + 1
        return Positions(
            positions - offset, f"max_position_embeddings {positions} less the {offset} before"
        )
    return Positions(positions, "max_position_embeddings")
