"""The CLI: output shapes and exit codes (0 ok, 2 bad input, 3 model unavailable)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import besides_first_run_notes, run_cli

# The tests run the tiny model on ONNX Runtime (--engine onnx), which starts in a fraction of
# the time torch and transformers take to import: the CLI's shapes and exit codes are the
# subject here, and test_predict_table_names_the_model runs the torch engine through the CLI.
# starts processes: the CLI, a server, Ray or export workers; each finds the tiny model's ONNX
# exports made (conftest.onnx_exports), so `--engine onnx` starts without torch
pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("onnx_exports")]


def test_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("tiankong 0.")


@pytest.mark.parametrize("command", ["predict", "train", "models"])
def test_help_everywhere(command: str) -> None:
    done = run_cli(command, "--help")
    assert done.returncode == 0 and "Usage" in done.stdout


def test_predict_json(tiny_model_dir: Path) -> None:
    done = run_cli(
        "predict",
        "他[MASK]天去公园[MASK]步。",
        "--model",
        str(tiny_model_dir),
        "--json",
        "--top-k",
        "3",
        "--engine",
        "onnx",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["predictions"]) == 3 and len(data["masks"]) == 2
    assert {"token", "score"} <= set(data["predictions"][0])
    assert data["model"] == tiny_model_dir.name


def test_predict_table_names_the_model(tiny_model_dir: Path) -> None:
    done = run_cli(
        "predict", "处处闻啼[MASK]。", "--model", str(tiny_model_dir), "--engine", "torch"
    )
    assert done.returncode == 0, done.stderr
    assert f"model: {tiny_model_dir.name}" in done.stdout
    assert "[MASK] 1" in done.stdout and "probability" in done.stdout


def test_predict_stdin_one_result_per_line(tiny_model_dir: Path) -> None:
    done = run_cli(
        "predict",
        "--model",
        str(tiny_model_dir),
        "--json",
        "--engine",
        "onnx",
        stdin="处处闻啼[MASK]。\n\n画龙点[MASK]\n没有空\n",
    )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 3
    assert "masks" in json.loads(lines[0]) and "masks" in json.loads(lines[1])
    assert json.loads(lines[2])["error"]["code"] == "no_mask"
    assert done.returncode == 2


def test_predict_stdin_as_text_errors_on_stderr_and_notes_and_long_lines_whole(
    tiny_model_dir: Path,
) -> None:
    """Without --json a bad line's sentence goes to stderr (it went to stdout); a warning the
    JSON carries is shown (it was dropped); a long answer stays one line in a file (it was cut
    at 80 columns)."""
    long_text = "春眠不觉晓，" * 20 + "处处闻啼[MASK]。"
    done = run_cli(
        "predict", "--model", str(tiny_model_dir), "--engine", "onnx",
        stdin=f"没有空\nhello [MASK]\n{long_text}\n",
    )  # fmt: skip
    assert done.returncode == 2
    # the line it was, of many (the message alone did not say)
    assert "error: line 1 (没有空): The text has no [MASK]" in done.stderr
    assert "error" not in done.stdout
    assert "note: The text has no Chinese (Han) character" in done.stdout
    assert any(line.startswith("春眠不觉晓，" * 20) for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("text", "code"),
    [("没有空", "no [MASK]"), ("   ", "empty"), ("[MASK]" * 17, "limit is 16")],
)
def test_bad_input_exits_2_with_one_sentence(tiny_model_dir: Path, text: str, code: str) -> None:
    done = run_cli("predict", text, "--model", str(tiny_model_dir), "--engine", "onnx")
    assert done.returncode == 2
    assert code in done.stderr
    assert "Traceback" not in done.stderr and len(besides_first_run_notes(done.stderr)) == 1


def test_top_k_out_of_range_exits_2(tiny_model_dir: Path) -> None:
    done = run_cli("predict", "画龙点[MASK]", "--model", str(tiny_model_dir), "--top-k", "51")
    assert done.returncode == 2 and "top_k must be an integer from 1 to 50" in done.stderr


def test_hub_model_offline_exits_3(tmp_path: Path) -> None:
    done = run_cli(
        "predict",
        "画龙点[MASK]",
        "--model",
        "google-bert/bert-base-chinese",
        env={"HF_HOME": str(tmp_path)},
    )
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert len(besides_first_run_notes(done.stderr)) == 1
    assert "google-bert/bert-base-chinese" in done.stderr and "offline" in done.stderr


def test_bad_model_path_exits_3(tmp_path: Path) -> None:
    done = run_cli("predict", "画龙点[MASK]", "--model", str(tmp_path / "missing"))
    assert done.returncode == 3 and "does not exist" in done.stderr


@pytest.mark.parametrize(
    ("vocab", "said"),
    [
        # a GBK-saved vocabulary was a UnicodeDecodeError traceback, exit 1 (a review)
        ("[PAD]\n[UNK]\n\u6625\n".encode("gbk") + b"\xff\xfe\n", "can't be read as UTF-8"),
        (None, "has no tokenizer: neither a tokenizer.json nor a vocab.txt"),
    ],
)
def test_a_model_folder_with_a_bad_vocabulary_exits_3(
    tiny_model_dir: Path, tmp_path: Path, vocab: bytes | None, said: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy2(tiny_model_dir / name, folder / name)
    if vocab is not None:
        (folder / "vocab.txt").write_bytes(vocab)
    done = run_cli("predict", "画龙点[MASK]", "--model", str(folder))
    assert done.returncode == 3, done.stderr
    assert said in done.stderr and str(folder) in done.stderr and "Traceback" not in done.stderr
    assert len(besides_first_run_notes(done.stderr)) == 1


def test_a_file_given_as_the_text_is_told_how_to_fill_it(tmp_path: Path) -> None:
    """It said "The text has no [MASK]" of a file full of them; check said it is a file."""
    lines = tmp_path / "t.txt"
    lines.write_text("今天[MASK]\n", encoding="utf-8")
    done = run_cli("predict", "t.txt", "--model", str(tmp_path / "never-loaded"), cwd=tmp_path)
    assert done.returncode == 2
    assert besides_first_run_notes(done.stderr) == [
        "error: 't.txt' is a file; fill its lines with tiankong fill t.txt -o OUT.jsonl, or give "
        "them on stdin: tiankong predict < t.txt."
    ]
    # a JSONL's lines on stdin were filled inside their braces; a name with a space is quoted
    (tmp_path / "my g.jsonl").write_text('{"text": "今天[MASK]"}\n', encoding="utf-8")
    done = run_cli("predict", "my g.jsonl", "--model", str(tmp_path / "never"), cwd=tmp_path)
    assert besides_first_run_notes(done.stderr) == [
        "error: 'my g.jsonl' is a file; fill its records with tiankong fill 'my g.jsonl' -o "
        "OUT.jsonl."
    ]


def test_unknown_option_is_a_usage_error() -> None:
    done = run_cli("predict", "画龙点[MASK]", "--nope")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_predict_decoding_options(tiny_model_dir: Path) -> None:
    base = ["predict", "--model", str(tiny_model_dir), "--engine", "onnx", "--json"]
    whole = run_cli(*base, "手机没电了，赶紧去[MASK][MASK]。", "--whole-word", "--top-k", "3")
    assert whole.returncode == 0, whole.stderr
    sequences = json.loads(whole.stdout)["sequences"]
    assert sequences and all(len(s["fill"]) == 2 for s in sequences)
    ranked = run_cli(*base, "赶紧去[MASK]。", "--candidates", "充电，吃饭、睡觉")
    assert ranked.returncode == 0, ranked.stderr
    options = [c["option"] for c in json.loads(ranked.stdout)["candidates"]]
    assert sorted(options) == ["充电", "吃饭", "睡觉"]
    constrained = run_cli(*base, "处处闻啼[MASK]。", "--allowed", "鸟,花")
    tokens = {c["token"] for c in json.loads(constrained.stdout)["masks"][0]}
    assert tokens <= {"鸟", "花"}
    bad = run_cli(*base, "处处闻啼[MASK]。", "--preset", "nope")
    assert bad.returncode == 2 and "Unknown constraints preset" in bad.stderr
    for flag in ("--allowed", "--exclude"):  # --exclude "" was taken and did nothing
        empty = run_cli(*base, "处处闻啼[MASK]。", flag, " ,")
        assert empty.returncode == 2 and f"error: {flag} is empty; give the" in empty.stderr


def table_rows(output: str, title: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the rich table printed under ``title``."""
    lines = output[output.index(title) :].splitlines()
    header = [cell.strip() for cell in lines[2].strip("┃").split("┃")]
    rows = []
    for line in lines[4:]:
        if line.startswith("└"):
            break
        rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return header, rows


