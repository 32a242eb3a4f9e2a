"""Write (or check) the locks: requirements-lock.txt, the exact versions of everything
`tiankong[dev]` needs, as installed in this environment, and requirements-serve-lock.txt, the part
of it that `tiankong[serving]` needs (the server on ONNX Runtime: no torch, Ray or test tools).
scripts/setup.sh installs exactly one of them (`--full`: the whole lock, torch first from the CPU
wheel index; `--serve`: the serving lock), then tiankong itself with --no-deps.

    .venv/bin/python scripts/lock_deps.py --check    # exit 1 if a lock and .venv disagree
    .venv/bin/python scripts/lock_deps.py --update   # after editing pyproject.toml's dependencies:
                                                     # pip-install them here, rewrite the lock
    .venv/bin/python scripts/lock_deps.py            # rewrite the locks from what is installed

The requirements are read from pyproject.toml itself (its `dependencies` and the `dev` extra,
with the self-references such as `tiankong[torch,serve]` expanded), not from the installed
tiankong's metadata, so a dependency just added to pyproject.toml counts before any reinstall.
Their closure is then walked over the installed packages. Packages installed by hand that
tiankong doesn't need are left out; tiankong itself too. The serving lock is the same walk from
the `serving` extra, over the same environment, so it is a subset of the full lock with the same
versions; --check checks both (run it in the full environment).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements-lock.txt"
SERVE_LOCK = REPO / "requirements-serve-lock.txt"
PYPROJECT = REPO / "pyproject.toml"
EXTRA = "dev"
SERVE_EXTRA = "serving"
HEADER = (
    "# The dependency versions of tiankong[dev] that scripts/setup.sh installs (torch first, from\n"
    "# the CPU wheel index; everything else from PyPI), audited by scripts/audit_deps.py.\n"
    "# Regenerate: .venv/bin/python scripts/lock_deps.py --update (see its docstring).\n"
)
SERVE_HEADER = (
    "# The part of requirements-lock.txt that tiankong[serving] needs (the server on ONNX\n"
    "# Runtime, no torch): what `bash scripts/serve.sh` installs (scripts/setup.sh --serve).\n"
    "# Written with requirements-lock.txt by scripts/lock_deps.py; never by hand.\n"
)


def requirements(pyproject: Path = PYPROJECT, extra: str = EXTRA) -> list[Requirement]:
    """The requirements of ``project[extra]`` in pyproject.toml, its own extras expanded."""
    project = tomllib.loads(pyproject.read_text())["project"]
    own = canonicalize_name(project["name"])
    optional = project.get("optional-dependencies", {})
    base = [Requirement(line) for line in project.get("dependencies", [])]
    return base + requirements_of_extra(optional, extra, own, {extra})


def requirements_of_extra(
    optional: dict[str, list[str]], extra: str, own: str, seen: set[str]
) -> list[Requirement]:
    """One extra's requirements, following references to the project's other extras."""
    found: list[Requirement] = []
    for line in optional[extra]:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) != own:
            found.append(requirement)
            continue
        for nested in requirement.extras - seen:
            seen.add(nested)
            found += requirements_of_extra(optional, nested, own, seen)
    return found


def closure(roots: list[Requirement]) -> tuple[dict[str, str], list[str]]:
    """({canonical name: installed version} of everything ``roots`` need, missing root names)."""
    found: dict[str, str] = {}
    missing: list[str] = []
    pending = [(canonicalize_name(root.name), frozenset(root.extras), True) for root in roots]
    pending = [item for item, root in zip(pending, roots, strict=True) if applies(root, set())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, wanted, is_root = pending.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if is_root:
                missing.append(name)
            continue  # an optional dependency for another platform
        found[name] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if applies(requirement, set(wanted)):
                item = (canonicalize_name(requirement.name), frozenset(requirement.extras), False)
                pending.append(item)
    return found, sorted(set(missing))


def applies(requirement: Requirement, extras: set[str]) -> bool:
    """Whether a requirement's environment marker holds here, for any of the wanted extras."""
    if requirement.marker is None:
        return True
    environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
    return any(requirement.marker.evaluate(env) for env in environments)


def render(pins: dict[str, str], header: str = HEADER) -> str:
    return header + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def pins_of(text: str) -> dict[str, str]:
    pairs = (line.split("==", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: version for name, version in pairs}


def check(pins: dict[str, str], missing: list[str], lock: Path = LOCK, header: str = HEADER) -> int:
    if missing:
        print(
            f"not installed but required by pyproject.toml: {', '.join(missing)}; "
            "run scripts/lock_deps.py --update"
        )
        return 1
    locked = pins_of(lock.read_text()) if lock.is_file() else {}
    if render(pins, header) == (lock.read_text() if lock.is_file() else ""):
        return 0
    differences = [
        f"{name} {locked.get(name, '(not locked)')} locked, {pins.get(name, '(not needed)')} here"
        for name in sorted(locked.keys() | pins.keys())
        if locked.get(name) != pins.get(name)
    ]
    shown = "; ".join(differences[:10]) + (" …" if len(differences) > 10 else "")
    print(
        f"{lock.name} does not match this environment: {shown or 'header differs'}. "
        "Bring .venv back to the lock with `bash scripts/setup.sh --force`, or after a "
        "dependency change run scripts/lock_deps.py --update"
    )
    return 1


def update(roots: list[Requirement]) -> None:
    """Install what pyproject.toml asks for into this environment, keeping what already fits."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--upgrade-strategy"]
    command += ["only-if-needed", *(str(root) for root in roots)]
    subprocess.run(command, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the lock is out of date")
    mode.add_argument("--update", action="store_true", help="install new requirements first")
    args = parser.parse_args()
    roots = requirements()
    if args.update:
        update(roots)
    pins, missing = closure(roots)
    serve_pins, serve_missing = closure(requirements(extra=SERVE_EXTRA))
    if args.check:
        return check(pins, missing) or check(serve_pins, serve_missing, SERVE_LOCK, SERVE_HEADER)
    if missing:
        print(f"not installed: {', '.join(missing)}; run scripts/lock_deps.py --update")
        return 1
    LOCK.write_text(render(pins))
    SERVE_LOCK.write_text(render(serve_pins, SERVE_HEADER))
    print(f"wrote {LOCK.name}: {len(pins)} packages; {SERVE_LOCK.name}: {len(serve_pins)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
