"""`tiankong eval` as a user runs it: the options it takes (--max-length, for a model with few
positions), the fill options --task check refuses rather than ignores, and its tables in a file
or a pipe, with every category name whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import besides_first_run_notes, run_cli
from tiny_bert import build_tiny_bert

# --engine onnx starts on the session's exports, without torch (conftest.onnx_exports)
pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("onnx_exports")]


def model_flags(model: Path) -> list[str]:
    return ["--model", str(model), "--engine", "onnx", "--threads", "1", "--index", "none"]


def write_lines(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def check_items(tmp_path: Path) -> Path:
    return write_lines(
        tmp_path / "check.jsonl",
        [
            {"text": "画龙点晴", "correct": "画龙点睛", "category": "modern_error"},
            {"text": "白日依山尽", "correct": "白日依山尽", "category": "modern_clean"},
        ],
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--blank"], "--blank applies"),
        (["--compare", "onnx:int8"], "--compare applies"),
        (["--compare-index"], "--compare-index applies"),
        (["--order", "confident_first"], "--order applies"),
        (["--beam-width", "3", "--length-alpha", "0.5"], "--beam-width and --length-alpha apply"),
    ],
)
def test_check_task_refuses_the_fill_options(
    tiny_model_dir: Path, check_items: Path, flags: list[str], named: str
) -> None:
    """They were ignored: the check ran as if they had not been given, exit 0."""
    done = run_cli(
        "eval", "--task", "check", str(check_items), *flags, *model_flags(tiny_model_dir)
    )
    assert done.returncode == 2, done.stdout
    [line] = besides_first_run_notes(done.stderr)
    assert line.startswith(f"error: {named} only to --task fill (--task check takes"), line


def test_check_report_in_a_pipe_keeps_category_names_whole(
    tiny_model_dir: Path, check_items: Path
) -> None:
    """Cut to 80 columns, both categories read 'modern…'."""
    done = run_cli("eval", "--task", "check", str(check_items), *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    assert "modern_error" in done.stdout and "modern_clean" in done.stdout
    assert "false alarms" in done.stdout and "…" not in done.stdout


def test_check_report_json_holds_every_sentence_with_its_fixes(
    tiny_model_dir: Path, check_items: Path, tmp_path: Path
) -> None:
    """The --json report held the totals only: no figure could be recomputed, no two runs
    compared sentence by sentence (a review)."""
    out = tmp_path / "report.json"
    flags = model_flags(tiny_model_dir)
    done = run_cli("eval", "--task", "check", str(check_items), *flags, "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    items = report["items"]
    assert [(item["line"], item["text"], item["correct"]) for item in items] == [
        (1, "画龙点晴", "画龙点睛"),
        (2, "白日依山尽", "白日依山尽"),
    ]
    for item in items:  # each sentence's fixes make its corrected text
        text = list(item["text"])
        for edit in item["edits"]:
            assert text[edit["start"]] == edit["original"]
            text[edit["start"]] = edit["suggestion"]
        assert "".join(text) == item["corrected"]
    corrected = sum(i["corrected"] == i["correct"] != i["text"] for i in items)
    assert report["overall"]["corrected"] == corrected


def test_a_check_item_with_nothing_the_model_checks_is_refused(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """ "hello world" was counted as a clean pass: 0.0% of 1 false alarms (a review)."""
    items = write_lines(
        tmp_path / "latin.jsonl",
        [
            {"text": "画龙点晴", "correct": "画龙点睛"},
            {"text": "hello world", "correct": "hello world"},
        ],
    )
    done = run_cli("eval", "--task", "check", str(items), *model_flags(tiny_model_dir))
    assert done.returncode == 2
    [line] = besides_first_run_notes(done.stderr)
    assert line == (
        "error: Line 2 of 'latin.jsonl': the model checks none of its characters (no Chinese "
        "character it reads), so the item tests nothing; leave it out."
    )


def test_a_second_engine_that_does_not_load_is_named_as_compare(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """ "fp16 needs a CUDA GPU" came without the --compare it belonged to (a review)."""
    items = write_lines(tmp_path / "c.jsonl", [{"text": "画龙点[MASK]", "answers": ["睛"]}])
    done = run_cli("eval", str(items), *model_flags(tiny_model_dir), "--compare", "torch:fp16")
    assert done.returncode == 2
    assert besides_first_run_notes(done.stderr)[-1] == (
        "error: --compare torch:fp16: fp16 needs a CUDA GPU; on the CPU use fp32 or int8."
    )


def test_fill_tables_in_a_pipe_keep_category_names_whole(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    items = write_lines(
        tmp_path / "cloze.jsonl",
        [
            {"text": "画龙点[MASK]", "answers": ["睛"], "category": "a_rather_long_category_one"},
            {"text": "守株待[MASK]", "answers": ["兔"], "category": "a_rather_long_category_two"},
        ],
    )
    done = run_cli("eval", str(items), *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    assert "a_rather_long_category_one" in done.stdout and "…" not in done.stdout


def test_eval_takes_max_length_for_a_model_with_few_positions(tmp_path: Path) -> None:
    """The refusal said "use --max-length 16 or less", and eval had no --max-length (nor read
    TIANKONG_MAX_LENGTH)."""
    model = build_tiny_bert(tmp_path / "short", positions=16)
    items = write_lines(tmp_path / "cloze.jsonl", [{"text": "画龙点[MASK]", "answers": ["睛"]}])
    # fp32: the INT8 export's guard sentences are longer than 16 positions (reported apart)
    flags = [*model_flags(model), "--precision", "fp32", "--onnx-cache-dir", str(tmp_path / "c")]
    refused = run_cli("eval", str(items), *flags)
    assert refused.returncode == 2 and "pass --max-length 16 (or less)" in refused.stderr
    from_env = run_cli("eval", str(items), *flags, env={"TIANKONG_MAX_LENGTH": "20"})
    assert from_env.returncode == 2 and "--max-length 20 is more than" in from_env.stderr
    done = run_cli("eval", str(items), *flags, "--max-length", "16")
    assert done.returncode == 0, done.stderr
    assert "overall" in done.stdout


def test_length_alpha_with_no_blank_to_rank_is_refused(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """It was accepted and did nothing (the report's title named no alpha); predict warns."""
    items = write_lines(tmp_path / "c.jsonl", [{"text": "画龙点[MASK]", "answers": ["睛"]}])
    done = run_cli("eval", str(items), "--length-alpha", "1.5", *model_flags(tiny_model_dir))
    assert done.returncode == 2
    assert "--length-alpha ranks the fills of a [BLANK], and no item of c.jsonl has one" in (
        done.stderr
    )
    blanks = write_lines(tmp_path / "b.jsonl", [{"text": "画龙点[BLANK]", "answers": ["睛"]}])
    for args in ([str(items), "--blank"], [str(blanks)]):
        ran = run_cli("eval", *args, "--length-alpha", "1.5", *model_flags(tiny_model_dir))
        assert ran.returncode == 0, ran.stderr


def test_blank_on_masks_apart_is_refused_with_the_line(tmp_path: Path) -> None:
    """--blank made two [BLANK]s of two masks apart, scored wrong at every run, exit 0."""
    items = write_lines(
        tmp_path / "c.jsonl",
        [
            {"text": "画龙点[MASK]", "answers": ["睛"]},
            {"text": "今[MASK]天气很[MASK]。", "answers": ["天好"]},
        ],
    )
    done = run_cli("eval", str(items), "--blank", "--model", str(tmp_path / "never-loaded"))
    assert done.returncode == 2
    assert "--blank: c.jsonl line 2: its masks are not one run" in done.stderr


def test_a_refusal_offers_blank_only_where_it_would_be_taken(tmp_path: Path) -> None:
    """For a file of choice items it said "add --blank", which is then refused."""
    choice = [{"text": "画龙点[MASK]", "answers": ["睛"], "candidates": ["睛", "晴"]}]
    items = write_lines(tmp_path / "c.jsonl", choice)
    for args in (["--beam-width", "3"], ["--length-alpha", "0.3"]):
        done = run_cli("eval", str(items), *args, "--model", str(tmp_path / "never-loaded"))
        assert done.returncode == 2 and "; leave it out." in done.stderr
        assert "add --blank" not in done.stderr


@pytest.mark.parametrize(
    ("lines", "args", "said"),
    [
        # a lone [MASK] reads neither: each was accepted and did nothing (a review)
        ([{"text": "画龙点[MASK]", "answers": ["睛"]}], ["--order", "confident_first"], "--order"),
        ([{"text": "画龙点[MASK]", "answers": ["睛"]}], ["--beam-width", "2"], "--beam-width"),
        (
            [{"text": "画龙点[MASK]", "answers": ["睛"], "candidates": ["睛", "晴"]}],
            ["--blank"],
            "--blank turns an item's masks",
        ),
    ],
)
def test_a_decoding_option_no_item_reads_is_refused(
    tiny_model_dir: Path, tmp_path: Path, lines: list[dict[str, object]], args: list[str], said: str
) -> None:
    items = write_lines(tmp_path / "c.jsonl", lines)
    done = run_cli("eval", str(items), *args, *model_flags(tiny_model_dir))
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    joint = write_lines(tmp_path / "j.jsonl", [{"text": "画[MASK][MASK]睛", "answers": ["龙点"]}])
    if "--blank" not in args:  # two masks are filled jointly: the option is read
        ran = run_cli("eval", str(joint), *args, *model_flags(tiny_model_dir))
        assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("text", ["春眠不觉[MASK]，处处闻啼[BLANK]。", "画[BLANK]点[BLANK]"])
def test_an_item_whose_blanks_break_the_rule_is_refused_with_its_line(
    tmp_path: Path, text: str
) -> None:
    """It was scored wrong at every run, exit 0, where the README says it is refused."""
    items = write_lines(
        tmp_path / "c.jsonl",
        [{"text": "画龙点[MASK]", "answers": ["睛"]}, {"text": text, "answers": ["晓鸟"]}],
    )
    done = run_cli("eval", str(items), "--model", str(tmp_path / "never-loaded"))
    assert done.returncode == 2
    assert "c.jsonl line 2: Use exactly one [BLANK] per text" in done.stderr


@pytest.mark.parametrize(
    ("compared", "flag"), [("onnx:fp64", "--precision"), ("bogus:fp32", "--engine")]
)
def test_a_bad_compare_is_named_as_typed_before_any_model_loads(
    tmp_path: Path, compared: str, flag: str
) -> None:
    """It said "--precision: unknown value 'fp64'", a flag the user never gave, after the
    first model had loaded (a review). The model named does not exist: its load never ran."""
    items = write_lines(tmp_path / "c.jsonl", [{"text": "画龙点[MASK]", "answers": ["睛"]}])
    done = run_cli("eval", str(items), "--compare", compared, "--model", str(tmp_path / "none"))
    assert done.returncode == 2, done.stderr
    [line] = besides_first_run_notes(done.stderr)
    assert line.startswith(f"error: --compare {compared}: {flag}: unknown value")
