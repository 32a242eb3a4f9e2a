"""The examples in the package's docstrings (``>>>``) are run, so none of them can go stale."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tiankong

MODULES = sorted(  # not __main__, which runs the CLI when imported
    info.name
    for info in pkgutil.walk_packages(tiankong.__path__, prefix="tiankong.")
    if not info.name.endswith("__main__")
)


def test_the_package_has_examples() -> None:
    examples = sum(
        len(test.examples)
        for name in MODULES
        for test in doctest.DocTestFinder().find(importlib.import_module(name))
    )
    assert examples >= 30


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=True)
    assert failed == 0, f"{failed} docstring example(s) in {name} failed (printed above)"
