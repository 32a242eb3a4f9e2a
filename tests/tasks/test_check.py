"""The proofreading task (tiankong.tasks.check) on the tiny random BERT: the decoding rules
with a scorer whose numbers the test sets, the corpus index and the idiom lexicon, bad input,
offsets, windows, and the torch and ONNX engines giving the same answers."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tiankong import FillMasker, Settings
from tiankong.errors import BadInputError, BadOptionError, EmptyTextError, TextTooLongError
from tiankong.index import build_index
from tiankong.offline.check_eval import CheckItem, Scores
from tiankong.tasks.check import CheckMethod, CheckResult, Edit, Proofreader
from tiankong.tasks.check.confusion import ConfusionSets
from tiankong.tasks.check.idioms import IdiomLexicon

POEM = "欲穷千里目，更上一层楼。"
CORPUS = [f"白日依山尽，黄河入海流。{POEM}", "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。"]


@pytest.fixture(scope="module")
def checker(tiny_masker: FillMasker) -> Proofreader:
    return Proofreader(tiny_masker)


@pytest.fixture(scope="module")
def indexed(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Proofreader:
    folder = tmp_path_factory.mktemp("check-index")
    (folder / "poems.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    build_index([folder / "poems.txt"], folder / "index", progress=False)
    settings = Settings(engine="torch", threads=1)
    return Proofreader(FillMasker.load(str(tiny_model_dir), settings, index=str(folder / "index")))


class SetScorer:
    """A RowScorer whose masked rows put ``probability`` on ``favourite``; the unmasked row
    gives the written characters 0.5 and ``favourite`` 0.4 everywhere."""

    def __init__(self, vocab_size: int, mask_id: int, favourite: int, probability: float) -> None:
        self.vocab_size, self.mask_id = vocab_size, mask_id
        self.favourite, self.probability = favourite, probability
        self.calls: list[int] = []

    def __call__(self, rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        self.calls.append(len(rows))
        out = []
        for row, indices in zip(rows, asked, strict=True):
            probabilities = np.full((len(indices), self.vocab_size), 1e-9, dtype=np.float32)
            for number, index in enumerate(indices):
                if row[index] == self.mask_id:
                    probabilities[number, self.favourite] = self.probability
                else:
                    probabilities[number, row[index]] = 0.5
                    probabilities[number, self.favourite] = 0.4
            out.append(probabilities)
        return out


def scorer_for(checker: Proofreader, char: str, probability: float) -> SetScorer:
    encoder = checker.masker.encoder
    return SetScorer(len(encoder.vocab), encoder.mask_id, encoder.vocab[char], probability)


def test_the_model_rule_fixes_a_confusable_character_at_the_right_offset(
    checker: Proofreader,
) -> None:
    text = "我门看电影。"
    scorer = scorer_for(checker, "们", 0.9)
    [result] = checker.run([checker.prepare(text)], scorer)
    # one unmasked row; then one masked row, for the one suspect (门: its candidate 们 is
    # the only character the unmasked row likes besides the written ones)
    assert scorer.calls == [1, 1]
    [edit] = result.edits
    assert (edit.start, edit.end, edit.original, edit.suggestion) == (1, 2, "门", "们")
    assert edit.source == "model" and 0.99 < edit.score <= 1.0 and edit.memory is None
    assert result.corrected == "我们看电影。"


def test_the_model_rule_needs_the_ratio_and_the_probability(checker: Proofreader) -> None:
    """The same text with the favourite too unlikely: no edit, the text unchanged."""
    weak = scorer_for(checker, "们", CheckMethod().min_probability / 2)
    [result] = checker.run([checker.prepare("我门看电影。")], weak)
    assert result.edits == [] and result.corrected == result.text


def test_only_confusion_set_characters_are_suggested(checker: Proofreader) -> None:
    """电 is in no confusion set of 门, so a model that wants it changes nothing."""
    assert "电" not in ConfusionSets.shipped().of("门")
    [result] = checker.run([checker.prepare("我门看")], scorer_for(checker, "电", 0.9))
    assert all(edit.original != "门" for edit in result.edits)


def test_a_known_idiom_misspelling_is_fixed_with_its_source(checker: Proofreader) -> None:
    result = checker.check("画龙点晴")
    [edit] = result.edits
    assert result.corrected == "画龙点睛" and edit.source == "idioms"
    assert edit.memory is not None and edit.memory["match"] == "画龙点睛"


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"min_probability": -1.0}, "min_probability"),
        ({"min_probability": 1.5}, "min_probability"),
        ({"suspects": 1.5}, "suspects"),
        ({"suspects": True}, "suspects"),
        ({"index_context": -3}, "index_context"),
        ({"index_context": 0}, "index_context"),
        ({"idiom_model_ratio": -0.5}, "idiom_model_ratio"),
        ({"index_ratio": float("nan")}, "index_ratio"),
        ({"use_index": "yes"}, "use_index"),
        ({"detect": "every"}, "detect"),
    ],
)
def test_a_method_knob_out_of_range_is_refused_by_name(
    tiny_masker: FillMasker, changes: dict[str, Any], named: str
) -> None:
    """A negative ratio or a fractional count was taken and quietly changed what was fixed."""
    with pytest.raises(BadOptionError, match=named):
        Proofreader(tiny_masker, CheckMethod(**changes))


def test_library_misuse_is_one_sentence(checker: Proofreader) -> None:
    """check_batch("画龙点晴") checked four one-character texts; Proofreader(None) was a bare
    AttributeError."""
    with pytest.raises(BadOptionError, match="check_batch takes a list of texts"):
        checker.check_batch("画龙点晴")
    with pytest.raises(BadOptionError, match="check_batch takes a list of texts, not NoneType"):
        checker.check_batch(None)  # type: ignore[arg-type]
    with pytest.raises(BadOptionError, match=r"takes a loaded FillMasker .* not NoneType"):
        Proofreader(None)  # type: ignore[arg-type]
    # the other arguments too: method="masked" was an AttributeError, and confusion="x" or
    # idioms="x" one at the first check (a review)
    for name, value in (("method", "masked"), ("confusion", "x"), ("idioms", "x")):
        said = rf"^Proofreader's {name} is an? \w+ .* not str\.$"  # "an IdiomLexicon"
        with pytest.raises(BadOptionError, match=said):
            Proofreader(checker.masker, **{name: value})  # type: ignore[arg-type]
    # which text of a batch was bad, as predict_batch says it (it named none)
    with pytest.raises(BadInputError, match=r"^texts\[1\]: The text is empty"):
        checker.check_batch(["画龙点晴", ""])


def test_the_extra_groups_are_read_both_ways() -> None:
    """confusion_extra.txt's groups are symmetric and of their kind; without them the sets are
    pycorrector's alone."""
    sets, alone = ConfusionSets.shipped(), ConfusionSets.shipped(extra=False)
    assert {"已", "巳"} <= sets.shape["己"] and "己" in sets.shape["巳"]
    assert "得" in sets.sound["地"] and "地" in sets.sound["得"]
    assert "已" not in alone.of("己") and "得" not in alone.of("地")
    assert alone.of("门") <= sets.of("门")  # nothing of pycorrector's is lost


