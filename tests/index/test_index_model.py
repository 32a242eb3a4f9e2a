"""With the bundled model: a phrase no model knows is completed from a two-line notes index."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong import FillMasker
from tiankong.index import (
    BlankLookup,
    build_index,
    combine_distribution,
    open_index,
    tokenizer_fingerprint,
)
from tiankong.index.lookup import blanks_of


@pytest.fixture(scope="module")
def masker() -> FillMasker:
    return FillMasker.load()


def test_a_notes_index_completes_its_phrase(masker: FillMasker, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(
        "周三下午的例会改在蓝鲸会议室开。\n项目代号叫做青蛙跳月计划。\n", encoding="utf-8"
    )
    build_index([notes], tmp_path / "idx", progress=False)
    index = open_index(tmp_path / "idx", tokenizer_fingerprint(masker.encoder.tokenizer), [notes])
    lookup = BlankLookup(index)
    prepared = masker.prepare("我们的项目代号叫做青蛙跳[MASK]计划。")
    row = masker.mask_probabilities([prepared])[0][0]
    blank = blanks_of(prepared.input_ids, prepared.mask_indices)[0]
    match = lookup.lookup(blank.left, blank.right, blank.length)
    moon = masker.encoder.vocab["月"]
    mixed = combine_distribution(row, match)
    row_scores, mixed_scores = row.copy(), mixed.copy()
    row_scores[masker.banned] = mixed_scores[masker.banned] = -1.0
    assert int(row_scores.argmax()) != moon  # the model alone doesn't know the code name
    assert int(mixed_scores.argmax()) == moon
    assert match is not None
    assert lookup.evidence(match, [moon]) == {
        "count": 1,
        "match": "项目代号叫做青蛙跳月计划。",
        "example": "项目代号叫做青蛙跳月计划。",
    }
    # A sentence the notes know nothing about: the model's own distribution, unchanged.
    prepared = masker.prepare("今天我去超[MASK]买菜。")
    row = masker.mask_probabilities([prepared])[0][0]
    blank = blanks_of(prepared.input_ids, prepared.mask_indices)[0]
    match = lookup.lookup(blank.left, blank.right, blank.length)
    assert match is None and combine_distribution(row, match) is row
