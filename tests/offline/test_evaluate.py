"""`tiankong eval`: readers, exact counts, and the CLI report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import besides_first_run_notes

from tiankong.core.options import PredictOptions
from tiankong.errors import BadDataFileError
from tiankong.offline.evaluate import ItemOutcome, agreement, evaluate_items, read_items, summarise

DATA = Path(__file__).parents[1] / "data"


def test_chid_reader_makes_one_item_per_placeholder() -> None:
    items = read_items(DATA / "chid_sample.json")
    assert len(items) == 3
    first, second, third = items
    assert first.category == "chid"
    assert first.text == "他读书总是[MASK]，看到结局时[UNK]。"
    assert first.answers == ("一目十行",) and first.candidates == (
        "一目十行",
        "一目了然",
        "目不转睛",
    )
    assert second.text == "他读书总是[UNK]，看到结局时[MASK]。"
    assert second.candidates[0] == "哭笑不得"
    assert third.text == "这件事让大家[MASK]。" and third.answers == ("哭笑不得",)


def test_bad_eval_lines_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "好[MASK]", "answers": ["的"]}\n{"text": 1}\n', encoding="utf-8")
    with pytest.raises(BadDataFileError, match="line 2"):
        read_items(path)
    path.write_text("not json\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match="line 1: not valid JSON"):
        read_items(path)


def test_counts_are_exact_on_a_small_file(tiny_masker, tmp_path: Path) -> None:
    """Build answers from the model's own output so the expected counts are known exactly."""
    texts = ["处处闻啼[MASK]。", "画龙点[MASK]", "守株待[MASK]", "一天有二十四个小[MASK]。"]
    results = [tiny_masker.predict(t, top_k=50).masks[0] for t in texts]
    lines = [
        {"category": "a", "text": texts[0], "answers": [results[0][0].token]},  # rank 1
        {"category": "a", "text": texts[1], "answers": [results[1][2].token]},  # rank 3
        {"category": "b", "text": texts[2], "answers": [results[2][9].token]},  # rank 10
        {"category": "b", "text": texts[3], "answers": ["不在前五十的字"]},  # not found
        {"category": "b", "text": "[MASK]" * 17, "answers": ["x"]},  # an error, a miss
    ]
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    report, outcomes = evaluate_items(tiny_masker, read_items(path), PredictOptions())
    assert [o.rank for o in outcomes] == [1, 3, 10, None, None]
    by_name = {c.category: c for c in report.categories}
    assert by_name["a"].items == 2 and by_name["a"].top1 == 0.5 and by_name["a"].top5 == 1.0
    assert by_name["a"].mrr == pytest.approx((1 + 1 / 3) / 2)
    assert by_name["b"].items == 3 and by_name["b"].top5 == 0.0 and by_name["b"].errors == 1
    assert by_name["b"].mrr == pytest.approx(0.1 / 3)
    assert report.overall.items == 5 and report.overall.top1 == pytest.approx(0.2)
    assert len(report.failures) == 4
    # every item in the report, with its rank: the figures recompute from them
    assert [entry["rank"] for entry in report.to_dict()["items"]] == [1, 3, 10, None, None]
    ranks = [entry["rank"] for entry in report.items]
    assert report.overall.mrr == pytest.approx(sum(1 / r for r in ranks if r) / len(ranks))


