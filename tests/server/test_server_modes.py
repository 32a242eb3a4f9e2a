"""Whole words, candidates, [BLANK], constraints and multi-character HF targets over HTTP.

Every answer is compared with the library's own (``FillMasker.predict``) on the same text and
options, so the server adds transport, never different numbers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import assert_error, local_client

from tiankong import FillMasker, Settings
from tiankong.core.decoding import Constraints, is_han
from tiankong.core.request import PreparedRequest
from tiankong.core.results import FillResult
from tiankong.core.text import PreparedText
from tiankong.server import create_app
from tiankong.serving.predictor import Predictor

POEM = "春眠不觉晓，处处闻啼[MASK]。"
WHOLE_WORD = "手机没电了，赶紧去[MASK][MASK]。"
APART = "画[MASK]点[MASK]"
TWO_BLANKS = "他[MASK]天去公园[MASK]步。"
IDIOM_CLOZE = "他做事一向[MASK]，从来不出差错。"
IDIOMS = ["一丝不苟", "马马虎虎", "半途而废", "画蛇添足"]
BLANK_TEXT = "今天天气很[BLANK]。"


@dataclass
class PathSpy:
    """How many texts went down each Predictor path."""

    plain: int = 0
    modes: int = 0


@pytest.fixture
def spy(app: FastAPI, client: TestClient, monkeypatch: pytest.MonkeyPatch) -> PathSpy:
    predictor = app.state.tiankong.predictor
    assert isinstance(predictor, Predictor)
    counts = PathSpy()
    real_run, real_run_search = predictor.run, predictor.run_search

    async def run(
        prepared: list[PreparedText],
        k: int,
        allowed: Any = None,
        use_index: bool = True,
        deadline: Any = None,
    ) -> list[FillResult]:
        counts.plain += len(prepared)
        return await real_run(prepared, k, allowed, use_index, deadline)

    async def run_search(request: PreparedRequest, deadline: float) -> FillResult:
        counts.modes += 1
        return await real_run_search(request, deadline)

    monkeypatch.setattr(predictor, "run", run)
    monkeypatch.setattr(predictor, "run_search", run_search)
    return counts


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/predict", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def token_count(masker: FillMasker, fill: str) -> int:
    """Tokens in a fill (a random model's tokens can be several letters, such as 'style')."""
    return len(masker.encoder.tokenizer.encode(fill, add_special_tokens=False).ids)


def assert_same_sequences(ours: list[dict[str, Any]], library: FillResult) -> None:
    assert [s["fill"] for s in ours] == [s.fill for s in library.sequences]
    assert [s["text"] for s in ours] == [s.text for s in library.sequences]
    assert [tuple(s["fills"]) for s in ours] == [s.fills for s in library.sequences]
    for got, expected in zip(ours, library.sequences, strict=True):
        assert got["score"] == pytest.approx(expected.score, rel=1e-6)
        assert got["normalised"] == pytest.approx(expected.normalised, rel=1e-6)


# --- modes -------------------------------------------------------------------------------


def test_plain_requests_keep_the_fast_path(client: TestClient, spy: PathSpy) -> None:
    post(client, text=POEM)
    post(client, text=POEM, beam_width=4, order="confident_first")  # no effect in single mode
    assert (spy.plain, spy.modes) == (2, 0)
    post(client, text=WHOLE_WORD, mode="whole_word")
    post(client, text=POEM, preset="chinese_only")
    post(client, text=BLANK_TEXT)
    post(client, text=IDIOM_CLOZE, candidates=IDIOMS)
    assert (spy.plain, spy.modes) == (2, 4)


@pytest.mark.parametrize(
    ("text", "changes"),
    [
        (WHOLE_WORD, {}),
        (WHOLE_WORD, {"beam_width": 3}),
        (APART, {"order": "confident_first", "beam_width": 4}),
    ],
)
def test_whole_word(
    client: TestClient, tiny_masker: FillMasker, text: str, changes: dict[str, Any]
) -> None:
    data = post(client, text=text, mode="whole_word", top_k=3, **changes)
    library = tiny_masker.predict(text, top_k=3, mode="whole_word", **changes)
    assert len(data["masks"]) == 2 and all(len(mask) == 3 for mask in data["masks"])  # kept
    assert data["predictions"] == data["masks"][0] and data["candidates"] == []
    assert 1 <= len(data["sequences"]) <= 3
    assert_same_sequences(data["sequences"], library)
    assert data["sequence"] == library.sequence
    scores = [s["score"] for s in data["sequences"]]
    assert scores == sorted(scores, reverse=True)
    for sequence in data["sequences"]:
        assert token_count(tiny_masker, sequence["fill"]) == 2
        assert "[MASK]" not in sequence["text"]
        # each mask's own fill: the sentence is the text with them in its masks, one a mask
        assert len(sequence["fills"]) == 2 and "".join(sequence["fills"]) == sequence["fill"]
        assert [token_count(tiny_masker, fill) for fill in sequence["fills"]] == [1, 1]
        parts = text.split("[MASK]")
        assert sequence["text"] == "".join(
            part + fill for part, fill in zip(parts, [*sequence["fills"], ""], strict=True)
        )


def test_candidates_ranked_with_exact_chain_scores(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    data = post(client, text=IDIOM_CLOZE, candidates=IDIOMS)  # candidates alone imply the mode
    library = tiny_masker.predict(IDIOM_CLOZE, candidates=tuple(IDIOMS))
    assert [c["option"] for c in data["candidates"]] == [c.option for c in library.candidates]
    assert sorted(c["option"] for c in data["candidates"]) == sorted(IDIOMS)
    for got, expected in zip(data["candidates"], library.candidates, strict=True):
        assert got["score"] == pytest.approx(expected.score, rel=1e-6)
        assert got["joint"] == pytest.approx(expected.joint, rel=1e-6)
        assert got["text"] == IDIOM_CLOZE.replace("[MASK]", got["option"])
        assert got["in_vocabulary"] is True
        assert got["joint"] == pytest.approx(got["score"] ** 4, rel=1e-6)  # 4 characters
    scores = [c["score"] for c in data["candidates"]]
    assert scores == sorted(scores, reverse=True)
    assert data["sequence"] == data["candidates"][0]["text"] and data["sequences"] == []
    # the blank may be written as one [MASK], a run of them or a [BLANK]: the same ranking
    for blank in ("[MASK][MASK][MASK][MASK]", "[BLANK]"):
        same = post(
            client, text=IDIOM_CLOZE.replace("[MASK]", blank), mode="candidates", candidates=IDIOMS
        )
        assert [c["option"] for c in same["candidates"]] == [
            c["option"] for c in data["candidates"]
        ]


def test_candidate_with_an_unknown_character_is_flagged(client: TestClient) -> None:
    data = post(client, text=IDIOM_CLOZE, candidates=["一丝不苟", "😀"])
    flags = {c["option"]: c["in_vocabulary"] for c in data["candidates"]}
    assert flags == {"一丝不苟": True, "😀": False}


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_blank_of_unknown_length(client: TestClient, tiny_masker: FillMasker, alpha: float) -> None:
    data = post(client, text=BLANK_TEXT, max_blank_length=3, length_alpha=alpha, top_k=6)
    library = tiny_masker.predict(BLANK_TEXT, top_k=6, max_blank_length=3, length_alpha=alpha)
    assert_same_sequences(data["sequences"], library)
    assert len(data["sequences"]) == 6
    assert all(s["fills"] == [s["fill"]] for s in data["sequences"])  # one blank, one fill
    for sequence in data["sequences"]:
        assert 1 <= token_count(tiny_masker, sequence["fill"]) <= 3
        assert sequence["text"] == BLANK_TEXT.replace("[BLANK]", sequence["fill"])
    assert data["text"] == BLANK_TEXT and data["sequence"] == data["sequences"][0]["text"]
    # alpha 0 ranks by the joint probability, alpha 1 by the per-character mean
    key = "score" if alpha == 0.0 else "normalised"
    ranked = [s[key] for s in data["sequences"]]
    assert ranked == sorted(ranked, reverse=True)


def test_constraints_renormalise_and_report_the_raw_score(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    unconstrained = post(client, text=POEM, top_k=10)
    assert all("raw_score" not in c for c in unconstrained["predictions"])
    banned = unconstrained["predictions"][0]["token"]
    data = post(client, text=POEM, top_k=10, preset="chinese_only", exclude=[banned])
    library = tiny_masker.predict(
        POEM, top_k=10, constraints=Constraints(exclude=(banned,), preset="chinese_only")
    )
    tokens = [c["token"] for c in data["predictions"]]
    assert tokens == [c.token for c in library.masks[0]]
    assert banned not in tokens and all(is_han(char) for token in tokens for char in token)
    for got, expected in zip(data["predictions"], library.masks[0], strict=True):
        assert got["raw_score"] == pytest.approx(expected.raw_score, rel=1e-6)
        assert got["score"] == pytest.approx(expected.score, rel=1e-6)
        assert got["raw_score"] < got["score"]  # renormalised over fewer tokens


@pytest.mark.parametrize("field", ["allowed", "exclude"])
def test_an_empty_constraint_word_is_a_bad_option(client: TestClient, field: str) -> None:
    """An empty entry would match the vocabulary's empty token (id 343 in bert-base-chinese's)
    and fill the blank with nothing."""
    for words in ([""], ["鸟", "  "], *([[]] if field == "allowed" else [])):
        # allowed: [] silently meant "no constraint"; exclude: [] excludes nothing, and answers
        answer = client.post("/predict", json={"text": POEM, field: words})
        assert_error(answer, 400, "bad_option")
        assert field in answer.json()["error"]["message"]
    query = client.get("/predict", params={"text": POEM, field: ""})
    assert_error(query, 400, "bad_option")


def test_chinese_only_never_offers_the_empty_token(tiny_masker: FillMasker) -> None:
    from tiankong.core.decoding import allowed_token_mask, banned_token_ids

    vocab = tiny_masker.encoder.vocab
    assert "" in vocab  # the real vocabulary's empty entry
    mask = allowed_token_mask(Constraints(preset="chinese_only"), vocab, banned_token_ids(vocab))
    assert not mask[vocab[""]] and mask[vocab["鸟"]]


def test_an_excluded_character_takes_its_word_piece_with_it(tiny_masker: FillMasker) -> None:
    """An answer shows ##果 as 果: exclude 果 left ##果 in, and 果 came back (a review). An
    allowed 果 still allows 果 alone (a word piece is never an allowed fill)."""
    from tiankong.core.decoding import allowed_token_mask, banned_token_ids

    vocab = tiny_masker.encoder.vocab
    banned = banned_token_ids(vocab)
    assert "##果" in vocab  # the real vocabulary's piece
    excluded = allowed_token_mask(Constraints(exclude=("果",)), vocab, banned)
    assert not excluded[vocab["果"]] and not excluded[vocab["##果"]] and excluded[vocab["鸟"]]
    words = allowed_token_mask(Constraints(exclude=("苹果",)), vocab, banned)
    assert not words[vocab["##苹"]] and not words[vocab["##果"]]
    allowed = allowed_token_mask(Constraints(allowed=("果",)), vocab, banned)
    assert allowed[vocab["果"]] and not allowed[vocab["##果"]]


def test_allowed_characters_and_words(client: TestClient) -> None:
    data = post(client, text=POEM, allowed=["鸟", "龙", "花"])
    assert sorted(c["token"] for c in data["predictions"]) == sorted(["鸟", "龙", "花"])
    assert sum(c["score"] for c in data["predictions"]) == pytest.approx(1.0)
    words = post(
        client, text=WHOLE_WORD, mode="whole_word", allowed=["充电", "吃饭"], beam_width=16
    )
    assert {s["fill"] for s in words["sequences"]} == {"充电", "吃饭"}
    for mask in words["masks"]:
        assert {c["token"] for c in mask} <= set("充电吃饭")
    punctuation = post(client, text=POEM, top_k=20, preset="no_punctuation")
    assert all(any(ch.isalnum() for ch in c["token"]) for c in punctuation["predictions"])


def test_get_predict_takes_the_options_as_query_parameters(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    query: list[tuple[str, str | int]] = [("text", IDIOM_CLOZE), ("top_k", 2)]
    query += [("candidates", option) for option in IDIOMS]
    got = client.get("/predict", params=query)
    assert got.status_code == 200, got.text
    posted = post(client, text=IDIOM_CLOZE, top_k=2, candidates=IDIOMS)
    assert got.json()["candidates"] == posted["candidates"]
    params = {"text": WHOLE_WORD, "mode": "whole_word", "beam_width": 4, "preset": "chinese_only"}
    words = client.get("/predict", params=params).json()
    assert words["sequences"] == post(client, **params)["sequences"]
    blank = client.get("/predict", params={"text": BLANK_TEXT, "max_blank_length": 2}).json()
    assert all(token_count(tiny_masker, s["fill"]) <= 2 for s in blank["sequences"])
    assert_error(client.get("/predict", params={"text": POEM, "mode": "fuzzy"}), 400, "bad_option")
    unknown = client.get("/predict", params={"text": POEM, "topk": 10})  # ignored before
    assert "topk" in assert_error(unknown, 422, "invalid_request")["message"]
    assert_error(
        client.get("/predict", params={"text": POEM, "beam_width": "wide"}), 422, "invalid_request"
    )


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words", "checked_first"),
    [
        ({"text": POEM, "mode": "fuzzy"}, "Unknown mode", True),
        ({"text": WHOLE_WORD, "mode": "whole_word", "order": "random"}, "Unknown order", True),
        ({"text": WHOLE_WORD, "mode": "whole_word", "beam_width": 0}, "beam_width", True),
        ({"text": WHOLE_WORD, "mode": "whole_word", "beam_width": 65}, "beam_width", True),
        ({"text": BLANK_TEXT, "max_blank_length": 0}, "max_blank_length", True),
        ({"text": BLANK_TEXT, "max_blank_length": 5}, "max_blank_length", True),
        ({"text": BLANK_TEXT, "length_alpha": -0.5}, "length_alpha", True),
        ({"text": BLANK_TEXT, "length_alpha": 2.5}, "length_alpha", True),
        ({"text": POEM, "mode": "candidates"}, "at least one option", True),
        ({"text": POEM, "candidates": ["鸟"] * 51}, "At most 50", True),
        ({"text": POEM, "candidates": ["一二三四五六七八九"]}, "longer than 8", True),
        ({"text": POEM, "candidates": ["飞[MASK]"]}, "[MASK]", True),
        ({"text": POEM, "candidates": ["  "]}, "non-empty", True),
        ({"text": POEM, "preset": "latin"}, "Unknown constraints preset", True),
        ({"text": POEM, "allowed": ["😀"]}, "a character the model doesn't know", False),
        ({"text": POEM, "allowed": ["。"], "preset": "chinese_only"}, "no token", False),
        ({"text": TWO_BLANKS, "candidates": ["鸟"]}, "exactly one blank", False),
        ({"text": "[BLANK]很[BLANK]"}, "exactly one [BLANK]", False),
        ({"text": "[BLANK]很[MASK]"}, "exactly one [BLANK]", False),
    ],
)
def test_bad_options_are_400_bad_option(
    client: TestClient, spy: PathSpy, body: dict[str, Any], words: str, checked_first: bool
) -> None:
    error = assert_error(client.post("/predict", json=body), 400, "bad_option")
    assert words in error["message"]
    if checked_first:  # rejected before any engine work
        assert (spy.plain, spy.modes) == (0, 0)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"text": "没有空格的句子。", "mode": "whole_word"}, "no_mask"),
        ({"text": "", "candidates": IDIOMS}, "empty_text"),
        ({"text": "[MASK]" * 17, "mode": "whole_word"}, "too_many_masks"),
        ({"text": "[BLANK]" + "字" * 10_001}, "text_too_long"),
        ({"text": WHOLE_WORD, "mode": "whole_word", "top_k": 0}, "top_k_out_of_range"),
    ],
)
def test_bad_text_in_a_mode_is_rejected_before_the_engine(
    client: TestClient, spy: PathSpy, body: dict[str, Any], code: str
) -> None:
    assert_error(client.post("/predict", json=body), 400, code)
    assert (spy.plain, spy.modes) == (0, 0)


