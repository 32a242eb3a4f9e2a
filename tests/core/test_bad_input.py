"""Bad input, property-based on the core and hand-picked at the JSON level.

Core: FillMasker.prepare / predict (FakeEngine on the real vocabulary, and the tiny torch model
for fewer examples) over arbitrary Unicode mixed with emoji, control and format characters, RTL
marks, zero-width characters, mask markers and brackets, lone surrogates, 100k-character
strings, texts that are only masks and 500 masks. Each input gives a result or a typed
TiankongError; anything else fails the test.

JSON: lone surrogates, malformed JSON, wrong content types, oversized bodies and batches, and
deep nesting each get their typed 4xx in the one error shape, never a 5xx. (Malformed JSON,
content types, lone surrogates and the 413s also have cases in tests/server/test_server.py.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_helpers import fake_masker
from server_helpers import assert_error, local_client

from tiankong import FillMasker, Settings
from tiankong.core.options import MASK_RUN
from tiankong.core.results import FillResult
from tiankong.core.text import BLANK, MASK, normalize_masks
from tiankong.errors import TiankongError, TopKOutOfRangeError
from tiankong.server import create_app

ODD_PIECES = [
    MASK,
    "[mask]",
    "【MASK】",
    "［ MASK ］",
    "[BLANK]",
    "[[MASK]]",
    "【[MASK]】",
    "([{[MASK]}])",
    "[",
    "]",
    "【",
    "】",
    "\u200b",  # zero-width space
    "\u200c",
    "\u200d",  # zero-width joiner
    "\u2060",
    "\ufeff",  # BOM
    "\u200e",  # LTR mark
    "\u200f",  # RTL mark
    "\u202e",  # RTL override
    "\u2067",
    "\u0301",  # combining accent
    "\x00",
    "\x07",
    "\x1b[31m",
    "\r\n",
    "\t",
    "😀",
    "👨\u200d👩\u200d👧",
    "🇨🇳",
    "\U0001f3fb",
    "\ud800",  # lone surrogates, as a str from bad UTF-8 can carry
    "\udcff",
    "ﷺ",
    "ß",
    "İ",
    "##",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[UNK]",
    "春眠不觉晓",
    "画龙点",
]
PIECE = st.one_of(
    st.sampled_from(ODD_PIECES),
    st.text(max_size=20),
    st.characters(categories=["Cc", "Cf", "Cs", "Co", "Mn", "Zs", "So"]),
)
TEXT = st.lists(PIECE, max_size=40).map("".join)
HUGE = st.builds(
    lambda piece, count, masks: piece * count + MASK * masks,
    st.sampled_from(["字", "😀", "\u200b", "a", "[", MASK]),
    st.integers(1_000, 100_000),
    st.integers(0, 3),
)
ONLY_MASKS = st.builds(
    lambda count, marker: marker * count,
    st.integers(1, 500),
    st.sampled_from([MASK, "[mask]", "【MASK】", "[BLANK]"]),
)
NESTED = st.builds(
    lambda depth, left, right: left * depth + MASK + right * depth,
    st.integers(1, 200),
    st.sampled_from(["[", "【", "［", "(", "{", "《"]),
    st.sampled_from(["]", "】", "］", ")", "}", "》"]),
)
ANY_TEXT = st.one_of(TEXT, HUGE, ONLY_MASKS, NESTED)
PROPERTY = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def fake(tiny_masker: FillMasker, tiny_model_dir: Path) -> FillMasker:
    return fake_masker(tiny_masker, Settings(engine="fake", threads=1, model=str(tiny_model_dir)))


def expected_error(masker: FillMasker, text: str, top_k: int = 5, **options: Any) -> str | None:
    """The error code ``text`` must get, worked out from the documented rules in their order
    (None: it must be answered). Written apart from the code it checks, so a rule that is
    skipped or gives the wrong code on some path fails the test."""
    limits = masker.settings
    if not 1 <= top_k <= limits.max_top_k:
        return "top_k_out_of_range"
    if not text.strip():
        return "empty_text"
    if len(text) > limits.max_text_chars:
        return "text_too_long"
    if any("\ud800" <= char <= "\udfff" for char in text):
        return "bad_input"
    normalised = normalize_masks(text)
    shortest = normalised.replace(BLANK, MASK)  # a [BLANK] is checked as its shortest fill
    count = shortest.count(MASK)
    if count == 0:
        return "no_mask"
    if count > limits.max_masks:
        return "too_many_masks"
    encoder = masker.encoder
    ids = encoder.tokenizer.encode(shortest, add_special_tokens=False).ids
    where = [index for index, token in enumerate(ids) if token == encoder.mask_id]
    if len(where) != count:  # the tokenizer merged a marker with its neighbours
        return "no_mask"
    if len(ids) > limits.max_length - 2 and where[-1] - where[0] + 1 > limits.max_length - 2:
        return "masks_do_not_fit"
    blanks = normalised.count(BLANK)
    if blanks and (blanks != 1 or MASK in normalised):
        return "bad_option"
    if options.get("mode") == "candidates" and not blanks and len(MASK_RUN.findall(shortest)) != 1:
        return "bad_option"
    return None


def check_answer(masker: FillMasker, text: str, **options: Any) -> None:
    """``predict`` gives exactly the expected error, or a result of the right shape; and
    ``predict_batch`` takes the same path for the same text."""
    expected = expected_error(masker, text, **options)
    attempts = {
        "predict": lambda: masker.predict(text, **options),
        "predict_batch": lambda: batch_of(masker, text, dict(options)),
    }
    for name, attempt in attempts.items():
        try:
            result = attempt()
        except TiankongError as error:
            assert error.code == expected, (name, error.code, error.message)
            assert error.message  # one readable sentence
            continue
        assert expected is None, f"{name}: expected {expected}, got an answer"
        assert isinstance(result, FillResult)
        if options.get("mode", "single") == "single" and BLANK not in normalize_masks(text):
            assert len(result.masks) == normalize_masks(text).count(MASK)
            assert all(candidate.score >= 0 for mask in result.masks for candidate in mask)
        json.dumps(result.to_dict())  # the answer can always be sent


def batch_of(masker: FillMasker, text: str, options: dict[str, Any]) -> FillResult:
    top_k = options.pop("top_k", 5)
    return masker.predict_batch([text], options=masker.options(top_k, **options))[0]


@PROPERTY
@given(text=ANY_TEXT)
def test_prepare_gives_a_text_or_a_typed_error(fake: FillMasker, text: str) -> None:
    try:
        prepared = fake.prepare(text)
    except TiankongError:
        return
    assert prepared.mask_indices and len(prepared.input_ids) <= fake.settings.max_length


@PROPERTY
@given(text=ANY_TEXT, top_k=st.integers(-2, 60))
def test_predict_gives_a_result_or_a_typed_error(fake: FillMasker, text: str, top_k: int) -> None:
    check_answer(fake, text, top_k=top_k)


@settings(PROPERTY, max_examples=60)
@given(text=TEXT, mode=st.sampled_from(["whole_word", "candidates"]))
def test_modes_give_a_result_or_a_typed_error(fake: FillMasker, text: str, mode: str) -> None:
    options: dict[str, Any] = {"mode": mode, "beam_width": 2}
    if mode == "candidates":
        options["candidates"] = ["鸟", "花开", "一丝不苟"]
    check_answer(fake, text, **options)


@pytest.mark.parametrize("odd", ["\u200b", "\x07", "\u200b\u200d"])
def test_a_candidate_the_model_cannot_read_is_bad_option(fake: FillMasker, odd: str) -> None:
    with pytest.raises(TiankongError) as caught:
        fake.predict("他做事一向[MASK]。", candidates=("鸟", odd))
    assert caught.value.code == "bad_option"


@pytest.mark.parametrize("field", ["candidates", "allowed", "exclude"])
def test_an_option_that_is_not_unicode_is_bad_option(fake: FillMasker, field: str) -> None:
    """GBK bytes in --candidates, --allowed or --exclude reach Python as lone surrogates: the
    tokenizer's TypeError was a traceback (a review's reproduction); the text's own check
    already refused them."""
    with pytest.raises(TiankongError, match="not valid Unicode") as caught:
        fake.predict(
            "天[MASK]", **{field: ("\udccc\udcec",) if field != "candidates" else ["\udccc"]}
        )
    assert caught.value.code == "bad_option"


@pytest.mark.parametrize("word", ["##好", "##鸟"])
@pytest.mark.parametrize("field", ["candidates", "allowed", "exclude"])
def test_a_word_piece_option_is_bad_option(fake: FillMasker, field: str, word: str) -> None:
    with pytest.raises(TiankongError, match="word piece") as caught:
        fake.predict("天[MASK]", **{field: (word,)})
    assert caught.value.code == "bad_option"


@pytest.mark.parametrize("special", ["[SEP]", "[CLS]", "鸟[PAD]", "[UNK]", "好[UNK]"])
def test_a_special_token_candidate_is_bad_option(fake: FillMasker, special: str) -> None:
    """As the Hugging Face route refuses such a target: a special token is never a fill."""
    with pytest.raises(TiankongError, match="special token") as caught:
        fake.predict("画龙点[MASK]", candidates=("睛", special))
    assert caught.value.code == "bad_option"


@pytest.mark.parametrize("field", ["allowed", "exclude"])
def test_a_vocabularys_bracketed_token_typed_whole_is_a_special_token(
    fake: FillMasker, field: str
) -> None:
    """[unused3] is read by the tokenizer as its letters: allowed, such an entry answered d, e,
    1; excluded, it banned u, n, s, e, d and 1 (a review). A token of the vocabulary's own in
    brackets is refused as [SEP] is; a bracketed word the vocabulary lacks is text (this
    vocabulary has no [unused1]: ids 1 and 2 are [SUB] and [OBJ])."""
    assert "[unused3]" in fake.encoder.vocab  # the premise: the real vocabulary's
    for entry in ("[unused3]", "鸟[unused3]", "[unused3][unused4]"):  # whole, or within one
        with pytest.raises(TiankongError, match="special token") as caught:
            fake.predict("画龙点[MASK]", **{field: (entry,)})
        assert caught.value.code == "bad_option"
    fake.predict("画龙点[MASK]", **{field: ("[睛]",)})


@pytest.mark.parametrize(
    "options",
    [
        {"candidates": "充电"},  # was two candidates, 充 and 电
        {"mode": "whole_word", "beam_width": "8"},
        {"mode": "whole_word", "beam_width": 2.5},
        {"mode": "whole_word", "beam_width": True},
        {"length_alpha": "1"},
        {"max_blank_length": 2.5},
        {"constraints": {"preset": "chinese_only"}},
        {"mode": ["single"]},
    ],
)
def test_an_option_of_the_wrong_type_is_bad_option(fake: FillMasker, options: dict) -> None:
    """The library takes any Python value: these were a TypeError or AttributeError from deep
    in the search, or (a string of candidates) an answer to another question."""
    with pytest.raises(TiankongError) as caught:
        fake.predict("他做事一向[MASK]，从来不出差错。", **options)
    assert caught.value.code == "bad_option"


def test_options_and_keyword_options_together_are_bad_option(fake: FillMasker) -> None:
    """options= with top_k=2 answered 3, and mode= beside options= was dropped."""
    from tiankong.core.options import PredictOptions

    text = "春眠不觉晓，处处闻啼[MASK]。"
    for extra in ({"top_k": 2}, {"mode": "whole_word"}):
        with pytest.raises(TiankongError, match="not both") as caught:
            fake.predict(text, options=PredictOptions(top_k=3), **extra)
        assert caught.value.code == "bad_option"
    assert len(fake.predict(text, top_k=2).masks[0]) == 2
    assert len(fake.predict_batch([text], options=PredictOptions(top_k=3))[0].masks[0]) == 3
    assert fake.predict_batch([text], candidates=["鸟", "花"])[0].candidates


def test_constraints_are_keyword_options_too(fake: FillMasker) -> None:
    """The README says predict takes the options as keywords, but preset= and exclude= were a
    bare TypeError from PredictOptions: constraints needed a Constraints object that neither
    tiankong's exports nor the docs named."""
    from tiankong.core.decoding import Constraints

    text = "春眠不觉晓，处处闻啼[MASK]。"
    by_keyword = fake.predict(text, top_k=10, preset="chinese_only", exclude=["鸟"])
    by_object = fake.predict(
        text, top_k=10, constraints=Constraints(exclude=("鸟",), preset="chinese_only")
    )
    assert by_keyword.to_dict() == by_object.to_dict()
    assert all(c.token != "鸟" for c in by_keyword.masks[0])
    allowed = fake.predict(text, allowed=["鸟", "花"]).masks[0]
    assert {c.token for c in allowed} <= {"鸟", "花"}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"topk": 3}, "Unknown option 'topk'; the options are top_k, mode,"),
        ({"candidates": []}, "candidates is an empty list"),  # answered in single mode
        ({"allowed": []}, "allowed is an empty list"),  # dropped: no limit
        ({"allowed": "很好"}, "allowed must be a list of strings, not str"),
        (
            {"preset": "chinese_only", "constraints": None, "exclude": ("鸟",), "mode": "single"},
            None,
        ),
    ],
)
def test_keyword_options_refuse_what_http_refuses(
    fake: FillMasker, options: dict, words: str | None
) -> None:
    text = "春眠不觉晓，处处闻啼[MASK]。"
    if words is None:  # None stands for "not given", as a JSON null does
        assert fake.predict(text, **options).masks[0]
        return
    with pytest.raises(TiankongError, match=re.escape(words)) as caught:
        fake.predict(text, **options)
    assert caught.value.code == "bad_option"


