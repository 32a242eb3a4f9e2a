"""The dynamic batcher on its own: pure asyncio, a recording run_batch, no model.

The engine is held busy deterministically by an exclusive job that blocks the worker thread on
a ``threading.Event``; items that arrive meanwhile queue up, and releasing the gate lets the
scheduler form its batches. No test depends on tight timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from tiankong.errors import (
    BadOptionError,
    EngineError,
    OverloadedError,
    RequestTimeoutError,
    ShuttingDownError,
)
from tiankong.serving.batch_policy import BatchLimits, BatchStats
from tiankong.serving.batching import DynamicBatcher
from tiankong.serving.lone_runs import INLINE_MAX_S, INLINE_MAX_WALL_S

GATE_TIMEOUT_S = 30.0  # a gate never blocks a test forever


@dataclass(frozen=True)
class Item:
    name: str
    size: int = 10


@dataclass
class Recorder:
    """run_batch for tests: records each batch's names, answers ``name.upper()``."""

    fail_on: str | None = None
    gate: threading.Event | None = None  # when given, each batch waits for it on the engine
    delay_s: float = 0.001  # each batch's run, asleep
    busy_s: float = 0.0  # each batch's run, on the CPU (what decides a run inline)
    batches: list[list[str]] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)  # the thread each batch ran on
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, items: list[Item]) -> list[str]:
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            self.batches.append([item.name for item in items])
            self.threads.append(threading.current_thread().name)
            if self.gate is not None:
                self.gate.wait(GATE_TIMEOUT_S)
            if self.fail_on is not None and any(item.name == self.fail_on for item in items):
                raise RuntimeError("engine failure")
            time.sleep(self.delay_s)
            spent = time.thread_time() + self.busy_s
            while time.thread_time() < spent:
                pass
            return [item.name.upper() for item in items]
        finally:
            with self.lock:
                self.active -= 1

    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.batches]


@dataclass
class Observer:
    batches: list[BatchStats] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)

    def observe_batch(self, stats: BatchStats) -> None:
        self.batches.append(stats)

    def set_queue_depth(self, depth: int) -> None:
        self.depths.append(depth)

    def count_batcher_event(self, event: str, count: int = 1) -> None:
        self.events[event] = self.events.get(event, 0) + count


@asynccontextmanager
async def started(
    recorder: Recorder,
    observer: Observer | None = None,
    company: Callable[[], int] | None = None,
    **limits: float,
) -> AsyncIterator[DynamicBatcher[Item, str]]:
    batcher: DynamicBatcher[Item, str] = DynamicBatcher(
        recorder,
        size_of=lambda item: item.size,
        limits=BatchLimits(**{"window_s": 0.0, **limits}),  # type: ignore[arg-type]
        observer=observer,
        company=company,
    )
    await batcher.start()
    try:
        yield batcher
    finally:
        await batcher.close(timeout_s=5)


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


@asynccontextmanager
async def engine_held(batcher: DynamicBatcher[Item, str]) -> AsyncIterator[threading.Event]:
    """Hold the engine with an exclusive job until the block ends (or the gate is set)."""
    gate = threading.Event()
    holder = asyncio.create_task(batcher.run_exclusive(lambda: gate.wait(GATE_TIMEOUT_S)))
    await until(lambda: batcher.busy and batcher.exclusive_waiting == 0)
    try:
        yield gate
    finally:
        gate.set()
        with contextlib.suppress(RequestTimeoutError):  # a short request timeout covers it too
            await holder


def submit_all(batcher: DynamicBatcher[Item, str], items: list[Item]) -> list[asyncio.Task[str]]:
    return [asyncio.create_task(batcher.submit(item)) for item in items]


pytestmark = pytest.mark.anyio


# --- sharing batches ---------------------------------------------------------------------


