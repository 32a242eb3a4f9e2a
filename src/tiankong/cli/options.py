"""The commands' settings flags, generated from the settings tables in ``config.py``.

A command takes them with ``@settings_flags`` and parameter defaults that say where they go:

    @app.command("predict")
    @settings_flags
    def predict_command(text: ..., model: object = FLAG, ..., settings: Settings = FROM_FLAGS):

``FLAG`` puts one row's flag there (the parameter is named like the flag: ``request_timeout``
for ``--request-timeout``); ``ALL_FLAGS`` puts every other row of the parameter's table there, in
table order. The command receives the table instance built from those flags and their env twins
(read by click, ``envvar=``) over the table's defaults, checked by ``config.check_settings``; a
parameter named ``given`` receives the names of the rows that a flag or env twin set.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import Field, fields, is_dataclass
from typing import Annotated, Any, TypeVar, get_origin, get_type_hints

import typer

from tiankong.config import Flag, check_settings, default_of, env_twin, help_text, rows

F = TypeVar("F", bound=Callable[..., Any])


class Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


FLAG: Any = Marker("FLAG")  # this parameter is the settings row of its name
FROM_FLAGS: Any = Marker("FROM_FLAGS")  # this parameter gets its table built from the flags
ALL_FLAGS: Any = Marker("ALL_FLAGS")  # FROM_FLAGS, and the table's other flags go here


def parameter_name(flag: Flag) -> str:
    """``--request-timeout`` -> ``request_timeout``; ``--warmup/--no-warmup`` -> ``warmup``."""
    return flag.names[0].split("/")[0].removeprefix("--").replace("-", "_")


def flag_parameter(table: type, row: Field[Any], flag: Flag) -> inspect.Parameter:
    """The typer parameter for one row: its flag, env twin, help, type and default."""
    kind = get_type_hints(table)[row.name]
    if get_origin(kind) is tuple:  # repeatable; the env twin is one comma-separated value
        kind = list[str] | None
    elif not flag.shows_default:
        kind = kind | None
    default = default_of(row) if flag.shows_default else None
    option = typer.Option(*flag.names, envvar=env_twin(row.name), help=help_text(row, flag))
    return inspect.Parameter(
        parameter_name(flag),
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[kind, option],
        default=default,
    )


def built(table: type, values: dict[str, Any]) -> tuple[Any, frozenset[str]]:
    """The table instance from flag values (None = not given), checked; and the rows given."""
    changes = {}
    for row, flag in rows(table):
        value = values.get(row.name)
        if value is None:
            continue
        if isinstance(value, list):  # repeated flags, or the env twin's comma-separated list
            value = tuple(
                part.strip() for item in value for part in item.split(",") if part.strip()
            )
        elif flag.choices and isinstance(value, str):
            value = value.lower()
        changes[row.name] = value
    instance = table(**{**{r.name: default_of(r) for r in fields(table)}, **changes})
    check_settings(instance)
    return instance, frozenset(changes)


def settings_flags(command: F) -> F:
    """Rewrite ``command``'s signature with the generated flags, and build its tables on call."""
    signature = inspect.signature(command)
    hints = get_type_hints(command, include_extras=True)
    tables = {
        name: hints[name]
        for name, parameter in signature.parameters.items()
        if parameter.default in (FROM_FLAGS, ALL_FLAGS) and is_dataclass(hints[name])
    }
    flags = {  # parameter name -> (table parameter, row name)
        parameter_name(flag): (table_name, row.name, flag_parameter(table, row, flag))
        for table_name, table in tables.items()
        for row, flag in rows(table)
        if flag.names
    }
    placed = {name for name, p in signature.parameters.items() if p.default is FLAG}
    out: list[inspect.Parameter] = []
    for name, parameter in signature.parameters.items():
        if parameter.default is FLAG:
            out.append(flags[name][2])
        elif parameter.default is ALL_FLAGS:
            out += [p for n, (t, _, p) in flags.items() if t == name and n not in placed]
        elif name not in tables and name != "given":
            out.append(parameter.replace(annotation=hints.get(name, parameter.annotation)))
    unknown = placed - set(flags)
    assert not unknown, f"{command.__name__}: no settings row for {sorted(unknown)}"

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        arguments = {n: v for n, v in values.items() if n not in flags}
        given: set[str] = set()
        for table_name, table in tables.items():
            own = {row: values.get(n) for n, (t, row, _) in flags.items() if t == table_name}
            arguments[table_name], names = built(table, own)
            given |= names
        if "given" in signature.parameters:
            arguments["given"] = frozenset(given)
        return command(**arguments)

    run.__signature__ = inspect.Signature(out, __validate_parameters__=False)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in out}
    return run  # type: ignore[return-value]