def test_the_idiom_lexicon() -> None:
    lexicon = IdiomLexicon.bundled()
    assert lexicon.near("守株待免") == [(3, "兔", "守株待兔")]
    assert lexicon.near("守株待兔") == []  # an idiom is never near another
    # one off two idioms at two places (五陵年少, 五陵豪气): ambiguous, no fix
    assert lexicon.near("五陵豪少") == []
    # ... at one place, both (the proofreader's model picks): it was no fix at all
    assert lexicon.near("一做皆惊") == [(1, "坐", "一坐皆惊"), (1, "座", "一座皆惊")]
    assert lexicon.known_misspelling("画龙点晴") == (3, "睛", "画龙点睛")
    # where modern usage is decisive it decides, though the training text writes the form:
    # 按步就班 (once there, 按部就班 twice) held as an idiom, and 再接再砺 offered beside 再接再厉
    assert lexicon.known_misspelling("按步就班") == (1, "部", "按部就班")
    assert lexicon.near("再接再励") == [(3, "厉", "再接再厉")]
    # ... and a variant modern text writes is not a misspelling (名符其实, 38 in jieba's list)
    assert "名符其实" in lexicon.idioms and lexicon.known_misspelling("名符其实") is None
    assert "画龙点晴" not in lexicon.idioms
    # standard modern forms the mostly classical text took for typos of classical variants
    for standard in ("吃里扒外", "惹是生非", "不值一钱", "心如刀绞", "披麻戴孝", "俯首帖耳"):
        assert standard in lexicon.idioms and lexicon.known_misspelling(standard) is None
    # common words one off an idiom: right as written, never a fix
    assert lexicon.as_written("毋庸置疑") and lexicon.near("毋庸置疑") == []
    assert lexicon.near("各种各样") == []


