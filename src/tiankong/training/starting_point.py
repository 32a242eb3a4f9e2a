"""Where a run starts: OUT's checkpoint (--resume), a model (--init) or a named --config.

Found before torch loads (`find_starting_point` reads config.json only), so a --seq-len past the
model's positions or a --config that is not the resumed run's shape is one sentence first; the
tokenizer and the model then load from it, the model last, after the data has been checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiankong.core.models import unloadable_weights, usable_positions
from tiankong.errors import ModelUnavailableError
from tiankong.training.train_options import (
    CHECKPOINT_DIR,
    MODEL_CONFIGS,
    TrainOptions,
    check_positions,
    check_resumed_shape,
    read_config,
)

NEW_MODEL_POSITIONS = 512


@dataclass(frozen=True)
class StartingPoint:
    """``folder``: the HF folder to load (None: a new model from ``config_name``); ``name``:
    how messages call it; ``positions``: the model's max_position_embeddings."""

    folder: Path | None
    name: str
    positions: int
    config_name: str = ""


def find_starting_point(options: TrainOptions) -> StartingPoint:
    """The run's starting point, checked against the options (validate_options ran first)."""
    from tiankong.model_sources import resolve_model

    init_config = None
    if options.init:
        resolved = resolve_model(options.init, flag="--init")
        init_config = read_config(resolved.path)
    if options.resume:
        check_resumed_shape(options, init_config)
        folder = options.out / CHECKPOINT_DIR
        start = StartingPoint(folder, str(folder), positions_of(folder))
    elif options.init and init_config is not None:
        start = StartingPoint(resolved.path, options.init, positions_of(resolved.path))
    else:
        name = options.config or ""
        start = StartingPoint(None, f"--config {name}", NEW_MODEL_POSITIONS, name)
    check_positions(options, start.positions, start.name)
    return start


def positions_of(folder: Path) -> int:
    """The most tokens a row of the model in ``folder`` may hold, by the server's rule
    (``usable_positions``): a RoBERTa-style model's positions start after its padding id, so
    130 of them hold 128 tokens (training packed 130 and failed in the engine, a traceback)."""
    found = usable_positions(folder)
    return found.usable if found is not None and found.usable > 0 else NEW_MODEL_POSITIONS


def load_tokenizer(start: StartingPoint) -> Any:
    if start.folder is None:
        from transformers import BertTokenizer  # the tokenizers-backed (fast) class in v5

        from tiankong.core.models import VOCAB_FILE

        return BertTokenizer(str(VOCAB_FILE), do_lower_case=False)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(start.folder, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as error:
        raise unloadable(start, error) from None


def load_model(start: StartingPoint, options: TrainOptions, vocab_size: int) -> Any:
    """The model in FP32 (the bundled model is stored in float16, and training float16 weights
    under bf16 autocast fails on mixed dtypes); a new one from --config."""
    import torch
    from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

    if start.folder is not None:
        try:
            return AutoModelForMaskedLM.from_pretrained(
                start.folder, dtype=torch.float32, trust_remote_code=False
            )
        except (OSError, ValueError, KeyError) as error:
            raise unloadable(start, error) from None
        except Exception as error:  # a truncated safetensors file, a shape config.json denies
            raise unloadable_weights(start.name, error, " for training") from None
    config = BertConfig(
        vocab_size=vocab_size,
        max_position_embeddings=NEW_MODEL_POSITIONS,
        **MODEL_CONFIGS[start.config_name],
    )
    model = BertForMaskedLM(config)
    if options.position_init == "sinusoidal":
        sinusoidal_positions(model.bert.embeddings.position_embeddings.weight, config)
    return model


def unloadable(start: StartingPoint, error: Exception) -> ModelUnavailableError:
    """transformers' refusal (an unknown model_type, a model with no masked-LM class) as one
    sentence: its own message is a paragraph listing every model type."""
    assert start.folder is not None
    model_type = read_config(start.folder).get("model_type") or "no model_type"
    return ModelUnavailableError(
        f"Model '{start.name}' ({model_type}) can't be loaded as a masked language model for "
        f"training ({type(error).__name__}); tiankong trains BERT-family *ForMaskedLM models "
        "such as bert-base-chinese."
    )


def load_starting_point(options: TrainOptions) -> tuple[Any, Any]:
    """Model and tokenizer where ``options`` start (resume, --init or --config)."""
    start = find_starting_point(options)
    tokenizer = load_tokenizer(start)
    return load_model(start, options, tokenizer.vocab_size), tokenizer


def sinusoidal_positions(weight: Any, config: Any) -> None:
    """Initialise learned position embeddings with (scaled) sinusoids.

    Random position vectors give attention nothing to tell neighbours apart with, and a small
    BERT then sits for a long time on a unigram plateau; sinusoids make relative offsets a
    linear map from the start. They are scaled to the norm of the word embeddings so that
    token identity still dominates after the embedding LayerNorm. Still trainable.
    """
    import torch

    positions, hidden = weight.shape
    position = torch.arange(positions, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, hidden, 2, dtype=torch.float32) * (-math.log(1e4) / hidden)
    )
    table = torch.zeros(positions, hidden)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    scale = config.initializer_range * math.sqrt(2.0)  # sinusoid entries have RMS 1/sqrt(2)
    with torch.no_grad():
        weight.copy_(table * scale)
