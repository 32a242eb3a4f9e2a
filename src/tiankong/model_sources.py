"""Resolving a model source (bundled name, local directory or hub id) to a local HF-layout folder.

This is the only module that knows where models come from: it reads folders, and reaches the
Hugging Face hub (honouring ``HF_HOME`` and ``HF_HUB_OFFLINE``). Everything downstream receives a
``ResolvedModel`` (``core/models.py``, the registry as data) whose ``path`` is a local directory
with ``config.json`` and a tokenizer.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from tiankong.core.models import (
    BUNDLED_MODELS,
    BUNDLED_ROOT,
    DEFAULT_MODEL,
    MASKED_LM_SUFFIXES,
    MODEL_FILE_PATTERNS,
    ResolvedModel,
    bundled_names,
)
from tiankong.core.output_folder import os_reason
from tiankong.errors import ModelUnavailableError, not_utf8

# Masked LMs whose inputs are more than token ids, which tiankong does not make: their answers
# would be wrong without a word (a review's RoCBert answered 并 where the pipeline gives 悼).
UNSUPPORTED_TYPES = {
    "roc_bert": "which reads each character's shape and pronunciation ids beside its token id; "
    "tiankong makes token ids only, so its answers would be wrong",
}


def resolve_model(source: str | None, flag: str = "--model") -> ResolvedModel:
    """Resolve ``source`` (given with ``flag``) to a local HF-layout folder, or raise
    ModelUnavailableError.

    >>> resolve_model("tiankong-mini-zh").kind
    'bundled'
    """
    source = (source or DEFAULT_MODEL).strip()
    for entry in BUNDLED_MODELS:
        if source == entry.name:
            path = BUNDLED_ROOT / entry.folder
            check_model_folder(path, source)
            return ResolvedModel(entry.name, path, "bundled", entry.summary)
    if source.startswith("bundled:"):
        raise ModelUnavailableError(
            f"There is no bundled model called '{source[8:]}'; "
            f"the bundled models are: {', '.join(bundled_names())}."
        )
    path = Path(source).expanduser()
    if os.path.exists(path) or looks_like_path(source):
        if not os.path.isdir(path):
            raise ModelUnavailableError(
                f"Model folder '{source}' does not exist or is not a directory; pass a folder in "
                "Hugging Face layout (config.json, weights, vocab), a hub id, or "
                f"one of the bundled models ({', '.join(bundled_names())})."
            )
        check_model_folder(path, source)
        for entry in BUNDLED_MODELS:  # a bundled model named by its folder is still bundled
            if path.resolve() == (BUNDLED_ROOT / entry.folder).resolve():
                return ResolvedModel(entry.name, path.resolve(), "bundled", entry.summary)
        # the folder's own name: ``--model .`` was named "" in every answer and in /info
        return ResolvedModel(path.resolve().name, path.resolve(), "local", read_summary(path))
    path = download_from_hub(source, flag)
    check_model_folder(path, source)
    return ResolvedModel(source, path, "hub", read_summary(path))


def looks_like_path(source: str) -> bool:
    """Hub ids are ``name`` or ``org/name``; anything else path-shaped is treated as a folder."""
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or "\\" in source


def download_from_hub(repo_id: str, flag: str = "--model") -> Path:
    """Fetch (or reuse from the HF cache) a hub model; honours HF_HOME and HF_HUB_OFFLINE."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(MODEL_FILE_PATTERNS)))
    except HFValidationError:
        raise ModelUnavailableError(
            f"'{repo_id}' is neither a bundled model ({', '.join(bundled_names())}), "
            "an existing folder, nor a valid Hugging Face hub id."
        ) from None
    except Exception as error:  # network, 404, gated, offline and not cached
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")
        reason = "offline mode is on (HF_HUB_OFFLINE)" if offline else type(error).__name__
        raise ModelUnavailableError(
            f"Could not load hub model '{repo_id}' ({reason}): it is not in the Hugging Face "
            "cache and could not be downloaded; connect to the internet once, copy the model "
            f"folder here and pass its path with {flag}, or use the bundled model "
            f"'{DEFAULT_MODEL}'."
        ) from None