def test_predict_batch_refuses_one_string(fake: FillMasker) -> None:
    """A string is a Sequence[str]: it was read a character at a time (no_mask)."""
    with pytest.raises(TiankongError, match="takes a list of texts, not one string") as caught:
        fake.predict_batch("画龙点[MASK]")
    assert caught.value.code == "bad_option"


@pytest.mark.parametrize("text", [None, 123, b"\xe7\x94\xbb[MASK]"])
def test_a_text_that_is_no_string_is_bad_input_not_an_empty_one(
    fake: FillMasker, text: object
) -> None:
    """predict(None) was an EmptyTextError, code empty_text, for a wrong type (a review)."""
    from tiankong.tasks.check import Proofreader

    with pytest.raises(TiankongError, match="The text must be a string, not") as caught:
        fake.predict(text)  # type: ignore[arg-type]
    assert caught.value.code == "bad_input"
    with pytest.raises(TiankongError, match="The text must be a string, not") as caught:
        Proofreader(fake).check(text)  # type: ignore[arg-type]
    assert caught.value.code == "bad_input"


@pytest.mark.parametrize(
    ("texts", "words"),
    [(None, "not NoneType"), (123, "not int"), ({"画龙点[MASK]": 1}, "not dict")],
)
def test_predict_batch_refuses_what_is_no_list_of_texts(
    fake: FillMasker, texts: object, words: str
) -> None:
    """None and 123 were a TypeError from the loop; a dict's keys were filled (a review)."""
    with pytest.raises(TiankongError, match=f"predict_batch takes a list of texts, {words}"):
        fake.predict_batch(texts)  # type: ignore[arg-type]
    assert len(fake.predict_batch(text for text in ["画龙点[MASK]"])) == 1  # any iterable


