"""schemathesis against the server's own OpenAPI: every documented operation, with valid and
invalid inputs, over real HTTP on loopback. No answer may be a 5xx, and every error answer has
the one error shape.

Bounded: ``MAX_EXAMPLES`` per operation and generation mode, derandomized (the same examples
every run), no per-example deadline (two busy cores). The server runs the fake engine: the
examples exercise the HTTP layer, validation, the modes and the error table, not model speed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from reliability_helpers import fake_masker, serve_with_runner
from schemathesis import GenerationMode

from tiankong import FillMasker, Settings
from tiankong.server import create_app

MAX_EXAMPLES = 50
WITH_INPUT = ["POST /predict", "GET /predict", "POST /batch_predict", "POST /"]
WITH_INPUT += ["POST /check", "POST /batch_check"]  # proofreading (server/check_routes.py)
WITHOUT_INPUT = ["GET /health", "GET /ready", "GET /info", "GET /metrics"]
OPERATIONS = WITH_INPUT + WITHOUT_INPUT
CASES = [(label, GenerationMode.POSITIVE) for label in OPERATIONS] + [
    (label, GenerationMode.NEGATIVE)
    for label in WITH_INPUT  # no input, nothing to break
]


@pytest.fixture(scope="module")
def served_url(tiny_masker: FillMasker, tiny_model_dir: Path) -> Iterator[str]:
    server_settings = Settings(
        engine="fake", threads=1, model=str(tiny_model_dir), result_cache_size=0
    )
    app = create_app(server_settings, fake_masker(tiny_masker, server_settings))
    with serve_with_runner(app, server_settings) as (url, _):
        yield url


@pytest.fixture(scope="module")
def api_schema(served_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{served_url}/openapi.json")


def test_every_operation_is_fuzzed(api_schema: Any) -> None:
    labels = {result.ok().label for result in api_schema.get_all_operations()}
    assert labels == set(OPERATIONS), "a new route: add it to OPERATIONS"


@pytest.mark.parametrize(
    ("label", "mode"), CASES, ids=[f"{label}-{mode.value}" for label, mode in CASES]
)
def test_no_5xx(api_schema: Any, served_url: str, label: str, mode: GenerationMode) -> None:
    operation = api_schema.find_operation_by_label(label)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        response = case.call(base_url=served_url, timeout=30)
        assert response.status_code < 500, (
            f"{case.method} {case.path} answered {response.status_code}: {response.text[:300]}"
        )
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"error"} and {"code", "message"} <= set(body["error"])

    check()
