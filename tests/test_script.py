"""The user's own script (core/script.py): what is converted, and how answers go back."""

from __future__ import annotations

import pytest

from tiankong.core import script
from tiankong.core.results import CandidateScore, FillResult, SequenceFill, TokenScore
from tiankong.core.script import script_of, standard, standard_lines, written_in


def test_traditional_and_mixed_text_is_converted() -> None:
    assert script_of("處處聞啼[MASK]。").simplified == "处处闻啼[MASK]。"
    # every convention reproduces it: Taiwan's comes first (s2t writes 喫 for 吃)
    assert script_of("處處聞啼[MASK]。").to_typed == "s2tw"
    assert script_of("臺灣的[MASK]很好吃").to_typed == "s2tw"  # Taiwan forms round-trip there
    assert script_of("這裏的[MASK]很好").to_typed == "s2hk"  # 裏: Hong Kong's, not Taiwan's 裡
    assert script_of("他喫了[MASK]").to_typed == "s2t"  # 喫: only OpenCC's standard
    assert not script_of("处处闻啼[MASK]。").converted  # simplified already
    # mixed: converted too (it was left as typed, so the index never matched it), and marked
    # mixed so that each blank is written as its place leans
    mixed = script_of("欲穷千里目，更上一層[MASK]。")
    assert (mixed.simplified, mixed.mixed) == ("欲穷千里目，更上一层[MASK]。", True)
    assert not script_of("處處聞啼[MASK]。").mixed
    assert not script_of("The [MASK] is").converted


def test_a_chinese_character_of_any_block_is_chinese() -> None:
    """The no-Chinese warning read only the basic block and extension A: a text of 𠀀
    (extension B) or 﨑 (a compatibility ideograph) was told it had no Chinese character."""
    from tiankong.core.script import has_han

    assert has_han("𠀀") and has_han("﨑") and has_han("中")
    assert not has_han("abc 123，。")


def test_variants_fold_to_the_standard_form() -> None:
    assert standard("天涯若比隣") == "天涯若比邻"
    assert standard("處處聞啼鳥") == "处处闻啼鸟"
    assert standard("芸芸众生") == "芸芸众生"  # a character of its own, not a variant of 艺
    assert script_of("天涯若比隣[MASK]").simplified == "天涯若比邻[MASK]"


def test_lines_are_converted_a_chunk_at_a_time_as_each_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = ["天涯若比隣", "處處聞啼鳥", "", "芸芸众生", "乾隆皇帝", "頭髮乾了", "臺灣 的 天氣"] * 3
    monkeypatch.setattr(script, "STANDARD_CHUNK", 4)  # chunks meet inside the list
    assert standard_lines(lines) == [standard(line) for line in lines]
    with pytest.raises(ValueError, match="newline"):
        standard_lines(["處處\n聞啼鳥"])


def test_answers_are_written_back_in_the_users_script() -> None:
    script = script_of("春眠不覺曉，處處聞啼[MASK]。")
    memory = {"count": 1, "match": "处处闻啼鸟。", "example": "春眠不觉晓，处处闻啼鸟。"}
    result = FillResult(
        text="春眠不觉晓，处处闻啼[MASK]。",
        masks=[[TokenScore("鸟", 1, 0.9, memory=memory)]],
        sequence="春眠不觉晓，处处闻啼鸟。",
        sequences=[SequenceFill("鸟", "春眠不觉晓，处处闻啼鸟。", ("鸟",), 0.9, 0.9)],
    )
    back = written_in(result, script)
    assert back.text == "春眠不覺曉，處處聞啼[MASK]。"
    assert back.sequence == "春眠不覺曉，處處聞啼鳥。"
    assert back.masks[0][0].token == "鳥"
    assert back.masks[0][0].memory == {
        "count": 1,
        "match": "處處聞啼鳥。",
        "example": "春眠不覺曉，處處聞啼鳥。",
    }
    assert back.sequences[0].fill == "鳥"
    assert back.sequences[0].fills == ("鳥",)