async def test_concurrent_requests_share_one_batch() -> None:
    recorder = Recorder()
    async with started(recorder) as batcher:
        results = await asyncio.gather(*(batcher.submit(Item(f"t{i}")) for i in range(12)))
    assert results == [f"T{i}" for i in range(12)]  # each future got its own answer
    assert sum(recorder.sizes()) == 12 and len(recorder.batches) < 12


async def test_requests_arriving_while_busy_go_in_the_next_batch() -> None:
    recorder = Recorder()
    async with started(recorder) as batcher:
        async with engine_held(batcher):
            tasks = submit_all(batcher, [Item(f"t{i}") for i in range(8)])
            await until(lambda: batcher.depth == 8)
        assert await asyncio.gather(*tasks) == [f"T{i}" for i in range(8)]
    assert recorder.batches == [[f"t{i}" for i in range(8)]]


async def test_a_lone_request_does_not_wait_for_the_window() -> None:
    recorder = Recorder()
    async with started(recorder, window_s=0.5) as batcher:
        for _ in range(3):
            started_at = time.perf_counter()
            assert await batcher.submit(Item("alone")) == "ALONE"
            assert time.perf_counter() - started_at < 0.25  # far below the 500 ms window


# --- a lone request inline ---------------------------------------------------------------

ENGINE_THREAD = "tiankong-engine_0"
LOOP_THREAD = threading.current_thread().name  # anyio runs the tests' loop on this thread


async def test_a_lone_request_runs_inline_once_lone_runs_are_known_to_be_short() -> None:
    recorder, observer = Recorder(), Observer()
    async with started(recorder, observer, company=lambda: 0) as batcher:
        answers = [await batcher.submit(Item(f"t{i}")) for i in range(3)]
    assert answers == ["T0", "T1", "T2"]
    # the first run has no measure yet, so it takes the engine thread; then the loop's own
    assert recorder.threads == [ENGINE_THREAD, LOOP_THREAD, LOOP_THREAD]
    assert [stats.size for stats in observer.batches] == [1, 1, 1]  # counted like any batch


async def test_nothing_runs_inline_beside_other_requests_a_busy_engine_or_a_slow_one() -> None:
    others = [1]
    recorder = Recorder()
    async with started(recorder, company=lambda: others[0]) as batcher:
        assert await batcher.submit(Item("warm")) == "WARM"
        assert await batcher.submit(Item("company")) == "COMPANY"  # another request in flight
        others[0] = 0
        async with engine_held(batcher):
            queued = asyncio.create_task(batcher.submit(Item("queued")))
            await until(lambda: batcher.depth == 1)  # behind the busy engine, not inline
        assert await queued == "QUEUED"
        many = await batcher.submit_many([Item("a"), Item("b")])  # not a lone text
        assert many == ["A", "B"]
    assert set(recorder.threads) == {ENGINE_THREAD}
    slow = Recorder(busy_s=2 * INLINE_MAX_S)
    async with started(slow, company=lambda: 0) as batcher:
        for index in range(3):
            await batcher.submit(Item(f"s{index}"))
    assert slow.threads == [ENGINE_THREAD] * 3  # its lone runs are too long for the loop
    waiting = Recorder(delay_s=2 * INLINE_MAX_WALL_S)  # long runs that barely use the CPU
    async with started(waiting, company=lambda: 0) as batcher:
        for index in range(3):
            await batcher.submit(Item(f"w{index}"))
    assert waiting.threads == [ENGINE_THREAD] * 3


async def test_an_inline_engine_error_is_one_engine_error_and_serving_goes_on() -> None:
    recorder, observer = Recorder(fail_on="bad"), Observer()
    async with started(recorder, observer, company=lambda: 0) as batcher:
        assert await batcher.submit(Item("warm")) == "WARM"
        with pytest.raises(EngineError) as caught:
            await batcher.submit(Item("bad"))
        assert await batcher.submit(Item("after")) == "AFTER"
    assert recorder.threads[1:] == [LOOP_THREAD, LOOP_THREAD]
    assert len(caught.value.error_id or "") == 12 and (caught.value.error_id or "") in str(
        caught.value
    )
    assert observer.events["failed_batch"] == 1


