"""Mask normalisation, validation and windowing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong.core.models import VOCAB_FILE
from tiankong.core.text import MASK, TextEncoder, TextLimits, normalize_masks
from tiankong.errors import (
    EmptyTextError,
    MasksDoNotFitError,
    NoMaskError,
    TextTooLongError,
    TooManyMasksError,
)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir) -> TextEncoder:
    return TextEncoder.from_folder(tiny_model_dir, TextLimits(max_masks=4, max_length=16))


@pytest.mark.parametrize(
    "typed",
    [
        *(
            "[MASK]",
            "[mask]",
            "[Mask]",
            "【MASK】",
            "［MASK］",
            "[ MASK ]",
            "【 mask】",
            "［mask ］",
        ),
        # full-width letters, as an input method in full-width mode types them (refused: no_mask)
        *("［ＭＡＳＫ］", "【ｍａｓｋ】", "[ＭａＳｋ]", "［\u3000ＭＡＳＫ\u3000］"),
    ],
)
def test_mask_variants_are_normalised(typed: str) -> None:
    assert normalize_masks(f"画龙点{typed}。") == "画龙点[MASK]。"


def test_non_mask_brackets_are_left_alone() -> None:
    assert normalize_masks("[MASKS] 【面具】 [MAS K]") == "[MASKS] 【面具】 [MAS K]"
    assert normalize_masks("［ＭＡＳＫＳ］［ＢＬＡＮ］") == "［ＭＡＳＫＳ］［ＢＬＡＮ］"


def test_blank_variants_are_normalised() -> None:
    assert (
        normalize_masks("很[blank]，很［ＢＬＡＮＫ］，很【ｂｌａｎｋ】")
        == "很[BLANK]，很[BLANK]，很[BLANK]"
    )


def test_prepare_adds_special_tokens_and_finds_masks(encoder: TextEncoder) -> None:
    prepared = encoder.prepare("处处闻啼【mask】。")
    assert prepared.text == "处处闻啼[MASK]。"
    assert prepared.input_ids[0] == encoder.cls_id and prepared.input_ids[-1] == encoder.sep_id
    assert [prepared.input_ids[i] for i in prepared.mask_indices] == [encoder.mask_id]
    assert prepared.mask_indices == [5]
    assert not prepared.truncated


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_rejected(encoder: TextEncoder, text: str) -> None:
    with pytest.raises(EmptyTextError, match="empty"):
        encoder.prepare(text)


def test_text_without_mask_is_rejected(encoder: TextEncoder) -> None:
    with pytest.raises(NoMaskError, match="no \\[MASK\\]"):
        encoder.prepare("春眠不觉晓")


def test_too_many_masks_is_rejected(encoder: TextEncoder) -> None:
    encoder.prepare(MASK * 4)
    with pytest.raises(TooManyMasksError, match="5 \\[MASK\\]s; the limit is 4"):
        encoder.prepare(MASK * 5)


def test_text_longer_than_char_limit_is_rejected(tiny_model_dir) -> None:
    encoder = TextEncoder.from_folder(tiny_model_dir, TextLimits(max_text_chars=10))
    with pytest.raises(TextTooLongError, match="11 characters; fill-mask takes at most 10 "):
        encoder.prepare("一二三四五[MASK]")


def test_long_text_is_cut_around_the_mask(encoder: TextEncoder) -> None:
    text = "甲" * 30 + "乙[MASK]丙" + "丁" * 30
    prepared = encoder.prepare(text)
    assert prepared.truncated
    assert len(prepared.input_ids) == 16
    inner = prepared.input_ids[1:-1]
    mask_at = prepared.mask_indices[0] - 1
    # the window keeps the mask and its neighbours, roughly centred
    vocab = encoder.vocab
    assert inner[mask_at - 1] == vocab["乙"] and inner[mask_at + 1] == vocab["丙"]
    assert 4 <= mask_at <= 9


def test_window_at_the_start_and_end(encoder: TextEncoder) -> None:
    head = encoder.prepare("[MASK]" + "甲" * 40)
    assert head.truncated and head.mask_indices == [1]
    tail = encoder.prepare("甲" * 40 + "[MASK]")
    assert tail.truncated and tail.mask_indices == [14]


def test_masks_that_do_not_fit_the_window(encoder: TextEncoder) -> None:
    with pytest.raises(MasksDoNotFitError, match="span 16 tokens, more than the 14-token window"):
        encoder.prepare("[MASK]" + "甲" * 14 + "[MASK]")


def test_short_text_is_not_marked_truncated(encoder: TextEncoder) -> None:
    assert not encoder.prepare("甲" * 13 + "[MASK]").truncated


def test_vocab_file_is_the_real_one() -> None:
    lines = VOCAB_FILE.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 21128
    assert lines[103] == "[MASK]" and lines[100] == "[UNK]"


def test_token_strings_drop_wordpiece_prefix(encoder: TextEncoder) -> None:
    assert encoder.token_string(encoder.vocab["##gio"]) == "gio"
    assert encoder.token_string(encoder.vocab["鸟"]) == "鸟"


@pytest.mark.parametrize(
    ("cased_file", "config"),
    [
        (True, None),  # no tokenizer_config.json: transformers' defaults lower-case
        (True, {"model_max_length": 512}),
        (False, {"do_lower_case": False}),  # the config says cased over a lower-casing file
        (True, {"do_lower_case": False}),
        (False, {"tokenize_chinese_chars": False}),
        # another class reads tokenizer.json as it is (a code review: it was lower-cased here)
        (True, {"tokenizer_class": "PreTrainedTokenizerFast"}),
        (True, {"tokenizer_class": "BertTokenizerFast"}),
    ],
)
def test_a_tokenizer_json_reads_text_as_transformers_does(
    tmp_path: Path, cased_file: bool, config: dict[str, object] | None
) -> None:
    """transformers 5's BertTokenizer builds its normalizer from tokenizer_config.json (with
    its defaults), not from tokenizer.json's: a cased tokenizer.json beside a config that
    doesn't say so was lower-cased by the pipeline and read as [UNK] here."""
    import json

    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import AutoTokenizer

    folder = tmp_path / "tok"
    folder.mkdir()
    made = BertWordPieceTokenizer(str(VOCAB_FILE), lowercase=not cased_file)._tokenizer
    made.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}), encoding="utf-8")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    text = "我在Café用iPhone写代码，效率很高。"
    ours = TextEncoder.from_folder(folder, TextLimits(5, 128, 1000)).tokenizer
    theirs = AutoTokenizer.from_pretrained(str(folder))
    assert ours.encode(text, add_special_tokens=False).tokens == theirs.tokenize(text)


