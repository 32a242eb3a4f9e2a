"""Small corpora built in fixtures, and the tokenizer the index uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tiankong.index import build_index, default_tokenizer

LINES = [
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "今天天气很好，我们去公园散步。",
    "今天天气很冷，我们在家看书。",
    "昨天天气很好，我们去公园跑步。",
    "手机没电了，赶紧去充电。",
    "电脑没电了，赶紧去充电。",
    "钱包丢了，赶紧去报警。",
    "这一笔真是画龙点睛之笔。",
    "画龙点睛",
    "守株待兔",
    "他在iPhone 15上读了3遍《静夜思》，床前明月光。",
]


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


def ids(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids
