"""--precision auto's split behind the server: batches under the split's rows go to the lone
engine, the rest to the other, and the warm-up before /ready runs each engine once."""

from __future__ import annotations

import pytest
from server_helpers import local_client

from tiankong import FillMasker, Settings
from tiankong.engines.fake import FakeEngine
from tiankong.engines.onnx_engine import guard_line
from tiankong.engines.split import SplitEngine, served_text
from tiankong.server.metrics import ServerMetrics
from tiankong.serving.predictor import Predictor

TEXTS = ["春眠不觉晓，处处闻啼[MASK]。", "[MASK]龙点睛", "他[MASK]天去公园散步。", "床前明[MASK]光"]


def split_masker(tiny_masker: FillMasker, rows: int) -> tuple[FillMasker, FakeEngine, FakeEngine]:
    vocab = len(tiny_masker.encoder.vocab)
    lone, batch = FakeEngine(vocab), FakeEngine(vocab)
    engine = SplitEngine(lone, batch, rows)
    return (
        FillMasker(tiny_masker.model, tiny_masker.encoder, engine, tiny_masker.settings),
        lone,
        batch,
    )


def test_batches_under_the_rows_go_to_the_lone_engine(tiny_masker: FillMasker) -> None:
    masker, lone, batch = split_masker(tiny_masker, rows=3)
    for size in (1, 2, 3, 4):
        masker.run_prepared([masker.prepare(text) for text in TEXTS[:size]], 1)
    assert (lone.calls, batch.calls) == ([1, 2], [3, 4])
    with pytest.raises(ValueError, match="2 or more"):
        SplitEngine(lone, batch, rows=1)


@pytest.mark.anyio
async def test_the_warm_up_runs_both_engines(tiny_masker: FillMasker) -> None:
    masker, lone, batch = split_masker(tiny_masker, rows=8)
    predictor = Predictor(masker, Settings(batch_window_ms=0), ServerMetrics())
    await predictor.start()
    try:
        await predictor.warm_up()
    finally:
        await predictor.close()
    assert (lone.calls, batch.calls) == ([1], [8])


def slow_engine(tiny_masker: FillMasker, seconds: float) -> FakeEngine:
    """A fake engine whose every call takes ``seconds``, longer than a tiny request timeout."""
    import time

    slow = FakeEngine(len(tiny_masker.encoder.vocab))
    run = slow.mask_logits
    slow.mask_logits = lambda batch: time.sleep(seconds) or run(batch)  # type: ignore[method-assign]
    return slow


@pytest.mark.anyio
async def test_the_warm_up_is_not_held_to_the_request_timeout(tiny_masker: FillMasker) -> None:
    """A --request-timeout shorter than the warm-up's one inference stopped the server's start
    with a RequestTimeoutError traceback (a review): the warm-up is no request."""
    slow = slow_engine(tiny_masker, 0.2)
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, slow, tiny_masker.settings)
    settings = Settings(batch_window_ms=0, request_timeout_s=0.01)
    predictor = Predictor(masker, settings, ServerMetrics())
    await predictor.start()
    try:
        await predictor.warm_up()
    finally:
        await predictor.close()
    assert slow.calls == [1]


def test_a_server_whose_request_timeout_is_shorter_than_its_warm_ups_starts(
    tiny_masker: FillMasker,
) -> None:
    """The proofreading task's warm-up still held the request timeout after the fill's no
    longer did, and stopped the start (a verifying review): the app starts, requests 504."""

    from tiankong.server import create_app

    slow = slow_engine(tiny_masker, 0.1)
    settings = Settings(engine="fake", batch_window_ms=0, request_timeout_s=0.01)
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, slow, settings)
    with local_client(create_app(settings, masker)) as client:
        assert client.get("/ready").status_code == 200
        assert client.post("/check", json={"text": "画龙点晴"}).status_code == 504


def test_the_guard_line_says_which_batches_each_engine_serves() -> None:
    """The INT8 guard's figures are one engine's; with a split, the line names both."""
    lone, batch = FakeEngine(8), FakeEngine(8)
    lone.name, lone.precision, batch.name, batch.precision = "onnx", "int8", "openvino", "bf16"
    quality = {"recipe": {"name": "u8s8"}, "cpu": {"kind": "amx"}, "top1_agreement": 0.99}
    lines = [guard_line("m", quality, served_text(e)) for e in (SplitEngine(lone, batch, 8), lone)]
    assert lines[0].endswith(
        "serving int8 (onnx) for batches under 8 texts, bf16 (openvino) from 8."
    )
    assert lines[1].endswith("serving int8.")
