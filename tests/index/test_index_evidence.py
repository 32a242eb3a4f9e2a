"""The evidence rule over whole public sets, and the issue's examples, on the default install
(the bundled model with the bundled index).

Every ``memory`` shown must hold at least three Han characters of the query's own context
beside the fill (its match minus the fill), or the whole query. Checked on the output alone, so
it fails whatever inside the index let a weaker match through."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from server_helpers import local_client

from tiankong import FillMasker
from tiankong.core.script import NO_HAN_WARNING, has_han
from tiankong.core.text import BLANK, MASK, normalize_masks

SETS = Path(__file__).resolve().parents[2] / "data" / "eval"
MIN_HAN = 3


def han(text: str) -> int:
    return sum(has_han(char) for char in text)


def holds(memory: Any, fill: str, filled: str) -> bool:
    """The rule, read from the output: Han characters of the match beside the fill, or the
    match is the whole filled query."""
    return han(memory["match"]) - han(fill) >= MIN_HAN or memory["match"] == filled.strip()


@pytest.fixture(scope="module")
def masker() -> FillMasker:
    masker = FillMasker.load()
    assert masker.index.used == "bundled"
    return masker


def shown(masker: FillMasker, item: dict[str, Any]) -> list[tuple[Any, str, str]]:
    """(memory, fill, filled text) for every candidate, sequence and option the item shows."""
    text = normalize_masks(item["text"])
    if item.get("candidates"):
        result = masker.predict(text, candidates=tuple(item["candidates"]))
    elif BLANK in text:
        result = masker.predict(text, top_k=10)
    elif text.count(MASK) > 1:
        result = masker.predict(text, top_k=10, mode="whole_word")
    else:
        result = masker.predict(text, top_k=10)
    found = [(s.memory, s.fill, s.text) for s in result.sequences]
    found += [(c.memory, c.option, c.text) for c in result.candidates]
    if text.count(MASK) == 1 and BLANK not in text:
        found += [(c.memory, c.token, result.text.replace(MASK, c.token)) for c in result.masks[0]]
    return found


@pytest.mark.parametrize("name", ["public_cloze", "modern_words", "traditional"])
def test_every_memory_in_the_public_sets_is_evidence(masker: FillMasker, name: str) -> None:
    items = [json.loads(line) for line in (SETS / f"{name}.jsonl").read_text("utf-8").splitlines()]
    memories = 0
    for item in items:
        for memory, fill, filled in shown(masker, item):
            if memory is None:
                continue
            memories += 1
            assert holds(memory, fill, filled), (item["text"], fill, memory)
    if name != "modern_words":  # memorised text: the index shows evidence there
        assert memories >= len(items) // 2


def test_every_mode_ranks_a_blank_as_one_mask_does() -> None:
    """Whole-word, [BLANK] and candidates ranked 凤 (0.29, unsupported, unweighed) over the
    supported 睛 (0.273) that one [MASK] puts first: the index took nothing from the fills it
    didn't support there, where a mask's row is weighed whole. In FP32: where --precision auto
    measures a split (FP32 for small batches, bf16 for larger ones), a lone mask and a batch of
    candidates run on two engines, whose scores differ past 1e-3 (a fresh clone's run)."""
    from tiankong import Settings

    masker = FillMasker.load(settings=Settings(precision="fp32"))
    for text in ("画龙点[MASK]", "对牛弹[MASK]"):
        single = masker.predict(text, top_k=3).masks[0]
        whole = masker.predict(text, top_k=3, mode="whole_word").sequences
        blank = masker.predict(text.replace("[MASK]", "[BLANK]"), top_k=3).sequences
        options = tuple(c.token for c in single)
        ranked = masker.predict(text, candidates=options).candidates
        assert single[0].memory is not None, text
        # the same order, and the same scores to 1e-3: a mask's row takes its share from the
        # fills the index keeps (1 - w x kept), a whole fill from 1 - w
        tokens, scores = [c.token for c in single], [c.score for c in single]
        assert [s.fill for s in whole] == tokens, text
        assert [s.score for s in whole] == pytest.approx(scores, rel=1e-3), text
        assert blank[0].fill == single[0].token, text
        # the fills the index supports none of keep the model's order across lengths (those
        # of a length without a supported fill went unweighed, above the weighed ones: 玉
        # fell below 凤舞); a shared factor moves length-normalised scores by its root, so
        # only near-ties (within 5%) may swap
        wide = masker.predict(text.replace("[MASK]", "[BLANK]"), top_k=12).sequences
        alone = masker.predict(text.replace("[MASK]", "[BLANK]"), top_k=30, index=False)
        off = {s.fill: s.rank_score for s in alone.sequences}
        on = [s.fill for s in wide if s.memory is None and s.fill in off]
        for before, after in itertools.combinations(on, 2):
            assert off[before] > off[after] / 1.05, (text, before, after)
        assert [c.option for c in ranked] == tokens, text
        assert [c.score for c in ranked] == pytest.approx(scores, rel=1e-3), text


def test_the_issues_examples(masker: FillMasker) -> None:
    bird = masker.predict("處處聞啼[MASK]。").masks[0][0]
    assert bird.token == "鳥" and bird.memory is not None and "處處聞啼鳥" in bird.memory["match"]
    assert bird.token_id == masker.encoder.vocab["鳥"] != masker.encoder.vocab["鸟"]
    assert masker.predict("天涯若比[MASK]").masks[0][0].token == "邻"
    # beside 欲, which both scripts write alike (OpenCC's 人慾 made it read as simplified)
    rain = masker.predict("清明時節雨紛紛，路上行人欲[MASK]魂。")
    assert rain.masks[0][0].token == "斷" and rain.sequence == "清明時節雨紛紛，路上行人欲斷魂。"
    # its 出处 quotes the line with the user's 欲, where OpenCC's s2t writes 慾 ("lust")
    found = rain.masks[0][0].memory
    assert found is not None and found["match"] == "清明時節雨紛紛，路上行人欲斷魂。"
    assert found["example"].startswith(found["match"]) and "慾" not in found["example"]
    dragon = masker.predict("画龙点[MASK]", top_k=10).masks[0]
    assert dragon[0].token == "睛" and dragon[0].memory is not None
    assert dragon[0].score > dragon[1].score > 0  # the index lifts it: the model alone has 凤
    assert dragon[0].model_score < dragon[1].model_score
    assert all(c.memory is None for c in dragon if c.token != "睛")  # no 出处 for a typo
    weather = masker.predict("今天天气很[BLANK]，我们去公园吧。").sequences[0]
    assert weather.fill.isalnum() and weather.memory is None  # the model's own: 不错的
    assert masker.predict("The weather is [MASK].").warnings == [NO_HAN_WARNING]
    assert masker.predict("今天天气很[MASK]。").warnings == []


def test_ascii_marks_after_chinese_characters_are_read_as_the_corpus_writes_them(
    masker: FillMasker,
) -> None:
    """春眠不觉晓,处处闻啼[MASK]. matched five characters (处处闻啼鸟, and 号 from another poem
    beside it); read with the full-width marks the corpus writes, it matches the whole line."""
    from tiankong.index.grounding import CorpusMemory
    from tiankong.index.lookup import BlankLookup

    [[best, *_]] = masker.predict("春眠不觉晓,处处闻啼[MASK].").masks
    assert best.token == "鸟" and best.memory is not None
    assert best.memory["match"] == "春眠不觉晓，处处闻啼鸟。"  # as the corpus writes it
    memory = masker.memory
    assert isinstance(memory, CorpusMemory)
    lookup = memory.lookup
    assert isinstance(lookup, BlankLookup)
    vocab = masker.encoder.vocab
    ids = [vocab[char] for char in "光,3.1"]
    left, right = lookup.widened(ids, [vocab["."], vocab["3"], vocab["."]])
    assert left == [vocab[char] for char in "光，3.1"]  # after 光 only; 3.1 stays
    assert right == [vocab["。"], vocab["3"], vocab["."]]  # the first, after the blank


def test_a_corpus_line_with_its_blank_lifts_a_fill_the_model_all_but_refuses(
    masker: FillMasker,
) -> None:
    """亡羊补[MASK] is the idiom line 亡羊补牢 with a blank: the model gives 牢 8.7e-5 of its
    best (狗), under the 1e-4 floor, and 亡羊补狗 was the answer with no 出处. A match holding
    the text's whole context of three Han characters or more has the floor at 1e-6."""
    alone = masker.predict("亡羊补[MASK]", index=False, top_k=1).masks[0][0]
    found = masker.predict("亡羊补[MASK]").masks[0][0]
    assert (alone.token, found.token) == ("狗", "牢")
    assert found.model_score is not None and found.model_score < 1e-4 * alone.score
    assert found.memory is not None and found.memory["match"] == "亡羊补牢"


def test_a_passage_that_reads_differently_lifts_no_word(masker: FillMasker) -> None:
    """千里之行，始于[MASK][MASK]。 was answered 东夷 at 0.64 (the model's 1e-5) with the 出处
    书名之行，始于东夷 (a review's find): the bundled corpus has no 始于足下, so the model's
    own answers stand, with no 出处."""
    for mode in ("single", "whole_word"):
        found = masker.predict("千里之行，始于[MASK][MASK]。", mode=mode)
        assert "东夷" not in found.sequence, mode
        assert all(s.memory is None for s in found.sequences), mode
        assert all(c.memory is None for mask in found.masks for c in mask), mode


@pytest.mark.parametrize(
    ("text", "half"),
    [
        ("塞翁失马，焉知非[MASK]。", "骅"),
        ("洞里久餐松[MASK]。", "乳"),
        ("发根风露冷[MASK]。", "飕"),
    ],
)
def test_a_passage_that_reads_on_with_a_rare_character_is_no_evidence(
    masker: FillMasker, text: str, half: str
) -> None:
    """A review's find: 塞翁失马，焉知非[MASK]。 was answered 骅 (the model's 1.6e-5) with the
    出处 伯乐尚未遇，焉知非骅骝: 骝 is not in the vocabulary, so the index holds an [UNK] there,
    which was read as the passage's end, and the half word as a whole fill (100 of 120 such
    classical lines answered so, 1 of 120 where the next character is a known one)."""
    found = masker.predict(text)
    assert found.masks[0][0].token != half
    assert all(c.memory is None for c in found.masks[0] if c.token == half)


@pytest.mark.parametrize(
    ("text", "filled"),
    [
        ("白日依山[MASK]，黄河入海[MASK]。", "白日依山尽，黄河入海流。"),
        ("春[MASK]不觉晓，处处闻啼[MASK]。", "春眠不觉晓，处处闻啼鸟。"),
        ("床前[MASK]月光，疑是地上[MASK]。", "床前明月光，疑是地上霜。"),
    ],
)
def test_whole_words_of_several_blanks_read_each_blanks_evidence(
    masker: FillMasker, text: str, filled: str
) -> None:
    """Whole-word mode over separate blanks answered the model's joint fill (白日依山外，黄河入海
    边) under per-blank lists of 尽 (90%) and 流 (65%), each with its 出处 (a review's find):
    each mask's mixed row now weighs the joint fills, and their best joins the beam. A joint
    fill of separate blanks is no one corpus span: no 出处 of its own."""
    found = masker.predict(text, mode="whole_word")
    assert found.sequence == filled
    assert [mask[0].token for mask in found.masks] == list(found.sequences[0].fills)
    assert all(fill.memory is None for fill in found.sequences)
    alone = masker.predict(text, mode="whole_word", index=False)
    assert alone.sequence != filled  # the model's own joint fill, as before
    assert all(fill.score == fill.model_score for fill in alone.sequences)


def test_an_option_in_the_other_script_is_scored_alike_in_both_directions(
    masker: FillMasker,
) -> None:
    """A review's find: 鳥 offered for 处处闻啼[MASK]。 scored 0.0 (the model read it in a
    simplified sentence) and 花 won, where 鸟 for 處處聞啼[MASK]。 scored as 鳥 does."""

    def ranked(text: str, options: list[str]) -> list[tuple[str, float, str]]:
        found = masker.predict(text, candidates=options).candidates
        return [(c.option, round(c.score, 4), c.text) for c in found]

    plain = ranked("处处闻啼[MASK]。", ["鸟", "花"])
    assert plain[0][0] == "鸟" and plain[0][1] > 0.5
    other = ranked("处处闻啼[MASK]。", ["鳥", "花"])
    assert other == [("鳥", plain[0][1], "处处闻啼鳥。"), ("花", plain[1][1], "处处闻啼花。")]
    back = ranked("處處聞啼[MASK]。", ["鸟", "花"])
    assert back == [("鸟", plain[0][1], "處處聞啼鸟。"), ("花", plain[1][1], "處處聞啼花。")]
    # forms that tie come with the sentence's own first (the answer was 處處聞啼鸟。, the
    # first typed), then the rest as typed; 髮 before 發 in 頭[MASK] whichever came first
    both = ranked("處處聞啼[MASK]。", ["鸟", "鳥", "花"])
    assert [option for option, _, _ in both] == ["鳥", "鸟", "花"] and both[0][1] == both[1][1]
    assert masker.predict("處處聞啼[MASK]。", candidates=["鸟", "鳥"]).sequence == "處處聞啼鳥。"
    for hair in (["發", "髮"], ["髮", "發"]):
        assert masker.predict("她的頭[MASK]很長。", candidates=hair).sequence == "她的頭髮很長。"
    assert ranked("处处闻啼[MASK]。", ["鳥", "鸟"])[0][0] == "鸟"
    # the 出处 of an option in the other script quotes the corpus in the sentence's script, never
    # the option put in it: 鳥's was 春眠不觉晓，处处闻啼鳥。, a line the corpus does not hold
    for text, options, line in (
        ("处处闻啼[MASK]。", ["鳥", "鸟"], "处处闻啼鸟。"),
        ("處處聞啼[MASK]。", ["鸟", "鳥"], "處處聞啼鳥。"),
        ("春眠不覺曉，处处闻啼[MASK]。", ["鳥", "鸟"], "处处闻啼鸟。"),
        # a traditional form the corpus's words write otherwise (白发 is 白髮): it quoted 白發
        ("白[MASK]三千丈，緣愁似個長。", ["發", "髮", "发"], "白髮三千丈，緣愁似個長。"),
    ):
        for found in masker.predict(text, candidates=options).candidates:
            assert found.memory is not None, (text, found.option)
            assert found.memory["match"].endswith(line) and line in found.memory["example"]
    # constraints alike: excluding 鳥 excludes the bird on a simplified text too
    assert masker.predict("处处闻啼[MASK]。", exclude=["鳥"]).masks[0][0].token != "鸟"
    assert masker.predict("处处闻啼[MASK]。", allowed=["鳥"]).masks[0][0].token == "鸟"


def test_a_text_mixing_the_scripts_is_grounded_and_answered_as_its_blank_leans(
    masker: FillMasker,
) -> None:
    """With one traditional character (層) the text was used as typed: the index never matched
    it and the model alone answered 人 and 山, while /check fixed the same line to 樓."""
    tower = masker.predict("欲穷千里目，更上一層[MASK]。")
    best = tower.masks[0][0]
    assert best.token == "樓" and best.memory is not None and "一層樓" in best.memory["match"]
    assert tower.sequence == "欲穷千里目，更上一層樓。"  # the typed 穷 kept
    # ... but not in the 出处: a corpus line in one script, not the user's mix spliced into it
    # (白日依山盡，黃河入海流。欲穷千里目，更上一層樓。 is in no edition: a review)
    assert best.memory["match"] == "欲窮千里目，更上一層樓。"
    assert best.memory["example"] == "白日依山盡，黃河入海流。欲窮千里目，更上一層樓。"
    simplified = masker.predict("欲穷千里目，更上一层[MASK]。\n處處聞啼鳥").masks[0][0]
    assert simplified.token == "楼" and simplified.memory is not None
    assert simplified.memory["example"] == "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"
    bird = masker.predict("春眠不觉晓，处处闻啼[MASK]。\n處處聞啼鳥").masks[0][0]
    assert bird.token == "鸟" and bird.memory is not None  # its own line is simplified
    from tiankong.tasks.check import Proofreader

    [fix] = Proofreader(masker).check("欲穷千里目，更上一層摟。").edits
    assert fix.suggestion == best.token  # proofreading and filling agree


def test_with_the_index_off_traditional_text_is_used_as_typed(masker: FillMasker) -> None:
    off = masker.predict("處處聞啼[MASK]。", index=False)
    assert off.text == "處處聞啼[MASK]。"
    assert all(c.memory is None and c.score == c.model_score for c in off.masks[0])


def test_the_hugging_face_route_reads_traditional_text_as_the_pipeline_does(
    masker: FillMasker,
) -> None:
    """The README's Hugging Face section: the index is off on that route, so the model reads
    處處聞啼[MASK]。 as typed and answers in its own script, as the pipeline does; /predict with
    the index on answers 鳥 (test_the_issues_examples)."""

    from tiankong import Settings
    from tiankong.server import create_app

    with local_client(create_app(Settings(), masker)) as client:
        [best, *_] = client.post("/", json={"inputs": "處處聞啼[MASK]。"}).json()
        assert best["sequence"] == "處處聞啼鸟。"
        grounded = client.post("/predict", json={"text": "處處聞啼[MASK]。"}).json()
        assert grounded["sequence"] == "處處聞啼鳥。"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("手机没电了，赶紧去[MASK][MASK]。", "whole_word"),
        ("白日依山[MASK]，黄河入海[MASK]。", "whole_word"),
        ("画龙点[BLANK]", "single"),
        ("守株待[BLANK]，不劳而获。", "single"),
    ],
)
def test_forward_rows_bound_the_rows_the_index_scores_too(
    masker: FillMasker, text: str, mode: str
) -> None:
    """The cost cap and the queue trust the estimate, which left out the rows the index's
    searches score: its fills of a blank as chains (up to ten of each length), and, since
    whole words read several blanks in each joint fill's context, those rows (白日依山[MASK]，
    黄河入海[MASK]。 scores 22 rows; the estimate without them was 17)."""
    request = masker.prepare_request(text, masker.options(5, mode=mode))
    scored: list[int] = []

    def score_rows(rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        scored.append(len(rows))
        return masker.score_rows(rows, asked)

    masker.run_search(request, score_rows)
    assert request.indexed
    assert sum(scored) <= request.forward_rows()
    unindexed = masker.prepare_request(text, masker.options(5, mode=mode, index=False))
    assert not unindexed.indexed and unindexed.forward_rows() < request.forward_rows()


def test_evidence_for_traditional_text_quotes_the_users_words_and_the_answer(
    tmp_path: Path,
) -> None:
    """The match was written with one form per character over the whole query: 出發 made every
    发 發, so 出發之前，他理了理頭[MASK] answered 髮 with the 出处 頭發, and 然後 turned 皇后 into
    皇後 (a review). The match is now the user's own sentence with the answer in it."""
    from tiankong import Settings
    from tiankong.index import build_index

    corpus = tmp_path / "corpus.txt"
    lines = ["出发之前，他理了理头发。", "皇后在宮裡梳頭髮，然後出發去看戲。"]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index([corpus], tmp_path / "idx", progress=False)
    masker = FillMasker.load(settings=Settings(precision="fp32"), index=str(tmp_path / "idx"))
    texts = ["出發之前，他理了理頭[MASK]。", "出[MASK]之前，他理了理頭髮。"]
    texts += ["皇后在宮裡梳頭[MASK]，然後出發去看戲。", "皇[MASK]在宮裡梳頭髮，然後出發去看戲。"]
    for text in texts:
        result = masker.predict(text, top_k=1)
        best = result.masks[0][0]
        assert best.memory is not None and best.memory["match"] == result.sequence, text
    blank = masker.predict("出發之前，他理了理頭[BLANK]。", top_k=1).sequences[0]
    assert blank.memory is not None
    assert blank.memory["match"] == blank.text == "出發之前，他理了理頭髮。"
    options = masker.predict("出發之前，他理了理頭[MASK]。", candidates=("髮", "發")).candidates
    assert [(c.option, c.memory and c.memory["match"]) for c in options] == [
        ("髮", "出發之前，他理了理頭髮。"),
        # the corpus's fill, not the option as typed: 頭發 is no line the corpus holds
        ("發", "出發之前，他理了理頭髮。"),
    ]
    word = masker.predict("出發之前，他理了理[MASK][MASK]。", mode="whole_word", top_k=1)
    assert word.sequence == "出發之前，他理了理頭髮。"
    assert [mask[0].token for mask in word.masks] == ["頭", "髮"]  # as the sentence reads
    assert all(mask[0].memory["match"] == word.sequence for mask in word.masks)
