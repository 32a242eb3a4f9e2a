"""Small corpora built in fixtures, and the tokenizer the index uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from index_corpus import LINES
from tokenizers import Tokenizer

from tiankong.index import build_index, default_tokenizer


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return default_tokenizer()


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def small_index(tmp_path_factory: pytest.TempPathFactory, corpus_file: Path) -> Path:
    out = tmp_path_factory.mktemp("index") / "small"
    build_index([corpus_file], out, progress=False)
    return out
