"""`tiankong check FILE -o OUT` across runs: a rerun is the same run (the model, the method, the
text's field and the input's format: ``resume.run_key``, as fill's) or it is refused; a
checkpoint keyed the earlier way still resumes, and moves to the new key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiankong.errors import BadDataFileError
from tiankong.offline.check_file import earlier_check_key, run_check_file
from tiankong.offline.resume import FillJob
from tiankong.tasks.check import Proofreader

RECORDS = [
    {"text": "画龙点晴", "other": "守株待免"},
    {"text": "白日依山尽", "other": "画蛇添足"},
] * 3


@pytest.fixture(scope="module")
def checker(tiny_masker: Any) -> Proofreader:
    return Proofreader(tiny_masker)


def write_jsonl(path: Path) -> Path:
    lines = [json.dumps(record, ensure_ascii=False) for record in RECORDS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def interrupt_at_once(done: int, checked: int, failed: int) -> None:
    raise KeyboardInterrupt


def interrupted_run(checker: Proofreader, tmp_path: Path) -> FillJob:
    """A check of RECORDS into out.jsonl, stopped after its first checkpoint."""
    job = FillJob(write_jsonl(tmp_path / "in.jsonl"), tmp_path / "out.jsonl", chunk_size=2)
    with pytest.raises(KeyboardInterrupt):
        run_check_file(job, checker, interrupt_at_once)
    return job


def test_a_rerun_with_another_field_is_refused_not_mixed_in(
    checker: Proofreader, tmp_path: Path
) -> None:
    """The second --field's answers were appended to the first's rows, without a word."""
    job = interrupted_run(checker, tmp_path)
    source = job.input
    other = FillJob(source, job.output, text_field="other", chunk_size=2)
    # its records' text field would be overwritten by the result's: refused before the key
    with pytest.raises(BadDataFileError, match="field 'text' has the name of a result field"):
        run_check_file(other, checker)
    as_txt = FillJob(source, job.output, input_format="txt", chunk_size=2)
    with pytest.raises(BadDataFileError, match="another model or other options"):
        run_check_file(as_txt, checker)
    assert run_check_file(job, checker).lines_done == len(RECORDS)  # the same run resumes
    rows = [json.loads(line) for line in job.output.read_text(encoding="utf-8").splitlines()]
    assert [row["text"] for row in rows] == [record["text"] for record in RECORDS]


def test_a_checkpoint_keyed_the_earlier_way_resumes_and_moves_to_the_new_key(
    tiny_masker: Any, tmp_path: Path
) -> None:
    from tiankong.tasks.check import CheckMethod

    # a method that answers as the code of the earlier key did (no earlier key for another)
    as_then = CheckMethod(  # then's default
        idiom_confusable_ratio=1.0, idiom_model_ratio=1.0, index_unsuspected_context=0
    )
    checker = Proofreader(tiny_masker, as_then)
    job = interrupted_run(checker, tmp_path)
    source = job.input
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    earlier = earlier_check_key(checker.masker.settings, checker.method)
    assert earlier
    saved["run_key"] = earlier
    job.checkpoint.write_text(json.dumps(saved), encoding="utf-8")
    assert run_check_file(job, checker).lines_done == len(RECORDS)
    moved = json.loads(job.checkpoint.read_text(encoding="utf-8"))["run_key"]
    assert moved not in ("", earlier)
    # moved to the new key: the same command again finds the run done, another format is refused
    assert run_check_file(job, checker).lines_done == len(RECORDS)
    as_txt = FillJob(source, job.output, input_format="txt", chunk_size=2)
    with pytest.raises(BadDataFileError, match="another model or other options"):
        run_check_file(as_txt, checker)


def test_the_earlier_key_is_the_one_the_earlier_code_wrote() -> None:
    """17b368e keyed a check run by the settings and a method without index_edge_marks (and
    without idiom_confusable_ratio, whose rule was then idiom_model_ratio's): a key it wrote
    (this one, computed by that code) resumes a method that answers as that code did, where a
    key from today's method never did; today's default answers otherwise, so it is no key."""
    from tiankong.config import Settings
    from tiankong.tasks.check import CheckMethod

    settings = Settings(engine="onnx", precision="int8", threads=1)
    as_then = CheckMethod(  # then's default
        idiom_confusable_ratio=1.0, idiom_model_ratio=1.0, index_unsuspected_context=0
    )
    assert earlier_check_key(settings, as_then) == "f42bdbb89c71d0c1"
    assert earlier_check_key(
        settings,
        CheckMethod(idiom_confusable_ratio=2.0, idiom_model_ratio=1.0, index_unsuspected_context=0),
    ) == ("f42bdbb89c71d0c1")
    # the unsuspected character's rule answers otherwise than that code
    unsuspected = CheckMethod(idiom_confusable_ratio=1.0, idiom_model_ratio=1.0)
    assert earlier_check_key(settings, unsuspected) == ""
    assert earlier_check_key(settings, CheckMethod()) == ""  # 0.1: fixes that code didn't make
    assert earlier_check_key(settings, CheckMethod(index_edge_marks=False)) == ""


def test_a_check_is_not_resumed_on_other_weights(checker: Proofreader, tmp_path: Path) -> None:
    """The checkpoint records the served model's weights, as fill's does."""
    job = interrupted_run(checker, tmp_path)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    assert len(saved["weights"]) == 16
    job.checkpoint.write_text(json.dumps({**saved, "weights": "f" * 16}), encoding="utf-8")
    with pytest.raises(BadDataFileError, match="was started on other weights of the model"):
        run_check_file(job, checker)


def test_a_lone_surrogate_in_another_field_is_written_not_a_crash(
    checker: Proofreader, tmp_path: Path
) -> None:
    """A field beside the text holding a lone surrogate (a JSON escape Python reads as one)
    stopped the check with a UnicodeEncodeError when its line was written; it is kept,
    escaped as it came."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "画龙点晴", "note": "a\\ud800"}\n', encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    assert run_check_file(job, checker).lines_done == 1
    [row] = [json.loads(line) for line in job.output.read_text(encoding="utf-8").splitlines()]
    assert row["note"] == "a\ud800" and row["text"] == "画龙点晴"


def test_a_check_is_not_resumed_on_another_engine_or_precision(
    checker: Proofreader, tmp_path: Path
) -> None:
    """As fill's: --precision auto chooses by the threads, and a resume with other --threads
    proofread the rest on bf16 after an fp32 start, in one output (a review). The checkpoint
    records what served."""
    job = interrupted_run(checker, tmp_path)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    engine = checker.masker.engine
    assert (saved["engine"], saved["precision"]) == (engine.name, engine.precision)
    job.checkpoint.write_text(
        json.dumps({**saved, "engine": "openvino", "precision": "bf16"}), encoding="utf-8"
    )
    with pytest.raises(
        BadDataFileError, match=r"was started on bf16 \(openvino\) and this run"
    ) as refused:
        run_check_file(job, checker)
    # its advice is what check can do: its run key holds --engine and --precision as typed, so
    # "pass --engine openvino --precision bf16" was refused in turn (a review)
    assert "change); resume it with the first run's --threads, or pass --restart" in str(
        refused.value
    )


def test_a_check_onto_a_fills_output_names_the_command_that_wrote_it(
    checker: Proofreader, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`check -o` onto fill's output (and back) was refused as "another model or other
    options", naming 28 options the user never gave (--top-k none (the run's: 5), ...), and
    "run the same command to resume it" was the command refused (a review)."""
    from tiankong.config import Settings
    from tiankong.core.options import PredictOptions
    from tiankong.offline.fill import run_fill

    source = write_jsonl(tmp_path / "in.jsonl")
    filled = FillJob(source, tmp_path / "shared.jsonl", chunk_size=2)
    settings = Settings(engine="fake", index="none", model=str(tiny_model_dir))
    with pytest.raises(KeyboardInterrupt):
        run_fill(filled, settings, PredictOptions(), interrupt_at_once)
    with pytest.raises(BadDataFileError) as refused:
        run_check_file(filled, checker)
    assert refused.value.message == (
        "'shared.jsonl' is the output of `tiankong fill`; name another output for `tiankong "
        "check`, or pass --restart to start over."
    )
    (tmp_path / "other").mkdir()
    checked = interrupted_run(checker, tmp_path / "other")
    with pytest.raises(BadDataFileError, match="is the output of `tiankong check`; name another"):
        run_fill(checked, settings, PredictOptions())


def test_a_text_the_model_gives_no_numbers_for_is_an_error_record(
    tiny_masker: Any, tmp_path: Path
) -> None:
    """A model broken on some texts (NaN scores for rows holding 炸) stopped the whole check -o
    at that text, and a resume stopped there again (a verifying review); now that line alone
    is an error record."""
    from tiankong import FillMasker
    from tiankong.engines.fake import FakeEngine

    vocab = tiny_masker.encoder.vocab
    masker = FillMasker(
        tiny_masker.model,
        tiny_masker.encoder,
        FakeEngine(len(vocab), nan_token_id=vocab["炸"]),
        tiny_masker.settings,
    )
    source = tmp_path / "in.txt"
    source.write_text("我门今天去学校。\n炸鸡很好吃。\n他做事半涂而废。\n", encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    state = run_check_file(job, Proofreader(masker))
    assert (state.lines_done, state.failed) == (3, 1)
    [error] = [json.loads(line) for line in job.error_file.read_text("utf-8").splitlines()]
    assert error["line"] == 2 and error["code"] == "model_unavailable"
    assert len(job.output.read_text("utf-8").splitlines()) == 2