def test_agreement_figures() -> None:
    from tiankong.offline.evaluate import ClozeItem

    item = ClozeItem("x", "[MASK]", ("a",))
    first = [ItemOutcome(item, list("abcde"), 1, 1.0), ItemOutcome(item, list("fghij"), None, 1.0)]
    second = [ItemOutcome(item, list("abxyz"), 1, 1.0), ItemOutcome(item, list("ghijf"), None, 1.0)]
    figures = agreement(first, second)
    assert figures["top1_agreement"] == 0.5
    assert figures["top5_overlap"] == pytest.approx((2 / 5 + 5 / 5) / 2)
    assert summarise("x", first).top1 == 0.5


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
@pytest.mark.processes
def test_eval_cli_prints_the_table_and_writes_json(tiny_model_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "eval",
            str(DATA / "chid_sample.json"),
            "--model",
            str(tiny_model_dir),
            "--engine",
            "onnx",
            "--json",
            str(report),
            "-v",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "chid" in done.stdout and "overall" in done.stdout and "top-5" in done.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["reports"][0]["overall"]["items"] == 3


@pytest.mark.parametrize(
    ("record", "message"),
    [
        # answers [null, 5] were scored as the strings "None" and "5"
        ({"text": "啼[MASK]", "answers": [None, 5]}, "line 1: 'answers' must be a list of strings"),
        ({"text": "啼[MASK]", "answers": [" "]}, "line 1: 'answers' must be a list of strings"),
        ({"text": "啼[MASK]", "answers": ["鸟"], "category": None}, 'line 1: "category" must be'),
        # the total's name: two overall rows, its items counted twice in the flips (a review)
        (
            {"text": "啼[MASK]", "answers": ["鸟"], "category": "overall"},
            'line 1: "category" .overall',
        ),
        (
            {"text": "啼[MASK]", "answers": ["鸟"], "category": " "},
            "line 1: .* can't be a row of its own",
        ),
        (
            {"text": "啼[MASK]", "answers": ["鸟", "雀"], "candidates": ["猫", "狗"]},
            "line 1: none of the answers '鸟', '雀' is among the candidates",
        ),
        (
            {
                "content": "他做事总是#idiom#。",
                "groundTruth": ["一丝不苟"],
                "candidates": ["马马虎虎"],
            },
            "line 1: '一丝不苟' is not among the candidates, so the item can never be scored right",
        ),
        (
            {"content": "他做事总是#idiom#。", "groundTruth": [None]},
            "line 1: each ChID groundTruth must be an idiom",
        ),
        (  # "needs ... 'answers' (a list)" of a list (a review)
            {"text": "画龙点[MASK]", "answers": []},
            "line 1: 'answers' is empty; list at least one right fill",
        ),
        # an empty or repeated candidate: an error at every run, exit 0 (a review)
        (
            {"text": "守株待[MASK]", "answers": ["兔"], "candidates": ["兔", ""]},
            "line 1: Every candidate must be a non-empty string, so the item can never be",
        ),
        (
            {"text": "守株待[MASK]", "answers": ["兔"], "candidates": ["兔", "兔"]},
            "line 1: The candidate '兔' is given twice, so the item can never be scored right",
        ),
        # present but no list: "", false, {} and 0 were read as no candidates (a review)
        *(
            (
                {"text": "守株待[MASK]", "answers": ["兔"], "candidates": given},
                "line 1: 'candidates' must be a list of strings, at least one",
            )
            for given in ("", False, {}, 0, [])
        ),
        (  # it was scored as an error item, every time, in the denominator
            {"text": "没有空", "answers": ["的"]},
            "line 1: the text has no \\[MASK\\] \\(or \\[BLANK\\]\\), so it can never be scored",
        ),
    ],
)
def test_an_item_that_can_never_be_right_is_refused_with_its_line(
    tmp_path: Path, record: dict[str, object], message: str
) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=f"^items.jsonl {message}"):
        read_items(path)


def test_a_category_is_read_without_its_spaces(tmp_path: Path) -> None:
    """ "idiom " made a second row that read idiom (a review)."""
    path = tmp_path / "items.jsonl"
    lines = [
        {"text": "画龙点[MASK]", "answers": ["睛"], "category": "idiom"},
        {"text": "守株待[MASK]", "answers": ["兔"], "category": "idiom "},
    ]
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    assert [item.category for item in read_items(path)] == ["idiom", "idiom"]


def test_a_chid_blank_without_candidates_has_a_mask_per_character() -> None:
    """It became one [MASK] for a four-character idiom: 0% whatever the model said."""
    from tiankong.offline.evaluate import parse_record

    record = {"content": "他做事总是#idiom#，#idiom#。", "groundTruth": ["一丝不苟", "好"]}
    first, second = parse_record(record, 3, "chid.jsonl")
    assert first.text == "他做事总是[MASK][MASK][MASK][MASK]，[UNK]。"
    assert first.candidates == () and first.answers == ("一丝不苟",)
    assert second.text == "他做事总是[UNK]，[MASK]。"


def test_answers_of_another_length_than_the_masks_are_refused(tiny_masker, tmp_path: Path) -> None:
    """Scored as misses before: a fill has one token per mask."""
    from tiankong.offline.evaluate import check_scorable

    path = tmp_path / "items.jsonl"
    lines = [
        {"text": "处处闻啼[MASK]。", "answers": ["鸟"]},
        {"text": "画龙点[MASK][MASK]", "answers": ["眼睛", "睛"]},  # one answer fits
        {"text": "啼[BLANK]。", "answers": ["黄鹂鸟"]},  # a blank takes any length
        {"text": "啼[MASK]。", "answers": ["黄鹂"], "candidates": ["黄鹂", "鸟"]},
        {"text": "春眠不觉晓，处处闻啼[MASK][MASK]。", "answers": ["鸟"]},
    ]
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    items = read_items(path)
    check_scorable(tiny_masker, items[:4], False, path.name)
    with pytest.raises(
        BadDataFileError,
        match=r"^items.jsonl line 5: the text has 2 \[MASK\]s and no answer is 2 tokens long",
    ):
        check_scorable(tiny_masker, items, False, path.name)
    check_scorable(tiny_masker, items, True, path.name)  # --blank: any length


