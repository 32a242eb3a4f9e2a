"""Shared fixtures: a tiny random BERT with the real bert-base-chinese vocabulary.

No test touches the network: HF_HUB_OFFLINE is forced on for the whole session.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tiankong.core.models import VOCAB_FILE


def build_tiny_bert(folder: Path, seed: int = 0, architecture: str = "BertForMaskedLM") -> Path:
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    torch.manual_seed(seed)
    tokenizer = BertTokenizer(str(VOCAB_FILE), do_lower_case=False)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    model = BertForMaskedLM(config)
    with torch.no_grad():  # a spread-out output bias, so rankings are well separated
        model.cls.predictions.bias.normal_(0.0, 3.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if architecture != "BertForMaskedLM":
        import json

        config_file = folder / "config.json"
        data = json.loads(config_file.read_text())
        data["architectures"] = [architecture]
        config_file.write_text(json.dumps(data))
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_masker(tiny_model_dir: Path):
    from tiankong import FillMasker, Settings

    return FillMasker.load(str(tiny_model_dir), Settings(engine="torch", threads=1))


@pytest.fixture(scope="session", autouse=True)
def private_user_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ONNX exports made by any test (engine auto picks onnx) never land in the real user cache;
    platformdirs reads XDG_CACHE_HOME, and CLI subprocesses inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture(scope="session")
def tiny_onnx_cache(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ONNX cache holding the tiny model's FP32 and INT8 exports, built once per session.
    Tests that change a cache copy it first (``shutil.copytree``)."""
    from tiankong import Settings
    from tiankong.build.export_cache import ensure_export
    from tiankong.core.models import resolve_model

    root = tmp_path_factory.mktemp("onnx-cache")
    ensure_export(
        resolve_model(str(tiny_model_dir)), "int8", Settings(threads=1, onnx_cache_dir=str(root))
    )
    return root
