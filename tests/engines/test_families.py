"""BERT-family models beyond BERT, against transformers' pipeline: a text's answer is its own,
whatever it is batched with, on the torch engine (FP32, index off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong import FillMasker, Settings
from tiankong.core.models import VOCAB_FILE

TEXTS = [
    "今天天气很[MASK]。",
    "春眠不觉晓，处处闻啼[MASK]。",
    "我们明天早上八点在学校门口集合，然后一起坐车去博物馆参[MASK]。",
    "他[MASK]天去公园散步。",
]


def build_convbert(folder: Path) -> Path:
    """A tiny random ConvBERT with peaked outputs (its convolution mixes in the padding)."""
    import torch
    from transformers import BertTokenizer, ConvBertConfig, ConvBertForMaskedLM

    torch.manual_seed(0)
    config = ConvBertConfig(
        vocab_size=21128, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, embedding_size=64, initializer_range=0.4,
    )  # fmt: skip
    ConvBertForMaskedLM(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    return folder


def test_a_text_batched_with_longer_ones_gets_its_own_answer(tmp_path: Path) -> None:
    """ConvBERT, Funnel and FNet read the padding: batched with longer texts, 8 of 12 texts
    got another top-1 than alone (and than the pipeline), and the result cache kept it."""
    from transformers import pipeline

    folder = build_convbert(tmp_path / "convbert")
    masker = FillMasker.load(str(folder), Settings(engine="torch", threads=1), index="none")
    fill = pipeline("fill-mask", model=str(folder), top_k=3)
    for text, batched in zip(TEXTS, masker.predict_batch(TEXTS, top_k=3), strict=True):
        alone = masker.predict(text, top_k=3).masks[0]
        assert [c.token_id for c in batched.masks[0]] == [c.token_id for c in alone], text
        reference = fill(text)
        assert [c.token_id for c in alone] == [row["token"] for row in reference], text
        for ours, theirs in zip(alone, reference, strict=True):
            assert ours.score == pytest.approx(theirs["score"], abs=1e-4)
