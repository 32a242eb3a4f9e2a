"""Whole-word and n-gram masking for pretraining (build/masking.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tiankong.core.models import VOCAB_FILE
from tiankong.errors import BadOptionError
from tiankong.training.masking import (
    IGNORE,
    MaskingPlan,
    mask_spans,
    packed_word_sequences,
    segmented_lines,
)

LINES = [
    "我们今天去公园散步，天气非常好。",
    "手机没电了，赶紧去充电。",
    "他做事一向认真负责，从来不出差错。",
    "中华人民共和国成立于一九四九年。",
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import BertTokenizerFast

    return BertTokenizerFast(str(VOCAB_FILE), do_lower_case=False)


def plan_for(tokenizer, kind: str, rate: float = 0.15) -> MaskingPlan:
    return MaskingPlan(
        rate=rate,
        kind=kind,
        mask_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        special_ids=frozenset(tokenizer.all_special_ids),
    )


def test_segmented_lines_keep_every_character_in_words(tokenizer) -> None:
    segmented = list(segmented_lines(LINES, tokenizer))
    assert len(segmented) == len(LINES)
    for line, words in zip(LINES, segmented, strict=True):
        ids = [token for word in words for token in word]
        assert ids == tokenizer(line, add_special_tokens=False)["input_ids"]
        assert any(len(word) >= 2 for word in words)  # jieba joined characters into words
    joined = ["".join(tokenizer.convert_ids_to_tokens(word)) for word in segmented[1]]
    assert "手机" in joined and "充电" in joined


def test_packed_sequences_have_exact_length_and_word_numbers(tokenizer) -> None:
    rng = random.Random(0)
    stream = packed_word_sequences(
        iter(list(segmented_lines(LINES * 30, tokenizer))), 32, 101, 102, rng
    )
    for _ in range(20):
        ids, word_ids = next(stream)
        assert len(ids) == len(word_ids) == 32 and ids[0] == 101
        for token, word in zip(ids, word_ids, strict=True):
            assert (word == -1) == (token in (101, 102))


@pytest.mark.parametrize("kind", ["word", "ngram"])
def test_masks_cover_whole_words_at_the_rate(tokenizer, kind: str) -> None:
    rng = random.Random(1)
    stream = packed_word_sequences(
        iter(list(segmented_lines(LINES * 200, tokenizer))), 64, 101, 102, rng
    )
    group = [next(stream) for _ in range(64)]
    batch = mask_spans([g[0] for g in group], [g[1] for g in group], plan_for(tokenizer, kind), rng)
    labels, inputs = batch["labels"].tolist(), batch["input_ids"].tolist()
    masked = content = 0
    for (ids, word_ids), row_labels, row_inputs in zip(group, labels, inputs, strict=True):
        chosen_words = {w for w, label in zip(word_ids, row_labels, strict=True) if label != IGNORE}
        for position, word in enumerate(word_ids):
            if word < 0:
                assert row_labels[position] == IGNORE  # specials are never masked
                continue
            content += 1
            # a word is labelled in full or not at all
            assert (row_labels[position] != IGNORE) == (word in chosen_words)
            if row_labels[position] != IGNORE:
                masked += 1
                assert row_labels[position] == ids[position]
            else:
                assert row_inputs[position] == ids[position]
    assert 0.12 < masked / content <= 0.16
    mask_share = sum(
        1
        for row_labels, row_inputs in zip(labels, inputs, strict=True)
        for label, token in zip(row_labels, row_inputs, strict=True)
        if label != IGNORE and token == tokenizer.mask_token_id
    )
    assert 0.65 < mask_share / masked < 0.95  # 80% [MASK], by span


def test_ngram_masks_longer_runs_than_word_masking(tokenizer) -> None:
    def mean_run(kind: str) -> float:
        rng = random.Random(2)
        stream = packed_word_sequences(
            iter(list(segmented_lines(LINES * 200, tokenizer))), 64, 101, 102, rng
        )
        group = [next(stream) for _ in range(64)]
        labels = mask_spans(
            [g[0] for g in group], [g[1] for g in group], plan_for(tokenizer, kind), rng
        )["labels"].tolist()
        runs = []
        for row in labels:
            length = 0
            for label in [*row, IGNORE]:
                if label != IGNORE:
                    length += 1
                elif length:
                    runs.append(length)
                    length = 0
        return sum(runs) / len(runs)

    assert mean_run("ngram") > mean_run("word") * 1.2


def test_training_with_whole_word_masks_learns_and_resumes(tmp_path: Path) -> None:
    import lzma

    from safetensors.torch import load_file

    from tiankong.training.train import TrainOptions, train

    corpus = tmp_path / "tiny.txt.xz"
    with lzma.open(corpus, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(LINES * 30) + "\n")
    held = tmp_path / "heldout.txt"
    held.write_text("\n".join(LINES) + "\n", encoding="utf-8")

    def options(out: Path, **changes) -> TrainOptions:
        base = dict(
            out=out, data=(str(corpus),), heldout=(str(held),), config="tiny", max_steps=40,
            batch_size=8, seq_len=32, lr=3e-3, warmup_steps=5, eval_every=20, save_every=20,
            shuffle_buffer=50, threads=1, seed=7, device="cpu", masking="ngram",
        )  # fmt: skip
        base.update(changes)
        return TrainOptions(**base)

    whole = train(options(tmp_path / "whole"))
    assert whole.history[-1]["heldout_loss"] < whole.history[0]["heldout_loss"] - 0.3
    train(options(tmp_path / "split", stop_after_steps=20))
    train(options(tmp_path / "split", resume=True))
    a = load_file(tmp_path / "whole" / "model.safetensors")
    b = load_file(tmp_path / "split" / "model.safetensors")
    assert all(bool((a[name] == b[name]).all()) for name in a)
    with pytest.raises(BadOptionError, match="--masking 'span' is not one of"):
        train(options(tmp_path / "bad", masking="span"))
