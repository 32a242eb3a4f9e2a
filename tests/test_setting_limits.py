"""The settings' limits: a value out of a row's range (config.py's ``at_least`` / ``at_most``) and
a window longer than the model's positions (``service.check_window``) are one sentence, exit 2,
never an engine's or a socket's traceback."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import besides_first_run_notes, run_cli
from server_helpers import local_client

from tiankong import FillMasker, Settings
from tiankong.config import MAX_THREADS, MIN_WINDOW, check_settings, setting
from tiankong.errors import BadOptionError
from tiankong.server import create_app

LONG_TEXT = "天" * 700 + "[MASK]"  # more tokens than BERT's 512 positions


@dataclass(frozen=True)
class Bounded:
    """Rows with an upper bound, apart from Settings: alone, and with a lower one."""

    most: int = setting(5, "--most", help="At most 10.", at_most=10)
    ranged: int = setting(5, "--ranged", help="0 to 10.", at_least=0, at_most=10)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"most": 11}, "--most must be 10 or less; got 11."),
        ({"ranged": 11}, "--ranged must be from 0 to 10; got 11."),
        ({"ranged": -1}, "--ranged must be from 0 to 10; got -1."),
    ],
)
def test_an_upper_bound_is_one_sentence(values: dict[str, int], words: str) -> None:
    with pytest.raises(BadOptionError) as refused:
        check_settings(Bounded(**values))
    assert refused.value.message == words


def test_the_bounds_themselves_pass() -> None:
    check_settings(Bounded(most=10, ranged=0))
    check_settings(Bounded(most=-5, ranged=10))


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"port": 70000}, "--port must be from 0 to 65535; got 70000."),
        ({"port": -1}, "--port must be from 0 to 65535; got -1."),
        ({"threads": 100_000}, f"--threads must be from 0 to {MAX_THREADS}; got 100000."),
        ({"threads": -1}, f"--threads must be from 0 to {MAX_THREADS}; got -1."),
        ({"max_length": 0}, f"--max-length must be {MIN_WINDOW} or more; got 0."),
        ({"max_length": 3}, f"--max-length must be {MIN_WINDOW} or more; got 3."),
        ({"max_masks": 0}, "max_masks must be 1 or more; got 0."),
        ({"max_text_chars": 0}, "max_text_chars must be 1 or more; got 0."),
        ({"max_check_chars": -1}, "max_check_chars must be 1 or more; got -1."),
        ({"max_body_bytes": -5}, "--max-body-bytes must be 1 or more; got -5."),
        ({"max_body_bytes": 0}, "--max-body-bytes must be 1 or more; got 0."),
        ({"max_batch_texts": 0}, "--max-batch-texts must be 1 or more; got 0."),
        # "" fell back to the default (the bundled model, the user's cache), and " " read as
        # the working folder
        ({"model": ""}, "--model is empty; give a value or leave it out."),
        ({"model": " "}, "--model is empty; give a value or leave it out."),
        ({"onnx_cache_dir": ""}, "--onnx-cache-dir is empty; give a value or leave it out."),
        ({"host": "\t"}, "--host is empty; give a value or leave it out."),
        ({"api_keys_file": ""}, "--api-keys-file is empty; give a value or leave it out."),
    ],
)
def test_settings_out_of_range_are_refused(values: dict[str, Any], words: str) -> None:
    with pytest.raises(BadOptionError) as refused:
        check_settings(Settings(**values))
    assert refused.value.message == words


def test_settings_at_their_limits_pass() -> None:
    # port 0: the OS picks a free one (tests run `serve --port 0`)
    check_settings(Settings(port=0, threads=0, max_length=MIN_WINDOW, max_masks=1))
    check_settings(Settings(port=65535, threads=MAX_THREADS, max_text_chars=1, max_check_chars=1))
    assert Settings().threads <= MAX_THREADS  # the default (this host's cores) is within it


@pytest.fixture(scope="module")
def short_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with 64 positions written in its config.json (its weights have 512)."""
    folder = Path(shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("short") / "model"))
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "max_position_embeddings": 64}))
    return folder


