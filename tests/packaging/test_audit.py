"""scripts/audit_deps.py's verdict on pip-audit's JSON: a vulnerability fails, an unreachable
advisory database is said in one calm line (and fails only when strict); the lock holds the dev
set."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


audit = load("audit_deps")


def test_a_vulnerable_package_fails() -> None:
    deps = [
        {"name": "urllib3", "version": "1.26.0", "vulns": [{"id": "PYSEC-2021-59"}]},
        {"name": "numpy", "version": "2.4.6", "vulns": []},
    ]
    code, lines = audit.verdict(deps, strict=False)
    assert code == 1 and lines == ["VULNERABLE urllib3==1.26.0: PYSEC-2021-59"]


def test_an_unreachable_database_is_one_calm_line() -> None:
    reason = "Dependency not found on PyPI and could not be audited: numpy (2.4.6)"
    deps = [{"name": "numpy", "skip_reason": reason}] * 3
    code, lines = audit.verdict(deps, strict=False)
    assert code == 0 and lines == [
        "pip-audit: not checked for known vulnerabilities: the advisory database could not be "
        "reached, so all 3 locked packages were skipped (Dependency not found on PyPI and could "
        "not be audited)"
    ]
    assert audit.verdict(deps, strict=True)[0] == 1


def test_clean_audit_names_what_could_not_be_looked_up() -> None:
    deps = [
        {"name": "numpy", "version": "2.4.6", "vulns": []},
        {"name": "torch", "skip_reason": "Dependency not found on PyPI: torch (2.13.0+cpu)"},
    ]
    code, lines = audit.verdict(deps, strict=True)
    assert code == 0 and lines == [
        "pip-audit: 1 locked packages audited, no known vulnerability; 1 could not be looked "
        "up: torch"
    ]


def test_the_lock_lists_the_dev_environment() -> None:
    lock = (SCRIPTS.parent / "requirements-lock.txt").read_text()
    pins = dict(line.split("==") for line in lock.splitlines() if line and line[0] != "#")
    assert {"fastapi", "uvicorn", "numpy", "tokenizers", "pip-audit", "torch"} <= set(pins)
    assert "tiankong" not in pins


def test_the_lock_pins_every_requirement_of_pyproject() -> None:
    """A dependency added to pyproject.toml without `scripts/lock_deps.py --update` fails here,
    before scripts/setup.sh (which installs only the lock) leaves it out of .venv."""
    lock_deps = load("lock_deps")
    roots = lock_deps.requirements()
    names = {lock_deps.canonicalize_name(root.name) for root in roots}
    assert {"fastapi", "torch", "onnxruntime", "pip-audit", "numpy"} <= names  # extras expanded
    assert "tiankong" not in names
    pins = lock_deps.pins_of(lock_deps.LOCK.read_text())
    for root in roots:
        if lock_deps.applies(root, set()):
            version = pins.get(lock_deps.canonicalize_name(root.name))
            assert version is not None, f"{root} is not in requirements-lock.txt"
            assert root.specifier.contains(version, prereleases=True), f"{root} vs {version}"


def test_the_serving_lock_is_the_full_locks_serving_part() -> None:
    """scripts/serve.sh installs requirements-serve-lock.txt: every pin as in the full lock, every
    requirement of tiankong[serving] pinned, and nothing only tests, training or Ray need."""
    lock_deps = load("lock_deps")
    full = lock_deps.pins_of(lock_deps.LOCK.read_text())
    serving = lock_deps.pins_of(lock_deps.SERVE_LOCK.read_text())
    assert serving.items() <= full.items()
    roots = lock_deps.requirements(extra=lock_deps.SERVE_EXTRA)
    names = {lock_deps.canonicalize_name(root.name) for root in roots}
    assert {"fastapi", "onnxruntime", "onnx", "filelock", "tokenizers"} <= names
    for root in roots:
        if lock_deps.applies(root, set()):
            assert lock_deps.canonicalize_name(root.name) in serving, root
    assert not {"torch", "transformers", "ray", "pytest", "playwright", "mypy"} & set(serving)
