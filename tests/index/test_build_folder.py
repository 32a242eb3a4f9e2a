"""What ``index build -o`` may replace: only an index of its own, never a folder with other
files in it, the working folder or one above it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiankong.errors import IndexInputError
from tiankong.index import build_index, open_index


def test_a_folder_with_a_foreign_manifest_is_not_replaced(
    corpus_file: Path, tmp_path: Path
) -> None:
    """A web app's manifest.json is not an index's: the build deleted the folder whole."""
    webapp = tmp_path / "webapp"
    webapp.mkdir()
    (webapp / "manifest.json").write_text('{"name": "pwa"}')
    (webapp / "important.txt").write_text("precious")
    with pytest.raises(IndexInputError, match="not an index folder"):
        build_index([corpus_file], webapp, progress=False)
    assert (webapp / "important.txt").read_text() == "precious"


def test_an_index_folder_with_other_files_is_not_replaced(
    corpus_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "idx"
    build_index([corpus_file], out, progress=False)
    (out / "notes.md").write_text("mine")
    with pytest.raises(IndexInputError, match="not an index folder"):
        build_index([corpus_file], out, progress=False)
    assert (out / "notes.md").read_text() == "mine"
    (out / "notes.md").unlink()
    build_index([corpus_file], out, progress=False)  # its own files only: replaced
    assert open_index(out).size > 0


def test_a_folder_inside_an_index_is_not_built(corpus_file: Path, tmp_path: Path) -> None:
    """-o idx/sub was built, and idx then could not be rebuilt ("not an index folder")."""
    out = tmp_path / "idx"
    build_index([corpus_file], out, progress=False)
    for inside in (out / "sub", out / "a" / "b"):
        with pytest.raises(IndexInputError, match="is inside the index folder"):
            build_index([corpus_file], inside, progress=False)
        assert not inside.exists()
    build_index([corpus_file], out, progress=False)  # still its own files only: replaced
    assert open_index(out).size > 0


def test_an_unreadable_manifest_is_not_an_index(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "odd"
    out.mkdir()
    (out / "manifest.json").write_text("not json")
    with pytest.raises(IndexInputError, match="not an index folder"):
        build_index([corpus_file], out, progress=False)
    (out / "manifest.json").write_text(json.dumps({"format": "other", "files": {}}))
    with pytest.raises(IndexInputError, match="not an index folder"):
        build_index([corpus_file], out, progress=False)
    assert (out / "manifest.json").is_file()


@pytest.mark.parametrize("name", [".", "..", "here"])
def test_the_working_folder_and_those_above_it_are_refused(
    corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = tmp_path / "here" / "work"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("mine")
    monkeypatch.chdir(work)
    target = {"here": str(tmp_path / "here")}.get(name, name)
    with pytest.raises(IndexInputError, match="the working folder or one above it"):
        build_index([corpus_file], target, progress=False)
    assert (work / "keep.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path / "here")) == ["work"]


def test_output_dot_on_the_command_line(corpus_file: Path, tmp_path: Path) -> None:
    """``-o .`` deleted files, then failed with an OSError traceback."""
    (tmp_path / "keep.txt").write_text("mine")
    (tmp_path / "manifest.json").write_text('{"name": "pwa"}')
    command = [sys.executable, "-m", "tiankong", "index", "build", str(corpus_file), "-o", "."]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "working folder" in done.stderr and "Traceback" not in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["keep.txt", "manifest.json"]


def test_an_output_folder_that_fills_up_is_one_sentence(
    corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while the arrays were written was a traceback after the progress bars."""
    import errno

    from tiankong.core import output_folder
    from tiankong.errors import BadOptionError

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output_folder.os, "rename", full)
    with pytest.raises(BadOptionError, match=r"out_dir '.*' can't be written \(No space left"):
        build_index([corpus_file], tmp_path / "idx", progress=False)
    assert [path.name for path in tmp_path.iterdir()] == []  # the half-built folder is gone


def test_a_user_cache_that_cant_hold_the_bundled_index_is_one_sentence(tmp_path: Path) -> None:
    """A read-only cache (XDG_CACHE_HOME on a read-only mount) was a traceback from the lock
    file's folder; here the folder can't be made, which fails the same way as root too."""
    from tiankong.errors import IndexUnavailableError
    from tiankong.index.bundled import ensure_bundled_index

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(IndexUnavailableError) as caught:
        ensure_bundled_index(progress=False, cache_dir=tmp_path / "file" / "index")
    message = str(caught.value)
    assert "The bundled corpus index can't be written in" in message
    assert "XDG_CACHE_HOME" in message and "--index none" in message


def test_a_rebuild_named_through_its_own_folder_keeps_an_index(
    corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o idx/../idx named the new index through the old one: the old was removed, the rename
    found no path, and the user was left with no index and a .building- folder (a review)."""
    monkeypatch.chdir(tmp_path)
    build_index([corpus_file], "idx", progress=False)
    build_index([corpus_file], "idx/../idx", progress=False)
    assert open_index(tmp_path / "idx").size > 0
    assert [name for name in os.listdir(tmp_path) if name != corpus_file.name] == ["idx"]


def test_a_folder_that_cant_be_put_in_place_leaves_the_old_one(tmp_path: Path) -> None:
    """The old folder is renamed aside, and put back when the new one can't take its place
    (it was removed first: a failure between the two steps lost it)."""
    from tiankong.core.output_folder import replace_folder

    out = tmp_path / "idx"
    out.mkdir()
    (out / "manifest.json").write_text("old")
    with pytest.raises(OSError):
        replace_folder(tmp_path / "never-made", out)
    assert (out / "manifest.json").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["idx"]
    new = tmp_path / "new"
    new.mkdir()
    (new / "manifest.json").write_text("new")
    replace_folder(new, out)
    assert (out / "manifest.json").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["idx"]


def test_one_file_and_an_empty_output_are_read_as_given(corpus_file: Path, tmp_path: Path) -> None:
    """build_index("notes.txt", ...) read the string's characters as file names ("The file t
    is given more than once"); an empty output was told as '.', a folder never named."""
    manifest = build_index(str(corpus_file), tmp_path / "idx", progress=False)
    assert [source["name"] for source in manifest["sources"]] == [corpus_file.name]
    with pytest.raises(IndexInputError) as refused:
        build_index([corpus_file], "", progress=False)
    assert refused.value.message == "out_dir is empty; name the folder the index is built in."
    command = [sys.executable, "-m", "tiankong", "index", "build", str(corpus_file), "-o", ""]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: --output is empty; name the folder the index is built in."


def test_a_dot_dot_past_a_link_is_read_as_the_system_reads_it(
    corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o sub/link/../fresh was folded by name to sub/fresh, where the system reads it beside
    what link points to; -o L/../L (L a link) replaced the link with a folder (a verifying
    review)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "sub" / "link").symlink_to(tmp_path / "real" / "inner")
    build_index([corpus_file], "sub/link/../fresh", progress=False)
    assert open_index(tmp_path / "real" / "fresh").size > 0
    assert not (tmp_path / "sub" / "fresh").exists()
    (tmp_path / "L").symlink_to(tmp_path / "real" / "inner")
    build_index([corpus_file], "L/../L", progress=False)
    assert (tmp_path / "L").is_symlink() and open_index(tmp_path / "real" / "L").size > 0
