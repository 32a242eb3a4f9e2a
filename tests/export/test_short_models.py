"""A model with fewer positions than the default window (128): the INT8 guard, the timed batches
and the calibration rows are cut to what it reads (``core.models.usable_positions``, the rule
``service.check_window`` holds the served window to), so ``--precision auto`` exports it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_bert import build_tiny_bert

from tiankong.core.models import VOCAB_FILE
from tiankong.engines.base import EncodedBatch
from tiankong.engines.fake import FakeEngine
from tiankong.errors import ModelUnavailableError
from tiankong.export import openvino_int8
from tiankong.export.quality_guard import compare_engines, guard_sentences

POSITIONS = 16


def model_folder(folder: Path, **config: object) -> Path:
    """A folder with a tokenizer and a config.json, enough for the guard's text side."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(VOCAB_FILE, folder / "vocab.txt")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


class ShortEngine(FakeEngine):
    """Fails as ONNX Runtime does on a row longer than the model's positions."""

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        if batch.input_ids.shape[1] > POSITIONS:
            raise RuntimeError("EmbedLayerNormalization: input index out of range")
        return super().mask_logits(batch)


def test_the_guard_measures_a_model_with_16_positions(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", model_type="bert", max_position_embeddings=POSITIONS)
    engine = ShortEngine(vocab_size=21128)
    figures = compare_engines(engine, engine, folder)
    # every guard sentence fits once cut to the window around its masks (none is left out)
    assert figures["sentences"] == len(guard_sentences())
    assert figures["top1_agreement"] == 1.0


def test_rows_follow_the_positions_rule_roberta_offset_included(tmp_path: Path) -> None:
    from tiankong.core.models import usable_positions
    from tiankong.export.quality_guard import model_encoder

    bert = model_folder(tmp_path / "bert", model_type="bert", max_position_embeddings=512)
    assert model_encoder(bert).limits.max_length == 128  # the default window, as before
    roberta = model_folder(
        tmp_path / "roberta", model_type="roberta", max_position_embeddings=18, pad_token_id=1
    )
    positions = usable_positions(roberta)
    assert positions is not None and positions.usable == POSITIONS
    encoder = model_encoder(roberta)
    assert encoder.limits.max_length == POSITIONS
    batches = openvino_int8.calibration_batches(encoder)
    assert sum(len(batch.input_ids) for batch in batches) == len(openvino_int8.calibration_texts())
    assert max(batch.input_ids.shape[1] for batch in batches) <= POSITIONS


def test_a_sentence_is_cut_around_its_masks_or_left_out_when_they_do_not_fit(
    tmp_path: Path,
) -> None:
    from tiankong.export.quality_guard import model_encoder, prepare_to_fit

    folder = model_folder(tmp_path / "m", model_type="bert", max_position_embeddings=8)
    encoder = model_encoder(folder)
    long_one = "一二三四五六七八九十[MASK]一二三四五六七八九十"
    apart = "[MASK]一二三四五六七八九十[MASK]"
    prepared = prepare_to_fit(encoder, [long_one, apart])
    assert len(prepared) == 1 and prepared[0].truncated and len(prepared[0].input_ids) == 8
    with pytest.raises(ModelUnavailableError, match="8-token rows"):
        prepare_to_fit(encoder, [apart])


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert-16"), positions=POSITIONS)


@pytest.mark.processes  # the CLI and its export workers
def test_eval_on_auto_precision_exports_a_16_position_model(
    short_model: Path, tmp_path: Path
) -> None:
    """The issue's command: exit 3 ("input index out of range" in the guard) before."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "春眠不觉晓，处处闻啼[MASK]。", "answers": ["鸟"]}\n')
    env = {**os.environ, "TIANKONG_ONNX_CACHE_DIR": str(tmp_path / "onnx")}
    command = [sys.executable, "-m", "tiankong", "eval", str(items)]
    options = ["--model", str(short_model), "--max-length", str(POSITIONS), "--threads", "1"]
    done = subprocess.run(
        [*command, *options], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    manifests = [
        json.loads(path.read_text())
        for path in (tmp_path / "onnx").glob("*-int8-*/tiankong-export.json")
    ]
    assert manifests and manifests[0]["quality"]["sentences"] == len(guard_sentences())


@pytest.mark.parametrize(
    ("model_type", "pad", "usable"),
    [
        ("longformer", 1, 512),
        ("roberta-prelayernorm", 1, 512),
        ("ibert", 1, 512),
        ("mpnet", 0, 513),
    ],
)
def test_every_family_that_numbers_positions_after_padding_is_offset(
    tmp_path: Path, model_type: str, pad: int, usable: int
) -> None:
    """These families' windows were checked as BERT's: --max-length 514 passed, and the row
    failed in the engine (a traceback in the CLI, a 500 for every request batched with it)."""
    from tiankong.core.models import usable_positions

    folder = model_folder(
        tmp_path / model_type, model_type=model_type, max_position_embeddings=514, pad_token_id=pad
    )
    positions = usable_positions(folder)
    assert positions is not None and positions.usable == usable
