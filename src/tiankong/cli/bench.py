"""`tiankong bench`: the benchmark suite in bench/ (``python -m bench``), from a source checkout."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tiankong.cli.root import app
from tiankong.errors import BadOptionError


@app.command(
    "bench",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench_command(ctx: typer.Context) -> None:
    """Benchmark tiankong against the usual deployments (python -m bench; --help for flags).
    Run it from the repository root: bench/ is not part of the installed package."""
    checkout = Path.cwd()
    if (checkout / "bench" / "suite.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))  # a console script's path doesn't hold the cwd
    try:
        from bench.refusal import exit_code
        from bench.suite import main as bench_main
    except ImportError:
        raise BadOptionError(
            "tiankong bench runs from the repository root (bench/ is not installed); "
            "cd there, or run python -m bench."
        ) from None
    raise typer.Exit(exit_code(bench_main, ctx.args))