def test_each_blanks_fill_is_written_as_the_sentence_writes_it() -> None:
    # 发 alone is 發; in 头发 it is 髮: each blank's part is cut from the sentence converted whole
    script = script_of("她的頭[MASK]很長，我們明天出[MASK]。")
    result = FillResult(
        text="她的头[MASK]很长，我们明天出[MASK]。",
        masks=[[TokenScore("发", 1, 0.9)], [TokenScore("发", 1, 0.9)]],
        sequence="她的头发很长，我们明天出发。",
        sequences=[SequenceFill("发发", "她的头发很长，我们明天出发。", ("发", "发"), 0.8, 0.9)],
    )
    [sequence] = written_in(result, script).sequences
    assert sequence.text == "她的頭髮很長，我們明天出發。"
    assert sequence.fills == ("髮", "發")
    assert sequence.fill == "髮發"


@pytest.mark.parametrize(
    ("typed", "simplified", "token"),
    [
        ("她的頭[MASK]很長。", "她的头[MASK]很长。", "髮"),  # 头发: hair
        ("我們明天出[MASK]。", "我们明天出[MASK]。", "發"),  # 出发: set off
        ("[MASK]是頭[MASK]。", "[MASK]是头[MASK]。", "髮"),  # the second of two masks
    ],
)
def test_a_fill_is_written_as_the_sentence_around_it_is(
    typed: str, simplified: str, token: str
) -> None:
    """发 alone converts to 發; in 头发 the sentence converted whole says 頭髮, and the token
    must agree with the sentence (it said 發 beside 頭髮)."""
    masks = [[TokenScore("发", 1, 0.9)]] * simplified.count("[MASK]")
    filled = simplified.replace("[MASK]", "发")
    result = FillResult(text=simplified, masks=masks, sequence=filled)
    back = written_in(result, script_of(typed))
    assert back.masks[-1][0].token == token
    assert back.sequence.endswith(f"{token}{typed.split('[MASK]')[-1]}")


def test_a_token_written_back_takes_its_own_id_where_the_vocabulary_has_it() -> None:
    """髮 came back with 发's token_id: a client reading the id got another character."""
    vocab = {"发": 1355, "髮": 7773, "头": 1928}  # bert-base-chinese's ids; 鬆 is not in it
    result = FillResult(
        text="她的头[MASK]很长。",
        masks=[[TokenScore("发", 1355, 0.9), TokenScore("头", 1928, 0.05)]],
        sequence="她的头发很长。",
    )
    back = written_in(result, script_of("她的頭[MASK]很長。"), vocab=vocab)
    assert [(c.token, c.token_id) for c in back.masks[0]] == [("髮", 7773), ("頭", 1928)]
    loose = FillResult(text="头发很[MASK]。", masks=[[TokenScore("松", 2128, 0.9)]], sequence="")
    [[only]] = written_in(loose, script_of("頭髮很[MASK]。"), vocab=vocab).masks
    assert (only.token, only.token_id) == ("鬆", 2128)  # not in the vocabulary: the scored id


@pytest.mark.parametrize(
    ("typed", "token", "sequence"),
    [
        # the blank's neighbours typed traditional: 樓, the simplified 穷 kept as typed
        ("欲穷千里目，更上一層[MASK]。", "樓", "欲穷千里目，更上一層樓。"),
        # its neighbours simplified, a traditional line elsewhere: 楼, the other line as typed
        ("處處聞啼鳥\n欲穷千里目，更上一层[MASK]。", "楼", "處處聞啼鳥\n欲穷千里目，更上一层楼。"),
        # neighbours the same in both scripts: their line's leaning (兩個黃鸝鳴), not the
        # simplified line after it
        (
            "兩個黃鸝鳴翠柳，更上一[MASK]\n一行白鹭上青天",
            "層",
            "兩個黃鸝鳴翠柳，更上一層\n一行白鹭上青天",
        ),
    ],
)
def test_a_mixed_texts_blank_is_written_as_its_place_leans(
    typed: str, token: str, sequence: str
) -> None:
    """A text mixing the scripts was used as typed: the model read it half converted, the index
    never matched it (欲穷千里目，更上一層[MASK]。 got 人 and 山, no 出处), and /check fixed the
    same line to 樓. Now it is read in simplified form, and each blank written in traditional
    characters only where the characters typed around it lean so; the rest stays as typed."""
    found = script_of(typed)
    assert found.mixed
    fill = "楼" if "[MASK]。" in typed else "层"
    memory = {"count": 1, "match": "更上一层楼。", "example": "欲穷千里目，更上一层楼。"}
    result = FillResult(
        text=found.simplified,
        masks=[[TokenScore(fill, 1, 0.9, memory=memory)]],
        sequence=found.simplified.replace("[MASK]", fill),
        sequences=[SequenceFill(fill, found.simplified.replace("[MASK]", fill), (fill,), 0.9, 0.9)],
    )
    back = written_in(result, found)
    assert back.text == typed
    assert back.masks[0][0].token == token
    assert back.sequence == sequence
    assert back.sequences[0].text == sequence and back.sequences[0].fills == (token,)
    leaning = token != fill  # the evidence in the script the fill is written in
    assert (back.masks[0][0].memory["match"] == "更上一層樓。") is leaning


