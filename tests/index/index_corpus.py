"""The small corpus the index tests build, and a helper: a module of its own, not conftest.py,
because several folders have a conftest.py and ``from conftest import`` gets whichever loaded last.
"""

from __future__ import annotations

from tokenizers import Tokenizer

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


def ids(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids
