"""The tiny random BERT the tests use: 2 layers, hidden 32, the real bert-base-chinese vocabulary.

A module of its own (not conftest.py), so a test can import it by a name no other file shares:
several folders have a conftest.py, and ``from conftest import`` gets whichever loaded last.
"""

from __future__ import annotations

from pathlib import Path

from tiankong.core.models import VOCAB_FILE


def build_tiny_bert(
    folder: Path, seed: int = 0, architecture: str = "BertForMaskedLM", positions: int = 512
) -> Path:
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
        max_position_embeddings=positions,
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
