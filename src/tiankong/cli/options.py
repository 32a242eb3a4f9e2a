"""The commands' settings flags, generated from the settings tables in ``config.py``.

A command takes them with ``@settings_flags`` and parameter defaults that say where they go:

    @app.command("predict")
    @settings_flags
    def predict_command(text: ..., model: object = FLAG, ..., settings: Settings = FROM_FLAGS):

``FLAG`` puts one row's flag there (the parameter is named like the flag: ``request_timeout``
for ``--request-timeout``); ``ALL_FLAGS`` puts every other row of the parameter's table there, in
table order. The command receives the table instance built from those flags and their env twins
(read by click, ``envvar=``) over the table's defaults, checked by ``config.check_settings``; a
parameter named ``given`` receives the names of the rows set by a flag or an env twin, and one
named ``typed`` the names of the rows and other parameters set on the command line itself
(``refuse_without_ray`` reads them: an environment speaks for every run of a shell).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import Field, is_dataclass
from typing import Annotated, Any, TypeVar, get_origin, get_type_hints

import typer

from tiankong.config import (
    Flag,
    check_settings,
    comma_list,
    default_of,
    env_twin,
    help_text,
    read_environment,
    rows,
)
from tiankong.errors import BadOptionError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
CONTEXT = "tiankong_context"  # where typer passes the click context, for ``given``


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


def split_listed(row: Field[Any], value: list[str], from_environment: bool) -> list[str]:
    """A repeatable flag's values; from its env twin, the variable's text whole, for
    ``comma_list`` to split at commas alone: click splits an env value at whitespace first, so
    TIANKONG_API_KEYS='correct horse battery staple' was four keys, each let in, where --api-key
    with that phrase is refused (a key has no spaces)."""
    if not from_environment:
        return value
    return [os.environ.get(env_twin(row.name), "")]


def built(
    table: type[T], values: dict[str, Any], from_environment: frozenset[str] = frozenset()
) -> T:
    """The table instance from flag values (None = not given), checked; ``from_environment``:
    the rows whose value click read from their env twin."""
    changes = {}
    for row, flag in rows(table):
        value = values.get(row.name)
        if value is None:
            continue
        if isinstance(value, list):  # repeated flags, or the env twin's comma-separated list
            value = comma_list(split_listed(row, value, row.name in from_environment))
        elif flag.choices and isinstance(value, str):
            value = value.lower()
        changes[row.name] = value
    # the rows with no flag, set by their env twins alone (TIANKONG_MAX_MASKS), as Ray reads
    # them: the CLI left them at their defaults without a word (a review)
    flagless = [row.name for row, flag in rows(table) if not flag.names]
    if flagless:
        changes.update(read_environment(table, only=flagless))
    instance = table(**{**{row.name: default_of(row) for row, _ in rows(table)}, **changes})
    check_settings(instance)
    return instance


def settings_flags(command: F) -> F:
    """Rewrite ``command``'s signature with the generated flags, and build its tables on call."""
    signature = inspect.signature(command)
    hints = get_type_hints(command, include_extras=True)
    tables = {
        name: hints[name]
        for name, parameter in signature.parameters.items()
        if parameter.default in (FROM_FLAGS, ALL_FLAGS) and is_dataclass(hints[name])
    }
    rows_by_flag = {  # parameter name -> (table parameter, row name, typer parameter)
        parameter_name(flag): (table_name, row.name, flag_parameter(table, row, flag))
        for table_name, table in tables.items()
        for row, flag in rows(table)
        if flag.names
    }
    placed = {name for name, p in signature.parameters.items() if p.default is FLAG}
    unknown = placed - set(rows_by_flag)
    assert not unknown, f"{command.__name__}: no settings row for {sorted(unknown)}"
    flags: dict[str, tuple[str, str, inspect.Parameter]] = {}  # the flags this command takes
    out: list[inspect.Parameter] = []
    for name, parameter in signature.parameters.items():
        if parameter.default is FLAG:
            new = {name: rows_by_flag[name]}
        elif parameter.default is ALL_FLAGS:  # the table's rows not placed or named otherwise
            new = {
                n: row
                for n, row in rows_by_flag.items()
                if row[0] == name and n not in signature.parameters
            }
        elif name in tables or name in ("given", "typed"):
            continue  # given to the command on call
        else:
            out.append(parameter.replace(annotation=hints.get(name, parameter.annotation)))
            continue
        flags.update(new)
        out += [typer_parameter for _, _, typer_parameter in new.values()]

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        arguments = {n: v for n, v in values.items() if n not in flags and n != CONTEXT}
        context: typer.Context | None = values.get(own_context or CONTEXT)
        # where click took each value: COMMANDLINE, ENVIRONMENT (the twin) or DEFAULT
        source = {
            n: getattr(context.get_parameter_source(n), "name", "DEFAULT") if context else "DEFAULT"
            for n in values
        }
        from_environment = frozenset(
            row for n, (_, row, _) in flags.items() if source[n] == "ENVIRONMENT"
        )
        for table_name, table in tables.items():
            mine = {row: values.get(n) for n, (t, row, _) in flags.items() if t == table_name}
            arguments[table_name] = built(table, mine, from_environment)
        if "given" in signature.parameters and context:  # set on the command line or the twin
            arguments["given"] = frozenset(
                row for n, (_, row, _) in flags.items() if source[n] != "DEFAULT"
            )
        if "typed" in signature.parameters and context:
            rows_of = {n: row for n, (_, row, _) in flags.items()}
            arguments["typed"] = frozenset(
                rows_of.get(n, n) for n in values if source[n] == "COMMANDLINE"
            )
        return command(**arguments)

    # typer passes the context to one parameter of its type (which flags were given, and where
    # from): the command's own where it takes one (eval's), else this one
    own_context = next((p.name for p in out if p.annotation is typer.Context), None)
    if own_context is None:
        out.append(
            inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        )
    # typer reads the signature; a generated flag may follow a parameter without a default
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        out, __validate_parameters__=False
    )
    run.__annotations__ = {p.name: p.annotation for p in out}
    return run  # type: ignore[return-value]