def test_no_misspelling_the_checker_fixes_is_in_the_bundled_idiom_list() -> None:
    """The index reads the bundled list: 打家截舍 in it made predict answer 截 with the 出处
    打家截舍 while check fixed 截 to 劫."""
    import lzma

    from tiankong.index.bundled import BUNDLED_CORPUS

    lexicon = IdiomLexicon.bundled()
    with lzma.open(BUNDLED_CORPUS / "idioms.txt.xz", "rt", encoding="utf-8") as handle:
        listed = {line.strip() for line in handle}
    assert lexicon.misspellings and not set(lexicon.misspellings) & listed
    assert "打家截舍" in lexicon.misspellings


def test_an_accepted_word_is_neither_fixed_nor_a_target() -> None:
    lexicon = IdiomLexicon(["无庸置疑", "守株待兔"], accepted=["毋庸置疑"])
    assert lexicon.near("毋庸置疑") == []
    assert lexicon.near("守株待免") == [(3, "兔", "守株待兔")]
    assert lexicon.as_written("毋庸置疑") and not lexicon.as_written("守株待免")


def test_the_index_fixes_a_memorised_line_and_leaves_the_right_one(indexed: Proofreader) -> None:
    result = indexed.check("欲穷千里目，更上一层搂。")
    index_edits = [edit for edit in result.edits if edit.source == "index"]
    assert [(e.start, e.original, e.suggestion) for e in index_edits] == [(10, "搂", "楼")]
    memory = index_edits[0].memory
    assert memory is not None and memory["count"] == 1 and "更上一层楼" in memory["match"]
    assert [e for e in indexed.check(POEM).edits if e.source == "index"] == []


@pytest.mark.parametrize("clean", ["他很开心。", "守株待兔。"])
def test_the_next_sentence_is_not_a_blanks_context(indexed: Proofreader, clean: str) -> None:
    """A clean sentence before a memorised line: the line (。欲穷千里目…) follows 黄河入海流 in
    the corpus, which made 心 and 兔 into 流 at score 0.5 while the lookup read past the 。."""
    result = indexed.check(clean + POEM)
    assert [e for e in result.edits if e.source == "index"] == []
    assert result.corrected.startswith(clean)


