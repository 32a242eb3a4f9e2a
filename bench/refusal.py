"""How the bench refuses a bad flag or model name before anything runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


class Refused(SystemExit):
    """A bad flag, contender, offline target or model, refused with one sentence. Raised as a
    ``SystemExit`` (a caller that doesn't catch it still stops with the sentence, exit 1);
    ``exit_code`` turns it into the sentence on stderr and exit 2, the CLI's code for bad input."""


def exit_code(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    """``main(argv)``'s exit code, 2 with the sentence on stderr where it refused."""
    try:
        return main(argv)
    except Refused as refused:
        print(refused.code, file=sys.stderr)
        return 2
