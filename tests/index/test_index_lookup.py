"""Counts, two-sided back-off, multi-token fills and the evidence, on a fixture corpus."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from index_corpus import LINES, ids
from tokenizers import Tokenizer

from tiankong.index import BlankLookup, build_index, open_index
from tiankong.index.combine import holds_evidence
from tiankong.index.lookup import EXAMPLE_CHARS, blanks_of, trim
from tiankong.index.tokens import CorpusEncoder


def brute_count(corpus: list[list[int]], pattern: list[int]) -> int:
    m = len(pattern)
    return sum(1 for line in corpus for i in range(len(line) - m + 1) if line[i : i + m] == pattern)


def test_counts_equal_a_brute_force_count(small_index: Path, tokenizer: Tokenizer) -> None:
    index = open_index(small_index)
    corpus = [ids(tokenizer, line) for line in LINES]
    rng = random.Random(0)
    patterns = [ids(tokenizer, text) for text in ("天气很", "赶紧去充电", "。", "画龙点睛", "无此")]
    for _ in range(200):
        line = rng.choice(corpus)
        start = rng.randrange(len(line))
        patterns.append(line[start : start + rng.randint(1, 6)])
    for pattern in patterns:
        assert index.count(pattern) == brute_count(corpus, pattern), pattern
    assert index.count(ids(tokenizer, "赶紧去充电")) == 2
    assert index.count(ids(tokenizer, "无此")) == 0


def test_fast_encoding_equals_the_tokenizer(tokenizer: Tokenizer) -> None:
    texts = [
        *LINES,
        "Ｆｕｌｌ　ｗｉｄｔｈ　１２３，ok",
        "tab\there  and émoji 😀 中",
        "控制\x01字符",
    ]
    token_ids, starts = CorpusEncoder(tokenizer).encode(texts)
    for text, start in zip(texts, starts, strict=True):
        expected = ids(tokenizer, text)
        assert token_ids[start : start + len(expected) + 1].tolist() == [*expected, 0]


def test_back_off_on_both_sides(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    # Neither side occurs whole: the left backs off to 今天天气很, the right to ，我们去公园.
    match = lookup.lookup(ids(tokenizer, "我说今天天气很"), ids(tokenizer, "，我们去公园玩吧"), 1)
    assert match is not None
    assert match.left == tuple(ids(tokenizer, "今天天气很"))
    assert match.right == tuple(ids(tokenizer, "，我们去公园"))
    assert match.fills == {tuple(ids(tokenizer, "好")): 1}
    # The longest total wins: 天天气很 + ，我们去公园跑步 (昨天's line, 12 tokens) beats
    # 今天天气很 + ，我们去公园 (11 tokens).
    match = lookup.lookup(ids(tokenizer, "今天天气很"), ids(tokenizer, "，我们去公园跑步"), 1)
    assert match is not None and match.fills == {tuple(ids(tokenizer, "好")): 1}
    assert match.left == tuple(ids(tokenizer, "天天气很"))
    assert match.right == tuple(ids(tokenizer, "，我们去公园跑步"))
    # ... and the longer right match decides between lines with the same left match.
    match = lookup.lookup(ids(tokenizer, "天天气很"), ids(tokenizer, "，我们在家"), 1)
    assert match is not None and match.fills == {tuple(ids(tokenizer, "冷")): 1}
    # Backing off further, 天气很 + ， gives three lines: both fills with their counts.
    match = lookup.lookup(ids(tokenizer, "天气很"), ids(tokenizer, "，"), 1)
    assert match is not None
    assert match.fills == {tuple(ids(tokenizer, "好")): 2, tuple(ids(tokenizer, "冷")): 1}
    assert match.probability(ids(tokenizer, "好")) == pytest.approx(2 / 3)


def test_multi_token_fills_and_blank_lengths(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "没电了，赶紧去"), ids(tokenizer, "。"), 2)
    assert match is not None and match.fills == {tuple(ids(tokenizer, "充电")): 2}
    assert match.probability(ids(tokenizer, "充电")) == 1.0
    assert match.probability(ids(tokenizer, "关机")) == 0.0
    # [BLANK]: every length is looked up; only 3 tokens fit between 画 and 之笔.
    found = {
        length: lookup.lookup(ids(tokenizer, "画"), ids(tokenizer, "之笔"), length)
        for length in (1, 2, 3, 4)
    }
    assert found[3] is not None and found[3].fills == {tuple(ids(tokenizer, "龙点睛")): 1}
    assert found[3].context_length == len(ids(tokenizer, "画之笔"))
    assert all(found[n] is None or found[n].context_length < 3 for n in (1, 2, 4))


def test_no_match_is_none(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    assert lookup.lookup(ids(tokenizer, "鑫鑫"), ids(tokenizer, "鑫"), 1) is None
    assert lookup.lookup([], [], 1) is None
    # Specials never match: [MASK] / [UNK] stop the context.
    mask, unk = tokenizer.token_to_id("[MASK]"), tokenizer.token_to_id("[UNK]")
    assert lookup.lookup([mask], [unk], 1) is None


def test_a_context_stops_at_a_sentence_end(small_index: Path, tokenizer: Tokenizer) -> None:
    """The corpus's 啼鸟。夜来风雨声… is no evidence for the blank of 他很开[MASK]。夜来风雨声…: the
    right context ends with its 。, and the blank's own sentence matches nothing."""
    lookup = BlankLookup(open_index(small_index), tokenizer)
    after = ids(tokenizer, "。夜来风雨声，花落知多少。")
    stray = lookup.lookup(ids(tokenizer, "他很开"), after, 1)
    assert stray is not None and stray.right == tuple(ids(tokenizer, "。"))
    assert not holds_evidence(stray) and not stray.whole  # cut at the 。: not the whole context
    match = lookup.lookup(ids(tokenizer, "春眠不觉晓，处处闻啼"), after, 1)
    assert match is not None and match.right == tuple(ids(tokenizer, "。"))
    assert match.fills == {(ids(tokenizer, "鸟")[0],): 1} and holds_evidence(match)
    left, right, cut = lookup.contexts(ids(tokenizer, "好，我们去公园散步。今天天气很"), [])
    assert (left, right, cut) == (ids(tokenizer, "。今天天气很"), [], True)
    assert lookup.contexts(ids(tokenizer, "今天天气很"), ids(tokenizer, "。"))[2] is False
    assert lookup.contexts([], ids(tokenizer, "。”？！"))[2] is False  # no other sentence
    # the corpus's whole line around the blank, then another sentence the corpus doesn't have:
    # held on both sides up to the 。, but not the query's whole context
    whole = lookup.lookup(ids(tokenizer, "钱包丢了，赶紧去报"), ids(tokenizer, "。"), 1)
    assert whole is not None and whole.whole
    cut = lookup.lookup(ids(tokenizer, "钱包丢了，赶紧去报"), ids(tokenizer, "。他很开心"), 1)
    assert cut is not None and (cut.left, cut.right) == (whole.left, whole.right)
    assert not cut.whole