def test_settings_and_options_of_the_wrong_kind_are_bad_option(fake: FillMasker) -> None:
    """A dict for settings= or options= was an AttributeError."""
    with pytest.raises(
        TiankongError, match=re.escape("settings must be a tiankong.Settings, not dict")
    ):
        FillMasker.load(settings={"threads": 1})  # type: ignore[arg-type]
    with pytest.raises(TiankongError, match="options must be a PredictOptions") as caught:
        fake.predict("处处闻啼[MASK]。", options={"top_k": 3})  # type: ignore[arg-type]
    assert caught.value.code == "bad_option"


def test_constraints_given_both_ways_are_refused(fake: FillMasker) -> None:
    from tiankong.core.decoding import Constraints

    with pytest.raises(TiankongError, match="as keywords or in constraints=, not both"):
        fake.predict("处处闻啼[MASK]。", preset="chinese_only", constraints=Constraints())


def test_a_candidate_with_an_unknown_character_is_still_ranked(fake: FillMasker) -> None:
    result = fake.predict("画龙点[MASK]", candidates=("睛", "𪚥"))
    assert [c.in_vocabulary for c in result.candidates] == [True, False]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("今天天气很[BLANK]。", None),
        ("今天天气很【blank】。", None),
        ("[BLANK]和[BLANK]", "bad_option"),
        ("今天[MASK]很[BLANK]。", "bad_option"),
        ("   ", "empty_text"),
        ("没有空格", "no_mask"),
    ],
)
def test_blank_through_predict_and_predict_batch(fake: FillMasker, text: str, code: Any) -> None:
    """The [BLANK] bug: predict_batch once sent a [BLANK] down the plain path (no_mask)."""
    assert expected_error(fake, text) == code
    check_answer(fake, text, top_k=3)


