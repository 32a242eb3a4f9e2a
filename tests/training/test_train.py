"""`tiankong train`: a tiny config on a tiny corpus, in seconds."""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from tiankong.core.models import VOCAB_FILE
from tiankong.errors import BadDataFileError, BadOptionError
from tiankong.training.train import TrainOptions, train
from tiankong.training.train_data import read_cloze_csv

LINES = [
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。",
    "手机没电了，赶紧去充电。",
    "守株待兔",
    "画龙点睛",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    with lzma.open(folder / "tiny.txt.xz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(LINES * 20) + "\n")
    (folder / "heldout.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return folder


def tiny_options(corpus: Path, out: Path, **changes) -> TrainOptions:
    base = dict(
        out=out,
        data=(str(corpus / "tiny.txt.xz"),),
        heldout=(str(corpus / "heldout.txt"),),
        config="tiny",
        max_steps=40,
        batch_size=8,
        seq_len=32,
        lr=3e-3,
        warmup_steps=5,
        eval_every=20,
        save_every=20,
        shuffle_buffer=50,
        threads=1,
        seed=7,
        device="cpu",  # bit-exact reruns; test_training_on_cuda covers the GPU
    )
    base.update(changes)
    return TrainOptions(**base)


def test_the_rate_warms_up_to_lr_then_decays_from_it_to_zero(corpus: Path, tmp_path: Path) -> None:
    """The decay counted from step 0, so the rate fell by warmup / max_steps in one step at the
    warm-up's end (1e-3 to 3.3e-4 at --max-steps 12 --warmup-steps 8)."""
    rates: list[float] = []
    options = tiny_options(corpus, tmp_path / "run", max_steps=12, warmup_steps=8, lr=1e-3)
    train(options, lambda state, metrics: rates.append(metrics["lr"]))
    expected = [1e-3 * (step + 1) / 8 for step in range(1, 8)] + [1e-3, 7.5e-4, 5e-4, 2.5e-4, 0]
    assert rates == pytest.approx(expected)


def test_max_time_alone_sets_no_step_limit(corpus: Path, tmp_path: Path) -> None:
    """--max-time 2h without --max-steps stopped at the default's 1000 steps, 40 s into a tiny
    run, its rate already at zero (a review): the clock alone ends such a run."""
    from tiankong.training.train_options import NO_STEP_LIMIT

    timed = tiny_options(corpus, tmp_path / "timed", max_steps=None, max_time_s=1.0)
    assert timed.step_limit == NO_STEP_LIMIT
    assert tiny_options(corpus, tmp_path, max_steps=None).step_limit == 1000
    assert tiny_options(corpus, tmp_path, max_steps=7, max_time_s=1.0).step_limit == 7
    summary = train(timed)
    assert 0 < summary.steps < NO_STEP_LIMIT and summary.wall_time_s >= 1.0
    record = json.loads((tmp_path / "timed" / "training.json").read_text(encoding="utf-8"))
    assert record["resolved"]["step_limit"] is None  # none: the clock ended it


def test_a_warm_up_as_long_as_the_run_is_said(corpus: Path, tmp_path: Path) -> None:
    from tiankong.training.train_options import schedule_warning

    assert schedule_warning(tiny_options(corpus, tmp_path, max_steps=12, warmup_steps=8)) is None
    assert schedule_warning(tiny_options(corpus, tmp_path, max_steps=5, warmup_steps=0)) is None
    assert schedule_warning(tiny_options(corpus, tmp_path, max_steps=5, warmup_steps=100)) == (
        "--warmup-steps 100 is not below --max-steps 5: the learning rate rises to 5% of --lr "
        "and never decays; give --warmup-steps below 5 for the whole schedule."
    )


def test_loss_goes_down_and_output_loads(corpus: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForMaskedLM

    from tiankong import FillMasker, Settings

    summary = train(tiny_options(corpus, tmp_path / "run", max_steps=60))
    history = summary.history
    assert summary.steps == 60 and len(history) == 3
    assert history[-1]["heldout_loss"] < history[0]["heldout_loss"] - 0.5
    assert summary.heldout_accuracy is not None and 0.0 <= summary.heldout_accuracy <= 1.0
    AutoModelForMaskedLM.from_pretrained(tmp_path / "run")
    masker = FillMasker.load(str(tmp_path / "run"), Settings(engine="torch", threads=1))
    assert len(masker.predict("处处闻啼[MASK]。").masks[0]) == 5
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert record["summary"]["steps"] == 60
    # what "auto" became here, for a rerun: options say "auto" and None
    assert record["resolved"]["device"] == "cpu" and record["resolved"]["threads"] == 1
    assert record["resolved"]["precision"] in ("bf16", "fp32") and record["resolved"]["torch"]


def in_own_interpreter(script: str, corpus: Path, out: Path) -> subprocess.CompletedProcess:
    """``script`` run by a Python of its own (argv: this folder, the corpus, ``out``), as the
    tests with data workers need; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).parent), str(corpus), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


SAVED_TOKENIZER_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from test_train import tiny_options
from tiankong.training.train import train
corpus, out = Path(sys.argv[2]), Path(sys.argv[3])
train(tiny_options(corpus, out / "run", max_steps=4, data_workers=1))
"""


@pytest.mark.processes
def test_the_saved_tokenizer_truncates_nothing(corpus: Path, tmp_path: Path) -> None:
    """With --data-workers the held-out set's encoding, truncated at --seq-len, was the main
    tokenizer's last call, and the run saved a tokenizer.json truncating every input (the GPU
    run's, at 128); a folder saved so passed it on through --init. (Data workers run in an
    interpreter of their own: test_data_workers_prepare_batches_repeatably says why.)"""
    in_own_interpreter(SAVED_TOKENIZER_RUN, corpus, tmp_path)
    saved = json.loads((tmp_path / "run" / "tokenizer.json").read_text(encoding="utf-8"))
    assert saved["truncation"] is None and saved["padding"] is None
    saved["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst",
                           "stride": 0}  # fmt: skip
    (tmp_path / "run" / "tokenizer.json").write_text(json.dumps(saved), encoding="utf-8")
    train(tiny_options(corpus, tmp_path / "next", max_steps=2, config=None,
                       init=str(tmp_path / "run")))  # fmt: skip
    again = json.loads((tmp_path / "next" / "tokenizer.json").read_text(encoding="utf-8"))
    assert again["truncation"] is None


def test_resume_continues_from_the_same_step(corpus: Path, tmp_path: Path) -> None:
    """Stopping at step 20 and resuming to 40 gives the same weights as one 40-step run."""
    import torch
    from safetensors.torch import load_file

    straight = train(tiny_options(corpus, tmp_path / "straight"))
    # first half: a 40-step schedule interrupted at 20 steps (simulated by max_steps on a copy)
    first = tiny_options(corpus, tmp_path / "split")
    _run_until(first, stop_at=20)
    state = torch.load(tmp_path / "split" / "checkpoint" / "trainer_state.pt", weights_only=False)
    assert state["state"]["step"] == 20
    resumed = train(tiny_options(corpus, tmp_path / "split", resume=True))
    assert resumed.steps == 40 == straight.steps
    a = load_file(tmp_path / "straight" / "model.safetensors")
    b = load_file(tmp_path / "split" / "model.safetensors")
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5), name


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(
    corpus: Path, tmp_path: Path
) -> None:
    """Two runs on one --out interleaved their saves, and one that saw the other's checkpoint
    called it a stopped run (a review); the folder is the first run's until it ends, and no
    lock file is left in the model it makes."""
    out = tmp_path / "run"
    refusals: list[str] = []

    def second_run(state, metrics) -> None:
        if state.step in (1, 20):  # before any checkpoint, and once one is saved
            with pytest.raises(BadOptionError) as refused:
                train(tiny_options(corpus, out, resume=state.step == 20))
            refusals.append(str(refused.value))

    assert train(tiny_options(corpus, out), second_run).steps == 40
    assert (
        refusals
        == [
            f"--out '{out}' is being written by another tiankong train now; wait for it to end, or "
            "give another --out."
        ]
        * 2
    )
    assert sorted(path.name for path in out.iterdir() if path.name.startswith(".")) == []
    assert train(tiny_options(corpus, out, max_steps=41, resume=True)).steps == 41


def _run_until(options: TrainOptions, stop_at: int) -> None:
    """Run ``options`` but stop after ``stop_at`` steps, like an interrupted job."""

    class Stop(Exception):
        pass

    def on_progress(state, metrics) -> None:
        if state.step == stop_at:
            raise Stop

    with pytest.raises(Stop):
        train(options, on_progress)


def test_seed_makes_runs_identical(corpus: Path, tmp_path: Path) -> None:
    a = train(tiny_options(corpus, tmp_path / "a", max_steps=10, eval_every=10))
    b = train(tiny_options(corpus, tmp_path / "b", max_steps=10, eval_every=10))
    assert a.final_train_loss == b.final_train_loss
    assert a.heldout_loss == b.heldout_loss


def test_csv_fine_tuning(tiny_model_dir: Path, tmp_path: Path) -> None:
    csv_path = tmp_path / "cloze.csv"
    csv_path.write_text(
        "text,label\n" + "手机没电了，赶紧去[MASK][MASK]。,充电\n处处闻啼[MASK]。,鸟\n" * 10,
        encoding="utf-8",
    )
    summary = train(
        TrainOptions(
            out=tmp_path / "tuned",
            data=(str(csv_path),),
            heldout=(str(csv_path),),
            init=str(tiny_model_dir),
            max_steps=60,
            batch_size=4,
            # 3e-2 was at the edge: with the decay from the warm-up's end (3% more rate for
            # a while) it stalled at a held-out loss of 0.46
            lr=1e-2,
            warmup_steps=2,
            eval_every=10,
            threads=1,
        )
    )
    history = summary.history
    assert history[-1]["heldout_loss"] < history[0]["heldout_loss"] - 1.0
    assert summary.heldout_accuracy == 1.0  # three labelled masks, memorised


def write_csv(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def test_a_malformed_csv_record_is_told_as_such(tmp_path: Path) -> None:
    """A quote never closed was "line 2: the label is empty" (the rest of the file one
    value), and a row with a value past the header's columns trained on its first two: the
    CSV is read as index build and fill read theirs (index.sources.CsvRecords)."""
    vocab = {t: i for i, t in enumerate(VOCAB_FILE.read_text(encoding="utf-8").splitlines())}
    unclosed = write_csv(
        tmp_path / "q.csv", 'text,label\n"春眠不觉晓，处处闻啼[MASK]。,鸟\n好[MASK],的\n'
    )
    with pytest.raises(BadDataFileError) as caught:
        read_cloze_csv(unclosed, vocab, skip_bad_rows=False)
    assert str(caught.value) == (
        f"Line 2 of {unclosed} is not well-formed CSV (a quote opened there is never closed)."
    )
    extra = write_csv(tmp_path / "e.csv", "text,label\n好[MASK],的\n春眠[MASK],鸟,extra\n")
    with pytest.raises(BadDataFileError, match="line 3: more values than the header's 2 columns"):
        read_cloze_csv(extra, vocab, skip_bad_rows=False)
    rows, problems = read_cloze_csv(extra, vocab, skip_bad_rows=True)
    assert [row.line for row in rows] == [2] and problems == [
        "line 3: more values than the header's 2 columns"
    ]
    short = write_csv(tmp_path / "s.csv", "text,label\n\n好[MASK]\n")  # a blank line first
    with pytest.raises(BadDataFileError, match="line 3: no value in column 'label'"):
        read_cloze_csv(short, vocab, skip_bad_rows=False)


def test_csv_errors_name_their_lines(tmp_path: Path) -> None:
    vocab = {t: i for i, t in enumerate(VOCAB_FILE.read_text(encoding="utf-8").splitlines())}
    missing = write_csv(tmp_path / "m.csv", "sentence,answer\n好[MASK],的\n")
    with pytest.raises(BadDataFileError, match="missing the column\\(s\\) text, label"):
        read_cloze_csv(missing, vocab, skip_bad_rows=False)
    bad = write_csv(
        tmp_path / "b.csv",
        "text,label\n好[MASK],的\n没有空,的\n[MASK][MASK]好,一\n好[MASK],\U0001f600\n",
    )
    with pytest.raises(BadDataFileError) as caught:
        read_cloze_csv(bad, vocab, skip_bad_rows=False)
    message = str(caught.value)
    assert "3 bad row(s)" in message
    assert "line 3: the text has no [MASK]" in message
    assert "line 4: the label '一' has 1 character(s) but the text has 2 [MASK]" in message
    assert (
        "line 5: the label character(s) '\U0001f600' are not in the model's vocabulary" in message
    )
    rows, problems = read_cloze_csv(bad, vocab, skip_bad_rows=True)
    assert [row.line for row in rows] == [2] and len(problems) == 3


def test_csv_masks_are_read_as_predict_reads_them(tmp_path: Path) -> None:
    """[mask] and 【MASK】 were "the text has no [MASK]", where predict and eval take them."""
    vocab = {t: i for i, t in enumerate(VOCAB_FILE.read_text(encoding="utf-8").splitlines())}
    spelled = write_csv(tmp_path / "s.csv", "text,label\n好[mask],的\n画龙点【MASK】,睛\n")
    rows, problems = read_cloze_csv(spelled, vocab, skip_bad_rows=False)
    assert [row.text for row in rows] == ["好[MASK]", "画龙点[MASK]"] and problems == []
    spaced = write_csv(tmp_path / "t.csv", 'text,label\n好[MASK][MASK][MASK],"的 好"\n')
    with pytest.raises(BadDataFileError, match=r"label character\(s\) ' ' are not in"):
        read_cloze_csv(spaced, vocab, skip_bad_rows=False)


def test_bad_options(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(BadOptionError, match="Unknown --config 'huge'"):
        train(tiny_options(corpus, tmp_path / "x", config="huge"))
    with pytest.raises(BadDataFileError, match="does not exist"):
        train(tiny_options(corpus, tmp_path / "x", data=("nope.txt",)))
    with pytest.raises(BadDataFileError, match="no checkpoint yet"):
        train(tiny_options(corpus, tmp_path / "fresh", resume=True))
    with pytest.raises(BadOptionError, match=r"Pass --init MODEL .* or --config NAME"):
        train(tiny_options(corpus, tmp_path / "x", config=None))  # not a random model unasked
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(BadOptionError, match="afile' is a file, not a folder"):
        train(tiny_options(corpus, tmp_path / "afile" / "run"))  # before any step, not at a save


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"lr": -1.0}, "--lr must be 0 or more; got -1."),
        ({"save_every": 0}, "--save-every must be 1 or more; got 0."),  # ZeroDivisionError
        ({"threads": -1}, "--threads must be 1 or more; got -1."),
        ({"shuffle_buffer": 0}, "--shuffle-buffer must be 1 or more; got 0."),
        ({"eval_lines": 0}, "--eval-lines must be 1 or more; got 0."),  # IndexError
        ({"warmup_steps": -5}, "--warmup-steps must be 0 or more; got -5."),  # was accepted
        ({"position_init": "foo"}, "--position-init 'foo' is not one of random, sinusoidal."),
        # "between 0 and 1" for 0, which reads as allowed
        ({"mask_rate": 0.0}, "--mask-rate must be more than 0 and less than 1; got 0."),
    ],
)
def test_bad_numbers_are_one_sentence_before_training(
    corpus: Path, tmp_path: Path, changes: dict[str, object], words: str
) -> None:
    """Each was a traceback from torch or the loop (or silently accepted)."""
    with pytest.raises(BadOptionError) as refused:
        train(tiny_options(corpus, tmp_path / "x", **changes))
    assert refused.value.message == words


def test_a_zero_data_weight_and_a_file_not_in_utf8_are_one_sentence(
    corpus: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        BadOptionError, match=r"weight \(FILE:WEIGHT\) must be more than 0; got '0'"
    ):
        train(tiny_options(corpus, tmp_path / "x", data=(f"{corpus / 'tiny.txt.xz'}:0",)))
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("春眠不觉晓，处处闻啼鸟。\n".encode("gbk") * 50)
    with pytest.raises(BadDataFileError, match=r"can't be read as UTF-8 text .*from GBK"):
        train(tiny_options(corpus, tmp_path / "y", data=(str(gbk),), heldout=(str(gbk),)))
    cloze = tmp_path / "cloze.csv"
    cloze.write_bytes("text,label\n画龙点[MASK],睛\n".encode("gbk"))
    with pytest.raises(BadDataFileError, match="can't be read as UTF-8 text"):
        read_cloze_csv(cloze, {}, skip_bad_rows=False)
    # UTF-16 (Windows' "Unicode") was told to convert from GBK
    utf16 = tmp_path / "utf16.csv"
    utf16.write_bytes("text,label\n画龙点[MASK],睛\n".encode("utf-16"))
    with pytest.raises(BadDataFileError) as refused:
        read_cloze_csv(utf16, {}, skip_bad_rows=False)
    assert refused.value.message.endswith(
        "it looks like UTF-16: convert it (iconv -f UTF-16 -t UTF-8)."
    )


DATA_WORKERS_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from test_train import tiny_options
from tiankong.training.train import train
corpus, out = Path(sys.argv[2]), Path(sys.argv[3])
runs = [train(tiny_options(corpus, out / name, max_steps=40, data_workers=2)) for name in "ab"]
print(json.dumps([[r.history[0]["heldout_loss"], r.history[-1]["heldout_loss"],
                   r.final_train_loss, r.heldout_loss] for r in runs]))
"""


@pytest.mark.processes
def test_data_workers_prepare_batches_repeatably(corpus: Path, tmp_path: Path) -> None:
    """With batches prepared in worker processes, the loss still falls and a rerun is identical.

    Run in an interpreter of its own: torch's DataLoader workers leave a process-wide SIGCHLD
    handler behind, and in a pytest worker that later loaded OpenVINO the next test waiting on
    a child process died of SIGSEGV (`pytest -n 0` on this test, tests/engines/test_openvino.py
    and tests/export/test_shipped_graph.py crashed in 3 runs of 3; each pair alone passed)."""
    done = in_own_interpreter(DATA_WORKERS_RUN, corpus, tmp_path)
    (first_a, last_a, train_a, heldout_a), b = json.loads(done.stdout.strip().splitlines()[-1])
    assert last_a < first_a - 0.3
    assert [train_a, heldout_a] == b[2:]


def test_bf16_autocast_on_the_cpu(corpus: Path, tmp_path: Path) -> None:
    """--precision bf16 trains under bfloat16 autocast on the CPU too; saved weights stay FP32."""
    from safetensors.torch import load_file

    summary = train(tiny_options(corpus, tmp_path / "run", max_steps=40, precision="bf16"))
    assert summary.history[-1]["heldout_loss"] < summary.history[0]["heldout_loss"] - 0.3
    weights = load_file(tmp_path / "run" / "model.safetensors")
    assert {str(tensor.dtype) for tensor in weights.values()} == {"torch.float32"}


@pytest.mark.processes
def test_device_options(corpus: Path, tmp_path: Path) -> None:
    import torch

    with pytest.raises(BadOptionError, match="--device 'tpu' is not one of"):
        train(tiny_options(corpus, tmp_path / "x", device="tpu"))
    with pytest.raises(BadOptionError, match="--precision 'fp8' is not one of"):
        train(tiny_options(corpus, tmp_path / "x", precision="fp8"))
    with pytest.raises(BadOptionError, match="--data-workers must be 0 or more"):
        train(tiny_options(corpus, tmp_path / "x", data_workers=-1))
    if not torch.cuda.is_available():
        with pytest.raises(BadOptionError, match="torch sees no CUDA GPU"):
            train(tiny_options(corpus, tmp_path / "x", device="cuda"))


@pytest.mark.processes
def test_train_cli_prints_summary(corpus: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "train",
            "--out",
            str(tmp_path / "cli"),
            "--config",
            "tiny",
            "--data",
            f"{corpus / 'tiny.txt.xz'}:2",
            "--heldout",
            str(corpus / "heldout.txt"),
            "--max-steps",
            "5",
            "--eval-every",
            "5",
            "--batch-size",
            "4",
            "--seq-len",
            "32",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "Training summary" in done.stdout and "held-out masked-token accuracy" in done.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "train",
            "--out",
            str(tmp_path / "bad"),
            "--data",
            str(tmp_path / "missing.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_sinusoidal_position_init(corpus: Path, tmp_path: Path) -> None:
    import math

    import torch

    from tiankong.training.train import load_starting_point

    model, _ = load_starting_point(tiny_options(corpus, tmp_path / "s", position_init="sinusoidal"))
    table = model.bert.embeddings.position_embeddings.weight.detach()
    scale = model.config.initializer_range * math.sqrt(2.0)
    assert torch.allclose(table[0, 0::2], torch.zeros(table.shape[1] // 2))  # sin(0)
    assert torch.allclose(table[0, 1::2], torch.full((table.shape[1] // 2,), scale))  # cos(0)
    assert torch.allclose(table[5, 0], torch.tensor(math.sin(5.0) * scale), atol=1e-6)
    # word embeddings and position rows end up on the same scale
    rms = table.pow(2).mean().sqrt().item()
    assert abs(rms - model.config.initializer_range) < 0.3 * model.config.initializer_range


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_training_on_cuda(corpus: Path, tmp_path: Path) -> None:
    """On a GPU, training runs there under bfloat16 autocast and the output loads on the CPU."""
    from tiankong import FillMasker, Settings

    summary = train(tiny_options(corpus, tmp_path / "run", max_steps=60, device="cuda"))
    assert summary.history[-1]["heldout_loss"] < summary.history[0]["heldout_loss"] - 0.5
    masker = FillMasker.load(str(tmp_path / "run"), Settings(engine="torch", device="cpu"))
    assert len(masker.predict("处处闻啼[MASK]。").masks[0]) == 5


def test_precision_auto_follows_the_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto: bf16 on CUDA, and for pretraining on a CPU with bf16 units; FP32 otherwise."""
    from tiankong.export import int8_recipe
    from tiankong.training.train import trains_in_bf16

    assert int8_recipe.cpu_has_bf16({"avx512f", "avx512_bf16"})
    assert int8_recipe.cpu_has_bf16({"amx_bf16", "amx_int8"})
    assert not int8_recipe.cpu_has_bf16({"avx2", "avx512_vnni"})
    monkeypatch.setattr(int8_recipe, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert trains_in_bf16("auto", "cpu", pretraining=True)
    assert not trains_in_bf16("auto", "cpu", pretraining=False)
    assert trains_in_bf16("auto", "cuda", pretraining=False)
    assert not trains_in_bf16("fp32", "cuda", pretraining=True)
    monkeypatch.setattr(int8_recipe, "cpu_flags", lambda: frozenset({"avx2"}))
    assert not trains_in_bf16("auto", "cpu", pretraining=True)
    assert trains_in_bf16("bf16", "cpu", pretraining=True)


def test_init_from_float16_weights_trains_in_fp32(corpus: Path, tmp_path: Path) -> None:
    """The bundled model is stored in float16: --init from it trains FP32 master weights (under
    bf16 autocast too, which failed on mixed dtypes when the weights stayed float16)."""
    from safetensors.torch import load_file

    start = train(tiny_options(corpus, tmp_path / "start", max_steps=5, save_fp16=True))
    assert start.steps == 5
    weights = load_file(tmp_path / "start" / "model.safetensors")
    assert {str(tensor.dtype) for tensor in weights.values()} == {"torch.float16"}
    options = tiny_options(corpus, tmp_path / "next", max_steps=20, precision="bf16")
    summary = train(
        TrainOptions(**{**options.__dict__, "config": None, "init": str(tmp_path / "start")})
    )
    assert summary.steps == 20 and summary.final_train_loss == summary.final_train_loss  # no NaN
    weights = load_file(tmp_path / "next" / "model.safetensors")
    assert {str(tensor.dtype) for tensor in weights.values()} == {"torch.float32"}


def test_data_workers_read_disjoint_shares_of_a_file(tmp_path: Path) -> None:
    """Each data worker streams its own every-n-th line, so the workers don't all start on the
    same lines; a file shorter than the worker count gives the empty shares the whole file."""
    from itertools import islice

    from tiankong.training.train_data import endless_lines

    text = tmp_path / "lines.txt"
    text.write_text("".join(f"第{n}行\n" for n in range(10)), encoding="utf-8")
    shares = [list(islice(endless_lines(text, shard, 3), 4)) for shard in range(3)]
    assert shares[0] == ["第0行", "第3行", "第6行", "第9行"]
    assert shares[1] == ["第1行", "第4行", "第7行", "第1行"]
    assert shares[2] == ["第2行", "第5行", "第8行", "第2行"]
    short = tmp_path / "short.txt"
    short.write_text("一\n二\n", encoding="utf-8")
    assert list(islice(endless_lines(short, 2, 3), 3)) == ["一", "二", "一"]
    assert list(islice(endless_lines(short, 1, 3), 3)) == ["二", "二", "二"]


def test_a_long_line_is_read_as_its_pieces_each_pass(tmp_path: Path) -> None:
    """A novel with no line breaks (one line of millions of characters) was read whole for each
    line the shuffle buffer took: 100,000 reads of the file before the first step, half an hour
    (a review). It is its consecutive pieces, every part of it drawn, in one read a pass."""
    from itertools import islice
    from unittest import mock

    from tiankong.training import train_data

    novel = "".join(LINES) * 50
    text = tmp_path / "novel.txt"
    text.write_text(novel + "\n", encoding="utf-8")
    reads = mock.patch.object(train_data, "read_lines", wraps=train_data.read_lines)
    with reads as spy:
        lines = list(islice(train_data.endless_lines(text, piece=100), len(novel) // 100))
    assert spy.call_count == 1  # one pass gave them all
    assert all(len(line) == 100 for line in lines)
    assert "".join(lines) == novel[: len(lines) * 100]  # consecutive: every part is drawn


def test_a_very_long_line_is_cut_before_it_is_tokenized(corpus: Path, tmp_path: Path) -> None:
    """256 whole lines went to the tokenizer at once, kept for one 63-token window each: lines
    of 5,000 characters took 2.7 GB, one of 40,000 17.7 GB. Each now goes in as a window."""
    import random

    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    from tiankong.training.train_batches import LINE_WINDOW_PER_TOKEN, pretraining_batches

    long_line = "".join(LINES) * 1000  # about 64,000 characters
    data = tmp_path / "long.txt"
    data.write_text("\n".join([long_line, *LINES]) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(str(VOCAB_FILE), do_lower_case=False)
    seen: list[int] = []

    class Spy(BertTokenizerFast):  # type: ignore[misc]
        def __call__(self, text, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.extend(len(t) for t in ([text] if isinstance(text, str) else text))
            return super().__call__(text, *args, **kwargs)

    tokenizer.__class__ = Spy
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    options = tiny_options(corpus, tmp_path / "run", data=(str(data),))
    batches = pretraining_batches(options, tokenizer, collator, random.Random(0))
    for _ in range(3):
        batch = next(batches)
        assert tuple(batch["input_ids"].shape) == (options.batch_size, options.seq_len)
    limit = options.seq_len * LINE_WINDOW_PER_TOKEN
    assert seen and max(seen) == limit  # the long line, cut; the others whole


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_saves_the_run_between_two_steps(
    corpus: Path, tmp_path: Path, signal_name: str
) -> None:
    """Ctrl-C lost every step since the last --save-every and said nothing of where to resume:
    the run now stops after its step, saves there, and a resume equals the straight run."""
    import os
    import signal

    import torch
    from safetensors.torch import load_file

    from tiankong.training.train import TrainingStopped

    straight = train(tiny_options(corpus, tmp_path / "straight"))

    def press(state, metrics) -> None:  # type: ignore[no-untyped-def]
        if state.step == 7:  # --save-every 20: nothing saved yet
            os.kill(os.getpid(), getattr(signal, signal_name))

    with pytest.raises(TrainingStopped) as stopped:
        train(tiny_options(corpus, tmp_path / "split"), press)
    assert stopped.value.step == 7 and isinstance(stopped.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was
    saved = torch.load(tmp_path / "split" / "checkpoint" / "trainer_state.pt", weights_only=False)
    assert saved["state"]["step"] == 7
    # the same command without --resume wrote over the stopped run with no word (a review)
    with pytest.raises(BadOptionError, match="holds a run that stopped before it finished"):
        train(tiny_options(corpus, tmp_path / "split"))
    resumed = train(tiny_options(corpus, tmp_path / "split", resume=True))
    assert resumed.steps == 40 == straight.steps
    a = load_file(tmp_path / "straight" / "model.safetensors")
    b = load_file(tmp_path / "split" / "model.safetensors")
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5), name


@pytest.mark.processes
def test_a_stop_sent_to_the_whole_group_saves_a_run_with_data_workers(
    corpus: Path, tmp_path: Path
) -> None:
    """A container's stop (SIGTERM to the process group) killed the data workers first, and the
    run failed with "DataLoader worker exited unexpectedly", saving nothing."""
    import os
    import signal
    import time

    out = tmp_path / "run"
    command = [sys.executable, "-m", "tiankong", "train", "--out", str(out), "--config", "tiny"]
    command += ["--data", str(corpus / "tiny.txt.xz"), "--max-steps", "100000", "--seq-len", "32"]
    command += [
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--data-workers",
        "1",
        "--save-every",
        "50000",
    ]
    command += ["--warmup-steps", "10"]
    run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        assert run.stdout is not None
        started = time.monotonic()
        for line in run.stdout:  # a plain line every 100 steps when not on a terminal
            if line.startswith("step 100/") or time.monotonic() - started > 240:
                break
        os.killpg(run.pid, signal.SIGTERM)
        rest, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == 130, rest[-2000:]
    assert "saved the run at step" in rest and (out / "checkpoint" / "trainer_state.pt").exists()


def test_a_resume_over_a_data_file_changed_in_place_is_refused(
    corpus: Path, tmp_path: Path
) -> None:
    """The recipe named --data by its path alone: a file replaced in place was resumed through,
    the replay skipping through another stream, with no word (a review). Its size and
    modification time are kept with the run, and a change is refused."""
    import os

    data = tmp_path / "data.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    first = tiny_options(corpus, tmp_path / "run", data=(str(data),), stop_after_steps=3)
    assert train(first).steps == 3
    resume = tiny_options(corpus, tmp_path / "run", data=(str(data),), resume=True)
    data.write_text("\n".join(reversed(LINES)) + "\n", encoding="utf-8")  # the same size
    with pytest.raises(BadDataFileError, match=r"'.*data\.txt' has changed since the run began"):
        train(resume)
    # put back as it was, byte for byte, with a new modification time: it resumes (a
    # verifying review saw a restored copy refused when size and time were compared)
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert train(resume).steps == first.max_steps


def test_a_run_whose_loss_becomes_nan_stops_in_one_sentence(corpus: Path, tmp_path: Path) -> None:
    """`--lr 1e10` (now past the most it takes) wrote a model of NaN weights with exit 0 (its
    summary showed an earlier, finite loss), and every use of it was a traceback (a review)."""
    from tiankong.errors import BadOptionError

    out = tmp_path / "run"
    options = tiny_options(corpus, out, lr=1e6, warmup_steps=0, max_steps=5)
    with pytest.raises(BadOptionError, match=r"diverged at step \d: its loss is not a number"):
        train(options)
    assert not (out / "model.safetensors").exists()