async def test_the_window_gathers_late_company_once_the_engine_was_busy() -> None:
    recorder = Recorder()
    # a long window, closed early because the batch fills up: no timing race either way
    async with started(recorder, window_s=GATE_TIMEOUT_S, max_size=2) as batcher:
        async with engine_held(batcher):
            first = asyncio.create_task(batcher.submit(Item("early")))
            await until(lambda: batcher.depth == 1)
        await asyncio.sleep(0.05)  # the engine is free now; "early" waits for company
        assert recorder.batches == []
        late = asyncio.create_task(batcher.submit(Item("late")))
        assert await asyncio.gather(first, late) == ["EARLY", "LATE"]
    assert recorder.batches == [["early", "late"]]


# --- limits and buckets ------------------------------------------------------------------


async def test_length_buckets_pad_only_to_the_longest_in_the_batch() -> None:
    recorder, observer = Recorder(), Observer()
    sizes = [10, 100, 11, 101, 12, 102]
    async with started(recorder, observer, max_size=3) as batcher:
        async with engine_held(batcher):
            tasks = submit_all(batcher, [Item(f"s{size}", size) for size in sizes])
            await until(lambda: batcher.depth == len(sizes))
        await asyncio.gather(*tasks)
    assert recorder.batches == [["s10", "s11", "s12"], ["s100", "s101", "s102"]]
    assert [(s.size, s.real_tokens, s.padded_tokens) for s in observer.batches] == [
        (3, 33, 36),
        (3, 303, 306),
    ]


async def test_the_oldest_item_always_goes_next() -> None:
    recorder = Recorder()
    async with started(recorder, max_size=2) as batcher:
        async with engine_held(batcher):
            order = [Item("long", 90), Item("a", 10), Item("b", 10), Item("c", 10)]
            tasks = submit_all(batcher, order)
            await until(lambda: batcher.depth == 4)
        await asyncio.gather(*tasks)
    # the oldest (long) goes first, with its nearest neighbour; not starved by the short ones
    assert recorder.batches == [["c", "long"], ["a", "b"]]


async def test_token_budget_and_max_size_are_respected() -> None:
    recorder, observer = Recorder(), Observer()
    async with started(recorder, observer, max_size=4, max_tokens=100) as batcher:
        async with engine_held(batcher):
            tasks = submit_all(batcher, [Item(f"t{i}", 30) for i in range(7)])
            tasks += submit_all(batcher, [Item(f"u{i}", 5) for i in range(6)])
            tasks += submit_all(batcher, [Item("huge", 500)])
            await until(lambda: batcher.depth == 14)
        await asyncio.gather(*tasks)
    assert all(stats.size <= 4 for stats in observer.batches)
    over_budget = [stats for stats in observer.batches if stats.padded_tokens > 100]
    assert [(stats.size, stats.padded_tokens) for stats in over_budget] == [(1, 500)]  # alone
    # 30s go three to a batch (4 x 30 > 100); the last 30 takes two 5s; four 5s; huge alone
    assert sorted(recorder.sizes()) == [1, 3, 3, 3, 4]
    assert sum(recorder.sizes()) == 14


def test_bad_limits_are_one_sentence() -> None:
    with pytest.raises(BadOptionError):
        BatchLimits(max_size=0).validated()
    with pytest.raises(BadOptionError):
        BatchLimits(window_s=-1).validated()
    with pytest.raises(BadOptionError):
        BatchLimits(timeout_s=0).validated()


# --- failures ----------------------------------------------------------------------------