@settings(PROPERTY, max_examples=60)
@given(text=st.one_of(TEXT, NESTED))
def test_the_tiny_model_too(tiny_masker: FillMasker, text: str) -> None:
    check_answer(tiny_masker, text, top_k=3)


# --- JSON level --------------------------------------------------------------------------------

POEM = "春眠不觉晓，处处闻啼[MASK]。"


@pytest.fixture(scope="module")
def client(tiny_masker: FillMasker, tiny_model_dir: Path) -> Iterator[TestClient]:
    settings_ = Settings(engine="fake", threads=1, model=str(tiny_model_dir))
    with local_client(create_app(settings_, fake_masker(tiny_masker, settings_))) as test_client:
        yield test_client


def post_raw(
    client: TestClient, path: str, content: bytes, content_type: str = "application/json"
) -> Any:
    return client.post(path, content=content, headers={"content-type": content_type})


@pytest.mark.parametrize("path", ["/predict", "/batch_predict", "/"])
@pytest.mark.parametrize(
    "content",
    [
        b"[" * 10_000 + b"]" * 10_000,  # deep nesting: past json's recursion limit
        b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        b'{"texts": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
        b'{"inputs": ' + b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"}",
        b'{"text": "\\udfff[MASK]"}',
        b'{"inputs": "\\ud83d[MASK]"}',
        b'{"texts": ["\\ud800[MASK]"]}',
        b"{",
        b"null",
        b"\x00\x01",
        b'{"text": "a"}{"text": "b"}',
        '{"text": "画龙点[MASK]"}'.encode("utf-16"),
        b'{"text": 1e999999}',
        b'{"text": "' + b"\\u0000" * 1000 + b'[MASK]"}',
    ],
    ids=lambda content: repr(content[:24]),
)
def test_hostile_bodies_are_never_5xx(client: TestClient, path: str, content: bytes) -> None:
    """A typed 4xx in the one shape, or (UTF-16 with a BOM, NULs in a string, which Python's
    json reads as valid) an answer."""
    response = post_raw(client, path, content)
    assert response.status_code < 500, response.text[:300]
    if response.status_code >= 400:
        assert_error(response, response.status_code, response.json()["error"]["code"])


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/json; charset=latin-1",
    ],
)
def test_wrong_content_types(client: TestClient, content_type: str) -> None:
    body = json.dumps({"text": POEM}).encode()
    response = post_raw(client, "/predict", body, content_type)
    assert response.status_code in (200, 415), response.text  # parsed as JSON or refused


