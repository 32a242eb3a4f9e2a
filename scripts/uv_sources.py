"""Where the machine's pip installs from, as uv options: scripts/setup.sh installs with uv, which
reads neither pip's config files nor its PIP_* variables.

    python3 scripts/uv_sources.py     # NUL-separated uv arguments on stdout

Reads ``pip config list`` (run by this Python's pip; nothing when it has none) and keeps, for
each option, the value of the place pip itself prefers: a PIP_* variable over the ``[install]``
section over ``[global]``. Then:

* ``index-url`` -> ``--index-url``; ``extra-index-url`` and ``find-links`` -> one option per URL
  or folder (a value may hold several, on one line or several);
* ``no-index`` -> ``--no-index``; ``trusted-host`` -> ``--allow-insecure-host``;
* ``cert`` -> ``--cert FILE`` as a pair that setup.sh turns into SSL_CERT_FILE (uv's variable for
  a CA bundle), unless SSL_CERT_FILE is already set.

``--index-strategy unsafe-best-match`` always comes first: pip takes the best version over every
index it is given, and so does uv with it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's own order: the environment, then a command's section, then [global]
PLACES = {":env:": 0, "install": 1, "global": 2}
LISTS = {
    "find-links": "--find-links",
    "extra-index-url": "--extra-index-url",
    "trusted-host": "--allow-insecure-host",
}
TRUE = {"1", "true", "yes", "on"}


def pip_config() -> dict[str, str]:
    """Each option's value from the place pip prefers (nothing when this Python has no pip)."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return preferred(listed)


def preferred(listed: str) -> dict[str, str]:
    """``pip config list``'s lines (``global.find-links='/wheels'``), one value per option."""
    best: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, shown = line.partition("=")
        place, _, name = key.rpartition(".")
        try:
            value = ast.literal_eval(shown)  # pip shows each value as a Python literal
        except (ValueError, SyntaxError):
            continue
        rank = PLACES.get(place, len(PLACES))
        if name not in best or rank < best[name][0]:
            best[name] = (rank, str(value))
    return {name: value for name, (_, value) in best.items()}


def uv_arguments(config: dict[str, str]) -> list[str]:
    arguments = ["--index-strategy", "unsafe-best-match"]
    index = config.get("index-url", "").split()
    if index:
        arguments += ["--index-url", index[0]]
    for name, flag in LISTS.items():
        for one in config.get(name, "").split():
            arguments += [flag, one]
    if config.get("no-index", "").strip().lower() in TRUE:
        arguments.append("--no-index")
    cert = config.get("cert", "").strip()
    if cert and not os.environ.get("SSL_CERT_FILE"):
        arguments += ["--cert", cert]
    return arguments


def main() -> int:
    sys.stdout.write("".join(f"{argument}\0" for argument in uv_arguments(pip_config())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