async def test_an_engine_error_fails_only_its_batch_each_future_with_the_error_id() -> None:
    recorder, observer = Recorder(fail_on="bad"), Observer()
    async with started(recorder, observer, max_size=3) as batcher:
        async with engine_held(batcher):
            doomed = submit_all(batcher, [Item("bad"), Item("x1"), Item("x2")])
            await until(lambda: batcher.depth == 3)
            fine = submit_all(batcher, [Item("y1"), Item("y2"), Item("y3")])
            await until(lambda: batcher.depth == 6)
        outcomes = await asyncio.gather(*doomed, *fine, return_exceptions=True)
        errors = outcomes[:3]
        assert all(isinstance(error, EngineError) for error in errors)
        error_ids = {error.error_id for error in errors if isinstance(error, EngineError)}
        assert len(error_ids) == 1 and len(next(iter(error_ids)) or "") == 12
        assert all(next(iter(error_ids)) in str(error) for error in errors)
        assert outcomes[3:] == ["Y1", "Y2", "Y3"]
        assert await batcher.submit(Item("after")) == "AFTER"  # the batcher kept serving
    assert observer.events["failed_batch"] == 1


async def test_a_wrong_result_count_is_an_engine_error() -> None:
    async with started(Recorder()) as batcher:
        batcher.run_batch = lambda items: ["only one"]
        with pytest.raises(EngineError) as caught:
            await asyncio.gather(batcher.submit(Item("a")), batcher.submit(Item("b")))
        assert caught.value.error_id


async def test_a_broken_scheduler_fails_waiting_requests_instead_of_hanging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with started(Recorder()) as batcher:

        def broken() -> tuple[list[object], bool]:
            raise RuntimeError("a bug in the scheduler")

        async with engine_held(batcher):
            task = asyncio.create_task(batcher.submit(Item("waiting")))
            await until(lambda: batcher.depth == 1)
            batcher.select = broken  # type: ignore[method-assign]
        with pytest.raises(EngineError) as caught:
            await task
        assert caught.value.error_id
        with pytest.raises(EngineError):
            await batcher.submit(Item("later"))  # refused at once, never left hanging
    assert "the scheduler stopped" in caplog.text


# --- backpressure, timeouts, cancellation ------------------------------------------------


async def test_a_full_queue_is_refused() -> None:
    recorder, observer = Recorder(), Observer()
    async with started(recorder, observer, max_queue=3) as batcher:
        async with engine_held(batcher):
            tasks = submit_all(batcher, [Item(f"t{i}") for i in range(3)])
            await until(lambda: batcher.depth == 3)
            with pytest.raises(OverloadedError):
                await batcher.submit(Item("one too many"))
            with pytest.raises(OverloadedError):
                await batcher.run_exclusive(lambda: None)
        assert await asyncio.gather(*tasks) == ["T0", "T1", "T2"]
        # a request larger than the whole queue still runs when the queue is empty
        assert await batcher.submit_many([Item(f"b{i}") for i in range(5)]) == [
            f"B{i}" for i in range(5)
        ]
    assert observer.events["overloaded"] == 2
    assert all("one too many" not in batch for batch in recorder.batches)


async def test_a_full_queue_names_the_wait_its_rows_take_at_the_engines_pace() -> None:
    """Retry-After was 1 s whatever the queue held: a client that waited it met another 503.
    Before any batch ran, no pace is known and the answer says "shortly" (the header: 1 s)."""
    async with started(Recorder(delay_s=0.2), max_queue=3) as batcher:
        async with engine_held(batcher):
            held = submit_all(batcher, [Item(f"t{i}") for i in range(3)])
            await until(lambda: batcher.depth == 3)
            with pytest.raises(OverloadedError) as unknown:
                await batcher.submit(Item("one too many"))
        await asyncio.gather(*held)
        assert unknown.value.retry_after_s is None and "retry shortly" in unknown.value.message
        for name in ("a", "b"):  # one-row batches of 0.2 s each: the pace
            await batcher.submit(Item(name))
        async with engine_held(batcher):
            held = submit_all(batcher, [Item(f"u{i}") for i in range(3)])
            await until(lambda: batcher.depth == 3)
            with pytest.raises(OverloadedError) as known:
                await batcher.submit(Item("one too many"))
        await asyncio.gather(*held)
    # three rows ahead at about 0.2 s each (more where the machine is slow)
    assert known.value.retry_after_s is not None and known.value.retry_after_s >= 1
    assert f"retry in about {known.value.retry_after_s} s" in known.value.message
    assert batcher.pace.seconds_per_row is not None and batcher.pace.seconds_per_row >= 0.06
    from tiankong.server.error_handlers import error_response  # the header the answer carries

    assert error_response(known.value).headers["Retry-After"] == str(known.value.retry_after_s)
    assert error_response(unknown.value).headers["Retry-After"] == "1"


