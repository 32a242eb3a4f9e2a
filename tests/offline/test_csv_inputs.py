"""A CSV input of `fill` and `check FILE -o` is read as `index build` reads one
(``index.sources.CsvRecords``): a quote never closed is refused with the line it opens on,
where the rest of the file became one text without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong import Settings
from tiankong.core.options import PredictOptions
from tiankong.errors import BadDataFileError
from tiankong.offline.fill import FillJob, count_records, input_columns, run_fill

UNCLOSED = 'text\n处处闻啼[MASK]。\n"画龙点[MASK]\n春眠不觉[MASK]\n'


def test_an_unclosed_quote_is_refused_before_the_work(tmp_path: Path) -> None:
    """``count_records`` runs before the model loads (the CLIs' progress total)."""
    source = tmp_path / "in.csv"
    source.write_text(UNCLOSED, encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"Line 3 of .*in.csv .*never closed"):
        count_records(source, "csv")
    source.write_text('text\n处处闻啼[MASK]。\n"画龙\n点[MASK]"\n春眠不觉[MASK]\n', "utf-8")
    assert count_records(source, "csv") == 3  # a closed quote may span lines


def test_the_line_named_is_the_records_after_blank_lines(tmp_path: Path) -> None:
    """The reader skips blank lines before a record: the error named the first blank one."""
    source = tmp_path / "in.csv"
    source.write_text('text\n处处闻啼[MASK]。\n\n\n"画龙\n点[MASK]\n', encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"Line 5 of .*in.csv .*never closed"):
        count_records(source, "csv")


def test_a_header_with_an_unclosed_quote_is_one_sentence(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text('"text\n处处闻啼[MASK]。\n', encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"Line 1 of .*in.csv .*never closed"):
        input_columns(source, "csv", "text")


def test_fill_refuses_an_unclosed_quote(settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(UNCLOSED, encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    with pytest.raises(BadDataFileError, match=r"Line 3 of .*in.csv .*never closed"):
        run_fill(job, settings, PredictOptions())
    assert not job.output.read_text(encoding="utf-8")  # nothing of the chunk was written


def test_a_header_that_names_a_column_twice_is_refused(settings: Settings, tmp_path: Path) -> None:
    """DictReader keeps the second value under the name: the first was lost, and the output
    wrote the second twice (1,画龙点[MASK],b,b)."""
    source = tmp_path / "dup.csv"
    source.write_text("id,text,note,note\n1,画龙点[MASK],a,b\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"names the column 'note' more than once"):
        count_records(source, "csv")
    with pytest.raises(BadDataFileError, match=r"names the column 'note' more than once"):
        run_fill(FillJob(source, tmp_path / "out.csv"), settings, PredictOptions())
    assert not (tmp_path / "out.csv").exists()


def test_empty_column_names_in_a_header_are_no_clash(settings: Settings, tmp_path: Path) -> None:
    """text,, (a spreadsheet's export) was read; the check for a name given twice refused it."""
    source = tmp_path / "export.csv"
    source.write_text("text,,\n画龙点[MASK],,\n", encoding="utf-8")
    assert count_records(source, "csv") == 1
