"""BERT-family models beyond BERT, against transformers' pipeline: a text's answer is its own,
whatever it is batched with, on the torch engine (FP32, index off)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def build_mobilebert(folder: Path) -> Path:
    """A tiny random MobileBERT (its layers have BERT's names but compute otherwise)."""
    import torch
    from transformers import BertTokenizer, MobileBertConfig, MobileBertForMaskedLM

    torch.manual_seed(0)
    config = MobileBertConfig(
        vocab_size=21128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32,
        num_feedforward_networks=1, initializer_range=0.4,
    )  # fmt: skip
    MobileBertForMaskedLM(config).save_pretrained(folder)
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


def test_an_ernie_with_task_ids_exports_to_onnx(tmp_path: Path) -> None:
    """ERNIE 3.0's task-type embedding (use_task_id): ORT's fused EmbedLayerNormalization
    dropped it, the export differed from torch by 15, and the default engine refused the model
    (exit 1); the fusion is off for such a model."""
    import torch
    from transformers import BertTokenizer, ErnieConfig, ErnieForMaskedLM, pipeline

    torch.manual_seed(0)
    folder = tmp_path / "ernie"
    config = ErnieConfig(
        vocab_size=21128, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, use_task_id=True, task_type_vocab_size=3, initializer_range=0.4,
    )  # fmt: skip
    ErnieForMaskedLM(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    settings = Settings(
        engine="onnx", precision="fp32", threads=1, onnx_cache_dir=str(tmp_path / "cache")
    )
    masker = FillMasker.load(str(folder), settings, index="none")
    reference = pipeline("fill-mask", model=str(folder), top_k=3)(TEXTS[0])
    ours = masker.predict(TEXTS[0], top_k=3).masks[0]
    assert [c.token_id for c in ours] == [row["token"] for row in reference]
    for candidate, row in zip(ours, reference, strict=True):
        assert candidate.score == pytest.approx(row["score"], abs=1e-4)


def test_a_mobilebert_exports_the_whole_sequence_graph(tmp_path: Path) -> None:
    """MobileBERT's layers pass the last-layer-at-the-masks check but compute otherwise: that
    graph's trace raised and the export failed with a traceback (exit 1); it falls back to the
    whole-sequence graph, as it does when that graph differs from torch."""
    from transformers import pipeline

    folder = build_mobilebert(tmp_path / "mobilebert")
    settings = Settings(
        engine="onnx", precision="fp32", threads=1, onnx_cache_dir=str(tmp_path / "cache")
    )
    masker = FillMasker.load(str(folder), settings, index="none")
    reference = pipeline("fill-mask", model=str(folder), top_k=3)(TEXTS[0])
    ours = masker.predict(TEXTS[0], top_k=3).masks[0]
    assert [c.token_id for c in ours] == [row["token"] for row in reference]
    for candidate, row in zip(ours, reference, strict=True):
        assert candidate.score == pytest.approx(row["score"], abs=1e-4)


def test_torch_int8_keeps_the_head_in_fp32(tmp_path: Path) -> None:
    """Dynamic INT8 quantized the head's decoder too; MobileBERT's head reads its weight, which
    a quantized Linear has not, and the first request failed with a traceback."""
    import warnings

    import torch

    folder = build_mobilebert(tmp_path / "mobilebert")
    settings = Settings(engine="torch", precision="int8", threads=1)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        masker = FillMasker.load(str(folder), settings, index="none")
        assert len(masker.predict(TEXTS[0], top_k=3).masks[0]) == 3
    # torch's deprecation of its quantized tensors reached the CLI's output (a review)
    assert not [w for w in said if "quantize_per_tensor" in str(w.message)]
    engine: Any = masker.engine
    linears = [m for m in engine.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(any(m is h for h in engine.head.modules()) for m in linears)


@pytest.mark.processes
def test_an_export_that_fails_is_one_sentence_with_its_details_in_a_file(tmp_path: Path) -> None:
    """FNet's Fourier transform has no ONNX op: the export worker printed a 28-line traceback
    before the sentence; the traceback now goes to a file the sentence names."""
    import torch
    from cli_helpers import besides_first_run_notes, run_cli
    from transformers import BertTokenizer, FNetConfig, FNetForMaskedLM

    torch.manual_seed(0)
    folder = tmp_path / "fnet"
    config = FNetConfig(
        vocab_size=21128, hidden_size=64, num_hidden_layers=2, intermediate_size=128
    )
    FNetForMaskedLM(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    done = run_cli(
        "predict", TEXTS[0], "--model", str(folder), "--index", "none", "--engine", "onnx",
        "--precision", "fp32", "--onnx-cache-dir", str(tmp_path / "cache"),
    )  # fmt: skip
    # exit 3, a model that can't be had on this engine (1, an internal error, before)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    [sentence] = besides_first_run_notes(done.stderr)  # "exporting ..., once" comes first
    assert (
        sentence.startswith("error: Exporting 'fnet' to ONNX failed")
        and "--engine torch" in sentence
    )
    log_file = Path(sentence.split("the details are in ")[1].split(";")[0])
    assert "Traceback" in log_file.read_text(encoding="utf-8")
