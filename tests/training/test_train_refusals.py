"""`tiankong train` refuses what it can't do, in one sentence, before the work: each case here
was a traceback, "Aborted.", a silent fallback or a silently ignored option."""

from __future__ import annotations

import json
import lzma
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tiankong.errors import BadDataFileError, BadOptionError, ModelUnavailableError
from tiankong.training.train import TrainOptions, train

LINES = ["春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。", "床前明月光，疑是地上霜。"] * 10
CLOZE = "text,label\n手机没电了，赶紧去[MASK][MASK]。,充电\n处处闻啼[MASK]。,鸟\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "t.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    with lzma.open(folder / "t.txt.xz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(LINES * 20) + "\n")
    (folder / "c.csv").write_text(CLOZE, encoding="utf-8")
    return folder


def options(out: Path, data: tuple[str, ...], **changes: object) -> TrainOptions:
    base: dict[str, object] = dict(
        out=out, data=data, config="tiny", max_steps=2, batch_size=4, threads=1, device="cpu"
    )
    if not all(spec.lower().split(":")[0].endswith(".csv") for spec in data):
        base["seq_len"] = 32
    base.update(changes)
    return TrainOptions(**base)  # type: ignore[arg-type]


def tuning(out: Path, data: tuple[str, ...], tiny_model_dir: Path, **changes: object):
    return options(out, data, config=None, init=str(tiny_model_dir), **changes)


def test_out_folder_holding_other_files_is_refused(files: Path, tmp_path: Path) -> None:
    """It was written over (its config.json replaced); an earlier run's folder still is."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    with pytest.raises(BadOptionError, match=r"is not empty and holds no tiankong training run"):
        train(options(mine, (str(files / "t.txt"),)))
    assert (mine / "config.json").read_text() == "{}"
    train(options(tmp_path / "run", (str(files / "t.txt"),)))
    assert train(options(tmp_path / "run", (str(files / "t.txt"),))).steps == 2  # again


def test_only_tiankongs_own_run_state_makes_an_out_a_run(files: Path, tmp_path: Path) -> None:
    """A project folder with a checkpoint/ of its own was taken for a run and its checkpoint
    deleted by the first save; one with a training.json of another tool was written over; so
    was the installed package's bundled model (a review)."""
    from typer.testing import CliRunner

    from tiankong.cli import app
    from tiankong.core.models import BUNDLED_ROOT

    data = (str(files / "t.txt"),)
    project = tmp_path / "proj"
    (project / "checkpoint").mkdir(parents=True)
    (project / "checkpoint" / "epoch10.ckpt").write_text("w")
    (project / "README.md").write_text("n")
    flags = ["train", "--config", "tiny", "--seq-len", "32", "--max-steps", "2", "--data", data[0]]
    result = CliRunner().invoke(app, [*flags, "--out", str(project)])
    assert isinstance(result.exception, BadOptionError)  # exit 2 (errors.ERROR_TABLE)
    assert "its checkpoint/ is not one tiankong wrote" in result.exception.message
    (project / "README.md").unlink()  # a checkpoint/ alone is not tiankong's either
    with pytest.raises(BadOptionError, match=r"holds no tiankong training run"):
        train(options(project, data))
    with pytest.raises(BadDataFileError, match=r"is incomplete|not a checkpoint tiankong wrote"):
        train(options(project, data, resume=True))
    assert (project / "checkpoint" / "epoch10.ckpt").read_text() == "w"
    other = tmp_path / "other"
    other.mkdir()
    (other / "training.json").write_text('{"epochs": 3}')
    (other / "config.json").write_text("{}")
    with pytest.raises(BadOptionError, match=r"holds no tiankong training run"):
        train(options(other, data))
    assert (other / "config.json").read_text() == "{}"
    bundled = BUNDLED_ROOT / "tiankong-mini-zh"
    config = (bundled / "config.json").read_bytes()
    with pytest.raises(BadOptionError, match=r"is the installed package's bundled model"):
        train(options(bundled, data))
    assert (bundled / "config.json").read_bytes() == config
    assert not (bundled / ".tiankong-train.lock").exists()
    run = tmp_path / "run"  # a finished run's folder is still written over, and resumed
    train(options(run, data))
    assert train(options(run, data)).steps == 2
    assert train(options(run, data, max_steps=3, resume=True)).steps == 3


def test_a_damaged_xz_file_is_one_sentence(files: Path, tmp_path: Path) -> None:
    """A cut-off .txt.xz was "Aborted." (lzma's EOFError reached click); a .txt.xz that is not
    xz at all an LZMAError traceback; either was found only when the stream reached it."""
    whole = (files / "t.txt.xz").read_bytes()
    (files / "cut.txt.xz").write_bytes(whole[: len(whole) // 2])
    (files / "plain.txt.xz").write_text("\n".join(LINES), encoding="utf-8")
    with pytest.raises(BadDataFileError) as refused:
        train(options(tmp_path / "x", (str(files / "cut.txt.xz"),)))
    assert refused.value.message == (
        f"Training file '{files / 'cut.txt.xz'}' is a damaged or incomplete xz file."
    )
    with pytest.raises(BadDataFileError) as refused:  # it was called damaged too
        train(options(tmp_path / "x", (str(files / "plain.txt.xz"),)))
    assert refused.value.message == (
        f"Training file '{files / 'plain.txt.xz'}' is named .xz but isn't xz-compressed; if it "
        "is plain text, name it .txt (or compress it with xz)."
    )
    with pytest.raises(BadDataFileError, match=r"Held-out file .* damaged or incomplete xz"):
        train(
            options(tmp_path / "x", (str(files / "t.txt"),), heldout=(str(files / "cut.txt.xz"),))
        )
    # damage the stream inside, past the checks of its ends: found where it is read
    from tiankong.training.train_data import read_lines

    middle = bytearray(whole)
    middle[len(whole) // 2] ^= 0xFF
    (files / "inside.txt.xz").write_bytes(bytes(middle))
    with pytest.raises(BadDataFileError, match=r"damaged or incomplete xz file"):
        list(read_lines(files / "inside.txt.xz"))


def test_a_csv_row_longer_than_the_model_is_a_bad_row(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """A 600-character row crashed fine-tuning (a tensor of 602 positions against 512)."""
    long = files / "long.csv"
    long.write_text(CLOZE + "好" * 600 + "[MASK]。,好\n", encoding="utf-8")
    with pytest.raises(BadDataFileError) as refused:
        train(tuning(tmp_path / "x", (str(long),), tiny_model_dir))
    assert "has 1 bad row(s): line 4: the text is 604 tokens with [CLS] and [SEP], more " in (
        refused.value.message
    )
    assert "than the model's 512 positions" in refused.value.message
    summary = train(tuning(tmp_path / "y", (str(long),), tiny_model_dir, skip_bad_rows=True))
    assert summary.steps == 2 and summary.skipped_rows == 1


def test_heldout_files_are_checked_before_the_model(files: Path, tmp_path: Path) -> None:
    """A missing --heldout file was a FileNotFoundError and an empty one an IndexError, after
    the model had loaded; their messages said "Training file"."""
    (files / "empty.txt").write_text("\n\n", encoding="utf-8")
    data = (str(files / "t.txt"),)
    cases = {
        "missing.txt": f"Held-out file '{files / 'missing.txt'}' does not exist.",
        "empty.txt": f"Held-out file '{files / 'empty.txt'}' has no text lines.",
    }
    for name, words in cases.items():
        with pytest.raises(BadDataFileError) as refused:
            train(options(tmp_path / "x", data, heldout=(str(files / name),)))
        assert refused.value.message == words
    gbk = files / "gbk.txt"
    gbk.write_bytes("春眠不觉晓，处处闻啼鸟。\n".encode("gbk"))
    with pytest.raises(BadDataFileError, match=r"^Held-out file .* can't be read as UTF-8 text"):
        train(options(tmp_path / "x", data, heldout=(str(gbk),)))


def test_an_init_model_it_cannot_train_is_one_sentence(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """--seq-len past the model's positions was a RuntimeError in the first step; a folder whose
    config.json names no masked-LM class (model_type gpt2) a ValueError from transformers."""
    from transformers import AutoConfig, AutoTokenizer, BertForMaskedLM

    short = tmp_path / "short"  # a model of 16 positions
    config = AutoConfig.from_pretrained(tiny_model_dir, max_position_embeddings=16)
    BertForMaskedLM(config).save_pretrained(short)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(short)
    data = (str(files / "t.txt"),)
    with pytest.raises(BadOptionError) as refused:
        train(options(tmp_path / "x", data, config=None, init=str(short), seq_len=32))
    assert refused.value.message == (
        f"--seq-len 32 is more than the 16 positions of model '{short}'; give --seq-len 16 or less."
    )
    # a RoBERTa-style model's positions start after its padding id: 18 of them hold 16
    # tokens, and --seq-len 18 was an index error in the first step (a review's find)
    from transformers import RobertaConfig, RobertaForMaskedLM

    roberta = tmp_path / "roberta"
    fields = {k: getattr(config, k) for k in ("vocab_size", "hidden_size", "intermediate_size")}
    RobertaForMaskedLM(
        RobertaConfig(
            **fields,
            num_hidden_layers=1,
            num_attention_heads=config.num_attention_heads,
            max_position_embeddings=18,
            pad_token_id=1,
        )
    ).save_pretrained(roberta)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(roberta)
    with pytest.raises(BadOptionError) as refused:
        train(options(tmp_path / "x", data, config=None, init=str(roberta), seq_len=18))
    assert refused.value.message == (
        f"--seq-len 18 is more than the 16 positions of model '{roberta}'; give --seq-len 16 "
        "or less."
    )
    gpt2 = tmp_path / "gpt2"
    shutil.copytree(tiny_model_dir, gpt2)
    fields = json.loads((gpt2 / "config.json").read_text())
    fields.pop("architectures", None)
    (gpt2 / "config.json").write_text(json.dumps({**fields, "model_type": "gpt2"}))
    with pytest.raises(ModelUnavailableError, match=r"^Model '.*gpt2' \(gpt2\) can't be loaded"):
        train(options(tmp_path / "x", data, config=None, init=str(gpt2), seq_len=16))


def test_an_init_model_whose_weights_do_not_load_is_one_sentence(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """A weights file cut short (a SafetensorError) and weights of another shape than
    config.json says (a RuntimeError) were tracebacks, exit 1; `tiankong predict` already
    said them in one sentence, now the same one."""
    data = (str(files / "t.txt"),)
    cut = tmp_path / "cut"
    shutil.copytree(tiny_model_dir, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    wider = tmp_path / "wider"
    shutil.copytree(tiny_model_dir, wider)
    fields = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps({**fields, "hidden_size": 64}))
    for folder in (cut, wider):
        with pytest.raises(ModelUnavailableError) as refused:
            train(options(tmp_path / "x", data, config=None, init=str(folder), seq_len=16))
        assert refused.value.message.startswith(
            f"The model weights in '{folder}' could not be loaded for training ("
        )
        assert "truncated or corrupt, or not match its config.json" in refused.value.message


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"seq_len": 32}, "--seq-len"),
        ({"mask_rate": 0.3}, "--mask-rate"),
        ({"data_workers": 1}, "--data-workers"),
        ({"shuffle_buffer": 10}, "--shuffle-buffer"),
        ({"eval_lines": 10}, "--eval-lines"),
        ({"given": frozenset({"--seq-len"})}, "--seq-len"),  # typed, at its default value
        ({"masking": "word"}, "--masking"),
        ({"given": frozenset({"--masking"})}, "--masking"),  # --masking token was taken
    ],
)
def test_options_csv_fine_tuning_would_ignore_are_refused(
    files: Path, tmp_path: Path, tiny_model_dir: Path, changes: dict[str, object], flag: str
) -> None:
    with pytest.raises(BadOptionError, match=rf"^{flag} does not apply to this run: "):
        train(tuning(tmp_path / "x", (str(files / "c.csv"),), tiny_model_dir, **changes))


def test_options_a_text_run_would_ignore_are_refused(files: Path, tmp_path: Path) -> None:
    data = (str(files / "t.txt"),)
    with pytest.raises(BadOptionError, match=r"^--eval-every does not apply .* no --heldout"):
        train(options(tmp_path / "x", data, eval_every=5))
    with pytest.raises(BadOptionError, match=r"^--skip-bad-rows does not apply .* no CSV file"):
        train(options(tmp_path / "x", data, skip_bad_rows=True))


def test_the_cli_refuses_a_flag_typed_at_its_default(files: Path, tmp_path: Path) -> None:
    """--seq-len 64 (the default) on CSV data was ignored all the same."""
    from typer.testing import CliRunner

    from tiankong.cli import app

    flags = ["train", "--out", str(tmp_path / "x"), "--init", "tiankong-mini-zh", "--max-steps"]
    flags += ["1", "--threads", "1", "--data", str(files / "c.csv")]
    result = CliRunner().invoke(app, [*flags, "--seq-len", "64"])
    assert isinstance(result.exception, BadOptionError)
    assert result.exception.message.startswith("--seq-len does not apply to this run")


def test_resume_and_init_drop_no_option(files: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    """--resume --config small on a tiny run trained the tiny model on; --init with
    --position-init sinusoidal kept the model's own positions."""
    data = (str(files / "t.txt"),)
    train(options(tmp_path / "run", data))
    with pytest.raises(BadOptionError) as refused:
        train(options(tmp_path / "run", data, config="small", resume=True, max_steps=3))
    assert (
        refused.value.message.startswith("--config small is not the shape of the run in")
        and "its hidden_size is 64" in refused.value.message
    )
    with pytest.raises(BadOptionError, match=r"^--position-init sinusoidal applies to a model"):
        train(tuning(tmp_path / "x", data, tiny_model_dir, position_init="sinusoidal"))
    assert train(options(tmp_path / "run", data, resume=True, max_steps=3)).steps == 3


def test_resume_of_an_empty_or_a_finished_run(files: Path, tmp_path: Path) -> None:
    """An empty OUT/checkpoint was "Unknown --config ''"; resuming a finished run wrote its
    training.json over with a NaN loss."""
    data = (str(files / "t.txt"),)
    (tmp_path / "empty" / "checkpoint").mkdir(parents=True)
    with pytest.raises(BadDataFileError, match=r"checkpoint' is incomplete .*no config.json"):
        train(options(tmp_path / "empty", data, config=None, resume=True))
    train(options(tmp_path / "run", data))
    record = (tmp_path / "run" / "training.json").read_text()
    with pytest.raises(BadOptionError) as refused:
        train(options(tmp_path / "run", data, config=None, resume=True))
    assert refused.value.message == (
        f"The run in '{tmp_path / 'run'}' is already at step 2, the end of --max-steps 2; raise "
        "--max-steps to train it further."
    )
    assert (tmp_path / "run" / "training.json").read_text() == record


def test_resume_finishes_a_run_stopped_after_its_last_step(files: Path, tmp_path: Path) -> None:
    """Killed in the final evaluation or while writing the model or training.json, a run's
    checkpoint was at --max-steps: without --resume it was "stopped before it finished; continue
    it with --resume", and with it "already at step 2 ...; raise --max-steps" (a review)."""
    data = (str(files / "t.txt"),)
    run = tmp_path / "run"
    finished = train(options(run, data, heldout=data))
    weights = (run / "model.safetensors").read_bytes()
    (run / "training.json").unlink()  # as a kill before it was written leaves the folder
    (run / "model.safetensors").unlink()
    with pytest.raises(BadOptionError, match=r"stopped before it finished; continue it with"):
        train(options(run, data, heldout=data))
    summary = train(options(run, data, heldout=data, resume=True))
    assert summary.steps == finished.steps == 2
    assert summary.final_train_loss == finished.final_train_loss
    assert summary.heldout_accuracy == finished.heldout_accuracy
    assert (run / "model.safetensors").read_bytes() == weights
    record = json.loads((run / "training.json").read_text())
    assert record["summary"]["steps"] == 2
    # the last step's evaluation once, not again ([2, 2]: a verifying review)
    assert [entry["step"] for entry in record["summary"]["history"]] == [
        entry["step"] for entry in finished.history
    ]
    with pytest.raises(BadOptionError, match=r"already at step 2, the end of --max-steps 2"):
        train(options(run, data, heldout=data, resume=True))  # finished now
    # a training.json cut short by a kill while it was written is no finished run's
    text = (run / "training.json").read_text()
    (run / "training.json").write_text(text[:100])
    os.utime(run / "checkpoint" / "trainer_state.pt", (0, 0))  # older than the cut record
    again = train(options(run, data, heldout=data, resume=True))
    assert again.steps == 2 and json.loads((run / "training.json").read_text())["summary"]


def test_csv_is_told_by_its_name_in_any_case_and_with_a_weight(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """C2.CSV and c.csv:2 were trained as raw text; a .jsonl too."""
    upper = files / "BAD.CSV"
    upper.write_text("text,label\n没有空,的\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"^CSV file 'BAD.CSV' has 1 bad row"):
        train(tuning(tmp_path / "x", (str(upper),), tiny_model_dir))
    with pytest.raises(BadOptionError, match=r"has a weight .* which a CSV file does not take"):
        train(tuning(tmp_path / "x", (f"{files / 'c.csv'}:2",), tiny_model_dir))
    (files / "c.jsonl").write_text('{"text": "好[MASK]", "answers": ["的"]}\n')
    with pytest.raises(BadDataFileError, match=r"c.jsonl' is JSON; --data takes raw text"):
        train(options(tmp_path / "x", (str(files / "c.jsonl"),)))


def test_bad_heldout_rows_stop_the_run_or_are_counted(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Bad held-out rows were skipped silently, and --skip-bad-rows' count was never shown."""
    bad = files / "bad.csv"
    bad.write_text(CLOZE + "没有空,的\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"^Held-out CSV file 'bad.csv' has 1 bad row"):
        train(tuning(tmp_path / "x", (str(files / "c.csv"),), tiny_model_dir, heldout=(str(bad),)))
    run = tuning(tmp_path / "run", (str(bad),), tiny_model_dir, heldout=(str(bad),))
    summary = train(TrainOptions(**{**run.__dict__, "skip_bad_rows": True}))
    assert (summary.skipped_rows, summary.skipped_heldout_rows) == (1, 1)
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert record["summary"]["skipped_rows"] == record["summary"]["skipped_heldout_rows"] == 1


def test_weight_and_folder_messages_say_what_is_wrong(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each said "does not exist"; a hub failure told train's user to pass --model."""
    text = files / "t.txt"
    cases = {
        f"{text}:-1": f"A --data weight (FILE:WEIGHT) must be more than 0; got '-1' in "
        f"'{text}:-1'.",
        f"{text}:abc": f"A --data weight (FILE:WEIGHT) must be a finite number; got 'abc' in "
        f"'{text}:abc'.",
        str(files): f"Training file '{files}' is a folder; --data takes a file (.txt, .txt.xz "
        "or .csv).",
    }
    for spec, words in cases.items():
        with pytest.raises((BadOptionError, BadDataFileError)) as refused:
            train(options(tmp_path / "x", (spec,)))
        assert refused.value.message == words
    import huggingface_hub

    def offline(*args: object, **kwargs: object) -> None:
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(ModelUnavailableError, match=r"pass its path with --init, or use"):
        train(options(tmp_path / "x", (str(text),), config=None, init="someone/no-such-model"))


def test_lr_zero_keeps_the_weights_and_scores_the_start(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """docs/TRAINING.md scores a model with --max-steps 1 --lr 0, which was refused."""
    import torch
    from safetensors.torch import load_file

    summary = train(
        tuning(
            tmp_path / "run", (str(files / "t.txt"),), tiny_model_dir,
            heldout=(str(files / "t.txt"),), lr=0.0, max_steps=1, eval_every=1,
        )
    )  # fmt: skip
    assert summary.heldout_accuracy is not None
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(tmp_path / "run" / "model.safetensors")
    assert all(torch.equal(before[name], after[name]) for name in after)


@pytest.mark.parametrize("lr", [math.inf, math.nan])
def test_a_non_finite_lr_is_refused(files: Path, tmp_path: Path, lr: float) -> None:
    """--lr inf trained and saved NaN weights."""
    with pytest.raises(BadOptionError) as refused:
        train(options(tmp_path / "x", (str(files / "t.txt"),), lr=lr))
    assert refused.value.message == f"--lr must be a finite number; got {lr:g}."


CHECK_BEFORE_TORCH = """
import sys
from pathlib import Path
from tiankong.errors import BadDataFileError
from tiankong.training.train import TrainOptions, train
try:
    train(TrainOptions(out=Path(sys.argv[1]), data=("missing.txt",), config="tiny"))
except BadDataFileError:
    print("torch" in sys.modules)
"""


@pytest.mark.processes
def test_bad_options_are_refused_before_torch_and_without_a_progress_bar(
    files: Path, tmp_path: Path
) -> None:
    """They came after torch loaded (seconds), under an empty bar: "step 0/2 loss nan"."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK_BEFORE_TORCH, str(tmp_path / "x")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr[-2000:]
    from typer.testing import CliRunner

    from tiankong.cli import app

    flags = ["train", "--out", str(tmp_path / "x"), "--config", "tiny", "--seq-len", "32"]
    flags += ["--max-steps", "2", "--data", str(files / "t.txt"), "--heldout", "missing.txt"]
    result = CliRunner().invoke(app, flags)
    assert isinstance(result.exception, BadDataFileError)
    assert "step 0/2" not in result.output


def test_resume_refuses_another_recipe_and_names_each_option(files: Path, tmp_path: Path) -> None:
    """--lr 0.1 on a resume did nothing (the scheduler kept the first rate) and training.json
    then recorded it; another --data, --batch-size or --seed changed the stream the replay
    skips through, without a word."""
    import torch

    data = (str(files / "t.txt"),)
    run = tmp_path / "run"
    train(options(run, data, max_steps=4, stop_after_steps=2))
    saved = torch.load(run / "checkpoint" / "trainer_state.pt", weights_only=False)
    assert saved["recipe"]["lr"] == options(run, data).lr
    with pytest.raises(BadOptionError) as refused:
        train(options(run, data, max_steps=4, resume=True, lr=0.1, seed=7))
    message = refused.value.message
    assert message.startswith(f"--resume continues the run in '{run}' as it was started")
    assert "--lr 0.1 (the run's: 0.0005)" in message and "--seed 7 (the run's: 42)" in message
    other = files / "other.txt"
    other.write_text((files / "t.txt").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(BadOptionError, match=r"--data .*other\.txt \(the run's: .*t\.txt\)"):
        train(options(run, (str(other),), max_steps=4, resume=True))
    # what may change: the end, the saving and evaluating, the threads; the start may be left out
    assert train(options(run, data, max_steps=5, save_every=3, config=None, resume=True)).steps == 5


def test_a_resumed_runs_record_keeps_its_recipe(files: Path, tmp_path: Path) -> None:
    """A resume that left out --config recorded "init": "None", "config": "None", kept a recipe
    without them in its checkpoint, and described only its own part under "resolved"; the
    files were a tuple's repr, "('/…/t.txt',)" (a review)."""
    import torch

    data = (str(files / "t.txt"),)
    run = tmp_path / "run"
    train(options(run, data, max_steps=4, stop_after_steps=2))
    begun = torch.load(run / "checkpoint" / "trainer_state.pt", weights_only=False)["recipe"]
    train(options(run, data, max_steps=4, config=None, resume=True))
    record = json.loads((run / "training.json").read_text(encoding="utf-8"))
    assert record["options"]["data"] == list(data) and record["options"]["resume"] is True
    assert record["options"]["config"] == "tiny" and record["options"]["init"] is None
    assert record["recipe"] == begun and begun["config"] == "tiny"
    kept = torch.load(run / "checkpoint" / "trainer_state.pt", weights_only=False)["recipe"]
    assert kept == begun
    segments = record["resolved"]["segments"]
    assert [segment["from_step"] for segment in segments] == [0, 2]
    assert segments[-1]["threads"] == record["resolved"]["threads"] == 1


def test_a_sinusoidal_run_resumes_without_its_config(files: Path, tmp_path: Path) -> None:
    """--position-init sinusoidal --config tiny could be resumed only with --config repeated:
    with the flag kept "applies to a model started from --config", with it dropped "differs:
    --position-init random (the run's: sinusoidal)" (a review)."""
    data = (str(files / "t.txt"),)
    run = tmp_path / "run"
    train(options(run, data, max_steps=5, stop_after_steps=2, position_init="sinusoidal"))
    kept = dict(max_steps=5, stop_after_steps=3, config=None, resume=True)
    assert train(options(run, data, position_init="sinusoidal", **kept)).steps == 3
    assert train(options(run, data, **{**kept, "stop_after_steps": 4})).steps == 4
    with pytest.raises(BadOptionError, match=r"--position-init random \(the run's: sinusoidal\)"):
        train(options(run, data, given=frozenset({"--position-init"}), **kept))
    again = {**kept, "config": "tiny", "stop_after_steps": None}  # the command repeated
    assert train(options(run, data, position_init="sinusoidal", **again)).steps == 5


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_the_run_files_are_readable_as_the_umask_lets_them(
    files: Path, tmp_path: Path, umask: int, mode: int
) -> None:
    """model.safetensors was 0600 (safetensors' save_file) beside 0644 files: a server running
    as another user could not read the model it was given (a review)."""
    import os

    before = os.umask(umask)
    try:
        train(options(tmp_path / "run", (str(files / "t.txt"),)))
    finally:
        os.umask(before)
    for folder in (tmp_path / "run", tmp_path / "run" / "checkpoint"):
        assert (folder / "model.safetensors").stat().st_mode & 0o777 == mode
        assert (folder / "config.json").stat().st_mode & 0o777 == mode


@pytest.mark.parametrize(("suffix", "packed"), [(".gz", "gzip"), (".bz2", "bzip2")])
def test_a_compressed_data_file_is_named_so(
    files: Path, tmp_path: Path, suffix: str, packed: str
) -> None:
    """It was told "it looks like UTF-16: convert it (iconv ...)"."""
    import bz2
    import gzip

    compress = gzip.compress if packed == "gzip" else bz2.compress
    data = tmp_path / f"train.txt{suffix}"
    data.write_bytes(compress("春眠不觉晓，处处闻啼鸟。\n".encode() * 50))
    with pytest.raises(BadDataFileError, match=rf"is {packed}-compressed; train reads plain text"):
        train(options(tmp_path / "run", (str(data),)))


def test_a_refusal_comes_alone_before_the_warm_up_warning(files: Path, tmp_path: Path) -> None:
    """The warm-up warning was printed first, so a one-sentence refusal came as two lines."""
    from typer.testing import CliRunner

    from tiankong.cli import app

    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("x")
    flags = ["train", "--out", str(full), "--config", "tiny", "--max-steps", "5"]
    result = CliRunner().invoke(app, [*flags, "--data", str(files / "t.txt")])
    assert isinstance(result.exception, BadOptionError)
    assert "not empty and holds no tiankong training run" in result.exception.message
    assert "warning" not in result.output


def test_a_run_refused_under_the_lock_leaves_no_folder_and_no_warning(
    files: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """A bad CSV row, --device cuda without a GPU or an --init that does not load left an empty
    --out behind, and the warm-up warning came before the refusal (a review)."""
    import torch
    from typer.testing import CliRunner

    from tiankong.cli import app

    bad = files / "bad.csv"
    bad.write_text("text,label\n没有空,的\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"has 1 bad row"):
        train(tuning(tmp_path / "new" / "out", (str(bad),), tiny_model_dir))
    assert not (tmp_path / "new").exists()
    flags = ["train", "--out", str(tmp_path / "made" / "out"), "--config", "tiny", "--seq-len"]
    flags += ["32", "--max-steps", "2", "--data", str(files / "t.txt")]
    if not torch.cuda.is_available():
        result = CliRunner().invoke(app, [*flags, "--device", "cuda"])
        assert isinstance(result.exception, BadOptionError)
        assert "sees no CUDA GPU" in result.exception.message
        assert "warning" not in result.output and not (tmp_path / "made").exists()
    result = CliRunner().invoke(app, flags)  # a run that begins says it, once
    assert result.exit_code == 0 and result.output.count("warning: --warmup-steps 100") == 1


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--seed", "18446744073709551616", r"--seed must be at most 9,223,372,036,854,775,807 "),
        ("--seed", "-1", r"--seed must be 0 or more; got -1\.$"),
        ("--threads", "100000", r"--threads must be at most \d+, 4 per core of this machine's"),
        ("--batch-size", "99999999999999999999", r"--batch-size must be at most 65,536; got 9+\.$"),
        ("--lr", "1e38", r"--lr must be at most 1,000,000 \(a rate past it diverges at once\)"),
        ("--shuffle-buffer", "10000000000", r"--shuffle-buffer must be at most 10,000,000 lines"),
        ("--data-workers", "100000", r"--data-workers must be at most \d+, 4 per core of"),
    ],
)
def test_extreme_numbers_are_one_sentence(
    files: Path, tmp_path: Path, flag: str, value: str, words: str
) -> None:
    """--seed 2**64 was torch's overflow traceback, --threads 100000 a MemoryError and
    --batch-size 10**20 a hang (a review)."""
    from typer.testing import CliRunner

    from tiankong.cli import app

    flags = ["train", "--out", str(tmp_path / "x"), "--config", "tiny", "--seq-len", "32"]
    flags += ["--max-steps", "2", "--data", str(files / "t.txt"), flag, value]
    result = CliRunner().invoke(app, flags)
    assert isinstance(result.exception, BadOptionError), result.output
    assert re.match(words, result.exception.message), result.exception.message
    assert not (tmp_path / "x").exists()


def test_steps_without_a_mask_leave_training_json_valid(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose batch drew no mask has a NaN loss, which reached final_train_loss and the
    history as NaN, not JSON; the history's entry written after the loop had no lr; and
    corpus.txt.XZ was read as plain text, "not UTF-8" (a review)."""
    import tiankong.training.train as training

    real, losses = training.masked_lm_loss, []

    def no_mask_after_the_first_step(model, batch, bf16=False):
        loss, logits, labels = real(model, batch, bf16)
        if model.training:
            losses.append(float(loss.detach()))
            if len(losses) > 1:  # as a batch that drew no mask
                return loss * math.nan, logits[:0], labels[:0]
        return loss, logits, labels

    monkeypatch.setattr(training, "masked_lm_loss", no_mask_after_the_first_step)
    upper = files / "T.TXT.XZ"
    shutil.copy(files / "t.txt.xz", upper)
    data = (str(upper),)
    run = tmp_path / "run"
    kept = dict(heldout=(str(files / "t.txt"),), max_steps=4, stop_after_steps=3, eval_every=2)
    summary = train(options(run, data, **kept))
    assert summary.final_train_loss == losses[0]  # the last step that drew a mask

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    record = json.loads((run / "training.json").read_text(), parse_constant=refuse)
    assert record["summary"]["final_train_loss"] == losses[0]
    assert [entry["step"] for entry in record["summary"]["history"]] == [2, 3]
    assert record["summary"]["history"][0]["loss"] is None
    assert [set(entry) for entry in record["summary"]["history"]] == [
        {"step", "loss", "lr", "heldout_loss", "heldout_accuracy", "elapsed_s", "tokens"}
    ] * 2


def test_text_that_begins_like_a_bzip2_header_is_text(files: Path, tmp_path: Path) -> None:
    """ "BZh" alone was taken for bzip2: a file of notes beginning "BZh1 model" was refused."""
    from tiankong.core.compression import compression_of

    notes = tmp_path / "notes.txt"
    notes.write_text("BZh1 model notes: 春眠不觉晓\n" * 20, encoding="utf-8")
    assert compression_of(notes) is None
    packed = tmp_path / "notes.txt.bz2"
    import bz2

    packed.write_bytes(bz2.compress(notes.read_bytes()))
    assert compression_of(packed) == "bzip2"
    assert train(options(tmp_path / "run", (str(notes),))).steps == 2


@pytest.mark.parametrize("at", ["checkpoint", "model"])
def test_a_full_disk_while_saving_is_one_sentence(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    """A full disk when the run saved was safetensors' SafetensorError, a traceback and exit 1
    after the run's work (a review's find, on a 300 kB tmpfs): now one sentence naming --out and
    the system's words, exit 2. ``at``: the first checkpoint, or the model after the last."""
    import safetensors
    import transformers.modeling_utils as modeling

    saved = modeling.safe_save_file
    calls = {"n": 0}

    def full(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if at == "checkpoint" or calls["n"] > 1:  # the last checkpoint is the first save
            raise safetensors.SafetensorError(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            )
        return saved(*args, **kwargs)

    monkeypatch.setattr(modeling, "safe_save_file", full)
    out = tmp_path / "run"
    with pytest.raises(BadOptionError) as refused:
        train(options(out, (str(files / "t.txt"),)))
    assert refused.value.message.startswith(f"--out '{out}' can't be written (")
    assert "No space left on device" in refused.value.message


def test_text_with_nothing_to_mask_is_refused(files: Path, tmp_path: Path) -> None:
    """A held-out file of one character, or of emoji (read as [UNK], never masked), scored
    NaN loss and NaN% accuracy in the summary and in training.json, and --data of emoji
    trained at a NaN loss to the end, all exit 0 (a review's find)."""
    data = (str(files / "t.txt"),)
    short = files / "short.txt"
    short.write_text("春\n", encoding="utf-8")
    emoji = files / "emoji.txt"
    emoji.write_text("😀😃😄😁😆😅🤣😂🙂🙃\n" * 50, encoding="utf-8")
    for name in (short, emoji):
        with pytest.raises(BadDataFileError, match=r"^--heldout .* gives no token to score"):
            train(options(tmp_path / "x", data, heldout=(str(name),)))
    with pytest.raises(BadDataFileError, match=r"^--data .* gives no token to mask"):
        train(options(tmp_path / "y", (str(emoji),)))
    summary = train(options(tmp_path / "z", data, heldout=data))  # real text: scored
    assert summary.heldout_loss is not None and summary.heldout_loss == summary.heldout_loss


@pytest.mark.parametrize(("name", "copies"), [("deep.txt", 300), ("deep.txt.xz", 300),
                                              ("near.txt", 1), ("rows.csv", 0)])  # fmt: skip
def test_a_bad_line_in_a_data_file_is_named_before_the_run(
    tmp_path: Path, name: str, copies: int
) -> None:
    """Only the first line was checked: a bad one 3,000 lines in ended a run at step 740 with
    no line to look at, and the file, fixed, no longer matched the run for --resume; one near
    the start was read with the first line's buffer and called GBK, as a CSV's was."""
    if name.endswith(".csv"):
        good = ("text,label\n" + "画龙点[MASK],睛\n" * 1500).encode()
    else:
        good = "\n".join(LINES * copies).encode() + b"\n"
    raw = good + b"\xff\xfe bad\n" + good
    data = tmp_path / name
    data.write_bytes(lzma.compress(raw) if name.endswith(".xz") else raw)
    line = good.count(b"\n") + 1
    told = rf"\(line {line:,}\) can't be read as UTF-8 text \(invalid start byte\); the lines"
    with pytest.raises(BadDataFileError, match=told):
        train(options(tmp_path / "run", (str(data),)))
    assert not (tmp_path / "run").exists()  # refused before anything was made


def test_a_gbk_file_under_an_ascii_first_line_is_told_to_convert(tmp_path: Path) -> None:
    """A GBK CSV under its ASCII header was told only to fix line 2, "where the 1 lines before
    it are" (a verifying review): the GBK advice every other command gives."""
    data = tmp_path / "rows.csv"
    data.write_bytes("text,label\n画龙点[MASK],睛\n".encode("gbk"))
    with pytest.raises(BadDataFileError) as refused:
        train(options(tmp_path / "run", (str(data),)))
    assert "rows.csv' (line 2) can't be read as UTF-8 text" in refused.value.message
    assert "that line reads as GBK: if the whole file is GBK" in refused.value.message


@pytest.mark.parametrize("name", ["rows.tsv", "rows.csv.xz", "notes.md", "corpus"])
def test_a_data_file_named_for_no_kind_is_refused(tmp_path: Path, name: str) -> None:
    """A .tsv's or a .csv.xz's text,label rows trained as passages, with exit 0."""
    data = tmp_path / name
    text = "text,label\n画龙点[MASK],睛\n".encode()
    data.write_bytes(lzma.compress(text) if name.endswith(".xz") else text)
    with pytest.raises(
        BadDataFileError, match=re.escape("is named neither .txt, .txt.xz nor .csv")
    ):
        train(options(tmp_path / "run", (str(data),)))


def test_xz_named_txt_is_told_to_be_named_xz(files: Path, tmp_path: Path) -> None:
    """It said "it doesn't look like a text file (it has NUL bytes)"."""
    data = tmp_path / "packed.txt"
    data.write_bytes((files / "t.txt.xz").read_bytes())
    with pytest.raises(BadDataFileError, match=re.escape("is xz-compressed; name it .txt.xz")):
        train(options(tmp_path / "run", (str(data),)))


@pytest.mark.parametrize("inside", [False, True])
def test_out_may_not_hold_the_init_model(
    files: Path, tmp_path: Path, tiny_model_dir: Path, inside: bool
) -> None:
    """--init X --out X wrote over the starting model, and the recipe's --init then named the
    run's own output (a review)."""
    import shutil

    start = tmp_path / "runs" / "start"
    shutil.copytree(tiny_model_dir, start)
    before = (start / "model.safetensors").read_bytes()
    out = start.parent if inside else start
    with pytest.raises(BadOptionError, match="the model the run starts from"):
        train(tuning(out, (str(files / "t.txt"),), start))
    assert (start / "model.safetensors").read_bytes() == before
