"""Issue 23's goals measured taking turns: each goal's two servers up together, one load at a time.

The bench's rows run one after another, a few minutes apart. On a shared VM whose speed moves
in phases (one run's GEMM peak read 2,807 Gop/s at its start and 973 at its end) a c=1 ratio
between two such rows mostly says which phase each ran in. So after a model's rows, each goal's
pair (tiankong's defaults and the best peer of that phase, at the thread setting the peer's row
kept; the fake engine and the floor; the index on and off) is started again, side by side, and
measured in ``rounds``: in each round the two take the same load one after the other, for
``seconds`` each, the order alternating between rounds. A round's ratio compares two runs
seconds apart; the goal's ratio is the median of the rounds' ratios.

The servers are fresh processes, each with its own sentence counter: no tiankong server is sent
a text twice (its result cache never answers; the peers and the floor keep none, and the floor,
the fastest, may wrap around). Each is warmed up with ``WARMUP_REQUESTS`` requests before the
first round.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.contenders.registry import Contender
from bench.load import run_load
from bench.report import best_peers, measured
from bench.servers import Server, ServerFailed
from bench.wrk_load import run_client

BEST_C1_PEER = "best c=1 peer"  # the error-free peer with the lowest c=1 p50 in the rows
BEST_C20_PEER = "best c=20 peer"  # ... and with the highest c=20 rate
WARMUP_REQUESTS = 20  # sentences 0-19 of each server; its runs count up from there
ROUNDS, SECONDS = 4, 5  # an even count: each side goes first as often as the other
QUICK_ROUNDS, QUICK_SECONDS = 1, 1  # --quick


@dataclass(frozen=True)
class Pair:
    goal: str  # the name of issue 23's goal in bench.report
    ours: str  # a contender key
    theirs: str  # a contender key, or BEST_C1_PEER / BEST_C20_PEER
    concurrency: int

    @property
    def higher_is_better(self) -> bool:
        return self.concurrency > 1  # requests/s at c=20, the p50 at c=1

    def figure(self, run: dict[str, Any]) -> float:
        return float(run["requests_per_s"] if self.higher_is_better else run["p50_ms"])


PAIRS: tuple[Pair, ...] = (
    Pair("defaults, c=1 p50", "tiankong-auto", BEST_C1_PEER, 1),
    Pair("defaults, c=20 requests/s", "tiankong-auto", BEST_C20_PEER, 20),
    Pair("serving overhead, c=1 p50", "tiankong-fake", "floor", 1),
    Pair("serving overhead, c=20 requests/s", "tiankong-fake", "floor", 20),
    Pair("index on, c=1 p50", "tiankong-auto-index", "tiankong-auto", 1),
)

Side = tuple[str, int | None]  # a contender key and its thread setting (None: its default)
# (contender, its thread setting or None) -> a started, ready server
Starter = Callable[[Contender, int | None], Server]


def best_peer_keys(rows: Sequence[dict[str, Any]]) -> dict[str, Side]:
    """BEST_C1_PEER and BEST_C20_PEER: the row's key and the thread setting it kept for that
    phase, chosen as bench.report chooses the goals' peers."""
    best_c1, best_c20 = best_peers(measured(list(rows)))
    out: dict[str, Side] = {}
    if best_c1 is not None:
        out[BEST_C1_PEER] = (best_c1["key"], best_c1.get("c1_threads"))
    if best_c20 is not None:
        out[BEST_C20_PEER] = (best_c20["key"], best_c20.get("c20_threads"))
    return out


def ratio_of(pair: Pair, ours: dict[str, Any], theirs: dict[str, Any]) -> float:
    """Ours over theirs, as the goal reads it: p50 over p50, or rate over rate."""
    return pair.figure(ours) / pair.figure(theirs) if pair.figure(theirs) else float("nan")