async def test_a_request_that_waits_too_long_times_out_and_never_runs() -> None:
    recorder, observer = Recorder(), Observer()
    async with started(recorder, observer, timeout_s=0.2) as batcher:
        async with engine_held(batcher):
            with pytest.raises(RequestTimeoutError):
                await batcher.submit(Item("slow"))
            assert batcher.pending == []  # gone from the queue already, the engine still held
        assert await batcher.submit(Item("next")) == "NEXT"
    assert recorder.batches == [["next"]]
    # two timeouts: the request, and the job holding the engine (it shares the timeout)
    assert observer.events["timeout"] == 2 and observer.events["skipped"] == 1


async def test_cancelled_requests_are_skipped_before_they_run() -> None:
    recorder, observer = Recorder(), Observer()
    async with started(recorder, observer) as batcher:
        async with engine_held(batcher):
            gone, kept = submit_all(batcher, [Item("gone"), Item("kept")])
            await until(lambda: batcher.depth == 2)
            gone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await gone
            # out of the queue once its request has ended, not once the engine is free again
            assert [entry.item.name for entry in batcher.pending] == ["kept"]
        assert await kept == "KEPT"
    assert recorder.batches == [["kept"]]
    assert observer.events["skipped"] == 1


async def test_a_request_gone_while_a_batch_runs_leaves_the_queue_at_once() -> None:
    recorder, observer = Recorder(gate=threading.Event()), Observer()
    assert recorder.gate is not None
    async with started(recorder, observer) as batcher:
        first = asyncio.create_task(batcher.submit(Item("first")))
        await until(lambda: bool(batcher.running))
        gone = asyncio.create_task(batcher.submit_many([Item("gone1"), Item("gone2")]))
        await until(lambda: batcher.depth == 2)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert batcher.pending == [] and observer.depths[-1] == 0
        assert [entry.item.name for entry in batcher.running] == ["first"]  # still on it
        recorder.gate.set()
        assert await first == "FIRST"
    assert recorder.batches == [["first"]]
    assert observer.events["skipped"] == 2


# --- exclusive jobs and shutdown ---------------------------------------------------------


async def test_exclusive_jobs_and_batches_take_turns_never_at_once() -> None:
    recorder = Recorder()
    async with started(recorder, max_size=4) as batcher:

        def exclusive_job(name: str) -> str:
            recorder([Item(name)])
            return name

        tasks: list[asyncio.Task[str]] = []
        for round_index in range(5):
            tasks += submit_all(batcher, [Item(f"r{round_index}-{i}") for i in range(6)])
            tasks.append(asyncio.create_task(batcher.run_exclusive(lambda: exclusive_job("job"))))
        results = await asyncio.gather(*tasks)
    assert results.count("job") == 5 and len(results) == 35
    assert recorder.most_active == 1  # the engine never ran two things at once


