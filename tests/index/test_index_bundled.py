"""The bundled index: shipped text, built once into a cache keyed by content."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tiankong.index import bundled
from tiankong.index.bundled import BUNDLED_CORPUS, BUNDLED_FILES, ensure_bundled_index


def test_shipped_text_is_present_and_small() -> None:
    sizes = {name: (BUNDLED_CORPUS / name).stat().st_size for name in BUNDLED_FILES}
    assert sum(sizes.values()) < 30 * 2**20
    readme = (BUNDLED_CORPUS / "README.md").read_text(encoding="utf-8")
    assert "MIT" in readme and "13,693" in readme
    assert not list(BUNDLED_CORPUS.glob("*heldout*"))


def test_built_once_and_keyed_by_content(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, corpus_file: Path
) -> None:
    source = tmp_path / "text.txt"
    source.write_text(corpus_file.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(bundled, "bundled_sources", lambda: [source])
    first = ensure_bundled_index(progress=False, cache_dir=tmp_path / "cache")
    stamp = (first / "manifest.json").stat().st_mtime_ns
    assert ensure_bundled_index(progress=False, cache_dir=tmp_path / "cache") == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp  # not rebuilt
    source.write_text("换了内容的一行。\n", encoding="utf-8")
    second = ensure_bundled_index(progress=False, cache_dir=tmp_path / "cache")
    assert second != first and (second / "manifest.json").is_file()


def test_two_starting_at_once_build_it_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, corpus_file: Path
) -> None:
    """Two servers (or test workers) on a fresh cache: one builds, the other waits for it."""
    monkeypatch.setattr(bundled, "bundled_sources", lambda: [corpus_file])
    builds: list[Path] = []
    real_build = bundled.build_index

    def slow_build(*args: Any, **kwargs: Any) -> Any:
        builds.append(Path(args[1]))
        time.sleep(0.5)  # long enough for the second to arrive while the first builds
        return real_build(*args, **kwargs)

    monkeypatch.setattr(bundled, "build_index", slow_build)
    with ThreadPoolExecutor(max_workers=2) as pool:
        folders = list(
            pool.map(lambda _: ensure_bundled_index(False, tmp_path / "cache"), range(2))
        )
    assert folders[0] == folders[1] and len(builds) == 1
    assert (folders[0] / "manifest.json").is_file()
