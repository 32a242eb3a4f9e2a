"""The import contract (pyproject.toml, checked by lint-imports) covers every part of the
package: a new top-level module or package has to take its place in the layers, so the one-way
rule holds for it too (docs/ARCHITECTURE.md, "The one-way rule")."""

from __future__ import annotations

import pkgutil
import re
import tomllib
from pathlib import Path

import tiankong

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def layered_names() -> set[str]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}


def test_every_top_level_module_is_in_a_layer() -> None:
    modules = {f"tiankong.{info.name}" for info in pkgutil.iter_modules(tiankong.__path__)}
    assert modules - layered_names() == set()
    assert layered_names() - modules == set()  # and no layer names a module that is gone
