"""What ``index build`` reads from its inputs: a malformed CSV is refused, with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong.errors import IndexInputError
from tiankong.index import build_index


def test_a_csv_quote_that_is_never_closed_is_refused_with_its_line(tmp_path: Path) -> None:
    """The rest of the file became one passage, without a word."""
    source = tmp_path / "in.csv"
    source.write_text('text\n画龙点睛\n"守株待兔\n刻舟求剑\n', encoding="utf-8")
    with pytest.raises(IndexInputError, match=r"Line 3 of .*in.csv .*never closed"):
        build_index([source], tmp_path / "out", field="text", progress=False)
    assert not (tmp_path / "out").exists()
    source.write_text('text\n画龙点睛\n"守株\n待兔"\n刻舟求剑\n', encoding="utf-8")
    manifest = build_index([source], tmp_path / "out", field="text", progress=False)
    assert manifest["counts"]["passages"] == 3  # a closed quote may span lines