def test_tables_show_the_score_that_ranks(tiny_model_dir: Path) -> None:
    """[BLANK] fills and candidates differ in length, so they are not ranked by the joint
    probability: [BLANK] fills by rank_score, options per token; that column is shown,
    labelled, in order, beside the others."""
    base = ["predict", "--model", str(tiny_model_dir), "--engine", "onnx"]
    blank = [*base, "手机没电了，赶紧去[BLANK]。", "--max-blank-length", "3"]
    shown = run_cli(*blank, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    header, rows = table_rows(shown.stdout, "[BLANK] fills, ranked by joint^(1/length^0.5)")
    assert header == ["#", "fill", "sentence", "rank", "per char", "joint"]
    sequences = json.loads(run_cli(*blank, "--json").stdout)["sequences"]
    assert [row[1] for row in rows] == [s["fill"] for s in sequences] and len(rows) > 1
    rank = [float(row[3]) for row in rows]
    assert rank == sorted(rank, reverse=True)
    assert rank == pytest.approx([s["rank_score"] for s in sequences], rel=1e-3)
    for column, field in ((4, "normalised"), (5, "score")):
        assert [float(row[column]) for row in rows] == pytest.approx(
            [s[field] for s in sequences], rel=1e-3
        )

    options = [*base, "赶紧去[MASK]。", "--candidates", "充电,吃,去😀,睡觉"]
    shown = run_cli(*options, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    header, rows = table_rows(shown.stdout, "candidates, ranked by score")
    assert header == ["#", "option", "score", "model", "model joint"]
    ranked = json.loads(run_cli(*options, "--json").stdout)["candidates"]
    for column, field in ((2, "score"), (3, "model_score"), (4, "joint")):
        shown_column = [float(row[column]) for row in rows]
        assert shown_column == pytest.approx([c[field] or c["score"] for c in ranked], rel=1e-3)
    known = [float(row[2]) for row in rows[:-1]]
    assert known == sorted(known, reverse=True)
    assert rows[-1][1] == "去😀 (unknown, last)"  # an unknown character ranks after the rest


def test_choice_words_are_read_in_any_case(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The settings' flags read --precision FP32 in any case, and export --precision INT8, eval
    --task Fill, fill --input-format TXT and predict --order Left_To_Right were refused (a
    review): one rule for every command."""
    flags = ["--model", str(tiny_model_dir), "--engine", "onnx", "--index", "none"]
    done = run_cli(
        "predict", "画龙点[MASK][MASK]", "--whole-word", "--order", "Left_To_Right", *flags
    )
    assert done.returncode == 0, done.stderr
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "画龙点[MASK]", "answers": ["睛"]}\n', encoding="utf-8")
    assert run_cli("eval", str(items), "--task", "FILL", *flags).returncode == 0
    lines = tmp_path / "in.txt"
    lines.write_text("画龙点[MASK]\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = run_cli("fill", str(lines), "-o", str(out), "--input-format", "TXT", *flags)
    assert done.returncode == 0, done.stderr
    # the settings' --device and eval's --compare too (a verifying review)
    done = run_cli("predict", "画龙点[MASK]", "--device", "CPU", *flags)
    assert done.returncode == 0, done.stderr
    # --index's words as well: --index NONE was looked for as a folder (exit 3, no index at NONE)
    done = run_cli("predict", "画龙点[MASK]", *flags[:-1], "NONE")
    assert done.returncode == 0, done.stderr
    compared = run_cli("eval", str(items), "--compare", "ONNX:FP32", *flags)
    assert compared.returncode == 0, compared.stderr


def test_a_setting_with_no_flag_is_read_from_its_env_twin(tiny_model_dir: Path) -> None:
    """TIANKONG_MAX_MASKS=0 and TIANKONG_MAX_TOP_K=0 were taken by `tiankong serve` and did
    nothing, where Ray reads and checks them (a review): every command reads them now."""
    flags = ["--model", str(tiny_model_dir), "--engine", "onnx", "--index", "none"]
    one = run_cli("predict", "[MASK]龙点[MASK]", *flags, env={"TIANKONG_MAX_MASKS": "1"})
    assert one.returncode == 2 and "the limit is 1" in one.stderr
    zero = run_cli("predict", "画龙点[MASK]", *flags, env={"TIANKONG_MAX_MASKS": "0"})
    assert zero.returncode == 2
    assert besides_first_run_notes(zero.stderr) == ["error: max_masks must be 1 or more; got 0."]
    bad = run_cli("serve", *flags, "--port", "0", env={"TIANKONG_MAX_TOP_K": "many"})
    assert bad.returncode == 2 and "max_top_k: 'many' is not valid" in bad.stderr
    # predict's --top-k defaults to the setting (its fixed 5 hid TIANKONG_DEFAULT_TOP_K, and
    # with TIANKONG_MAX_TOP_K=3 refused a command that gave no -k: a verifying review)
    env = {"TIANKONG_DEFAULT_TOP_K": "2", "TIANKONG_MAX_TOP_K": "3"}
    two = run_cli("predict", "--json", "画龙点[MASK]", *flags, env=env)
    assert two.returncode == 0, two.stderr
    assert len(json.loads(two.stdout)["masks"][0]) == 2
    # reading them read the secrets' too: a blank TIANKONG_API_KEYS refused a predict, which
    # reads no key (serve still refuses it)
    keyless = run_cli("predict", "画龙点[MASK]", *flags, env={"TIANKONG_API_KEYS": ""})
    assert keyless.returncode == 0, keyless.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("predict", "我去[MASK][MASK]吧", "--whole-word", "--beam-width", "0"), "--beam-width"),
        (("predict", "我去[BLANK]吧", "--max-blank-length", "5"), "--max-blank-length"),
        (("eval", "ITEMS", "--length-alpha", "3"), "--length-alpha"),
        (("eval", "ITEMS", "--beam-width", "65"), "--beam-width"),
    ],
)
def test_an_out_of_range_option_is_named_by_its_flag(
    tiny_model_dir: Path, tmp_path: Path, args: tuple[str, ...], flag: str
) -> None:
    """The library's sentence named the field (beam_width must be from 1 to 64.), not the flag
    the user typed (a review)."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "画龙点[MASK]", "answers": ["睛"]}\n', encoding="utf-8")
    args = tuple(str(items) if arg == "ITEMS" else arg for arg in args)
    done = run_cli(*args, "--model", str(tiny_model_dir), "--engine", "onnx")
    assert done.returncode == 2
    assert f"Invalid value for '{flag}'" in done.stderr and "_" not in flag, done.stderr


def test_candidates_with_whole_word_names_the_flags(tiny_model_dir: Path) -> None:
    done = run_cli(
        *("predict", "画龙点[MASK]", "--candidates", "睛,晴", "--whole-word"),
        *("--model", str(tiny_model_dir), "--engine", "onnx"),
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --candidates ranks options for one blank; drop --whole-word."
    )