def test_a_mark_next_to_the_blank_may_match_another_mark(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    """With ``edge_marks`` (the check path), the user's ， right after the blank matches the
    corpus's 。 there (啼鸟。夜来 for 啼[X]，夜来), and the evidence quotes the corpus; a mark
    inside the context is still matched exactly, and without ``edge_marks`` nothing changes."""
    lookup = BlankLookup(open_index(small_index), tokenizer)
    marks = lookup.edge_marks
    left, right = (
        ids(tokenizer, "春眠不觉晓，处处闻啼"),
        ids(tokenizer, "，夜来风雨声，花落知多少。"),
    )
    exact = lookup.lookup(left, right, 1)
    assert exact is not None and exact.right == () and exact.sides == (True, False)
    loose = lookup.lookup(left, right, 1, marks)
    assert loose is not None and loose.right == tuple(right) and loose.sides == (True, True)
    assert loose.fills == {(ids(tokenizer, "鸟")[0],): 1} and loose.whole
    memory = lookup.evidence(loose, ids(tokenizer, "鸟"))
    assert memory is not None and memory["match"] == LINES[0]  # the corpus's 。, not the ，
    # the left side: 、 before the blank against the corpus's ，
    after = lookup.lookup(ids(tokenizer, "春眠不觉晓、"), ids(tokenizer, "处闻啼鸟"), 1, marks)
    assert after is not None and after.left == tuple(ids(tokenizer, "春眠不觉晓、"))
    # inside the context a mark must be the corpus's own: 、 for ， stops the left match
    inside = lookup.lookup(ids(tokenizer, "春眠不觉晓、处处闻啼"), right, 1, marks)
    assert inside is not None and inside.left == tuple(ids(tokenizer, "处处闻啼"))
    # a character next to the blank is never loosened
    assert lookup.lookup(left, ids(tokenizer, "夜来风雨声"), 1, marks) == lookup.lookup(
        left, ids(tokenizer, "夜来风雨声"), 1
    )


def test_evidence_fields(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "画龙点"), [], 1)
    assert match is not None
    memory = lookup.evidence(match, ids(tokenizer, "睛"))
    assert memory is not None
    assert memory["count"] == 2 and memory["match"] == "画龙点睛"
    assert memory["example"] in {"这一笔真是画龙点睛之笔。", "画龙点睛"}
    assert lookup.evidence(match, ids(tokenizer, "白")) is None
    # The match is cut from the stored line with the tokenizer's offsets (letters, digits).
    match = lookup.lookup(ids(tokenizer, "读了3遍《静夜思》，"), ids(tokenizer, "前明月光"), 1)
    assert match is not None
    memory = lookup.evidence(match, ids(tokenizer, "床"))
    assert memory is not None and memory["match"] == "读了3遍《静夜思》，床前明月光"