def test_an_edition_variant_is_not_a_fix(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The corpus's edition reads 春风自绿; 自 is in no confusion set of 又, so the famous 又 is
    not an error. (With the any-character rule on, the index rewrote it at score 1.0.)"""
    folder = tmp_path_factory.mktemp("variant-index")
    (folder / "poem.txt").write_text(
        "京口瓜洲一水间，钟山只隔数重山。春风自绿江南岸，明月何时照我还。\n"
    )
    build_index([folder / "poem.txt"], folder / "index", progress=False)
    settings = Settings(engine="torch", threads=1)
    masker = FillMasker.load(str(tiny_model_dir), settings, index=str(folder / "index"))
    text = "春风又绿江南岸，明月何时照我还。"
    assert [e for e in Proofreader(masker).check(text).edits if e.source == "index"] == []
    anywhere = Proofreader(masker, CheckMethod(index_any_context=8)).check(text)
    assert [(e.original, e.suggestion) for e in anywhere.edits if e.source == "index"] == [
        ("又", "自")
    ]


def test_a_written_character_whose_passage_reads_on_still_counts_as_written(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The index's fills are judged per fill (``grounded_fills``): 地, whose one passage goes
    on differently from the text, left the match's fills, so the proofreader saw it "never
    written there" and one passage of 的 made a right 地 wrong (a code review's corpus)."""
    folder = tmp_path_factory.mktemp("misread-index")
    (folder / "c.txt").write_text("昨天今天大家都很高兴地跑了回去\n今天大家都很高兴的跑了\n")
    build_index([folder / "c.txt"], folder / "index", progress=False)
    settings = Settings(engine="torch", threads=1)
    masker = FillMasker.load(str(tiny_model_dir), settings, index=str(folder / "index"))
    text = "我说今天大家都很高兴地跑了过去看。"
    assert [e for e in Proofreader(masker).check(text).edits if e.source == "index"] == []


def test_a_mark_next_to_the_character_may_be_another_mark(indexed: Proofreader) -> None:
    """The corpus's 黄河入海流。欲穷千里目 holds 黄河入海留，欲穷千里目's 留 with context on both
    sides once the ， after it may match the corpus's 。 (``index_edge_marks``)."""
    text = "白日依山尽，黄河入海留，欲穷千里目，更上一层楼。"
    result = indexed.check(text)
    index_edits = [(e.original, e.suggestion) for e in result.edits if e.source == "index"]
    assert index_edits == [("留", "流")]
    memory = next(e.memory for e in result.edits if e.source == "index")
    assert memory is not None and "黄河入海流。欲穷千里目" in memory["match"]
    exact = Proofreader(indexed.masker, CheckMethod(index_edge_marks=False)).check(text)
    assert all(e.source != "index" for e in exact.edits)


def test_without_the_index_there_is_no_index_edit(indexed: Proofreader) -> None:
    alone = Proofreader(indexed.masker, CheckMethod(use_index=False))
    assert alone.memory is None
    assert all(e.source != "index" for e in alone.check("欲穷千里目，更上一层搂。").edits)


@pytest.mark.parametrize(
    "text", ["！？。，", "hello world", "Python 3.12 and GPT-4", "   。 ", "😀😀", "ㄅㄆㄇ"]
)
def test_text_with_nothing_to_check_comes_back_clean(checker: Proofreader, text: str) -> None:
    result = checker.check(text)
    assert result.edits == [] and result.corrected == text


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text_is_a_typed_error(checker: Proofreader, text: str) -> None:
    with pytest.raises(EmptyTextError, match="empty"):
        checker.check(text)


def test_a_text_over_the_limit_is_refused_with_the_limit_named(checker: Proofreader) -> None:
    limit = checker.masker.settings.max_check_chars
    with pytest.raises(TextTooLongError, match=f"{limit:,}.*max_check_chars"):
        checker.prepare("好" * (limit + 1))


def test_a_long_text_is_checked_in_windows_with_offsets_into_the_input(
    checker: Proofreader,
) -> None:
    """Mixed scripts, a text several windows long: every edit's span is its original."""
    text = "我用iPhone给妈妈打电话，她说画龙点晴。" * 20
    request = checker.prepare(text)
    room = checker.masker.settings.max_length
    assert len(request.windows) > 1 and all(len(w.input_ids) <= room for w in request.windows)
    result = checker.run([request])[0]
    fixes = [edit for edit in result.edits if edit.source == "idioms"]
    assert len(fixes) == 20
    for edit in result.edits:
        assert text[edit.start : edit.end] == edit.original
    assert result.corrected.count("画龙点睛") == 20


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\r", "\u2028"])
def test_each_line_is_checked_on_its_own(checker: Proofreader, brk: str) -> None:
    """The tokenizer drops a line break, so a poem typed one line a row ran together: no
    window, idiom run or index context spans two lines, and spans are the typed text's."""
    text = brk.join(["床前明月光", "", "疑是地上霜", "画龙", "点睛 abc"])
    request = checker.prepare(text)
    lines = [w.chars for w in request.windows]
    assert lines == ["床前明月光", "疑是地上霜", "画龙", "点睛"]
    for window in request.windows:
        for (first, last), char in zip(window.spans, window.chars, strict=True):
            assert text[first:last] == char
    assert [run for w in request.windows for run in w.runs(4)] == [0, 1, 0, 1]


def test_the_first_pass_holds_one_engine_calls_rows_at_a_time(checker: Proofreader) -> None:
    """Every window asks for all its characters' distributions, so the unmasked pass scores one
    engine call's windows at a time (``FillMasker.call_slices``) instead of all at once; the
    edits are those of a proofreader whose limits make that pass one call."""
    masker = checker.masker
    small = FillMasker(
        masker.model,
        masker.encoder,
        masker.engine,
        dataclasses.replace(masker.settings, max_batch_size=3, max_masks=40),
        masker.index,
    )
    asked_at_once: list[int] = []

    def recording(rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        if all(masker.encoder.mask_id not in row for row in rows):  # the unmasked pass
            assert len(small.call_slices(rows, asked)) == 1
            asked_at_once.append(sum(len(wanted) for wanted in asked))
        return small.score_rows(rows, asked)

    texts = ["我用iPhone给妈妈打电话，她说画龙点晴。" * 12, "他每天都去公圆散步。" * 30]
    requests = [checker.prepare(text) for text in texts]
    windows = [window for request in requests for window in request.windows]
    assert len(windows) > 3
    results = Proofreader(small).run(requests, recording)
    assert len(asked_at_once) > 1
    assert sum(asked_at_once) == sum(len(window.positions) for window in windows)
    assert max(asked_at_once) <= 3 * 40 or len(asked_at_once) == len(windows)

    def shape(results: list[CheckResult]) -> list[list[tuple[int, str, str]]]:
        return [[(e.start, e.suggestion, e.source) for e in r.edits] for r in results]

    assert shape(results) == shape(checker.run(requests))


def test_forward_rows_bound_the_engine_rows(checker: Proofreader) -> None:
    texts = ["我门看电影。", "画龙点晴，守株待免。", "今天天气很好。" * 30]
    requests = [checker.prepare(text) for text in texts]
    scorer = scorer_for(checker, "们", 0.9)
    checker.run(requests, scorer)
    assert sum(scorer.calls) <= sum(checker.forward_rows(r) for r in requests)


def test_the_onnx_engine_gives_the_same_edits(
    checker: Proofreader, tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    onnx = Proofreader(
        FillMasker.load(str(tiny_model_dir), settings.with_overrides(precision="fp32"))
    )
    texts = ["我门看美国电影，我觉得很有意事。", "画龙点晴", "他每天都去公圆散步。"]

    def shape(results: list[CheckResult]) -> list[list[tuple[int, str]]]:
        return [[(e.start, e.suggestion) for e in r.edits] for r in results]

    assert shape(onnx.check_batch(texts)) == shape(checker.check_batch(texts))


def test_sentence_scores_follow_sighan() -> None:
    """Detection counts the right positions, correction the right sentence; a clean sentence
    with an edit is a false alarm."""

    def result(text: str, corrected: str, starts: list[int]) -> CheckResult:
        edits = [Edit(s, s + 1, text[s], corrected[s], 0.9) for s in starts]
        return CheckResult(text, corrected, edits)

    scores = Scores("all")
    scores.add(CheckItem(1, "我门", "我们"), result("我门", "我们", [1]))  # both right
    scores.add(CheckItem(2, "我门", "我们"), result("我门", "我扪", [1]))  # detected only
    scores.add(CheckItem(3, "你好", "你好"), result("你好", "你号", [1]))  # a false alarm
    scores.add(CheckItem(4, "你好", "你好"), result("你好", "你好", []))
    figures = scores.figures()
    assert figures["detection_precision"] == pytest.approx(2 / 3)
    assert figures["detection_recall"] == 1.0
    assert figures["correction_precision"] == pytest.approx(1 / 3)
    assert figures["correction_recall"] == 0.5
    assert figures["false_alarm_rate"] == 0.5


class Gone(Exception):
    """The request's client left (a server's ``SearchStopped``)."""


def test_a_gone_requests_lookups_stop_with_it(indexed: Proofreader) -> None:
    """A server's scorer raises once its client has gone; the index lookups, on the check's
    own thread, ask it before each window, so a long text's lookups stop there instead of
    holding that thread for every check queued behind (a 4-character check waited 6 s)."""

    class Stopping:
        def __init__(self) -> None:
            self.gone, self.checks = False, 0
            self.looking, self.left = threading.Event(), threading.Event()

        def check(self) -> None:
            if self.checks == 1:  # the second window waits until the client has left
                self.left.wait(10)
            if self.gone:
                raise Gone
            self.checks += 1
            self.looking.set()

        def __call__(
            self, rows: Sequence[list[int]], asked: Sequence[list[int]]
        ) -> list[np.ndarray]:
            self.looking.wait(10)  # the lookups have begun (their first window asked)
            self.gone = True  # then the client leaves, as the first engine step is asked for
            self.left.set()
            raise Gone

    request = indexed.prepare(POEM * 60)
    scorer = Stopping()
    with pytest.raises(Gone):
        indexed.run([request], scorer)
    indexed.lookup_thread.submit(lambda: None).result()  # the lookups have ended
    assert scorer.checks == 1 < len(request.windows)  # the second window was not looked up


def test_a_window_picks_suspects_only_among_the_slots_it_edits(checker: Proofreader) -> None:
    """Overlapping windows share slots, each editing its half: a suspect picked among the
    other window's slots took the place of one of its own, and its edit was thrown away."""
    from tiankong.tasks.check.request import Window

    encoder = checker.masker.encoder
    chars = "我门在在公园"
    ids = [encoder.vocab[char] for char in chars]
    spans = [(at, at + 1) for at in range(len(chars))]
    positions = list(range(1, len(chars) + 1))
    window = Window([encoder.cls_id, *ids, encoder.sep_id], positions, spans, chars, None)
    row = np.full((len(chars), len(encoder.vocab)), 1e-6, dtype=np.float32)
    for slot, char in enumerate(chars):
        row[slot, encoder.vocab[char]] = 1e-3  # every written character unlikely...
        for other in checker.candidates.get(encoder.vocab[char], ())[:1]:
            row[slot, other] = 0.9  # ...and a confusable one likely, at every slot
    everywhere = checker.likeliest_suspects(window, row)
    assert everywhere - {0, 1, 2}  # the precondition: the row makes suspects past slot 2
    mine = Window(window.input_ids, positions, spans, chars, frozenset({0, 1, 2}))
    picked = checker.likeliest_suspects(mine, row)
    assert picked and picked <= {0, 1, 2}


def test_a_text_of_characters_the_model_cant_read_says_nothing_was_checked(
    checker: Proofreader,
) -> None:
    """𠮷𠮷𠮷𠮷 (outside the vocabulary) came back clean, with no word that nothing was read."""
    from tiankong.tasks.check.proofreader import NOTHING_CHECKED, SOME_UNREAD

    unread = checker.check("𠮷𠮷𠮷𠮷")
    assert unread.edits == [] and unread.warnings == [NOTHING_CHECKED] and unread.checked == 0
    read = checker.check("𠮷是好字")
    assert read.warnings == [SOME_UNREAD] and read.checked == 3  # 是好字 were checked
    assert NOTHING_CHECKED not in checker.check("hello").warnings[0]  # no Chinese at all
    assert checker.check("hello").checked == 0
    long = checker.check("欲穷千里目更上一层楼" * 40)  # overlapping windows: each char once
    assert long.checked == 400


def test_checks_take_turns_on_the_lookup_thread(
    indexed: Proofreader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long check's lookups go a few windows a turn, so a short check queued meanwhile is
    looked up after one turn, not after all of them (a one-sentence /check behind a
    /batch_check of 64 long texts waited 27 s for the one lookup thread)."""
    from tiankong.tasks.check import proofreader

    order: list[str] = []
    first_turn, small_queued = threading.Event(), threading.Event()
    plain = proofreader.Proofreader.window_matches

    def recorded(self: Proofreader, memory: Any, window: Any, marks: Any) -> dict[int, Any]:
        order.append("small" if window.chars.startswith("画龙") else "large")
        if len(order) == 1:
            first_turn.set()
            small_queued.wait(10)  # the short check is queued while the first turn runs
        return plain(self, memory, window, marks)

    monkeypatch.setattr(proofreader.Proofreader, "window_matches", recorded)
    large = [w for _ in range(3) for w in indexed.prepare(POEM * 150).windows]
    assert len(large) > 2 * proofreader.LOOKUP_WINDOWS
    found_large = indexed.start_lookups(large)
    first_turn.wait(10)
    found_small = indexed.start_lookups(indexed.prepare("画龙点晴。").windows)
    small_queued.set()
    assert len(found_small()) == 1 and len(found_large()) == len(large)
    assert order.index("small") == proofreader.LOOKUP_WINDOWS  # right after the first turn


def test_a_sentence_of_marks_alone_is_no_window(checker: Proofreader) -> None:
    """Each sentence is a window; one of marks alone (！！！) was one too, charged a row of the
    cost cap and never scored (a code review)."""
    request = checker.prepare("太好了！！！真的吗？！")
    assert [window.chars for window in request.windows] == ["太好了", "真的吗"]
    assert checker.forward_rows(request) == 2 + 2 * 3
