"""The settings tables (config.py) and what is generated from them: the typer flags
(cli/options.py), the env reading (pydantic-settings) and the one check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from tiankong.cli.options import ALL_FLAGS, FLAG, FROM_FLAGS, settings_flags
from tiankong.config import (
    Settings,
    check_settings,
    comma_list,
    env_twin,
    from_environment,
    read_environment,
    rows,
    setting,
)
from tiankong.errors import BadOptionError


@dataclass(frozen=True)
class Table:
    """A small table with one row of each kind, so the mechanism is tested apart from Settings."""

    size: int = setting(4, "--size", help="Items (default {default}).", at_least=1)
    wait_s: float = setting(2.0, "--wait", help="Seconds (default {default}).", more_than=0)
    level: str = setting("info", "--level", help="Level.", choices=("info", "debug"))
    names: tuple[str, ...] = setting((), "--name", help="Repeatable.")
    mode: str = setting("auto", "--mode", help="auto or fast.", shows_default=True)
    quiet: bool = setting(False, "--quiet/--no-quiet", help="Less.", shows_default=True)
    hidden: int = setting(7)  # no flag: the env twin only


def toy_app(seen: list[Any]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @settings_flags
    def run(
        first: Annotated[str, typer.Option("--first")] = "a",
        mode: object = FLAG,
        table: Table = ALL_FLAGS,
        given: frozenset[str] = frozenset(),
    ) -> None:
        seen.append((first, table, given))

    @app.command()
    @settings_flags
    def other(size: object = FLAG, table: Table = FROM_FLAGS) -> None:
        seen.append(table)

    return app


def test_flags_are_generated_in_place_with_twins_help_and_defaults() -> None:
    command = typer.main.get_command(toy_app([]))
    run = command.get_command(typer.Context(command), "run")  # type: ignore[attr-defined]
    by_name = {param.name: param for param in run.params}
    assert list(by_name) == ["first", "mode", "size", "wait", "level", "name", "quiet"]
    assert by_name["size"].envvar == "TIANKONG_SIZE" and by_name["size"].default is None
    assert by_name["wait"].envvar == "TIANKONG_WAIT"  # the unit suffix is left out
    assert by_name["wait"].help == "Seconds (default 2)."  # {default}, written as help writes it
    assert by_name["mode"].default == "auto" and by_name["quiet"].default is False
    assert by_name["name"].multiple
    other = command.get_command(typer.Context(command), "other")  # type: ignore[attr-defined]
    assert [param.name for param in other.params] == ["size"]  # only the row it places


def test_flags_and_twins_build_the_table() -> None:
    seen: list[Any] = []
    runner = CliRunner()
    env = {"TIANKONG_SIZE": "9", "TIANKONG_NAMES": "x, y,z"}  # the field's name
    done = runner.invoke(toy_app(seen), ["run", "--level", "DEBUG", "--wait", "0.5"], env=env)
    assert done.exit_code == 0, done.output
    first, table, given = seen[-1]
    assert first == "a"
    assert table == Table(size=9, wait_s=0.5, level="debug", names=("x", "y", "z"))
    assert given == {"size", "wait_s", "level", "names"}
    runner.invoke(toy_app(seen), ["run", "--name", "p", "--name", "q,r", "--quiet"])
    assert seen[-1][1] == Table(names=("p", "q", "r"), quiet=True)


@pytest.mark.parametrize(
    ("items", "listed"),
    [
        (["x,", "y,z"], ("x", "y", "z")),  # click splits an env value at whitespace first
        (["a,,b "], ("a", "b")),  # a stray comma among values is dropped
        ([" , "], ("",)),  # all blank: one empty entry, which an API key check refuses
        ([""], ("",)),
        ([], ()),
    ],
)
def test_comma_lists(items: list[str], listed: tuple[str, ...]) -> None:
    assert comma_list(items) == listed


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--size", "0"], "--size must be 1 or more; got 0."),
        (["--wait", "0"], "--wait (wait_s) must be more than 0; got 0."),
        (["--level", "loud"], "--level: unknown value 'loud'; use one of info, debug."),
    ],
)
def test_a_broken_rule_is_one_sentence(flags: list[str], words: str) -> None:
    done = CliRunner().invoke(toy_app([]), ["run", *flags])
    assert isinstance(done.exception, BadOptionError) and done.exception.message == words


def test_env_twins_and_given_values_through_pydantic_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIANKONG_HIDDEN", "8")
    monkeypatch.setenv("TIANKONG_NAMES", "a, b")
    monkeypatch.setenv("TIANKONG_QUIET", "yes")
    monkeypatch.setenv("TIANKONG_WAIT", "3")
    assert read_environment(Table, {"size": "5", "wait_s": 1}) == {
        "size": 5,
        "wait_s": 1.0,  # given wins over the twin
        "names": ("a", "b"),
        "quiet": True,
        "hidden": 8,
    }
    assert from_environment(Table).size == 4  # unset: the table's default
    with pytest.raises(BadOptionError, match="size: 'many' is not valid"):
        read_environment(Table, {"size": "many"})
    with pytest.raises(BadOptionError, match="Unknown setting"):
        read_environment(Table, {"sizes": "1"})


def test_an_empty_twin_is_unset_on_the_cli_and_on_ray_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """click reads ``TIANKONG_SIZE=`` as unset; the environment reading for Ray must too (it
    refused an empty number and read an empty list as one empty entry)."""
    seen: list[Any] = []
    empty = {"TIANKONG_SIZE": "", "TIANKONG_NAMES": ""}
    done = CliRunner().invoke(toy_app(seen), ["run"], env=empty)
    assert done.exit_code == 0, done.output
    assert seen[-1][1] == Table()
    for name, value in empty.items():
        monkeypatch.setenv(name, value)
    assert read_environment(Table) == {}
    assert from_environment(Table) == Table()


@pytest.mark.parametrize("value", ["", " ", " , "])
def test_a_blank_secret_twin_is_refused_on_ray(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """Unlike any other blank twin: a secret missing from a manifest must not start Ray's
    replicas open (TIANKONG_API_KEYS= read as no keys)."""
    monkeypatch.setenv("TIANKONG_API_KEYS", value)
    with pytest.raises(BadOptionError, match="An API key is empty"):
        read_environment(Settings)


def test_settings_rows_are_checked_and_every_twin_is_distinct() -> None:
    twins = [env_twin(row.name) for row, _ in rows(Settings)]
    assert len(set(twins)) == len(twins)
    assert env_twin("request_timeout_s") == "TIANKONG_REQUEST_TIMEOUT"
    check_settings(Settings())  # the defaults keep every rule
    with pytest.raises(BadOptionError, match="--max-queue must be 1 or more"):
        check_settings(Settings(max_queue=0))
    with pytest.raises(BadOptionError, match="--log-level: unknown value"):
        check_settings(Settings(log_level="loud"))
    # an unknown precision was refused by whichever engine auto chose, in its own terms ("The
    # onnx engine runs auto, fp32 or int8, not 'foo'") for a user who named no engine
    with pytest.raises(BadOptionError, match="--precision: unknown value 'foo'; use one of auto"):
        check_settings(Settings(precision="foo"))


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"max_length": "128"}, "--max-length must be a whole number, not str ('128')."),
        ({"threads": "2"}, "--threads must be a whole number, not str ('2')."),
        ({"port": 1.5}, "--port must be a whole number, not float (1.5)."),
        ({"warmup": "yes"}, "--warmup must be true or false, not str ('yes')."),
        ({"model": 123}, "--model must be a string, not int (123)."),
        (
            {"api_keys": "secret"},
            "--api-key (api_keys) must be a list of strings, not str ('secret').",
        ),
        (
            {"request_timeout_s": True},
            "--request-timeout (request_timeout_s) must be a number, not bool (True).",
        ),
        # a row that can't be unset: a TypeError from the limit's comparison in predict
        (
            {"max_top_k": None},
            "max_top_k can't be None; give a value or leave it out (the default is used then).",
        ),
    ],
)
def test_a_setting_of_the_wrong_type_is_one_sentence(changes: dict[str, Any], words: str) -> None:
    """The library takes any Python value: max_length="128" was a TypeError from the limit's
    comparison, and FillMasker.load(123) an AttributeError."""
    from tiankong.config import Settings, check_settings

    with pytest.raises(BadOptionError) as refused:
        check_settings(Settings(**changes))
    assert refused.value.message == words
    check_settings(Settings(request_timeout_s=5, model=None))  # an int is a number; None unset


def test_the_type_check_is_not_skipped_for_an_equal_table_of_other_types() -> None:
    """Settings(threads=1.0) == Settings(threads=1): once one was checked, the other passed
    (and torch's set_num_threads refused the float)."""
    from tiankong.config import Settings, check_settings

    check_settings(Settings(threads=1))
    with pytest.raises(BadOptionError, match="--threads must be a whole number, not float"):
        check_settings(Settings(threads=1.0))


def test_paths_are_kept_as_strings() -> None:
    """Settings(onnx_cache_dir=Path(...)) worked before the type check, and model= or index=
    as a Path were an AttributeError: a path is its string."""
    from pathlib import Path

    from tiankong.config import Settings, check_settings

    settings = Settings(onnx_cache_dir=Path("/tmp/exports"), model=Path("my-model"))
    check_settings(settings)
    assert (settings.onnx_cache_dir, settings.model) == ("/tmp/exports", "my-model")


@pytest.mark.parametrize(
    ("given", "kept"),
    [("NONE", "none"), (" Bundled ", "bundled"), ("Auto", "auto"), ("./none", "./none")],
)
def test_an_index_word_is_read_in_any_case(given: str, kept: str) -> None:
    """--index NONE was looked for as a folder named NONE (exit 3), where every choice word is
    read in any case; a folder so named is still reachable by its path."""
    from tiankong.config import Settings

    assert Settings(index=given).index == kept


def test_the_engines_own_thread_choice_is_shared_as_every_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--threads 0 (the engine's own choice: every core) gave each of several engines one
    thread (`fill --ray --threads 0`: a review); one engine keeps its own choice."""
    from tiankong import config

    monkeypatch.setattr(config, "usable_cores", lambda: 8)
    assert config.threads_per_worker(0, 1) == 0
    assert config.threads_per_worker(0, 2) == 4 and config.threads_per_worker(0, 16) == 1
    assert config.threads_per_worker(6, 4) == 1 and config.threads_per_worker(6, 2) == 3
