"""The caches: a thread-safe LRU, the tokenization cache, and the result cache's key."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest

from tiankong import FillMasker, FillResult, Settings
from tiankong.core.decoding import Constraints
from tiankong.core.options import PredictOptions
from tiankong.engines.fake import FakeEngine
from tiankong.errors import BadOptionError, NoMaskError
from tiankong.server.metrics import ServerMetrics
from tiankong.serving.caches import LRUCache, PlainKey, ResultKey
from tiankong.serving.predictor import Predictor

POEM = "春眠不觉晓，处处闻啼[MASK]。"
WORD = "手机没电了，赶紧去[MASK][MASK]。"


# --- the LRU itself ----------------------------------------------------------------------


def test_lru_evicts_the_least_recently_used() -> None:
    seen: list[tuple[str, bool]] = []
    cache: LRUCache[str, int] = LRUCache("demo", 2, lambda name, hit: seen.append((name, hit)))
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses, len(cache)) == (3, 1, 2)
    assert seen == [("demo", True), ("demo", False), ("demo", True), ("demo", True)]
    assert cache.stats() == {"size": 2, "entries": 2, "hits": 3, "misses": 1}


def test_size_zero_turns_a_cache_off() -> None:
    cache: LRUCache[str, int] = LRUCache("off", 0)
    assert cache.get_or_compute("a", lambda: 1) == 1
    assert cache.get_or_compute("a", lambda: 2) == 2  # computed again, nothing stored
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)


def test_an_error_is_raised_not_cached() -> None:
    cache: LRUCache[str, int] = LRUCache("errors", 4)
    calls = 0

    def failing() -> int:
        nonlocal calls
        calls += 1
        raise ValueError("bad")

    for _ in range(2):
        with pytest.raises(ValueError):
            cache.get_or_compute("x", failing)
    assert calls == 2 and len(cache) == 0


def test_the_lru_is_safe_across_threads() -> None:
    cache: LRUCache[int, int] = LRUCache("threads", 64)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        try:
            for step in range(5_000):
                key = (seed * 7 + step) % 200
                assert cache.get_or_compute(key, lambda key=key: key * 2) == key * 2
        except BaseException as error:  # surfaces in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=hammer, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(cache) <= 64
    assert cache.hits + cache.misses == 8 * 5_000


# --- the result key ----------------------------------------------------------------------


def test_the_result_key_holds_model_engine_precision_text_and_every_option() -> None:
    base = ResultKey("m", "/models/m", "onnx", "int8", POEM, PredictOptions(top_k=5))
    variants = [
        dataclasses.replace(base, model="other"),
        dataclasses.replace(base, model_path="/models/other"),
        dataclasses.replace(base, engine="torch"),
        dataclasses.replace(base, precision="fp32"),
        dataclasses.replace(base, text=POEM + "。"),
        dataclasses.replace(base, options=PlainKey(5)),
    ]
    option_changes: list[dict[str, Any]] = [
        {"top_k": 6},
        {"mode": "whole_word"},
        {"beam_width": 4},
        {"order": "confident_first"},
        {"candidates": ("鸟",)},
        {"constraints": Constraints(preset="chinese_only")},
        {"constraints": Constraints(allowed=("鸟",))},
        {"constraints": Constraints(exclude=("鸟",))},
        {"max_blank_length": 2},
        {"length_alpha": 1.0},
    ]
    variants += [
        dataclasses.replace(base, options=dataclasses.replace(PredictOptions(top_k=5), **change))
        for change in option_changes
    ]
    assert len({base, *variants}) == len(variants) + 1  # every change is a different key
    same = ResultKey("m", "/models/m", "onnx", "int8", POEM, PredictOptions(top_k=5))
    assert same == base and hash(same) == hash(base)
    allowed = np.zeros(10, dtype=bool)
    allowed[[3, 7]] = True
    assert PlainKey.of(5, allowed) == PlainKey(5, (3, 7)) != PlainKey(5)


# --- the caches in the Predictor ---------------------------------------------------------


class PrecisionEngine(FakeEngine):
    """A FakeEngine that claims another precision (for the key)."""

    precision = "int8"


def fake_masker(tiny_masker: FillMasker, engine: FakeEngine | None = None) -> FillMasker:
    engine = engine or FakeEngine(len(tiny_masker.encoder.vocab))
    return FillMasker(tiny_masker.model, tiny_masker.encoder, engine, tiny_masker.settings)


@asynccontextmanager
async def running(
    masker: FillMasker, **settings: Any
) -> AsyncIterator[tuple[Predictor, ServerMetrics]]:
    metrics = ServerMetrics()
    predictor = Predictor(masker, Settings(batch_window_ms=0, **settings), metrics)
    await predictor.start()
    try:
        yield predictor, metrics
    finally:
        await predictor.close()


def sample(metrics: ServerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.mark.anyio
async def test_identical_plain_requests_hit_and_any_difference_misses(
    tiny_masker: FillMasker,
) -> None:
    masker = fake_masker(tiny_masker)
    engine = masker.engine
    assert isinstance(engine, FakeEngine)
    async with running(masker) as (predictor, metrics):
        prepared = [predictor.prepare(POEM)]
        [first] = await predictor.run(prepared, 3)
        [again] = await predictor.run([predictor.prepare(POEM)], 3)
        assert again is first and engine.calls == [1]  # no engine call for the hit
        await predictor.run(prepared, 4)  # another top_k
        allowed = np.zeros(len(masker.encoder.vocab), dtype=bool)
        allowed[masker.encoder.vocab["鸟"]] = True
        await predictor.run(prepared, 3, allowed)  # HF targets
        await predictor.run(prepared, 3, allowed)  # ... the same targets again: a hit
        assert engine.calls == [1, 1, 1]
        assert sample(metrics, "tiankong_cache_hits_total", cache="results") == 2
        assert sample(metrics, "tiankong_cache_misses_total", cache="results") == 3
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.text = "changed"  # type: ignore[misc]


@pytest.mark.anyio
async def test_a_long_text_or_a_large_result_is_answered_not_kept(tiny_masker: FillMasker) -> None:
    """The caches count entries: 4,096 texts of 10,000 characters took a server from 400 to
    964 MB, 1,024 results of 16 masks at top-k 50 to 875 MB (a review). A text over 1,000
    characters, or a result of more than 100 candidates, is not kept."""
    masker = fake_masker(tiny_masker)
    engine = masker.engine
    assert isinstance(engine, FakeEngine)
    long = "字" * 1_001 + "[MASK]"
    many = "".join(f"第{i}[MASK]" for i in range(3))
    async with running(masker) as (predictor, _):
        for _ in range(2):
            await predictor.run([predictor.prepare(long)], 1)  # a long text, run twice
            await predictor.run([predictor.prepare(many)], 34)  # 3 x 34 = 102 candidates
            await predictor.run([predictor.prepare(many)], 33)  # 99: kept
        assert engine.calls == [1, 1, 1, 1, 1]
        assert long not in predictor.token_cache.entries and many in predictor.token_cache.entries


@pytest.mark.anyio
async def test_a_mixed_request_runs_only_its_misses(tiny_masker: FillMasker) -> None:
    masker = fake_masker(tiny_masker)
    engine = masker.engine
    assert isinstance(engine, FakeEngine)
    async with running(masker) as (predictor, _):
        [cached] = await predictor.run([predictor.prepare(POEM)], 2)
        texts = ["画龙点[MASK]", POEM, "守株待[MASK]"]
        results = await predictor.run([predictor.prepare(text) for text in texts], 2)
    assert [result.text for result in results] == texts and results[1] is cached
    assert engine.calls == [1, 2]


async def run_text(predictor: Predictor, text: str, options: PredictOptions) -> FillResult:
    """One text through the predictor as a route runs it: prepared, then run."""
    return await predictor.run_request(predictor.prepare_request(text, options))


@pytest.mark.anyio
async def test_option_modes_hit_only_with_every_option_equal(tiny_masker: FillMasker) -> None:
    masker = fake_masker(tiny_masker)
    engine = masker.engine
    assert isinstance(engine, FakeEngine)
    async with running(masker) as (predictor, metrics):
        options = masker.options(3, mode="whole_word")
        first = await run_text(predictor, WORD, options)
        calls = len(engine.calls)
        assert await run_text(predictor, WORD, masker.options(3, mode="whole_word")) is first
        assert len(engine.calls) == calls
        await run_text(predictor, WORD, masker.options(3, mode="whole_word", beam_width=2))
        await run_text(predictor, WORD, masker.options(2, mode="whole_word"))
        await run_text(predictor, WORD, masker.options(3, candidates=("充电", "吃饭")))
        assert sample(metrics, "tiankong_cache_hits_total", cache="results") == 1
        assert sample(metrics, "tiankong_cache_misses_total", cache="results") == 4


@pytest.mark.anyio
async def test_the_key_names_the_model_engine_and_precision(tiny_masker: FillMasker) -> None:
    plain = fake_masker(tiny_masker)
    int8 = fake_masker(tiny_masker, PrecisionEngine(len(tiny_masker.encoder.vocab)))
    async with running(plain) as (fp32_predictor, _), running(int8) as (int8_predictor, _):
        fp32_key = fp32_predictor.result_key(POEM, PlainKey(5))
        int8_key = int8_predictor.result_key(POEM, PlainKey(5))
    assert (fp32_key.model, fp32_key.engine, fp32_key.precision) == (
        tiny_masker.model.name,
        "fake",
        "fp32",
    )
    assert fp32_key.model_path == str(tiny_masker.model.path)
    assert int8_key.precision == "int8" and int8_key != fp32_key


@pytest.mark.anyio
async def test_result_cache_size_zero_always_runs(tiny_masker: FillMasker) -> None:
    masker = fake_masker(tiny_masker)
    engine = masker.engine
    assert isinstance(engine, FakeEngine)
    async with running(masker, result_cache_size=0) as (predictor, metrics):
        for _ in range(3):
            await predictor.run([predictor.prepare(POEM)], 3)
        assert engine.calls == [1, 1, 1]
        assert sample(metrics, "tiankong_cache_misses_total", cache="results") == 0


@pytest.mark.anyio
async def test_tokenization_is_cached_by_raw_text_and_errors_are_not(
    tiny_masker: FillMasker,
) -> None:
    async with running(fake_masker(tiny_masker), token_cache_size=2) as (predictor, metrics):
        first = predictor.prepare(POEM)
        assert predictor.prepare(POEM) is first
        assert predictor.prepare("春眠不觉晓，处处闻啼【mask】。") is not first  # another raw text
        for _ in range(2):
            with pytest.raises(NoMaskError):
                predictor.prepare("no mask here")
        assert sample(metrics, "tiankong_cache_hits_total", cache="tokens") == 1
        assert sample(metrics, "tiankong_cache_misses_total", cache="tokens") == 4
        assert predictor.token_cache.stats()["entries"] == 2


def test_negative_cache_sizes_are_refused(tiny_masker: FillMasker) -> None:
    with pytest.raises(BadOptionError):
        Predictor(fake_masker(tiny_masker), Settings(result_cache_size=-1), ServerMetrics())
