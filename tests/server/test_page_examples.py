"""The page's example buttons (``EXAMPLES`` in static/app.js) answer right with the bundled model
and its index, as a user who clicks them first sees them: a review found the whole-word example
answered 手机没电了，赶紧去赶紧。, the common-sense one 太阳从东北升起。 and the choice one 马马虎虎
for 他做事一向[MASK]，从来不出差错。"""

from __future__ import annotations

import re

import pytest

from tiankong import FillMasker
from tiankong.core.models import PACKAGE_ROOT
from tiankong.tasks.check import Proofreader

APP_JS = PACKAGE_ROOT / "server" / "static" / "app.js"
# each example's answer (a check's corrected text) that a teacher would accept
RIGHT = {
    "idiom": "画龙点睛",
    "poem": "春眠不觉晓，处处闻啼鸟。",
    "common": "中国的首都是北京。",
    "wholeWord": "我饿了，我们去吃饭吧。",
    "choice": "他画的龙栩栩如生，真是画龙点睛。",
    "check": "欲穷千里目，更上一层楼。画龙点睛。",
}


def examples() -> dict[str, dict[str, str]]:
    """``EXAMPLES`` as the page holds it: key -> its text, mode and candidates, if any."""
    block = APP_JS.read_text(encoding="utf-8").split("const EXAMPLES = {", 1)[1].split("\n};", 1)[0]
    found = {}
    for key, body in re.findall(r"^  (\w+): \{(.*?)\},?$", block, flags=re.M | re.S):
        found[key] = dict(re.findall(r'(\w+): "([^"]*)"', body))
    return found


@pytest.fixture(scope="module")
def masker() -> FillMasker:
    return FillMasker.load()


def test_every_example_is_read() -> None:
    found = examples()
    assert set(found) == {*RIGHT, "blank"}
    assert all("text" in example and "mode" in example for example in found.values())


@pytest.mark.parametrize("key", sorted(RIGHT))
def test_an_example_answers_right(masker: FillMasker, key: str) -> None:
    example = examples()[key]
    if example["mode"] == "check":
        assert Proofreader(masker).check(example["text"]).corrected == RIGHT[key]
        return
    options = {"mode": "whole_word"} if example["mode"] == "whole_word" else {}
    if example["mode"] == "candidates":
        options = {"candidates": re.split("[、,，\\s]+", example["candidates"])}
    assert masker.predict(example["text"], **options).sequence == RIGHT[key]


# /docs's examples (server/schemas.py), as its "Try it out" sends them: the same texts as the
# page's (it kept 太阳从东[MASK]升起。, 赶紧去[MASK][MASK] and 他做事一向[MASK] after the page
# dropped them for their wrong answers, a review)
DOCS_RIGHT = {
    "idiom": "画龙点睛",
    "poem": "春眠不觉晓，处处闻啼鸟。",
    "common_sense": "中国的首都是北京。",
    "whole_word": "我饿了，我们去吃饭吧。",
    "candidates": "他画的龙栩栩如生，真是画龙点睛。",
}


@pytest.mark.parametrize("key", sorted(DOCS_RIGHT))
def test_a_docs_example_answers_right(masker: FillMasker, key: str) -> None:
    from tiankong.server.schemas import PREDICT_EXAMPLES

    body = dict(PREDICT_EXAMPLES[key]["value"])
    text = body.pop("text")
    body.pop("top_k", None)
    body.pop("beam_width", None)
    assert masker.predict(text, **body).sequence == DOCS_RIGHT[key]


def test_the_docs_hf_word_targets_rank_the_right_word_first(masker: FillMasker) -> None:
    """The Hugging Face route has no index: the model's own scores rank the targets."""
    from tiankong.server.schemas import HF_EXAMPLES

    value = HF_EXAMPLES["word_targets"]["value"]
    targets = value["parameters"]["targets"]
    found = masker.predict(value["inputs"], candidates=targets, index=False).candidates
    assert found[0].option == "吃饭"