def check_model_folder(path: Path, source: str) -> None:
    """Fail fast with one sentence when a folder can't be a Chinese masked-LM model."""
    config_file = path / "config.json"
    if not config_file.is_file() and (path / "checkpoint" / "config.json").is_file():
        # a `tiankong train --out` folder whose run stopped before it saved the model (a review)
        raise ModelUnavailableError(
            f"Model '{source}' is a training run that stopped before it finished: its last "
            f"checkpoint is '{path / 'checkpoint'}' (pass that folder), or continue it with "
            f"`tiankong train --out {source} --resume` and the run's other options."
        )
    if not config_file.is_file():
        raise ModelUnavailableError(
            f"Model '{source}' has no config.json; a model folder must be in Hugging Face layout."
        )
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelUnavailableError(
            f"Model '{source}' has an unreadable or corrupt config.json."
        ) from None
    if not isinstance(config, dict):
        raise ModelUnavailableError(f"Model '{source}' has a config.json that is no JSON object.")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) and transformers_installed():
        # transformers can't load it, and its error read as bad weights at export (a review)
        raise ModelUnavailableError(
            f"Model '{source}' has no model_type in its config.json, so its architecture is "
            'unknown; add one ("model_type": "bert" for a BERT).'
        )
    if "auto_map" in config and not native_masked_lm(model_type):
        # transformers asked on a terminal, then ran the folder's code; a type it knows loads
        # without it (trust_remote_code is off everywhere)
        raise ModelUnavailableError(
            f"Model '{source}' needs Python code of its own (auto_map in its config.json), "
            "which tiankong does not run; use a masked LM that transformers knows without it."
        )
    if model_type in UNSUPPORTED_TYPES:
        raise ModelUnavailableError(
            f"Model '{source}' is of type '{model_type}', {UNSUPPORTED_TYPES[model_type]}."
        )
    architectures = config.get("architectures") or []
    if architectures and not any(a.endswith(MASKED_LM_SUFFIXES) for a in architectures):
        raise ModelUnavailableError(
            f"Model '{source}' is a {', '.join(architectures)}, not a masked language model; "
            "tiankong needs a *ForMaskedLM model such as bert-base-chinese."
        )
    weights = [*path.glob("*.safetensors"), *path.glob("pytorch_model*.bin")]
    if not weights:
        raise ModelUnavailableError(
            f"Model '{source}' has no weights (*.safetensors or pytorch_model*.bin)."
        )
    if not has_mask_token(path):
        other = (
            " (its mask token is <mask>, a SentencePiece vocabulary's)"
            if has_token(path, "<mask>")
            else ""
        )
        raise ModelUnavailableError(
            f"The tokenizer of model '{source}' has no [MASK] token{other}; tiankong reads "
            "Chinese BERT-family vocabularies, whose blanks are [MASK]."
        )


def transformers_installed() -> bool:
    """Whether this install loads models (a serving install runs only cached exports, where a
    folder's config.json is read for its figures alone)."""
    return importlib.util.find_spec("transformers") is not None


def native_masked_lm(model_type: object) -> bool:
    """Whether transformers has a masked-LM class of its own for ``model_type``; True where
    transformers isn't installed (a serving install, which runs only cached exports)."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES
    except ImportError:
        return True
    return isinstance(model_type, str) and model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def has_mask_token(path: Path) -> bool:
    """True when the folder's tokenizer (tokenizer.json, else vocab.txt) knows [MASK]."""
    return has_token(path, "[MASK]")


def has_token(path: Path, token: str) -> bool:
    """True when the folder's tokenizer (tokenizer.json, else vocab.txt) knows ``token``."""
    tokenizer_json = path / "tokenizer.json"
    if tokenizer_json.is_file():
        from tokenizers import Tokenizer

        try:
            return Tokenizer.from_file(str(tokenizer_json)).token_to_id(token) is not None
        except Exception:  # a corrupt tokenizer.json
            raise ModelUnavailableError(
                f"The tokenizer.json of model '{path}' is corrupt or unreadable."
            ) from None
    vocab = path / "vocab.txt"
    if not vocab.is_file():
        raise ModelUnavailableError(
            f"Model '{path}' has no tokenizer: neither a tokenizer.json nor a vocab.txt file."
        )
    try:
        return token in vocab.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:  # a GBK-saved vocabulary was a traceback, exit 1
        raise ModelUnavailableError(not_utf8(f"The vocab.txt of model '{path}'", error)) from None
    except OSError as error:
        raise ModelUnavailableError(
            f"The vocab.txt of model '{path}' can't be read ({os_reason(error)})."
        ) from None


def read_summary(path: Path) -> str:
    card = path / "MODEL_CARD.md"
    if not card.is_file():
        card = path / "README.md"
    if not card.is_file():
        return ""
    try:  # a summary only: a card in another encoding or unreadable is no reason to stop
        text = card.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "---", "<")) and ":" not in stripped[:20]:
            return stripped[:300]
    return ""
