"""Write (or check) requirements-lock.txt: the exact versions installed in this environment of
everything `tiankong[dev]` needs, found by walking the installed packages' requirements.

    .venv/bin/python scripts/lock_deps.py            # rewrite requirements-lock.txt
    .venv/bin/python scripts/lock_deps.py --check    # exit 1 if it no longer matches the venv

Packages installed by hand that tiankong doesn't need are left out; tiankong itself too.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK = Path(__file__).resolve().parent.parent / "requirements-lock.txt"
ROOT = "tiankong"
HEADER = (
    "# The dependency versions of tiankong[dev] as installed by scripts/setup.sh, audited by\n"
    "# scripts/audit_deps.py. Regenerate: .venv/bin/python scripts/lock_deps.py\n"
)


def closure(root: str, extras: set[str]) -> dict[str, str]:
    """{canonical name: installed version} of everything ``root[extras]`` needs."""
    found: dict[str, str] = {}
    pending: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency for another platform
        found[name] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            marker = requirement.marker
            if marker is None or any(marker.evaluate(env) for env in environments):
                pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    found.pop(ROOT, None)
    return found


def render() -> str:
    pins = closure(ROOT, {"dev"})
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        if LOCK.is_file() and LOCK.read_text() == text:
            return 0
        print(f"{LOCK.name} does not match the installed packages; run scripts/lock_deps.py")
        return 1
    LOCK.write_text(text)
    print(f"wrote {LOCK.name}: {text.count(chr(10)) - HEADER.count(chr(10))} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