def test_passages_that_go_on_with_another_character_are_no_evidence(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    """书名之行，始于东夷 was shown as the 出处 of 东 in 千里之行，始于[MASK]下。 and lifted it from
    0.2% to 52%: five characters matched on the left, and the passage's 夷 stood where the
    user wrote 下. Where every passage goes on with a Han character other than the user's next
    to the blank, they are no evidence; where one ends there, or the text's own follows, they
    are."""
    lookup = BlankLookup(open_index(small_index), tokenizer)
    left = ids(tokenizer, "我们去公园")  # 散步 and 跑步: 步 follows both fills
    other = lookup.lookup(left, ids(tokenizer, "马。"), 1)
    assert other is not None and other.contradicted[1] and not holds_evidence(other)
    own = lookup.lookup(left, ids(tokenizer, "步。"), 1)
    assert own is not None and not any(own.contradicted) and holds_evidence(own)
    alone = lookup.lookup(left, [], 1)  # nothing typed after the blank: nothing to go against
    assert alone is not None and holds_evidence(alone)
    # one of the passages ends after the fill (画龙点睛 is a line of its own): evidence
    ends = lookup.lookup(ids(tokenizer, "画龙点"), ids(tokenizer, "气"), 1)
    assert ends is not None and not any(ends.contradicted) and holds_evidence(ends)
    # the same on the left: 手机没电了 and 电脑没电了 hold 机 and 脑 where the user wrote 马
    before = lookup.lookup(ids(tokenizer, "马"), ids(tokenizer, "电了，赶紧去充电"), 1)
    assert before is not None and before.context_han >= 3
    assert before.contradicted[0] and not holds_evidence(before)


CLAUSES = [
    "可怜见子母每天翻地覆。",
    "欲到仙都有底难。",
    "更剡荐牍辨玖琼，匹夫有获万口称。",
    "百般的参不透这个道理。",
    "女无悦己，谁适为容。不龟手药，或一朝兮取封。",
    "你要见本来真面目。",
    "两脚踏实地，风雨无漂摇。",
    "脚踏实地",
    "三人行，必有我师焉。",
    "书名之行，始于东夷。",
]


def small_lookup(folder: Path, tokenizer: Tokenizer, lines: list[str]) -> BlankLookup:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index([folder / "c.txt"], folder / "index", progress=False)
    return BlankLookup(open_index(folder / "index"), tokenizer)


@pytest.fixture(scope="module")
def clause_lookup(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> BlankLookup:
    return small_lookup(tmp_path_factory.mktemp("clauses"), tokenizer, CLAUSES)


@pytest.mark.parametrize(
    ("left", "right", "contradicted", "evidence"),
    [
        # three characters shared inside two different clauses: the passage reads 子母 and 覆
        # where the text has 他 and 铁 (翻 was answered at 0.27 with this 出处)
        ("他每天", "地铁去公司上班。", (True, True), False),
        # 底 against 地, and three Han characters (a mark before 到 in the text, where the
        # passage has 欲, counts only right next to the blank)
        ("这个城市的交通很方便，到", "都有地铁站。", (False, True), False),
        # the text's clause ends after the blank, the passage's goes on (获万口称): nothing
        # matched on that side, so the side alone decides
        ("天下兴亡，匹夫有", "。", (False, True), False),
        # one side differs (是 against 透) and the match holds three Han characters
        ("说的就是这个道", "。", (True, False), False),
        # one side differs (我 against 你) and the match holds six: evidence
        ("我要见本来真面", "。", (True, False), True),
        # the clause is shared whole (不龟手药，): what follows the mark is another clause
        ("", "龟手药，说的就是这个道理。", (False, False), True),
        # the match crossed a mark and stops inside the next clause (之行，始于东: 名 against
        # 里): that clause reads differently (it counted as shared, as any mark inside a match
        # did); one side and five Han characters: still evidence for one character
        ("千里之行，始于东", "。", (True, False), True),
    ],
)
def test_passages_that_read_differently_from_the_text_are_no_evidence(
    clause_lookup: BlankLookup,
    tokenizer: Tokenizer,
    left: str,
    right: str,
    contradicted: tuple[bool, bool],
    evidence: bool,
) -> None:
    """A reviewer's modern sentences were answered from chance matches of three characters in
    classical lines (他每天[MASK]地铁 → 翻, 出处 可怜见子母每天翻地覆; 到[MASK]都有地铁站 → 仙, 出处
    欲到仙都有底难), 34 of the 38 sourced first answers over 745 blanks were wrong, and 8 right
    answers were turned wrong. A passage that reads differently from the text past the match,
    within the clause, is no evidence on both sides, or on one side of a short match."""
    match = clause_lookup.lookup(ids(tokenizer, left), ids(tokenizer, right), 1)
    assert match is not None
    assert match.contradicted == contradicted
    assert holds_evidence(match) is evidence


def test_a_fill_whose_own_passages_read_differently_is_no_evidence(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    """The evidence rule was judged per match: with 每天扫地 in the corpus beside 可怜见子母每天
    翻地覆, the passage that ends its clause after 地 made the match evidence, and 翻, whose only
    passage reads 子母 and 覆 where the text has 他 and 铁, kept its count and showed that
    passage as its 出处. Each fill is now judged by its own passages."""
    lookup = small_lookup(tmp_path, tokenizer, ["可怜见子母每天翻地覆。", "每天扫地"])
    left, right = ids(tokenizer, "他每天"), ids(tokenizer, "地铁去公司上班。")
    match = lookup.lookup(left, right, 1)
    assert match is not None and holds_evidence(match)
    assert match.fills == {tuple(ids(tokenizer, "扫")): 1}
    assert lookup.evidence(match, ids(tokenizer, "翻")) is None
    example = lookup.evidence(match, ids(tokenizer, "扫"))
    assert example is not None and example["example"] == "每天扫地"

    # each fill's passages read differently on one side, a different side for each: neither
    # is evidence, so the match is none either
    split = small_lookup(tmp_path / "split", tokenizer, ["我每天翻地", "每天扫地板"])
    match = split.lookup(left, right, 1)
    assert match is not None and match.context_han == 3
    assert not holds_evidence(match)


def test_a_clause_the_text_holds_whole_is_evidence_where_a_longer_match_is_not(
    clause_lookup: BlankLookup, tokenizer: Tokenizer
) -> None:
    """做事要脚踏[MASK]地，不要好高骛远。 matched 两脚踏实地，风雨 longest (脚踏 + 地，), which
    reads 两 where the text has 要: no evidence, and the idiom line 脚踏实地, a shorter match, was
    never looked at, so 实 lost its 出处 and its place. The lookup now falls back to the
    occurrences whose passage ends right past their match on both sides."""
    match = clause_lookup.lookup(
        ids(tokenizer, "做事要脚踏"), ids(tokenizer, "地，不要好高骛远。"), 1
    )
    assert match is not None and holds_evidence(match)
    assert match.left == tuple(ids(tokenizer, "脚踏")) and match.right == tuple(
        ids(tokenizer, "地")
    )
    assert match.fills == {tuple(ids(tokenizer, "实")): 1}
    example = clause_lookup.evidence(match, ids(tokenizer, "实"))
    assert example is not None and example["example"] == "脚踏实地"


def test_a_sentence_final_particle_where_the_text_ends_its_clause_is_no_contradiction(
    clause_lookup: BlankLookup, tokenizer: Tokenizer
) -> None:
    """三人行，必有我师焉 goes on with 焉 where 三人行，必有我[MASK]。 has its 。: the classical
    line ends there too (师 lost its 出处 and fell out of the top three)."""
    match = clause_lookup.lookup(ids(tokenizer, "三人行，必有我"), ids(tokenizer, "。"), 1)
    assert match is not None and match.contradicted == (False, False) and holds_evidence(match)


def test_whole_fills_and_candidates_read_passages_as_one_mask_does(
    clause_lookup: BlankLookup, tokenizer: Tokenizer
) -> None:
    """option_match (whole words, [BLANK]s, candidates) built its match without
    ``contradicted``, so 翻 from 可怜见子母每天翻地覆 stayed the first answer with its 出处
    there."""
    from tiankong.index.options import option_match

    left, right = ids(tokenizer, "他每天"), ids(tokenizer, "地铁去公司上班。")
    match = option_match(clause_lookup, left, right, ids(tokenizer, "翻"))
    assert match is not None and match.contradicted == (True, True)
    assert not holds_evidence(match)
    whole = option_match(
        clause_lookup, [], ids(tokenizer, "龟手药，说的就是这个道理。"), ids(tokenizer, "不")
    )
    assert whole is not None and holds_evidence(whole)


def test_the_fallbacks_keep_the_open_ended_rules(tmp_path: Path, tokenizer: Tokenizer) -> None:
    """A review of the fallbacks: an open-ended fill (a [BLANK]'s, a candidate's) took the
    blank's fallback match without the spanning rule (四 for 张三李[BLANK]王五赵六。 from
    四王五赵六。, where the text has 李 before the blank), and the one-character row of a [BLANK]
    showed the passage the fallback had passed over as its 出处."""
    from tiankong.index.grounding import CorpusMemory
    from tiankong.index.options import option_match, spanning_fills

    lookup = small_lookup(tmp_path / "a", tokenizer, ["甲李四王乙。", "四王五赵六。"])
    left, right, four = ids(tokenizer, "张三李"), ids(tokenizer, "王五赵六。"), ids(tokenizer, "四")
    opened = option_match(lookup, left, right, four, open_ended=True)
    assert opened is None or not opened.right or opened.left  # never the one-sided 四王五赵六。
    memory = CorpusMemory(lookup.index, "t", tokenizer)
    text = [tokenizer.token_to_id("[CLS]"), *left, *four, *right, tokenizer.token_to_id("[SEP]")]
    grounded = memory.ground(text, 1 + len(left), four, 0.01, 0.5, open_ended=True)
    assert grounded.memory is None and grounded.score == pytest.approx(0.01)

    lookup = small_lookup(tmp_path / "b", tokenizer, ["两脚踏实地，风雨无漂摇。", "脚踏实地；"])
    left, right = ids(tokenizer, "做事要脚踏"), ids(tokenizer, "地，不要好高骛远。")
    match = lookup.lookup(left, right, 1)
    assert match is not None and holds_evidence(match)
    row = spanning_fills(lookup, match, left, right)
    assert row is not None
    example = lookup.evidence(row, ids(tokenizer, "实"))
    assert example is not None and example["example"] == "脚踏实地；"


def test_a_context_cut_at_an_unknown_character_is_not_the_whole_text(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    """“, —, … and emoji are [UNK] in bert-base-chinese's vocabulary, where a context stops.
    Counted as the text's whole context, two characters were evidence: 老师[MASK]“春眠不觉晓…
    showed 老师一句扑不破 as the 出处 of 一, 我爱😀[MASK]国。 中国。 for 中. The text's own start
    or end still makes a short context whole; a sentence end before the [UNK] does too."""
    lookup = BlankLookup(open_index(small_index), tokenizer)
    start = lookup.lookup(ids(tokenizer, "画"), [], 1)  # 画[MASK]: the text's start and end
    assert start is not None and start.whole and holds_evidence(start)
    unknown = ids(tokenizer, "😀")
    assert unknown == [tokenizer.token_to_id("[UNK]")]
    cut = lookup.lookup(unknown + ids(tokenizer, "画"), [], 1)
    assert cut is not None and not cut.whole and not holds_evidence(cut)
    cut_right = lookup.lookup([], ids(tokenizer, "龙") + unknown, 1)
    assert cut_right is not None and not cut_right.whole
    ended = lookup.lookup(ids(tokenizer, "花落知多"), ids(tokenizer, "。") + unknown, 1)
    assert ended is not None and ended.whole
    # another blank: the text goes on past it (画[MASK]: 画 is the whole of [MASK]画[MASK])
    other_blank = [tokenizer.token_to_id("[MASK]")]
    beside = lookup.lookup(other_blank + ids(tokenizer, "画"), [], 1)
    assert beside is not None and not beside.whole and not holds_evidence(beside)
    after_a_sentence = lookup.lookup(
        ids(tokenizer, "花落知多"), ids(tokenizer, "。") + other_blank, 1
    )
    assert after_a_sentence is not None and after_a_sentence.whole


def test_example_is_trimmed_around_the_match() -> None:
    line = "甲" * 100 + "画龙点睛" + "乙" * 100
    example = trim(line, 100, 104)
    assert "画龙点睛" in example
    assert example.startswith("…") and example.endswith("…")
    assert len(example.strip("…")) == EXAMPLE_CHARS
    assert trim("短句画龙点睛。", 2, 6) == "短句画龙点睛。"


def test_blanks_group_consecutive_masks() -> None:
    blanks = blanks_of([101, 5, 103, 103, 6, 103, 7, 102], [2, 3, 5])
    assert [(b.first, b.length) for b in blanks] == [(2, 2), (5, 1)]
    assert blanks[0].left == [101, 5] and blanks[0].right == [6, 103, 7, 102]
    assert blanks[1].left == [101, 5, 103, 103, 6] and blanks[1].right == [7, 102]


def test_positions_are_sorted_suffixes(small_index: Path) -> None:
    index = open_index(small_index)
    suffixes = [index.suffix(row, 1000) for row in range(index.size)]
    assert suffixes == sorted(suffixes)
    assert np.array_equal(np.sort(np.asarray(index.suffix_array)), np.arange(index.size))


def test_option_match_counts_left_option_right(small_index: Path, tokenizer: Tokenizer) -> None:
    from tiankong.index.options import option_match

    lookup = BlankLookup(open_index(small_index), tokenizer)
    left, right = ids(tokenizer, "手机没电了，赶紧去"), ids(tokenizer, "。")
    charge = option_match(lookup, left, right, ids(tokenizer, "充电"))
    assert charge is not None
    # 手机没电了，赶紧去充电。 occurs once; 手机没电了，赶紧去 + 2 tokens + 。 also once.
    assert charge.left == tuple(left) and charge.right == tuple(right)
    assert charge.fills == {tuple(ids(tokenizer, "充电")): 1} and charge.total == 1
    police = option_match(lookup, left, right, ids(tokenizer, "报警"))
    assert police is not None  # only 了，赶紧去报警。 occurs: a shorter context, 1 of 3 lines
    assert police.left == tuple(ids(tokenizer, "了，赶紧去")) and police.right == tuple(right)
    assert police.fills == {tuple(ids(tokenizer, "报警")): 1} and police.total == 3
    assert police.probability(ids(tokenizer, "报警")) == pytest.approx(1 / 3)
    assert option_match(lookup, left, right, ids(tokenizer, "鑫鑫")) is None
    memory = lookup.evidence(charge, ids(tokenizer, "充电"))
    assert memory is not None and memory["match"] == "手机没电了，赶紧去充电。"
    # A four-character option in a [BLANK]-style blank of that length.
    idiom = option_match(
        lookup, ids(tokenizer, "真是"), ids(tokenizer, "之笔"), ids(tokenizer, "画龙点睛")
    )
    assert idiom is not None and idiom.context_length == 4 and idiom.total == 1


def test_a_search_within_a_prefixs_rows_equals_a_whole_search(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    index = open_index(small_index)
    corpus = [ids(tokenizer, line) for line in LINES]
    rng = random.Random(1)
    for _ in range(200):
        line = rng.choice(corpus)
        start = rng.randrange(len(line))
        pattern = line[start : start + rng.randint(2, 8)]
        if len(pattern) < 2:
            continue
        prefix = index.search(pattern[: rng.randint(1, len(pattern) - 1)])
        assert index.search(pattern, within=prefix) == index.search(pattern), pattern


def brute_match_length(tokens: np.ndarray, begin: int, context: list[int], step: int) -> int:
    length = 0
    for token in context:
        at = min(max(begin + length * step, 0), len(tokens) - 1)
        if int(tokens[at]) != token:
            break
        length += 1
    return length


def test_match_lengths_equal_a_brute_force_walk(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    tokens = np.asarray(lookup.tokens)
    rng = random.Random(2)
    for _ in range(60):
        step = rng.choice((1, -1))
        # a context read from the corpus itself (long matches, several blocks), then changed
        at = rng.randrange(len(tokens))
        context = [int(tokens[min(max(at + i * step, 0), len(tokens) - 1)]) for i in range(30)]
        context = context[: rng.randint(0, 30)]
        if context and rng.random() < 0.5:
            context[rng.randrange(len(context))] = 1
        begins = np.array(
            [at, 0, len(tokens) - 1, *(rng.randrange(len(tokens)) for _ in range(20))],
            dtype=np.int64,
        )
        got = lookup.match_lengths(begins, context, step)
        expected = [brute_match_length(tokens, int(b), context, step) for b in begins]
        assert got.tolist() == expected


@pytest.mark.parametrize("limit", [1, 2, 3, 512])
def test_side_occurrences_back_off_to_the_shortest_part_with_few_hits(
    small_index: Path, tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    import tiankong.index.lookup as lookup_module

    monkeypatch.setattr(lookup_module, "OCCURRENCE_LIMIT", limit)
    index = open_index(small_index)
    lookup = BlankLookup(index, tokenizer)
    rng = random.Random(3)
    contexts = [ids(tokenizer, text) for text in ("今天天气很", "，我们去公园", "无此", "")]
    corpus = [ids(tokenizer, line) for line in LINES]
    for _ in range(40):
        line = rng.choice(corpus)
        start = rng.randrange(len(line))
        contexts.append(line[start : start + rng.randint(1, 10)])
    for context in contexts:
        for from_end in (True, False):
            parts = [
                context[len(context) - size :] if from_end else context[:size]
                for size in range(1, len(context) + 1)
            ]
            counts = [index.count(part) for part in parts]
            occurring = [size for size, n in enumerate(counts, 1) if n > 0]
            few = [size for size, n in enumerate(counts, 1) if 0 < n <= limit]
            length = (few[0] if few else occurring[-1]) if occurring else 0
            positions, got_length, exact = lookup.side_occurrences(context, from_end)
            assert got_length == length, (context, from_end)
            if length:
                found = index.search(parts[length - 1])
                assert positions.tolist() == index.positions(found, limit).tolist()
                assert exact == (counts[length - 1] <= limit)
            else:
                assert positions.size == 0 and exact


def test_a_fill_of_several_tokens_read_differently_on_a_side_is_no_evidence(
    clause_lookup: BlankLookup, tokenizer: Tokenizer
) -> None:
    """千里之行，始于[MASK][MASK]。 was answered 东夷 at 0.64 (the model's 1e-5) with the 出处
    书名之行，始于东夷: four Han characters matched, one side read differently, which a single
    character's match of four passes."""
    match = clause_lookup.lookup(ids(tokenizer, "千里之行，始于"), ids(tokenizer, "。"), 2)
    assert match is not None and match.context_han == 4
    assert match.contradicted == (True, False) and not holds_evidence(match)
    one = clause_lookup.lookup(ids(tokenizer, "书名之行，始于东"), ids(tokenizer, "。"), 1)
    assert one is not None and not any(one.contradicted) and holds_evidence(one)


@pytest.mark.parametrize(
    ("left", "right", "fill"),
    [
        ("这本书的价格是", "9元。", "30"),  # 309元, its 出处 这本书的价格是30元。
        ("他在公司负责", "2个项目。", "后"),  # 负责后2个项目 from 负责后端开发
        ("他在公司负责", "AI项目。", "后"),  # an [UNK] (AI, in a cased vocabulary) past the context
    ],
)
def test_a_passage_reads_differently_where_the_text_goes_on_with_digits_or_letters(
    tmp_path: Path, tokenizer: Tokenizer, left: str, right: str, fill: str
) -> None:
    """Only a Han character past the match counted as the text going on, so 价格是[MASK]9元
    took 30 from 价格是30元。 with that line as its 出处 (a review)."""
    corpus = tmp_path / "digits.txt"
    corpus.write_text("这本书的价格是30元。\n他在公司负责后端开发。\n", encoding="utf-8")
    build_index([corpus], tmp_path / "index", progress=False)
    lookup = BlankLookup(open_index(tmp_path / "index"))
    match = lookup.lookup(ids(tokenizer, left), ids(tokenizer, right), 1)
    assert match is not None and tuple(ids(tokenizer, fill)) in match.fills
    assert not holds_evidence(match)
    clean = lookup.lookup(
        ids(tokenizer, left), ids(tokenizer, right[-2:] if fill == "30" else "端开发。"), 1
    )
    assert clean is not None and holds_evidence(clean)  # the same fill where the text agrees