def test_a_window_longer_than_the_model_is_refused_on_load(tiny_model_dir: Path) -> None:
    settings = Settings(engine="torch", threads=1, max_length=513)
    with pytest.raises(BadOptionError) as refused:
        FillMasker.load(str(tiny_model_dir), settings)
    assert refused.value.message == (
        f"--max-length 513 is more than model '{tiny_model_dir.name}' can read: it has 512 "
        "positions (max_position_embeddings); use --max-length 512 or less."
    )


def test_the_default_window_is_refused_for_a_model_with_fewer_positions(
    short_model_dir: Path,
) -> None:
    """Refused, but not as if the user had asked for --max-length 128 (a review: "although I
    never passed --max-length")."""
    with pytest.raises(BadOptionError) as refused:
        FillMasker.load(str(short_model_dir), Settings(engine="torch", threads=1))
    assert refused.value.message == (
        f"Model '{short_model_dir.name}' reads at most 64 tokens (max_position_embeddings), "
        "fewer than the window of 128 (--max-length, 128 by default); pass --max-length 64 "
        "(or less)."
    )


def test_a_roberta_window_counts_the_positions_it_can_read(tmp_path: Path) -> None:
    """RoBERTa's positions start after its padding id (pad_token_id 1: two unread), so 66 of
    them read 64 tokens: a window of 66 crashed in the engine (a 500 on the server)."""
    import torch
    from transformers import BertTokenizer, RobertaConfig, RobertaForMaskedLM

    from tiankong.core.models import VOCAB_FILE

    torch.manual_seed(0)
    folder = tmp_path / "roberta"
    config = RobertaConfig(
        vocab_size=21128, max_position_embeddings=66, type_vocab_size=1, hidden_size=32,
        num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        tokenizer_class="BertTokenizer",
    )  # fmt: skip
    RobertaForMaskedLM(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    refused = r"it has 64 positions \(max_position_embeddings 66 less the 2 before"
    with pytest.raises(BadOptionError, match=refused):
        FillMasker.load(str(folder), Settings(engine="torch", threads=1, max_length=66))
    masker = FillMasker.load(str(folder), Settings(engine="torch", threads=1, max_length=64))
    result = masker.predict("春眠不觉晓，" * 30 + "处处闻啼[MASK]。", index=False)
    assert result.truncated and result.masks[0]


def test_the_model_window_serves_long_text_truncated(tiny_model_dir: Path) -> None:
    masker = FillMasker.load(
        str(tiny_model_dir), Settings(engine="torch", threads=1, max_length=512, index="none")
    )
    result = masker.predict(LONG_TEXT)
    assert result.truncated and result.masks[0]


def test_load_checks_the_settings_rules(tiny_model_dir: Path) -> None:
    with pytest.raises(BadOptionError, match="--max-length must be 4 or more; got 0"):
        FillMasker.load(str(tiny_model_dir), Settings(engine="torch", threads=1, max_length=0))


def test_a_server_with_a_window_longer_than_the_model_does_not_start(
    tiny_model_dir: Path,
) -> None:
    """Before: it started, then answered every long text (and its batch) with 500."""
    settings = Settings(engine="torch", threads=1, model=str(tiny_model_dir), max_length=1024)
    app = create_app(settings)  # the model loads at startup
    with pytest.raises(BadOptionError, match="it has 512 positions"), local_client(app):
        pass


def test_a_server_refuses_settings_that_refuse_every_text(settings: Settings) -> None:
    """Before: max_masks=0 refused the warm-up's text, a startup traceback."""
    with pytest.raises(BadOptionError, match="max_masks must be 1 or more"):
        create_app(replace(settings, max_masks=0))


@pytest.mark.processes
@pytest.mark.usefixtures("onnx_exports")  # a model that loads starts without torch
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["serve", "--port", "70000"], "--port must be from 0 to 65535; got 70000."),
        (["serve", "--port", "-1"], "--port must be from 0 to 65535; got -1."),
        (["serve", "--max-length", "1"], "--max-length must be 4 or more; got 1."),
        (["predict", "天[MASK]", "--max-length", "0"], "--max-length must be 4 or more; got 0."),
        (
            ["predict", "天[MASK]", "--threads", "100000"],
            f"--threads must be from 0 to {MAX_THREADS}; got 100000.",
        ),
        (["predict", LONG_TEXT, "--max-length", "2000"], "--max-length 2000 is more than model"),
        (["check", "画龙点晴。", "--max-length", "2000"], "--max-length 2000 is more than model"),
        (["serve", "--max-length", "1024", "--port", "0"], "--max-length 1024 is more than model"),
    ],
)
def test_the_cli_says_a_limit_in_one_sentence(
    tiny_model_dir: Path, args: list[str], words: str
) -> None:
    done = run_cli(*args, "--model", str(tiny_model_dir), "--engine", "onnx")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert besides_first_run_notes(done.stderr)[0].startswith(f"error: {words}"), done.stderr
    assert len(besides_first_run_notes(done.stderr)) == 1


