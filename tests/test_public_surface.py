"""The public surface, pinned: every CLI command with its flags, defaults and env twins, the
Python API's names, the error codes with their HTTP status and exit code, and the server's
OpenAPI document. A refactor that changes any of them fails here.

Regenerate the snapshot only when a change to the surface is intended:
    .venv/bin/python tests/test_public_surface.py > tests/data/public_surface.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).parent / "data" / "public_surface.json"


def cli_surface() -> dict[str, Any]:
    import typer.main

    from tiankong.cli import app, register_commands

    register_commands()
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    commands: dict[str, Any] = {}
    for name in sorted(group.list_commands(ctx)):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert command is not None
        params = []
        for param in command.params:
            default = param.default
            params.append(
                {
                    "name": param.name,
                    "opts": [*param.opts, *param.secondary_opts],
                    "kind": type(param).__name__,
                    "required": param.required,
                    "envvar": param.envvar,
                    "multiple": param.multiple,
                    "is_flag": getattr(param, "is_flag", False),
                    "default": default if isinstance(default, str | int | float | None) else "?",
                    "help": getattr(param, "help", None),
                }
            )
        commands[name] = {"help": command.help, "params": params}
    return commands


def python_surface() -> dict[str, Any]:
    import tiankong
    from tiankong import FillMasker, FillResult, Settings, TokenScore

    def public(obj: object) -> list[str]:
        return sorted(name for name in dir(obj) if not name.startswith("_"))

    return {
        "tiankong": sorted(tiankong.__all__),
        "FillMasker": public(FillMasker),
        "FillResult": public(FillResult),
        "TokenScore": public(TokenScore),
        "Settings": public(Settings),
    }


def error_surface() -> dict[str, Any]:
    from tiankong import errors

    def subclasses(klass: type) -> list[type]:
        found = [klass]
        for sub in klass.__subclasses__():
            found.extend(subclasses(sub))
        return found

    table = {}
    for klass in subclasses(errors.TiankongError):
        if not klass.__module__.startswith("tiankong."):
            continue
        mapping = errors.ERROR_TABLE.get(klass) or next(
            m for k, m in errors.ERROR_TABLE.items() if issubclass(klass, k)
        )
        table[klass.__name__] = [klass.code, mapping.http_status, mapping.exit_code]
    return table


def openapi_surface() -> dict[str, Any]:
    from tiankong.config import Settings
    from tiankong.server import create_app

    return create_app(Settings(engine="fake", warmup=False)).openapi()


def public_surface() -> dict[str, Any]:
    surface = {
        "cli": cli_surface(),
        "python": python_surface(),
        "errors": error_surface(),
        "openapi": openapi_surface(),
    }
    return json.loads(json.dumps(surface))  # tuples become lists, as in the snapshot


def test_public_surface_is_unchanged() -> None:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    current = public_surface()
    for part in ("cli", "python", "errors", "openapi"):
        assert current[part] == snapshot[part], f"the public surface changed: {part}"


if __name__ == "__main__":
    print(json.dumps(public_surface(), indent=1, ensure_ascii=False, sort_keys=True))
