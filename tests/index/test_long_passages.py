"""Evidence from a very long passage reads a window around the match, not the passage from its
start: an index built from one 3,000,011-character line took 15-20 s a request, 14.5 s of it
tokenizing the line up to the match (docs/INDEX.md, "Evidence"). The cost is asserted as the
characters handed to the tokenizer (a timing assertion would be flaky): with the old code,
every character up to the match; now none for Chinese text."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from index_corpus import ids
from tokenizers import Tokenizer

from tiankong.index import BlankLookup, build_index, open_index
from tiankong.index.lookup import VERBATIM_PREFIX, trim

PHRASE = "张三最喜欢的水果是榴莲"
DEPTH = 120_000  # characters before the phrase


class CountingTokenizer:
    """The real tokenizer, counting the characters it is asked to encode."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.characters = 0

    def encode(self, text: str, *args: Any, **kwargs: Any) -> Any:
        self.characters += len(text)
        return self.tokenizer.encode(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


def filler(count: int, seed: int) -> str:
    # characters that never spell the phrase's first ones, so the phrase occurs once
    common = (
        "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着"
        "去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主"
        "行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二"
        "理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走"
        "电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市"
        "眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提"
        "感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它"
        "许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青"
        "管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步"
        "完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持"
        "取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯"
        "专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴急"
    )
    rng = random.Random(seed)
    text = "".join(rng.choice(common) for _ in range(count))
    return text.replace("张三", "张四")


@pytest.fixture(scope="module")
def long_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("long-index")
    chinese = filler(DEPTH, 1) + PHRASE + filler(5_000, 2)
    kept = "iPhone 15 " + filler(DEPTH, 3) + "李四最爱的水果是山竹" + filler(5_000, 4)
    (folder / "long.txt").write_text(f"{chinese}\n{kept}\n", encoding="utf-8")
    build_index([folder / "long.txt"], folder / "index", progress=False)
    return folder / "index"


@pytest.mark.parametrize(
    "line",
    [
        # long words: 2 tokens a character at most was the rule, and 'information technology'
        # is about 11 characters a token, so its match counted and could not be quoted
        "information technology " * 400 + "张三最喜欢的水果是榴莲。",
        # more than 8,192 bytes, fewer characters: quotable whole, and it was dropped
        "2024年" + "今天天气很好。" * 1100 + "张三最喜欢的水果是榴莲。",
    ],
)
def test_a_match_in_a_passage_kept_as_text_is_counted_only_where_it_is_quoted(
    tmp_path: Path, tokenizer: Tokenizer, line: str
) -> None:
    """Counting and quoting follow one rule (a verifying review): a match is shown with its
    出处 or not counted."""
    (tmp_path / "one.txt").write_text(line + "\n", encoding="utf-8")
    build_index([tmp_path / "one.txt"], tmp_path / "index", progress=False)
    lookup = BlankLookup(open_index(tmp_path / "index"), tokenizer)
    match = lookup.lookup(ids(tokenizer, "张三最喜欢的水果是榴"), ids(tokenizer, "。"), 1)
    quotable = len(line) <= VERBATIM_PREFIX
    assert (match is not None) == quotable
    if match is not None:
        memory = lookup.evidence(match, ids(tokenizer, "莲"))
        assert memory is not None and memory["match"] == "张三最喜欢的水果是榴莲。"


def test_evidence_deep_in_a_long_passage_is_cut_from_a_window(
    long_index: Path, tokenizer: Tokenizer
) -> None:
    counting = CountingTokenizer(tokenizer)
    lookup = BlankLookup(open_index(long_index), counting)  # type: ignore[arg-type]
    match = lookup.lookup(ids(tokenizer, PHRASE[:-1]), ids(tokenizer, "。"), 1)
    assert match is not None
    counting.characters = 0
    memory = lookup.evidence(match, ids(tokenizer, "莲"))
    assert memory is not None and memory["match"] == PHRASE
    line = filler(DEPTH, 1) + PHRASE + filler(5_000, 2)
    assert memory["example"] == trim(line, DEPTH, DEPTH + len(PHRASE))
    assert counting.characters == 0  # Chinese text: the window is spelled from its tokens


def test_deep_in_a_long_passage_kept_as_text_no_evidence_rather_than_a_slow_one(
    long_index: Path, tokenizer: Tokenizer
) -> None:
    """A passage with letters or digits is kept as text and must be tokenized to find the
    match's characters; past VERBATIM_PREFIX characters it shows none (no misplaced quote),
    and near its start it still shows the right one. What it can't quote it doesn't count
    either: the match moved 莲's score from 0.05 to 0.96 with ``memory`` null (a review)."""
    counting = CountingTokenizer(tokenizer)
    lookup = BlankLookup(open_index(long_index), counting)  # type: ignore[arg-type]
    assert lookup.lookup(ids(tokenizer, "李四最爱的水果是山"), [], 1) is None
    assert counting.characters <= VERBATIM_PREFIX  # what evidence would quote, once
    counting.characters = 0
    assert lookup.lookup(ids(tokenizer, "李四最爱的水果是山"), [], 1) is None
    assert counting.characters == 0  # known per passage
    near = lookup.lookup(ids(tokenizer, "iPhone 15"), [], 1)
    assert near is not None
    memory = lookup.evidence(near, next(iter(near.fills)))
    kept = "iPhone 15 " + filler(DEPTH, 3)
    assert memory is not None and memory["match"] == "15 " + kept[10]
    assert memory["example"] == trim(kept, 7, 11)
    assert counting.characters <= 2 * VERBATIM_PREFIX