@pytest.mark.parametrize(
    "changes",
    [
        {"beam_width": "8"},
        {"beam_width": True},
        {"beam_width": 2.5},
        {"candidates": "一丝不苟"},
        {"candidates": [1, 2]},
        {"allowed": "鸟"},
        {"length_alpha": "1"},
        {"mode": 1},
        {"mode": None},
        {"max_blank_length": True},
        {"beam": 8},
    ],
)
def test_option_types_are_422(client: TestClient, changes: dict[str, Any]) -> None:
    assert_error(client.post("/predict", json={"text": POEM, **changes}), 422, "invalid_request")


# --- /batch_predict ----------------------------------------------------------------------


def test_batch_applies_the_options_to_every_text(client: TestClient) -> None:
    texts = [WHOLE_WORD, "没有空格。", APART, "[BLANK]很[BLANK]", ""]
    response = client.post(
        "/batch_predict", json={"texts": texts, "mode": "whole_word", "top_k": 2}
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(texts)
    for index in (0, 2):
        single = post(client, text=texts[index], mode="whole_word", top_k=2)
        assert results[index]["sequences"] == single["sequences"]
        assert results[index]["masks"] == single["masks"]
    assert results[1]["error"]["code"] == "no_mask"
    assert results[3]["error"]["code"] == "bad_option"
    assert results[4]["error"]["code"] == "empty_text"


def test_batch_candidates_and_mixed_paths(client: TestClient, spy: PathSpy) -> None:
    texts = [IDIOM_CLOZE, IDIOM_CLOZE.replace("[MASK]", "[BLANK]")]
    results = client.post("/batch_predict", json={"texts": texts, "candidates": IDIOMS}).json()
    single = post(client, text=IDIOM_CLOZE, candidates=IDIOMS)["candidates"]
    # search rows share engine calls with whatever else is queued, so padding may move the
    # last digits: the same ranking, the same scores within the reference's 1e-4
    for item in results["results"]:
        assert [c["option"] for c in item["candidates"]] == [c["option"] for c in single]
        for got, expected in zip(item["candidates"], single, strict=True):
            assert got["score"] == pytest.approx(expected["score"], rel=1e-4)
            assert got["joint"] == pytest.approx(expected["joint"], rel=1e-4)
    spy.plain = spy.modes = 0
    # single mode: the plain texts share one run, the [BLANK] text takes the modes path
    mixed = client.post("/batch_predict", json={"texts": [POEM, BLANK_TEXT, APART]}).json()
    assert (spy.plain, spy.modes) == (2, 1)
    assert mixed["results"][1]["sequences"] and not mixed["results"][0]["sequences"]


def test_batch_with_a_bad_option_fails_as_a_whole(client: TestClient, spy: PathSpy) -> None:
    response = client.post("/batch_predict", json={"texts": [POEM, APART], "beam_width": 99})
    assert_error(response, 400, "bad_option")
    assert (spy.plain, spy.modes) == (0, 0)


# --- Hugging Face targets ----------------------------------------------------------------


def test_hf_multi_character_targets_are_chain_scored(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    targets = ["飞鸟", "鸟", "黄鹂鸟", " 飞鸟 "]  # the repeat is dropped, as the pipeline does
    rows = client.post("/", json={"inputs": POEM, "parameters": {"targets": targets}}).json()
    library = tiny_masker.predict(POEM, candidates=("飞鸟", "鸟", "黄鹂鸟")).candidates
    assert [row["token_str"] for row in rows] == [c.option for c in library]  # normalised order
    vocab = tiny_masker.encoder.vocab
    for row, candidate in zip(rows, library, strict=True):
        assert row["score"] == pytest.approx(candidate.joint, rel=1e-6)  # the joint probability
        assert row["sequence"] == POEM.replace("[MASK]", candidate.option)
        assert row["token"] == vocab[candidate.option[0]]
    capped = client.post("/", json={"inputs": POEM, "parameters": {"targets": targets, "top_k": 2}})
    assert capped.json() == rows[:2]


def test_hf_one_character_targets_score_the_same_either_way(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    """For one token the chain probability is the softmax probability: both paths agree."""
    targets = ["鸟", "龙", "睛"]
    rows = client.post("/", json={"inputs": POEM, "parameters": {"targets": targets}}).json()
    library = tiny_masker.predict(POEM, candidates=tuple(targets)).candidates
    assert [row["token_str"] for row in rows] == [c.option for c in library]
    for row, candidate in zip(rows, library, strict=True):
        assert row["score"] == pytest.approx(candidate.joint, rel=1e-5)
        assert candidate.score == pytest.approx(candidate.joint, rel=1e-9)
    # adding a word switches the whole list to chain scoring; the characters keep their score
    mixed = client.post("/", json={"inputs": POEM, "parameters": {"targets": [*targets, "飞鸟"]}})
    by_target = {row["token_str"]: row["score"] for row in mixed.json()}
    for row in rows:
        assert by_target[row["token_str"]] == pytest.approx(row["score"], rel=1e-5)


def test_hf_word_targets_on_several_inputs(client: TestClient) -> None:
    inputs = [POEM, WHOLE_WORD]  # a run of [MASK]s is one blank of any length
    outputs = client.post("/", json={"inputs": inputs, "parameters": {"targets": ["充电", "鸟"]}})
    assert outputs.status_code == 200, outputs.text
    first, second = outputs.json()
    assert {row["token_str"] for row in first} == {row["token_str"] for row in second}
    assert {row["sequence"] for row in second} == {
        "手机没电了，赶紧去充电。",
        "手机没电了，赶紧去鸟。",
    }


@pytest.mark.parametrize(
    ("parameters", "inputs", "words"),
    [
        # it said "Candidate ranking takes exactly one blank", which no client asked for
        (
            {"targets": ["飞鸟"]},
            TWO_BLANKS,
            "A target of several tokens ('飞鸟') is scored as the fill of one blank, so each "
            "text needs exactly one [MASK] (or one run of [MASK]s); give one-token targets",
        ),
        ({"targets": ["鸟", "飞鸟"]}, [POEM, TWO_BLANKS], "inputs[1]: A target of several tok"),
        ({"targets": ["😀鸟"]}, POEM, "not in the model's vocabulary"),
        ({"targets": ["鸟", "[SEP]"]}, POEM, "special token"),  # answered before
        ({"targets": ["[MASK]"]}, POEM, "A target can't contain [MASK]"),  # as a candidate
        (
            {"targets": ["一二三四五六七八九"]},
            POEM,
            "The target '一二三四五六七八九' is longer than 8",
        ),
        ({"targets": ["飞鸟", ""]}, POEM, "Every target must be a non-empty"),
        ({"targets": ["[BLANK]"]}, POEM, "A target can't contain [MASK] or [BLANK]"),
    ],
)
def test_hf_target_errors(
    client: TestClient, spy: PathSpy, parameters: dict[str, Any], inputs: Any, words: str
) -> None:
    response = client.post("/", json={"inputs": inputs, "parameters": parameters})
    assert words in assert_error(response, 400, "bad_option")["message"]
    assert (spy.plain, spy.modes) == (0, 0)  # nothing reached the engine


# --- concurrency -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_modes_and_plain_requests_concurrently(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    app = create_app(Settings(engine="torch", threads=1, model=str(tiny_model_dir)), tiny_masker)
    bodies: list[dict[str, Any]] = [
        {"text": POEM, "top_k": 2},
        {"text": WHOLE_WORD, "mode": "whole_word", "top_k": 3},
        {"text": IDIOM_CLOZE, "candidates": IDIOMS},
        {"text": BLANK_TEXT, "max_blank_length": 2},
        {"text": POEM, "preset": "chinese_only"},
        {"text": APART, "mode": "whole_word", "order": "confident_first"},
    ] * 2
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            responses = await asyncio.gather(*(http.post("/predict", json=b) for b in bodies))
    for body, response in zip(bodies, responses, strict=True):
        assert response.status_code == 200, response.text
        data = response.json()
        assert data["text"] == body["text"]  # each answer belongs to its own request
        options = {key: value for key, value in body.items() if key not in ("text", "top_k")}
        if "preset" in options:
            options["constraints"] = Constraints(preset=options.pop("preset"))
        if "candidates" in options:
            options["candidates"] = tuple(options["candidates"])
        direct = tiny_masker.predict(body["text"], top_k=body.get("top_k", 5), **options)
        assert data["sequence"] == direct.sequence
        assert [s["fill"] for s in data["sequences"]] == [s.fill for s in direct.sequences]
        assert [c["option"] for c in data["candidates"]] == [c.option for c in direct.candidates]


@pytest.mark.parametrize("parameters", [{}, {"targets": ["鸟", "飞鸟"]}])
def test_hf_refuses_a_text_longer_than_the_window(
    client: TestClient, spy: PathSpy, parameters: dict[str, Any]
) -> None:
    """The pipeline reads a text whole; the route cut it to a window around the mask and
    answered other numbers than the pipeline's, with nothing to say so."""
    long = "床前明月光，疑是地上霜。" * 12 + POEM + "举头望明月，低头思故乡。" * 12
    assert client.post("/predict", json={"text": long}).json()["truncated"] is True
    spy.plain = spy.modes = 0
    response = client.post("/", json={"inputs": long, "parameters": parameters})
    assert (
        "POST /predict fills it in a window"
        in assert_error(response, 400, "text_too_long")["message"]
    )
    assert (spy.plain, spy.modes) == (0, 0)  # nothing reached the engine


def test_a_longer_target_that_cuts_the_text_is_refused_and_said(client: TestClient) -> None:
    """One [MASK] fits the window exactly; a target of two characters makes the text one token
    longer, and its chain was scored on a cut text with nothing to say so (/predict answered
    "truncated": false)."""
    text = "好" * 125 + "[MASK]"  # 126 tokens: the 128-token window less [CLS] and [SEP]
    one = client.post("/predict", json={"text": text}).json()
    assert one["truncated"] is False
    ranked = client.post("/predict", json={"text": text, "candidates": ["飞鸟", "鸟"]}).json()
    assert ranked["truncated"] is True
    blank = client.post("/predict", json={"text": text.replace("[MASK]", "[BLANK]")}).json()
    assert blank["truncated"] is True  # its fills of 2 to 4 characters were cut
    response = client.post("/", json={"inputs": text, "parameters": {"targets": ["飞鸟", "鸟"]}})
    assert_error(response, 400, "text_too_long")
    assert client.post("/", json={"inputs": text}).status_code == 200  # one mask: whole


def test_the_readmes_cost_example_is_what_the_server_prices() -> None:
    """README "Cost": 64 texts x 16 masks x beam 64 is 75,840 rows with the bundled index and
    65,600 without, over the default cap of 16,384 (the README said 65,600 alone: a review)."""
    from tiankong import Settings
    from tiankong.server import create_app

    body = {"texts": ["[MASK]" * 16] * 64, "mode": "whole_word", "beam_width": 64}
    with local_client(create_app(Settings(engine="fake", threads=1))) as bundled:
        for index, rows in ((True, "75,840"), (False, "65,600")):
            answer = bundled.post("/batch_predict", json={**body, "index": index})
            assert answer.status_code == 400, answer.text
            message = answer.json()["error"]["message"]
            assert f"would cost {rows} forward rows, over this server's limit of 16,384" in message
        # sixteen separate masks: each its own blank for the index, so more with it, as the
        # README says (the example's figure was taken for any 16 masks: a review)
        apart = {**body, "texts": ["好[MASK]" * 16] * 64}
        costs = []
        for index in (True, False):
            answer = bundled.post("/batch_predict", json={**apart, "index": index})
            assert answer.status_code == 400, answer.text
            costs.append(int(answer.json()["error"]["message"].split()[4].replace(",", "")))
        assert costs[0] > 75_840 and costs[1] == 65_600, costs