async def test_an_exclusive_job_waits_at_most_for_the_running_batch() -> None:
    recorder = Recorder()
    async with started(recorder, max_size=2) as batcher:
        async with engine_held(batcher):
            batch_tasks = submit_all(batcher, [Item(f"t{i}") for i in range(6)])
            await until(lambda: batcher.depth == 6)
            job = asyncio.create_task(batcher.run_exclusive(lambda: recorder([Item("job")])))
            await until(lambda: batcher.exclusive_waiting == 1)
        await asyncio.gather(*batch_tasks, job)
    # FIFO turns: one batch took the engine before the job asked for it, the job goes next
    assert recorder.batches.index(["job"]) <= 1


async def test_close_drains_queued_work_and_refuses_new_work() -> None:
    recorder = Recorder()
    batcher: DynamicBatcher[Item, str] = DynamicBatcher(
        recorder, size_of=lambda item: item.size, limits=BatchLimits(window_s=0.0, max_size=2)
    )
    await batcher.start()
    gate = threading.Event()
    holder = asyncio.create_task(batcher.run_exclusive(lambda: gate.wait(GATE_TIMEOUT_S)))
    await until(lambda: batcher.busy)
    tasks = submit_all(batcher, [Item(f"t{i}") for i in range(5)])
    await until(lambda: batcher.depth == 5)
    closing = asyncio.create_task(batcher.close(timeout_s=GATE_TIMEOUT_S))
    await until(lambda: batcher.closing)
    with pytest.raises(ShuttingDownError):
        await batcher.submit(Item("too late"))
    with pytest.raises(ShuttingDownError):
        await batcher.run_exclusive(lambda: None)
    gate.set()
    await holder
    assert await asyncio.gather(*tasks) == [f"T{i}" for i in range(5)]
    await closing
    assert sum(recorder.sizes()) == 5


async def test_close_fails_what_the_drain_could_not_finish() -> None:
    recorder = Recorder()
    batcher: DynamicBatcher[Item, str] = DynamicBatcher(
        recorder, size_of=lambda item: item.size, limits=BatchLimits(window_s=0.0)
    )
    await batcher.start()
    gate = threading.Event()
    holder = asyncio.create_task(batcher.run_exclusive(lambda: gate.wait(GATE_TIMEOUT_S)))
    await until(lambda: batcher.busy)
    task = asyncio.create_task(batcher.submit(Item("stuck")))
    await until(lambda: batcher.depth == 1)
    await batcher.close(timeout_s=0.1)
    with pytest.raises(ShuttingDownError):
        await task
    gate.set()
    await holder


# --- search rows: a lane after the plain items, admitted by cost -------------------------


def submit_search(batcher: DynamicBatcher[Item, str], names: list[str]) -> asyncio.Task[list[str]]:
    items = [Item(name) for name in names]
    return asyncio.create_task(batcher.submit_many(items, search=True))


async def test_plain_items_go_before_search_rows_which_get_a_small_share() -> None:
    recorder = Recorder()
    async with started(recorder, max_size=32) as batcher, engine_held(batcher):
        search = submit_search(batcher, [f"s{index}" for index in range(12)])
        await until(lambda: batcher.depth == 12)
        plain = submit_all(batcher, [Item("a"), Item("b"), Item("c")])
        await until(lambda: batcher.depth == 15)
    assert await asyncio.gather(*plain) == ["A", "B", "C"]
    assert await search == [f"S{index}" for index in range(12)]
    limits = BatchLimits(max_size=32)
    assert (limits.search_rows_with_plain, limits.search_rows) == (1, 8)
    # the plain items first, with one search row beside them; then, while a plain request came
    # in the last second, search rows alone a quarter of a batch at a time
    assert recorder.batches[0] == ["a", "b", "c", "s0"]
    assert recorder.batches[1:] == [[f"s{index}" for index in range(1, 9)], ["s9", "s10", "s11"]]


async def test_search_rows_fill_whole_batches_when_no_plain_request_came_lately() -> None:
    recorder = Recorder()
    async with started(recorder, max_size=8) as batcher, engine_held(batcher):
        search = submit_search(batcher, [f"s{index}" for index in range(20)])
        await until(lambda: batcher.depth == 20)
    await search
    assert recorder.sizes() == [8, 8, 4]