def test_a_mixed_texts_options_keep_the_typed_text_around_them() -> None:
    found = script_of("欲穷千里目，更上一層[BLANK]。")
    result = FillResult(
        text=found.simplified,
        masks=[],
        sequence="",
        candidates=[
            CandidateScore("楼", "欲穷千里目，更上一层楼。", 0.9, 0.9, True),
            CandidateScore("山", "欲穷千里目，更上一层山。", 0.1, 0.1, True),
        ],
    )
    back = written_in(result, found, typed_options=["山"])
    assert [(c.option, c.text) for c in back.candidates] == [
        ("樓", "欲穷千里目，更上一層樓。"),
        ("山", "欲穷千里目，更上一層山。"),
    ]
    assert back.sequence == "欲穷千里目，更上一層樓。"


def test_a_mixed_texts_run_of_masks_is_one_blank_written_alike() -> None:
    """Each [MASK] of a word read the other's marker letters as its neighbours, which say
    nothing, so the word's two characters came back in two scripts (更上一[MASK][MASK]樓: 层層)."""
    found = script_of("欲穷千里目，更上一[MASK][MASK]樓。")
    assert found.mixed
    filled = found.simplified.replace("[MASK][MASK]", "层层")
    result = FillResult(
        text=found.simplified,
        masks=[[TokenScore("层", 1, 0.9)], [TokenScore("层", 1, 0.9)]],
        sequence=filled,
        sequences=[SequenceFill("层层", filled, ("层", "层"), 0.8, 0.9)],
    )
    back = written_in(result, found)
    assert [mask[0].token for mask in back.masks] == ["層", "層"]
    assert back.sequences[0].fills == ("層", "層")
    assert back.sequence == back.sequences[0].text == "欲穷千里目，更上一層層樓。"


def test_a_mask_is_written_beside_the_other_masks_best_fills() -> None:
    """Each mask is written in the sentence read with the other masks' best fills (头发 is 頭髮
    where 发 alone beside a [MASK] is 發), and a mask with no fill before it leaves its [MASK]
    in place without shifting which [MASK] the others are written at (a self-review)."""
    typed = "出發之前，他[MASK]了理[MASK][MASK]。"
    script = script_of(typed)
    result = FillResult(
        text="出发之前，他[MASK]了理[MASK][MASK]。",
        masks=[[], [TokenScore("头", 1, 0.9)], [TokenScore("发", 2, 0.9)]],
        sequence="出发之前，他[MASK]了理头发。",
    )
    back = written_in(result, script)
    assert [mask[0].token for mask in back.masks[1:]] == ["頭", "髮"]


def test_candidates_of_a_run_of_masks_have_one_list_written_back() -> None:
    """Candidates mode's per-mask list reads the blank as one [MASK] however many the run has:
    written back for a traditional text, its one list met two [MASK]s (畫龍[MASK][MASK] with
    options answered 500 on the page, /batch_predict and the CLI; a review)."""
    found = script_of("真是畫龍[MASK][MASK]。")
    result = FillResult(
        text=found.simplified,
        masks=[[TokenScore("龙", 1, 0.4), TokenScore("点", 2, 0.2)]],
        sequence="真是画龙点睛。",
        candidates=[
            CandidateScore("点睛", "真是画龙点睛。", 0.9, 0.9, True),
            CandidateScore("添足", "真是画龙添足。", 0.1, 0.1, True),
        ],
    )
    back = written_in(result, found, typed_options=["點睛", "添足"])
    assert [token.token for token in back.masks[0]] == ["龍", "點"]
    assert [(c.option, c.text) for c in back.candidates] == [
        ("點睛", "真是畫龍點睛。"),
        ("添足", "真是畫龍添足。"),
    ]
    assert back.sequence == "真是畫龍點睛。"