def summarise(pair: Pair, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians over rounds of each side's figure and of the rounds' ratios (NaN when a
    round has none: a side that answered nothing), and the errors."""
    ratios = [ratio_of(pair, run["ours"], run["theirs"]) for run in runs]
    finite = all(math.isfinite(ratio) for ratio in ratios)
    return {
        "ratio": statistics.median(ratios) if finite else math.nan,
        "round_ratios": [round(ratio, 3) for ratio in ratios],
        "ours_median": statistics.median(pair.figure(run["ours"]) for run in runs),
        "theirs_median": statistics.median(pair.figure(run["theirs"]) for run in runs),
        "errors": sum(run["ours"]["errors"] + run["theirs"]["errors"] for run in runs),
    }


def measure(
    rows: Sequence[dict[str, Any]],
    contenders: dict[str, Contender],
    start: Starter,
    client: str,
    rounds: int,
    seconds: int,
    distinct: int,
) -> dict[str, Any]:
    """Each of ``PAIRS`` whose two rows were measured, taken in turns; the rest skipped with
    the reason. ``rows``: the model's rows from the bench (their keys and thread settings).
    Every server of every pair is started (and warmed up) before the first round and stays up
    to the last; only one takes load at a time. Raises ``ServerFailed`` when a warm-up request
    fails, and ``ValueError`` once a tiankong server was sent more than ``distinct`` sentences
    (its result cache could then answer; the peers and the floor keep none)."""
    measured_keys = {row["key"] for row in measured(list(rows))}
    peers = best_peer_keys(rows)
    plans: list[tuple[Pair, Side, Side]] = []
    skipped: list[dict[str, str]] = []
    for pair in PAIRS:
        ours: Side = (pair.ours, None)
        theirs: Side = peers.get(pair.theirs, (pair.theirs, None))
        missing = [key for key, _ in (ours, theirs) if key not in measured_keys]
        if missing:
            skipped.append({"goal": pair.goal, "reason": f"no row for {', '.join(missing)}"})
            continue
        plans.append((pair, ours, theirs))
    servers: dict[Side, Server] = {}
    first: dict[Side, int] = {}
    results: list[dict[str, Any]] = []
    try:
        for _, ours, theirs in plans:
            for side in (ours, theirs):
                if side in servers:
                    continue
                key, threads = side
                servers[side] = server = start(contenders[key], threads)
                warm = run_load(server.base_url + "/predict", 1, 0, count=WARMUP_REQUESTS)
                if warm.errors:
                    raise ServerFailed(f"{key}: {warm.errors} warm-up errors {warm.error_samples}")
                first[side] = WARMUP_REQUESTS
        runs: dict[str, list[dict[str, Any]]] = {pair.goal: [] for pair, *_ in plans}
        for round_index in range(rounds):
            for pair, ours, theirs in plans:
                order = (ours, theirs) if round_index % 2 == 0 else (theirs, ours)
                taken: dict[Side, dict[str, Any]] = {}
                for side in order:
                    url = servers[side].base_url + "/predict"
                    result = run_client(client, url, pair.concurrency, first[side], seconds)
                    first[side] += result.requests + result.errors + pair.concurrency
                    if first[side] > distinct and contenders[side[0]].is_tiankong:
                        raise ValueError(
                            f"{side[0]} was sent more than the {distinct:,} distinct sentences "
                            "its result cache has not seen; take fewer or shorter rounds"
                        )
                    taken[side] = result.to_dict()
                runs[pair.goal].append({"ours": taken[ours], "theirs": taken[theirs]})
                shown = ratio_of(pair, taken[ours], taken[theirs])
                print(
                    f"  taking turns, round {round_index + 1}: {pair.goal}: {ours[0]} / "
                    f"{theirs[0]} = {shown:.2f}",
                    flush=True,
                )
        for pair, ours, theirs in plans:
            results.append(
                {
                    "goal": pair.goal,
                    "ours": ours[0],
                    "theirs": theirs[0],
                    "theirs_threads": theirs[1],
                    "concurrency": pair.concurrency,
                    "runs": runs[pair.goal],
                    **summarise(pair, runs[pair.goal]),
                }
            )
    finally:
        for server in servers.values():
            server.stop()
    return {
        "rounds": rounds,
        "seconds": seconds,
        "client": client,
        "pairs": results,
        "skipped": skipped,
    }
