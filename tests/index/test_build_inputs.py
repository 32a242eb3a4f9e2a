"""What ``index build`` reads from its inputs: a malformed CSV is refused, with its line."""

from __future__ import annotations

import lzma
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


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        # a record one value short has no text: it was skipped without a word
        ("1,画龙点睛的故事。\n2\n", r"Line 3 of .*in.csv: no value in column 'text'"),
        # one with more values than the header was indexed without a word
        ("1,画龙点睛的故事。\n3,守株待兔的人。,extra\n", r"Line 3 of .*in.csv: more values"),
    ],
)
def test_a_csv_record_that_does_not_fit_its_header_is_refused_with_its_line(
    tmp_path: Path, rows: str, message: str
) -> None:
    source = tmp_path / "in.csv"
    source.write_text(f"id,text\n{rows}", encoding="utf-8")
    with pytest.raises(IndexInputError, match=message):
        build_index([source], tmp_path / "out", field="text", progress=False)
    source.write_text(
        "id,text\n1,画龙点睛的故事。\n2,\n", encoding="utf-8"
    )  # an empty value: blank
    manifest = build_index([source], tmp_path / "out", field="text", progress=False)
    assert manifest["counts"]["passages"] == 1


def test_the_same_file_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """c.txt c.txt ./c.txt indexed the file three times: every count tripled."""
    monkeypatch.chdir(tmp_path)
    Path("c.txt").write_text("春眠不觉晓\n", encoding="utf-8")
    with pytest.raises(IndexInputError, match=r"The file c.txt is given more than once"):
        build_index(["c.txt", "./c.txt"], tmp_path / "out", progress=False)
    with pytest.raises(IndexInputError, match="given more than once"):
        build_index([tmp_path / "c.txt", "c.txt"], tmp_path / "out", progress=False)
    # a copy under another name doubled the evidence's count (a review: poems.txt and
    # poems_copy.txt gave count 2); refused by its bytes
    Path("copy.txt").write_bytes(Path("c.txt").read_bytes())
    with pytest.raises(IndexInputError, match=r"copy\.txt holds the same bytes as c\.txt"):
        build_index(["c.txt", "copy.txt"], tmp_path / "out", progress=False)
    # ... and the same text packed: c.txt beside c.txt.xz was indexed twice (a review)
    with lzma.open("c.txt.xz", "wb") as packed:
        packed.write(Path("c.txt").read_bytes())
    with pytest.raises(IndexInputError, match=r"c\.txt\.xz holds the same text as c\.txt"):
        build_index(["c.txt", "c.txt.xz"], tmp_path / "out", progress=False)
    # ... and one without the final newline: the same text, not the same bytes (it said bytes)
    Path("nonl.txt").write_bytes(Path("c.txt").read_bytes().rstrip(b"\n"))
    with pytest.raises(IndexInputError, match=r"nonl\.txt holds the same text as c\.txt"):
        build_index(["c.txt", "nonl.txt"], tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
