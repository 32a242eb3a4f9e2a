"""The real huggingface_hub InferenceClient against a running tiankong server, unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError
from server_helpers import serve_in_thread

from tiankong import FillMasker, Settings
from tiankong.server import create_app

POEM = "春眠不觉晓，处处闻啼[MASK]。"


@pytest.fixture
def client(base_url: str, monkeypatch: pytest.MonkeyPatch) -> InferenceClient:
    # The test session runs with HF_HUB_OFFLINE=1, and the client then refuses every request,
    # even to loopback. Lift it for the client only: it talks to 127.0.0.1 and nothing else.
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_sent_but_ignored")  # the client sends it as a bearer token
    return InferenceClient(base_url=base_url)


def our_predictions(base_url: str, top_k: int) -> list[dict[str, object]]:
    response = httpx.post(f"{base_url}/predict", json={"text": POEM, "top_k": top_k}, timeout=30)
    return list(response.json()["predictions"])


def test_fill_mask_default(client: InferenceClient, base_url: str) -> None:
    results = client.fill_mask(POEM)
    assert len(results) == 5
    expected = our_predictions(base_url, 5)
    assert [r.token for r in results] == [c["token_id"] for c in expected]
    for result in results:
        assert result.sequence == POEM.replace("[MASK]", result.token_str)
        assert 0 < result.score < 1


def test_fill_mask_top_k(client: InferenceClient, base_url: str) -> None:
    results = client.fill_mask(POEM, top_k=2)
    assert [r.token for r in results] == [c["token_id"] for c in our_predictions(base_url, 2)]


def test_fill_mask_targets(client: InferenceClient) -> None:
    results = client.fill_mask(POEM, targets=["鸟", "狗", "龙"])
    assert sorted(r.token_str for r in results) == ["狗", "鸟", "龙"]
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert {r.sequence for r in results} == {POEM.replace("[MASK]", t) for t in "鸟狗龙"}


def test_fill_mask_targets_and_top_k(client: InferenceClient) -> None:
    everything = client.fill_mask(POEM, targets=["鸟", "狗", "龙"])
    best_two = client.fill_mask(POEM, targets=["鸟", "狗", "龙"], top_k=2)
    assert [r.token for r in best_two] == [r.token for r in everything[:2]]


def test_fill_mask_multi_character_targets(
    client: InferenceClient, tiny_masker: FillMasker
) -> None:
    """Words are scored whole (exact chain probability), never cut to their first character."""
    targets = ["飞鸟", "鸟", "黄鹂鸟"]
    results = client.fill_mask(POEM, targets=targets)
    library = tiny_masker.predict(POEM, candidates=tuple(targets)).candidates
    assert [r.token_str for r in results] == [c.option for c in library]  # length-normalised order
    for result, candidate in zip(results, library, strict=True):
        assert result.score == pytest.approx(candidate.joint, rel=1e-6)
        assert result.sequence == POEM.replace("[MASK]", candidate.option)
        assert result.token == tiny_masker.encoder.vocab[candidate.option[0]]
    assert len(client.fill_mask(POEM, targets=targets, top_k=2)) == 2


def test_fill_mask_error_reaches_the_client(client: InferenceClient) -> None:
    with pytest.raises(HfHubHTTPError) as raised:
        client.fill_mask("这句话没有空格。")
    assert raised.value.response.status_code == 400
    assert raised.value.response.json()["error"]["code"] == "no_mask"


HF_KEY = "hf-client-key-0123456789"


@pytest.fixture(scope="module")
def keyed_url(tiny_model_dir: Path, tiny_masker: FillMasker) -> Iterator[str]:
    settings = Settings(engine="torch", threads=1, model=str(tiny_model_dir), api_keys=(HF_KEY,))
    with serve_in_thread(create_app(settings, tiny_masker)) as url:
        yield url


def test_the_client_token_is_the_api_key(
    keyed_url: str, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With API keys on, the client's own bearer token (api_key= or HF_TOKEN) gets in."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    results = InferenceClient(base_url=keyed_url, api_key=HF_KEY).fill_mask(POEM, top_k=2)
    assert [r.token for r in results] == [c["token_id"] for c in our_predictions(base_url, 2)]
    monkeypatch.setenv("HF_TOKEN", HF_KEY)
    assert len(InferenceClient(base_url=keyed_url).fill_mask(POEM)) == 5
    with pytest.raises(HfHubHTTPError) as refused:
        InferenceClient(base_url=keyed_url, api_key="wrong").fill_mask(POEM)
    assert refused.value.response is not None and refused.value.response.status_code == 401
