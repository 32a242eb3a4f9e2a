"""Known vulnerabilities in requirements-lock.txt, with pip-audit (PyPI's advisory data).

    .venv/bin/python scripts/audit_deps.py [--strict]

* A known vulnerability in a locked package: listed, exit 1 (CI fails).
* Every package audited, none vulnerable: exit 0.
* The advisory database can't be reached (no network to PyPI's JSON API, or a mirror that only
  serves the simple index), so pip-audit skips packages: said in one calm line, with the count,
  and exit 0, because CI on a machine without that network would otherwise always fail; with
  ``--strict`` (or TIANKONG_AUDIT_STRICT=1) it is exit 1. pip-audit alone prints "No known
  vulnerabilities found" even when it audited nothing, which is why this wrapper exists.
* Packages pip-audit can't look up even with the network (a local build such as torch's
  ``+cpu`` wheel) are named as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements-lock.txt"


def run_pip_audit(lock: Path, report: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip_audit", "--requirement", str(lock), "--no-deps"]
    command += ["--disable-pip", "--progress-spinner", "off", "--format", "json"]
    command += ["--output", str(report), "--timeout", "20"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strict", action="store_true", help="fail when nothing was audited")
    parser.add_argument("--lock", type=Path, default=LOCK)
    args = parser.parse_args()
    strict = args.strict or os.environ.get("TIANKONG_AUDIT_STRICT") == "1"
    with tempfile.TemporaryDirectory() as folder:
        report_file = Path(folder) / "audit.json"
        done = run_pip_audit(args.lock, report_file)
        if not report_file.is_file():
            print(f"pip-audit did not run (exit {done.returncode}): {done.stderr.strip()[-500:]}")
            return 1
        dependencies = json.loads(report_file.read_text())["dependencies"]
    code, lines = verdict(dependencies, strict)
    print("\n".join(lines))
    return code


def verdict(dependencies: list[dict[str, Any]], strict: bool) -> tuple[int, list[str]]:
    """pip-audit's JSON ``dependencies`` -> exit code and what to print."""
    skipped = [dep for dep in dependencies if "skip_reason" in dep]
    vulnerable = [dep for dep in dependencies if dep.get("vulns")]
    audited = len(dependencies) - len(skipped)
    if vulnerable:
        return 1, [
            f"VULNERABLE {dep['name']}=={dep['version']}: "
            + ", ".join(vuln["id"] for vuln in dep["vulns"])
            for dep in vulnerable
        ]
    if audited == 0:
        # pip-audit's reason names the first package; the count already says it was all of them
        reason = skipped[0]["skip_reason"].split(":")[0] if skipped else "nothing to audit"
        return (1 if strict else 0), [
            f"pip-audit: not checked for known vulnerabilities: the advisory database could not "
            f"be reached, so all {len(skipped)} locked packages were skipped ({reason})"
        ]
    names = ", ".join(dep["name"] for dep in skipped)
    return 0, [
        f"pip-audit: {audited} locked packages audited, no known vulnerability"
        + (f"; {len(skipped)} could not be looked up: {names}" if skipped else "")
    ]


if __name__ == "__main__":
    sys.exit(main())