async def test_a_search_reserves_its_rows_in_the_queue_but_not_ahead_of_plain_items() -> None:
    async with started(Recorder(), max_queue=10) as batcher:
        async with batcher.search_admission(4):
            assert batcher.describe()["search_rows_reserved"] == 4
            batcher.admit(10)  # a plain request: search rows never go before it
        async with batcher.search_admission(8):  # a search reserves at most half the queue
            assert batcher.describe()["search_rows_reserved"] == 5
        assert batcher.describe()["search_rows_reserved"] == 0
        async with engine_held(batcher):
            plain = submit_all(batcher, [Item("p")])
            await until(lambda: batcher.depth == 1)
            # larger than the queue: admitted while no other search is ahead, plain or not
            async with batcher.search_admission(50):
                assert batcher.describe()["searches"] == 1
                # it reserves half the queue, not all of it: a small search still gets in
                assert batcher.describe()["search_rows_reserved"] == 5
                async with batcher.search_admission(3):
                    assert batcher.describe()["searches"] == 2
        assert await asyncio.gather(*plain) == ["P"]


async def test_a_search_that_does_not_fit_waits_for_the_searches_running() -> None:
    """Two users proofreading a paragraph each at once: the second check got a 503 on an idle
    server, because the first search held half the queue. It waits for the first now."""
    async with started(Recorder(), max_queue=10) as batcher:
        order: list[str] = []
        first_done = asyncio.Event()

        async def search(name: str, cost: int, hold: asyncio.Event | None = None) -> None:
            async with batcher.search_admission(cost):
                order.append(f"{name} in")
                if hold is not None:
                    await hold.wait()
                order.append(f"{name} out")

        first = asyncio.create_task(search("first", 7, first_done))
        await until(lambda: order == ["first in"])
        second = asyncio.create_task(search("second", 7))  # 5 reserved + 7 > 10: it waits
        await until(lambda: batcher.describe()["searches_waiting"] == 1)
        third = asyncio.create_task(search("third", 1))  # it would fit, but comes later
        await until(lambda: batcher.describe()["searches_waiting"] == 2)
        with pytest.raises(
            OverloadedError, match=r"and checks waiting hold 6 of the queue.s 10 forward rows"
        ):
            # the searches waiting reserve the whole queue (5 + 1, and 5 more would be 11)
            async with batcher.search_admission(6):
                pass
        assert order == ["first in"]
        first_done.set()
        await asyncio.gather(first, second, third)
        assert order == [
            "first in",
            "first out",
            "second in",
            "second out",
            "third in",
            "third out",
        ]
        assert batcher.describe()["searches_waiting"] == 0
        assert batcher.describe()["search_rows_reserved"] == 0


async def test_a_search_waiting_for_room_times_out_then_leaves_the_line() -> None:
    observer = Observer()
    async with started(Recorder(), observer, max_queue=4, timeout_s=0.05) as batcher:
        async with batcher.search_admission(4):
            with pytest.raises(RequestTimeoutError, match="did not start"):
                async with batcher.search_admission(4):
                    pass
            assert batcher.describe()["searches_waiting"] == 0
            assert observer.events.get("timeout") == 1
            # its own deadline, when the request has one, instead of the timeout
            with pytest.raises(RequestTimeoutError):
                async with batcher.search_admission(4, deadline=time.monotonic()):
                    pass
        async with batcher.search_admission(4):  # the line is empty again
            assert batcher.describe()["searches"] == 1


