"""The request, decided once (core/request.py): every entry point takes the same path for the
same text, a [BLANK] works through all of them, and a candidates option means candidates mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from server_helpers import assert_error

from tiankong import FillMasker, Settings
from tiankong.core.decoding import Constraints
from tiankong.core.options import PredictOptions
from tiankong.core.request import needs_search, prepare_request
from tiankong.errors import RequestTimeoutError, TiankongError
from tiankong.offline.evaluate import evaluate_items, read_items
from tiankong.offline.fill import FillJob, run_fill

BLANK_TEXT = "今天天气很[BLANK]。"
POEM = "春眠不觉晓，处处闻啼[MASK]。"
IDIOM_CLOZE = "他做事一向[MASK]，从来不出差错。"
DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(
    ("text", "options", "search"),
    [
        (POEM, PredictOptions(), False),
        (BLANK_TEXT, PredictOptions(), True),
        ("今天天气很【blank】。", PredictOptions(), True),
        (POEM, PredictOptions(mode="whole_word"), True),
        (POEM, PredictOptions(candidates=("鸟",)), True),
        (POEM, PredictOptions(constraints=Constraints(allowed=("鸟",))), True),
        (POEM, PredictOptions(constraints=Constraints()), False),  # nothing constrained
    ],
)
def test_the_path_is_decided_once(
    tiny_masker: FillMasker, text: str, options: PredictOptions, search: bool
) -> None:
    request = tiny_masker.prepare_request(text, options)
    assert request.plain is not search
    assert needs_search(request.text, request.options) is search


def test_a_candidates_option_implies_candidates_mode(tiny_masker: FillMasker) -> None:
    """What tiankong eval built: PredictOptions(candidates=...) with no mode."""
    options = PredictOptions(candidates=("一丝不苟", "马马虎虎"))
    request = tiny_masker.prepare_request(IDIOM_CLOZE, options)
    assert request.options.mode == "candidates"
    result = tiny_masker.predict(IDIOM_CLOZE, options=options)
    assert sorted(c.option for c in result.candidates) == ["一丝不苟", "马马虎虎"]


def test_candidates_mode_with_nothing_to_rank_is_an_error(tiny_masker: FillMasker) -> None:
    with pytest.raises(TiankongError) as caught:
        tiny_masker.predict(IDIOM_CLOZE, options=PredictOptions(mode="candidates"))
    assert caught.value.code == "bad_option"


def test_blank_through_predict_and_predict_batch(tiny_masker: FillMasker) -> None:
    alone = tiny_masker.predict(BLANK_TEXT, top_k=3)
    assert alone.sequences and alone.sequence != BLANK_TEXT
    mixed = tiny_masker.predict_batch([POEM, BLANK_TEXT, POEM], top_k=3)
    assert [len(result.sequences) > 0 for result in mixed] == [False, True, False]
    assert mixed[1].to_dict() == alone.to_dict()
    plain = tiny_masker.predict(POEM, top_k=3)  # alone, so unpadded: equal within float noise
    assert [c.token for c in mixed[0].masks[0]] == [c.token for c in plain.masks[0]]
    assert [c.score for c in mixed[0].masks[0]] == pytest.approx(
        [c.score for c in plain.masks[0]], abs=1e-6
    )


def test_blank_through_fill(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    texts = [POEM, BLANK_TEXT, "没有空"]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=2)
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    state = run_fill(job, settings, PredictOptions(top_k=3))
    assert (state.filled, state.failed) == (2, 1)
    rows = [json.loads(line) for line in job.output.read_text(encoding="utf-8").splitlines()]
    assert rows[1]["text"] == BLANK_TEXT and rows[1]["sequences"]
    errors = [json.loads(line) for line in job.error_file.read_text(encoding="utf-8").splitlines()]
    assert [(error["line"], error["code"]) for error in errors] == [(3, "no_mask")]


def test_eval_ranks_candidate_items(tiny_masker: FillMasker) -> None:
    """Every chid item lists its answer among the candidates: each must be ranked (once, every
    item scored 0% because candidates came back empty)."""
    items = read_items(DATA / "chid_sample.json")
    report, outcomes = evaluate_items(tiny_masker, items, PredictOptions().validated())
    assert all(sorted(o.ranked) == sorted(o.item.candidates) for o in outcomes)
    assert report.overall.errors == 0 and report.overall.top5 == 1.0


def test_blank_through_eval(tiny_masker: FillMasker, tmp_path: Path) -> None:
    source = tmp_path / "cloze.jsonl"
    source.write_text(json.dumps({"text": "画龙点[MASK]", "answers": ["睛"]}) + "\n", "utf-8")
    _, outcomes = evaluate_items(
        tiny_masker, read_items(source), PredictOptions(beam_width=2).validated(), blank=True
    )
    assert outcomes[0].error is None and outcomes[0].ranked


def test_blank_through_the_http_routes(client: TestClient, tiny_masker: FillMasker) -> None:
    expected = tiny_masker.predict(BLANK_TEXT, top_k=3).to_dict()
    one = client.post("/predict", json={"text": BLANK_TEXT, "top_k": 3})
    assert one.status_code == 200, one.text
    assert [s["fill"] for s in one.json()["sequences"]] == [
        s["fill"] for s in expected["sequences"]
    ]
    many = client.post("/batch_predict", json={"texts": [POEM, BLANK_TEXT], "top_k": 3})
    assert many.status_code == 200, many.text
    results = many.json()["results"]
    assert results[1]["sequences"] and not results[0]["sequences"]


def test_the_hf_route_refuses_a_blank_with_a_clear_400(client: TestClient) -> None:
    response = client.post("/", json={"inputs": BLANK_TEXT})
    assert "POST /predict" in assert_error(response, 400, "bad_input")["message"]
    both = client.post("/", json={"inputs": [POEM, BLANK_TEXT]})
    assert_error(both, 400, "bad_input")


def test_an_empty_candidate_list_is_bad_option(client: TestClient) -> None:
    response = client.post("/predict", json={"text": IDIOM_CLOZE, "candidates": []})
    assert "candidates" in assert_error(response, 400, "bad_option")["message"]
    batch = client.post("/batch_predict", json={"texts": [IDIOM_CLOZE], "candidates": []})
    assert_error(batch, 400, "bad_option")


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
@pytest.mark.processes
@pytest.mark.parametrize("flag", ["--candidates", "--allowed"])  # --allowed "" meant no limit
def test_an_empty_list_flag_exits_2(tiny_model_dir: Path, flag: str) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tiankong", "predict", IDIOM_CLOZE, flag, " , "),
            *("--model", str(tiny_model_dir), "--engine", "onnx"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert f"{flag} is empty" in done.stderr and "Traceback" not in done.stderr


def test_forward_rows_estimate_the_engine_work(tiny_masker: FillMasker) -> None:
    def rows(text: str, **changes: object) -> int:
        return tiny_masker.prepare_request(text, tiny_masker.options(3, **changes)).forward_rows()

    assert rows(POEM) == 1
    assert rows("手机没电了，赶紧去[MASK][MASK]。", mode="whole_word", beam_width=4) == 1 + 2 * 4
    assert rows(IDIOM_CLOZE, candidates=("一丝不苟", "好")) == 1 + 4 + 1
    assert rows(BLANK_TEXT, beam_width=2, max_blank_length=3) == 1 + (1 + 2 + 3) * 2


def test_the_search_path_sends_every_engine_call_through_its_row_scorer(
    tiny_masker: FillMasker,
) -> None:
    request = prepare_request(BLANK_TEXT, PredictOptions(beam_width=2), tiny_masker.prepare)
    calls = []

    def score_rows(rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        calls.append(len(rows))
        if len(calls) == 3:
            raise RequestTimeoutError("out of time")
        return tiny_masker.score_rows(rows, asked)

    with pytest.raises(RequestTimeoutError):
        tiny_masker.run_search(request, score_rows)
    assert len(calls) == 3  # stopped at the third engine call, not after the whole search
    assert sum(calls) <= request.forward_rows()
    assert tiny_masker.run_search(request).sequences  # the default scores on the engine


@pytest.mark.parametrize(
    ("text", "changes"),
    [
        ("手机没电了，赶紧去[MASK][MASK][MASK]。", {"mode": "whole_word", "beam_width": 6}),
        (IDIOM_CLOZE, {"candidates": ("一丝不苟", "好", "马马虎虎")}),
        (BLANK_TEXT, {"beam_width": 3, "max_blank_length": 3}),
        (POEM, {"preset": "chinese_only"}),
    ],
)
def test_forward_rows_bound_the_rows_a_search_really_scores(
    tiny_masker: FillMasker, text: str, changes: dict[str, object]
) -> None:
    """The cost cap and the queue trust the estimate: it may not be below the real work."""
    preset = changes.pop("preset", None)
    options = tiny_masker.options(
        3, constraints=Constraints(preset=preset) if preset else None, **changes
    )
    request = tiny_masker.prepare_request(text, options)
    scored = []

    def score_rows(rows: Sequence[list[int]], asked: Sequence[list[int]]) -> list[np.ndarray]:
        scored.append(len(rows))
        return tiny_masker.score_rows(rows, asked)

    tiny_masker.run_search(request, score_rows)
    assert sum(scored) <= request.forward_rows() <= 2 * sum(scored) + 2


@pytest.mark.parametrize("text", ["畫龍點[MASK]\udcff", "画龙点[MASK]\ud800"])
def test_a_lone_surrogate_is_bad_input_before_the_script_is_converted(
    tiny_masker: FillMasker, text: str
) -> None:
    """Bad UTF-8 on a command line arrives as lone surrogates, which OpenCC can't encode: the
    request refuses them (400 / exit 2) before converting the script."""
    from tiankong.errors import BadInputError

    with pytest.raises(BadInputError, match="lone surrogate"):
        prepare_request(text, PredictOptions(), tiny_masker.prepare, indexed=True)