def test_an_answer_no_result_can_hold_is_refused(tiny_masker, tmp_path: Path) -> None:
    """ "[SEP]" as the answer was counted a miss (a review): no result holds it."""
    from tiankong.offline.evaluate import check_scorable

    path = tmp_path / "items.jsonl"
    lines = [
        {"text": "处处闻啼[MASK]。", "answers": ["[SEP]", "鸟"]},  # one answer can be right
        {"text": "处处闻啼[MASK]。", "answers": ["[SEP]"]},
    ]
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    items = read_items(path)
    check_scorable(tiny_masker, items[:1], False, path.name)
    with pytest.raises(BadDataFileError, match=r"^items.jsonl line 2: every answer of its"):
        check_scorable(tiny_masker, items, False, path.name)
    # a character the model's vocabulary lacks is named as that, not as [SEP] or [PAD] (a
    # review, with a model of its own vocabulary)
    path.write_text('{"text": "处处闻啼[MASK]。", "answers": ["𠮷"]}\n', encoding="utf-8")
    with pytest.raises(BadDataFileError) as refused:
        check_scorable(tiny_masker, read_items(path), False, path.name)
    assert refused.value.message == (
        "items.jsonl line 1: every answer of its length holds a character this model's "
        "vocabulary doesn't have (𠮷), so it can never be scored right; leave the item out for "
        "this model."
    )


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
@pytest.mark.processes
def test_eval_cli_refuses_an_item_that_can_never_be_right(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from cli_helpers import run_cli

    path = tmp_path / "lenmis.jsonl"
    path.write_text('{"text": "处处闻啼[MASK][MASK]。", "answers": ["鸟"]}\n', encoding="utf-8")
    done = run_cli("eval", str(path), "-m", str(tiny_model_dir), "--engine", "onnx")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = besides_first_run_notes(done.stderr)  # a first run's "measuring …, once" may come first
    assert said[0].startswith("error: lenmis.jsonl line 1: the text has 2 [MASK]s")


def test_an_answer_is_compared_as_the_fills_are_without_spaces(tiny_masker, tmp_path: Path) -> None:
    """ " 聊" had its length checked stripped and was compared as written: never right."""
    best = tiny_masker.predict("画龙点[MASK]", top_k=1).masks[0][0].token
    lines = [
        {"text": "画龙点[MASK]", "answers": [f" {best} "]},
        {"text": "画[MASK]", "answers": ["x"], "candidates": [" x", "y "]},
    ]
    path = tmp_path / "spaced.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    items = read_items(path)
    assert items[0].answers == (best,) and items[1].candidates == ("x", "y")
    _, outcomes = evaluate_items(tiny_masker, items, PredictOptions())
    assert outcomes[0].rank == 1


def test_an_answer_is_compared_as_the_model_reads_it(
    tiny_masker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An uncased vocabulary reads C as c, and the model fills c: the item was never counted
    right, where its candidates item was; 一 层 never matched 一层 (a review)."""
    from tokenizers import normalizers

    from tiankong.offline import evaluate

    uncased = normalizers.BertNormalizer(lowercase=True)  # as bert-base-uncased's
    monkeypatch.setattr(tiny_masker.encoder.tokenizer, "normalizer", uncased)
    fills = {"维生素[MASK]可以预防感冒。": ["c", "d"], "更上[MASK][MASK]楼": ["一层", "二层"]}
    monkeypatch.setattr(evaluate, "predicted_fills", lambda masker, item, *_: fills[item.text])
    lines = [
        {"text": "维生素[MASK]可以预防感冒。", "answers": ["C"]},
        {"text": "更上[MASK][MASK]楼", "answers": ["一 层"]},
    ]
    path = tmp_path / "cased.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    _, outcomes = evaluate_items(tiny_masker, read_items(path), PredictOptions())
    assert [outcome.rank for outcome in outcomes] == [1, 1]


def test_a_candidate_the_vocabulary_lacks_is_refused(tiny_masker, tmp_path: Path) -> None:
    """Scored through [UNK], 𠀀 ranked first and the item counted right (a review); a free
    answer of it was refused, and POST /'s targets refuse it."""
    from tiankong.offline.evaluate import check_scorable

    path = tmp_path / "unk.jsonl"
    path.write_text(
        '{"text": "守株待[MASK]", "answers": ["𠀀"], "candidates": ["𠀀", "鳜"]}\n',
        encoding="utf-8",
    )
    with pytest.raises(BadDataFileError) as refused:
        check_scorable(tiny_masker, read_items(path), False, path.name)
    assert refused.value.message == (
        "unk.jsonl line 1: the candidate '𠀀' holds a character this model's vocabulary "
        "doesn't have (𠀀), so it has no honest score; leave it out for this model."
    )
    with pytest.raises(BadDataFileError, match="the candidate '𠀀'"):
        check_scorable(tiny_masker, read_items(path), True, path.name)  # --blank too
    # one the tokenizer reads as nothing was an item error at every run (a verifying review)
    item = {"text": "我今天很[MASK]兴。", "answers": ["高"], "candidates": ["高", "\u200b"]}
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"candidate '\\u200b' has no character the model"):
        check_scorable(tiny_masker, read_items(path), False, path.name)