def test_huge_batches_are_refused_whole(client: TestClient) -> None:
    texts = ["[MASK]"] * 100_000  # 900 kB, under the body limit
    response = client.post("/batch_predict", json={"texts": texts})
    assert "100000 texts" in assert_error(response, 400, "batch_too_large")["message"]
    hf = client.post("/", json={"inputs": ["[MASK]"] * 100_000})
    assert_error(hf, 400, "batch_too_large")


def test_oversized_bodies_are_413_on_every_route(client: TestClient) -> None:
    big = json.dumps({"text": "字" * 400_000 + MASK}, ensure_ascii=False).encode()
    for path in ("/predict", "/batch_predict", "/", "/no/such/route"):
        assert_error(post_raw(client, path, big), 413, "body_too_large")


def test_the_warning_for_an_index_asked_of_index_none_reads_right(tiny_model_dir: Path) -> None:
    """It read "index was asked for, but no corpus index is loaded: no index was asked for"
    (a review)."""
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), index="none")
    masker = FillMasker.load(settings=settings)
    warnings = masker.predict("画龙点[MASK]", index=True).warnings
    assert warnings == [
        "index was asked for, but no corpus index is loaded: --index is none; the answers are "
        "the model's own."
    ]


def test_the_index_asked_for_where_there_is_none_is_said(fake: FillMasker) -> None:
    """predict(..., index=True) on a model with no index answered with the model's own numbers
    without a word, where the server's same request gets a warning (a review)."""
    assert fake.memory is None
    asked = fake.predict("画龙点[MASK]", index=True)
    assert any(w.startswith("index was asked for, but no corpus index") for w in asked.warnings)
    assert not fake.predict("画龙点[MASK]").warnings  # left unset, the default: nothing said
    [batch] = fake.predict_batch(["画龙点[MASK]"], index=True)
    assert batch.warnings == asked.warnings


def test_a_numpy_integer_top_k_is_the_integer_it_is(fake: FillMasker) -> None:
    """A top_k read from pandas or numpy was refused as not an integer: "top_k must be an
    integer from 1 to 50; got np.int64(3)" (a review)."""
    import numpy as np

    result = fake.predict("春眠不觉晓，处处闻啼[MASK]。", top_k=np.int64(3))
    assert len(result.masks[0]) == 3
    assert [len(r.masks[0]) for r in fake.predict_batch(["画龙点[MASK]"], top_k=np.int32(2))] == [2]
    with pytest.raises(TopKOutOfRangeError, match="got 0"):
        fake.predict("画龙点[MASK]", top_k=np.int64(0))
