"""Predictions: top-k bounds, special-token filtering, multi-mask shapes, the pipeline reference."""

from __future__ import annotations

import numpy as np
import pytest

from tiankong import FillMasker, Settings
from tiankong.core.decoding import banned_token_ids
from tiankong.engines.base import pad_batch
from tiankong.errors import TopKOutOfRangeError

SENTENCES = [
    "春眠不觉晓，处处闻啼[MASK]。",
    "[MASK]龙点睛",
    "手机没电了，赶紧去[MASK][MASK]。",
    "他[MASK]天[MASK]去公园散步，WiFi信号[MASK]。",
]


@pytest.mark.parametrize("k", [1, 5, 50])
def test_top_k_length(tiny_masker: FillMasker, k: int) -> None:
    result = tiny_masker.predict(SENTENCES[0], top_k=k)
    assert len(result.masks) == 1 and len(result.masks[0]) == k
    scores = [c.score for c in result.masks[0]]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores)


@pytest.mark.parametrize("k", [0, -1, 51, 1.5, True])
def test_top_k_out_of_range(tiny_masker: FillMasker, k: object) -> None:
    with pytest.raises(TopKOutOfRangeError, match="top_k must be an integer from 1 to 50"):
        tiny_masker.predict(SENTENCES[0], top_k=k)  # type: ignore[arg-type]


def test_special_tokens_never_appear(tiny_masker: FillMasker) -> None:
    vocab = tiny_masker.encoder.vocab
    banned = set(banned_token_ids(vocab).tolist())
    assert {
        vocab["[CLS]"],
        vocab["[SEP]"],
        vocab["[PAD]"],
        vocab["[UNK]"],
        vocab["[MASK]"],
    } <= banned
    assert {vocab["[unused3]"], vocab["[unused98]"], vocab["[SUB]"]} <= banned
    assert {vocab["<S>"], vocab["<T>"]} <= banned and vocab["["] not in banned

    # Force the engine to prefer special tokens: they must still be filtered out.
    class SpecialLovingEngine:
        name, device, precision = "fake", "cpu", "fp32"

        def mask_logits(self, batch):
            logits = np.zeros((len(batch.mask_positions), len(vocab)), dtype=np.float32)
            logits[:, sorted(banned)] = 50.0
            logits[:, vocab["鸟"]] = 10.0
            return logits

    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, SpecialLovingEngine(), Settings())
    result = masker.predict(SENTENCES[0], top_k=50)
    assert result.masks[0][0].token == "鸟"
    assert not any(c.token_id in banned for c in result.masks[0])
    # "[" itself is an ordinary token; bracketed specials such as [UNK] never appear
    assert not any(c.token.startswith("[") and len(c.token) > 1 for c in result.masks[0])


def test_multi_mask_shapes_and_sequence(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict(SENTENCES[3], top_k=3)
    assert len(result.masks) == 3 and all(len(m) == 3 for m in result.masks)
    best = [m[0].token for m in result.masks]
    assert result.sequence == f"他{best[0]}天{best[1]}去公园散步，WiFi信号{best[2]}。"
    assert "[MASK]" not in result.sequence and " " not in result.sequence
    assert result.predictions == result.masks[0]


def test_to_dict_shape(tiny_masker: FillMasker) -> None:
    data = tiny_masker.predict(SENTENCES[2]).to_dict()
    assert set(data) >= {"predictions", "masks", "sequence", "truncated", "model", "text"}
    assert data["predictions"] == data["masks"][0]
    assert set(data["predictions"][0]) == {"token", "token_id", "score", "model_score", "memory"}
    # a user model has no index by default (auto): the model's own numbers, no evidence
    assert data["predictions"][0]["model_score"] == data["predictions"][0]["score"]
    assert data["predictions"][0]["memory"] is None


def test_token_strings_are_clean(tiny_masker: FillMasker) -> None:
    for sentence in SENTENCES:
        for candidates in tiny_masker.predict(sentence, top_k=50).masks:
            for candidate in candidates:
                assert not candidate.token.startswith("##")
                assert " " not in candidate.token


def test_batch_equals_single(tiny_masker: FillMasker) -> None:
    batch = tiny_masker.predict_batch(SENTENCES, top_k=5)
    for sentence, result in zip(SENTENCES, batch, strict=True):
        single = tiny_masker.predict(sentence, top_k=5)
        assert [c.token_id for m in single.masks for c in m] == [
            c.token_id for m in result.masks for c in m
        ]
        for a, b in zip(single.masks[0], result.masks[0], strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)


def test_pad_batch_pads_to_the_longest_row() -> None:
    batch = pad_batch([[101, 1, 103, 102], [101, 103, 102]], [[2], [1]], pad_id=0)
    assert batch.input_ids.shape == (2, 4)
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batch.mask_positions.tolist() == [2, 5]


def test_matches_transformers_pipeline(tiny_model_dir, tiny_masker: FillMasker) -> None:
    """The correctness reference: same weights, FP32, same top-k tokens, scores within 1e-4."""
    from transformers import pipeline

    reference = pipeline("fill-mask", model=str(tiny_model_dir), top_k=10, device="cpu")
    vocab = tiny_masker.encoder.vocab
    banned = set(banned_token_ids(vocab).tolist())
    for sentence in SENTENCES:
        ours = tiny_masker.predict(sentence, top_k=10).masks
        theirs = reference(sentence)
        if isinstance(theirs[0], dict):
            theirs = [theirs]
        assert len(ours) == len(theirs)
        for our_list, their_list in zip(ours, theirs, strict=True):
            expected = [t for t in their_list if t["token"] not in banned]
            assert len(expected) >= 5
            got = our_list[: len(expected)]
            assert [c.token_id for c in got] == [t["token"] for t in expected]
            for candidate, reference_item in zip(got, expected, strict=True):
                assert abs(candidate.score - reference_item["score"]) < 1e-4
