"""Predictions: top-k bounds, special-token filtering, multi-mask shapes, the pipeline reference."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from tiankong import FillMasker, Settings
from tiankong.core.decoding import banned_token_ids
from tiankong.engines.base import EncodedBatch, engine_calls, pad_batch
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


@pytest.mark.parametrize("seed", range(20))
def test_engine_calls_cut_at_the_first_limit_each_call_would_pass(seed: int) -> None:
    rng = random.Random(seed)
    rows = [[1] * rng.randint(1, 40) for _ in range(rng.randint(0, 30))]
    asked = [list(range(rng.randint(0, len(row)))) for row in rows]
    max_rows, max_tokens, max_outputs = rng.randint(1, 8), rng.randint(1, 120), rng.randint(1, 60)
    calls = engine_calls(rows, asked, max_rows, max_tokens, max_outputs)

    def within(start: int, end: int) -> bool:
        return (
            end - start <= max_rows
            and (end - start) * max(len(row) for row in rows[start:end]) <= max_tokens
            and sum(len(wanted) for wanted in asked[start:end]) <= max_outputs
        )

    assert [index for call in calls for index in range(*call)] == list(range(len(rows)))
    for start, end in calls:
        assert end - start == 1 or within(start, end)  # a row over a limit alone runs alone
        if end < len(rows):
            assert not within(start, end + 1)  # cut only where the next row would pass one


def test_no_engine_call_passes_the_batch_limits(tiny_masker: FillMasker) -> None:
    """Whoever asks (here a proofreading-like request: every position of long rows), each engine
    call keeps to the server's batch limits, and the answers are those of one call a row."""
    settings = dataclasses.replace(
        tiny_masker.settings, max_batch_size=4, max_batch_tokens=120, max_masks=5
    )
    seen: list[EncodedBatch] = []

    class Recording:
        def __getattr__(self, name: str) -> object:
            return getattr(tiny_masker.engine, name)

        def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
            seen.append(batch)
            return tiny_masker.engine.mask_logits(batch)

    masker = FillMasker(
        tiny_masker.model, tiny_masker.encoder, Recording(), settings, tiny_masker.index
    )
    texts = ["春眠不觉晓处处闻啼鸟", "夜来风雨声花落知多少", "白日依山尽", "黄河入海流欲穷千里目"]
    texts *= 3
    rows = [tiny_masker.encoder.tokenizer.encode(text).ids for text in texts]
    asked = [list(range(1, len(row) - 1)) for row in rows]
    together = masker.score_rows(rows, asked)
    assert len(seen) > 3
    for batch in seen:
        assert batch.input_ids.shape[0] <= 4 and batch.input_ids.size <= 120
        assert len(batch.mask_positions) <= 4 * 5 or batch.input_ids.shape[0] == 1
    alone = [
        tiny_masker.score_rows([row], [wanted])[0] for row, wanted in zip(rows, asked, strict=True)
    ]
    for mine, reference in zip(together, alone, strict=True):
        np.testing.assert_allclose(mine, reference, atol=1e-5)


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


def test_a_bad_text_of_a_batch_is_named_by_its_place(tiny_masker) -> None:
    """One text without a [MASK] among 1,500 failed the batch without saying which."""
    from tiankong.errors import NoMaskError

    texts = ["画龙点[MASK]"] * 3 + ["没有掩码"] + ["守株待[MASK]"]
    with pytest.raises(NoMaskError, match=r"^texts\[3\]: The text has no \[MASK\]"):
        tiny_masker.predict_batch(texts)