def test_the_top_k_settings(tiny_model_dir: Path) -> None:
    """default_top_k is the library's default too (predict answered 5 whatever it was), and a
    max_top_k below 1 is refused at load (every call failed after the model had loaded)."""
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1, default_top_k=3)
    masker = FillMasker.load(settings=settings)
    assert len(masker.predict("春眠不觉晓，处处闻啼[MASK]。").masks[0]) == 3
    with pytest.raises(BadOptionError, match="max_top_k must be 1 or more; got 0"):
        FillMasker.load(settings=replace(settings, max_top_k=0))
    # each within its own range, the two disagreeing: every call without a top_k was refused
    with pytest.raises(BadOptionError, match=r"default_top_k \(100\) is more than max_top_k"):
        FillMasker.load(settings=replace(settings, default_top_k=100))


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        # inf held the engine for good: every request a 504 while the probes said 200
        ({"batch_window_ms": float("inf")}, "--batch-window-ms must be a finite number; got inf."),
        ({"batch_window_ms": float("nan")}, "--batch-window-ms must be a finite number; got nan."),
        ({"batch_window_ms": 60_001.0}, "--batch-window-ms must be from 0 to 60000; got 60001."),
        # 1e10 was an OverflowError traceback from the drain's watchdog at SIGTERM
        (
            {"drain_timeout_s": 1e10},
            "--drain-timeout (drain_timeout_s) must be 86400 or less; got 1e+10.",
        ),
        (
            {"request_timeout_s": float("inf")},
            "--request-timeout (request_timeout_s) must be a finite number; got inf.",
        ),
        (
            {"client_timeout_s": 86_401.0},
            "--client-timeout (client_timeout_s) must be from 0.1 to 86400; got 86401.",
        ),
        # 1e-9 was taken, and every connection closed before its headers came, /ready's too
        (
            {"client_timeout_s": 1e-9},
            "--client-timeout (client_timeout_s) must be from 0.1 to 86400; got 1e-09.",
        ),
        ({"int8_min_agreement": float("nan")}, "must be a finite number; got nan."),
    ],
)
def test_a_time_setting_past_what_a_timer_takes_is_refused(
    changes: dict[str, float], words: str
) -> None:
    """A review's reproductions: each was taken at startup and broke the server later."""
    with pytest.raises(BadOptionError) as refused:
        check_settings(Settings(**changes))
    assert refused.value.message.endswith(words), refused.value.message


@pytest.mark.processes
def test_an_infinite_batch_window_in_the_env_stops_serve() -> None:
    done = run_cli("serve", "--port", "1", env={"TIANKONG_BATCH_WINDOW_MS": "inf"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: --batch-window-ms must be a finite number; got inf."


def test_a_split_is_asked_for_with_the_precision_that_makes_one() -> None:
    """--split-engines with --precision fp32 was taken and did nothing (a verifying review)."""
    check_settings(Settings(split_engines=True))  # auto: the measured choice may split
    with pytest.raises(BadOptionError, match="--split-engines applies to --precision auto"):
        check_settings(Settings(split_engines=True, precision="fp32"))