def test_a_tokenizer_json_that_left_out_mask_still_reads_it_whole(tmp_path: Path) -> None:
    """transformers adds tokenizer_config.json's special tokens (BERT's where it names none)
    to any tokenizer, so a tokenizer.json whose added_tokens left out [MASK] still reads it
    as one token there; tiankong split it into [, mask, ] and refused every text as if its
    markers were the user's fault (a review's reproduction)."""
    import json
    import shutil

    from tiankong.core.models import BUNDLED_ROOT, DEFAULT_MODEL

    source = BUNDLED_ROOT / DEFAULT_MODEL
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, tmp_path / name)
    tokenizer = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["content"] != MASK]
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    full = TextEncoder.from_folder(source, TextLimits())
    cut = TextEncoder.from_folder(tmp_path, TextLimits())
    for text in ("天[MASK]", "春眠不觉晓，处处闻啼[MASK]。", "a[MASK]b [MASK]"):
        assert cut.prepare(text).input_ids == full.prepare(text).input_ids
        assert len(cut.prepare(text).mask_indices) == text.count(MASK)


@pytest.mark.parametrize(
    ("part", "value"),
    [
        ("normalizer", None),
        (
            "normalizer",
            {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        ),
        ("pre_tokenizer", {"type": "WhitespaceSplit"}),
    ],
)
@pytest.mark.parametrize("class_name", ["BertTokenizer", "PreTrainedTokenizerFast"])
def test_a_tokenizer_json_of_another_kind_reads_text_as_transformers_does(
    tmp_path: Path, part: str, value: object, class_name: str
) -> None:
    """transformers 5's BertTokenizer sets BERT's normalizer and pre-tokenizer over whatever
    tokenizer.json holds; tiankong kept a file's own where it was not a BertNormalizer: with
    none, 今天天气 read 今 ##天 ##天 ##气 where the pipeline reads one character a token, and a
    random model's answers were another's (a review's find). Another class reads the file as
    it is, both sides."""
    import json
    import shutil

    from transformers import AutoTokenizer

    from tiankong.core.models import BUNDLED_ROOT, DEFAULT_MODEL

    source = BUNDLED_ROOT / DEFAULT_MODEL
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(source / name, tmp_path / name)
    tokenizer = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer[part] = value
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["tokenizer_class"] = class_name
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    ours = TextEncoder.from_folder(tmp_path, TextLimits(5, 128, 1000)).tokenizer
    theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    for text in ("今天天气很[MASK]。", "ＡＢＣ和Café都好", "Mr.Smith's 猫丢了", "iPhone 15 很贵"):
        assert (
            ours.encode(text, add_special_tokens=False).ids
            == theirs(text, add_special_tokens=False)["input_ids"]
        ), text