RAY_ONLY = {  # what only --ray reads: given without it, it was ignored
    "ray_address": "--ray-address",
    "replicas": "--replicas",
    "max_replicas": "--max-replicas",
}


def refuse_unread(
    typed: frozenset[str], flags: Mapping[str, str], when: str, add: str | None = None
) -> None:
    """Flags typed where the run will not read them (``flags``: parameter name -> flag): one
    sentence, exit 2, where they were accepted and ignored. ``when`` says where they apply,
    ``add`` what would make them apply."""
    named = [flag for name, flag in flags.items() if name in typed]
    if not named:
        return
    verb, them = ("applies", "it") if len(named) == 1 else ("apply", "them")
    remedy = f"{add}, or leave {them} out" if add else f"leave {them} out"
    listed = " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
    raise BadOptionError(f"{listed} {verb} only {when}; {remedy}.")


def refuse_without_ray(ray: bool, typed: frozenset[str]) -> None:
    """A flag that only ``--ray`` reads, typed without ``--ray``. Its environment variable
    alone (``RAY_ADDRESS``, ``TIANKONG_REPLICAS``) is not refused: ``serve run`` and other Ray
    programs of the shell read it too."""
    if not ray:
        refuse_unread(typed, RAY_ONLY, "with --ray", "add --ray")


TXT_UNREAD = {"field": "--field"}  # a TXT input is one text a line: no field to name


def refuse_field_for_txt(typed: frozenset[str], input_format: str) -> None:
    """``--field`` typed for a TXT input, which has no fields (it was ignored)."""
    if input_format == "txt":
        refuse_unread(typed, TXT_UNREAD, "to JSONL and CSV input (a TXT file is one text a line)")


def int8_warned(masker: Any) -> Any:
    """``masker``, after a warning on stderr where it serves INT8 that failed its quality guard
    (``--precision int8`` serves it as asked): ``export`` and ``serve`` said so, and predict,
    fill, eval and check answered with it silently (a review's find)."""
    quality = getattr(masker.engine, "quality", None) or {}
    if masker.engine.precision == "int8" and quality.get("passed") is False:
        from tiankong.engines.onnx_engine import failed_guard

        typer.echo(
            f"warning: INT8 for '{masker.model.name}' {failed_guard(quality)}; it answers as "
            "asked, though --precision auto would not serve it.",
            err=True,
        )
    return masker


def any_case(value: str | None) -> str | None:
    """A word naming a choice on the command line, read in any case, as the settings' flags
    read theirs (``built``): export --precision INT8 and eval --task Fill were refused where
    predict --precision FP32 was taken (a review)."""
    return value.lower() if isinstance(value, str) else value


def names_a_folder(text: str) -> bool:
    """Whether the sentence argument is the path of an existing folder with no Chinese in it
    (``check /tmp`` checked the sentence '/tmp' and exited 0 with "no Chinese": a review; a
    sentence is a sentence though a folder here bears its name: 画龙点晴 after mkdir 画龙点晴)."""
    from tiankong.core.script import has_han

    return len(text) < 4096 and "\n" not in text and not has_han(text) and os.path.isdir(text)


def names_a_file(text: str) -> bool:
    """Whether the sentence argument is the path of an existing file (``os.path.isfile``: a
    sentence longer than a file name may be, 255 bytes, is not one, where pathlib raises)."""
    return len(text) < 4096 and "\n" not in text and os.path.isfile(text)
