"""The wheel declares every licence of what it ships: tiankong's and pycorrector's Apache-2.0,
and the MIT of the bundled corpus's sources and jieba's word list, each notice a licence file
(a review found the metadata naming Apache-2.0 alone, the MIT notices only package data)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_licence_metadata_names_what_ships() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0 AND MIT"
    files = project["license-files"]
    assert all((ROOT / name).is_file() for name in files), files
    shipped_notices = [
        "src/tiankong/bundled/corpus/README.md",  # the corpus's MIT notices
        "src/tiankong/tasks/check/data/LICENSE",  # pycorrector's Apache-2.0
        "src/tiankong/tasks/check/data/LICENSE-jieba",  # jieba's MIT
    ]
    assert set(shipped_notices) <= set(files)
    corpus = (ROOT / shipped_notices[0]).read_text(encoding="utf-8")
    assert "MIT" in corpus and "Permission is hereby granted" in corpus


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: without py.typed shipped, a user's mypy ignored the library's type hints (a
    review)."""
    assert (ROOT / "src" / "tiankong" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["tiankong"]