async def test_a_search_waiting_for_room_is_refused_when_the_server_closes() -> None:
    async with started(Recorder(), max_queue=4, timeout_s=30) as batcher:
        release = asyncio.Event()

        async def running() -> None:
            async with batcher.search_admission(4):
                await release.wait()

        holder = asyncio.create_task(running())
        await until(lambda: batcher.searches == 1)

        async def waiting() -> None:
            async with batcher.search_admission(4):
                pass

        waiter = asyncio.create_task(waiting())
        await until(lambda: batcher.describe()["searches_waiting"] == 1)
        closing = asyncio.create_task(batcher.close(timeout_s=5))
        with pytest.raises(ShuttingDownError):
            await waiter
        release.set()
        await holder
        await closing


async def test_a_cancelled_search_leaves_the_line_and_the_next_one_gets_in() -> None:
    async with started(Recorder(), max_queue=4, timeout_s=30) as batcher:
        release = asyncio.Event()
        entered: list[str] = []

        async def search(name: str, hold: asyncio.Event | None = None) -> None:
            async with batcher.search_admission(4):
                entered.append(name)
                if hold is not None:
                    await hold.wait()

        holder = asyncio.create_task(search("holder", release))
        await until(lambda: entered == ["holder"])
        gone = asyncio.create_task(search("gone"))  # its client goes away while it waits
        await until(lambda: batcher.describe()["searches_waiting"] == 1)
        last = asyncio.create_task(search("last"))
        await until(lambda: batcher.describe()["searches_waiting"] == 2)
        gone.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
        assert batcher.describe()["searches_waiting"] == 1
        release.set()
        await asyncio.gather(holder, last)
        assert entered == ["holder", "last"]


async def test_a_request_deadline_replaces_the_timeout() -> None:
    async with started(Recorder(), timeout_s=30) as batcher, engine_held(batcher):
        started_at = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await batcher.submit_many([Item("late")], deadline=time.monotonic() + 0.05)
        assert time.monotonic() - started_at < 5


async def test_a_search_step_past_its_deadline_is_counted_once_by_its_search() -> None:
    """A timeout counts once a request in /metrics. A search's step carries the search's
    deadline, so the batcher timed the step out at the moment the search's own runner timed the
    search out, and both counted it (2 for one 504, now and then). The batcher counts a plain
    request's timeout; a step's is its search's, which the runner counts, and only it."""
    from tiankong.serving.search_steps import StepRunner

    observer = Observer()
    async with started(Recorder(), observer, timeout_s=30) as batcher, engine_held(batcher):
        with pytest.raises(RequestTimeoutError):
            await batcher.submit_many([Item("plain")], deadline=time.monotonic() + 0.05)
        assert observer.events.get("timeout") == 1
        with pytest.raises(RequestTimeoutError):  # a step alone: its runner's to count
            await batcher.submit_many([Item("step")], search=True, deadline=time.monotonic())
        assert observer.events.get("timeout") == 1

        async def step(jobs: list[object], deadline: float) -> list[str]:
            items = [Item(f"row{index}") for index, _ in enumerate(jobs)]
            return await batcher.submit_many(items, search=True, deadline=deadline)

        runner = StepRunner(step, timeout_s=30, observer=observer)  # type: ignore[arg-type]
        try:
            for wait_s in (0.0, 0.02, 0.05):  # the step's timeout or the runner's, first
                with pytest.raises(RequestTimeoutError):
                    await runner.run_steps(
                        lambda score: score([[1]], [[0]]), time.monotonic() + wait_s
                    )
        finally:
            runner.close()
        assert observer.events.get("timeout") == 4


async def test_close_lets_admitted_searches_finish_their_steps() -> None:
    recorder = Recorder()
    async with started(recorder) as batcher:
        async with batcher.search_admission(2):
            closing = asyncio.create_task(batcher.close(timeout_s=5))
            await until(lambda: batcher.closing)
            with pytest.raises(ShuttingDownError):
                await batcher.submit(Item("new"))
            assert await batcher.submit_many([Item("step")], search=True) == ["STEP"]
        await closing
    assert ["step"] in recorder.batches
