"""One frozen Settings object, declared as one table: each row is a setting with its default,
CLI flag, help text and rule, and its TIANKONG_* env twin follows from its name.

Everything else is generated from the table: the CLI's typer options (``cli/options.py``), the
environment reading for Ray Serve (``from_environment``, pydantic-settings) and the check
(``check_settings``). The library and the server only ever receive a ``Settings`` instance and
never read the environment. A new setting is one row; see docs/ARCHITECTURE.md, "a new flag".
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from platformdirs import user_cache_dir

from tiankong.errors import BadOptionError
from tiankong.host import usable_cores

ENV_PREFIX = "TIANKONG_"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# what --precision names; which engine runs which is the engine's rule (engines/*_engine.py)
PRECISIONS = ("auto", "fp32", "int8", "bf16", "fp16")
# what --engine names (engines.create_engine builds them; "fake" answers without a model)
ENGINES = ("auto", "torch", "onnx", "openvino", "fake")
# --index's words; anything else names an index folder (./none for a folder so named)
INDEX_KEYWORDS = ("auto", "bundled", "none")
DEVICES = ("auto", "cpu", "cuda")  # read in any case as the other choices (engines judge them)
# The most intra-op threads one engine may start. A fixed number, not this host's CPUs, so a
# setting valid on one machine is valid on every other (a Ray driver checks the settings its
# replicas run elsewhere); 1024 is above the physical cores of any one host a process runs on
# today (the largest two-socket servers have 384), so the default (``usable_cores``) is always
# within it, and it stops a typo (100000 started some 10,000 threads and took 16 GB) before an
# export or a ``--precision auto`` measurement, whose cache key holds the thread count, starts.
MAX_THREADS = 1024
# The smallest window: [CLS], one [MASK] and [SEP] (``TextEncoder.window`` keeps max_length - 2
# tokens around the masks), and one more, for proofreading's windows hold at least 2 tokens
# between [CLS] and [SEP] (``tasks/check/request.windows_of``). The largest is the model's
# (``service.check_window``, where the model is known).
MIN_WINDOW = 4
T = TypeVar("T")


def threads_per_worker(threads: int, workers: int) -> int:
    """The one split of intra-op threads between engines that share a machine (``fill
    --workers``, Ray Data actors, Ray Serve replicas): an equal share each, at least one.
    ``threads`` 0 (the engine's own choice, which takes every core) shares this machine's
    cores: it gave each engine one thread, where one engine alone would have used them all (a
    review). One engine keeps 0, its own choice."""
    if threads == 0:
        return 0 if workers <= 1 else max(1, usable_cores() // workers)
    return max(1, threads // max(1, workers))


def cache_folder(kind: str, override: str | None = None) -> Path:
    """The one choice of where tiankong caches ``kind`` (``onnx``: the export cache, ``index``:
    the bundled corpus index): ``override`` when given, else the user's cache folder
    (platformdirs: ``$XDG_CACHE_HOME/tiankong/KIND`` on Linux)."""
    if override:
        return Path(override).expanduser()
    return Path(user_cache_dir("tiankong")) / kind


# The longest a server setting may wait: beyond them a timer overflows (--drain-timeout 1e10
# was an OverflowError traceback from the drain's watchdog at SIGTERM) or the server never
# answers (--batch-window-ms inf held the engine for good, every request a 504, the probes
# 200); a day, and a minute for the batch window, are past any use.
MAX_TIMEOUT_S = 86_400.0
MAX_BATCH_WINDOW_MS = 60_000.0
MIN_CLIENT_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class Flag:
    """A setting's command-line face and rule. ``{default}`` in ``help`` is the default."""

    names: tuple[str, ...] = ()  # ("--model", "-m"); () = no flag, the env twin only
    help: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    more_than: float | None = None
    choices: tuple[str, ...] = ()  # the CLI lower-cases the value first
    # a list setting's rule for each of its entries: the sentence that refuses one, or None
    each: Callable[[str], str | None] | None = None
    # True: the flag's default is the setting's (typer prints it); False: unset (None), so the
    # help text says the default.
    shows_default: bool = False


def setting(
    default: Any = MISSING,
    *names: str,
    help: str | None = None,
    factory: Callable[[], Any] | None = None,
    **rules: Any,
) -> Any:
    """One row of a settings table: ``port: int = setting(8000, "--port", help=...)``."""
    flag = Flag(names, help, **rules)
    if factory is not None:
        return field(default_factory=factory, metadata={"flag": flag})
    return field(default=default, metadata={"flag": flag})


def api_key_problem(key: str) -> str | None:
    """An API key's rule, for the flag's and the keys file's alike: not empty (an empty one
    would be dropped, and with no other key the server would start open), printable ASCII
    without spaces (what a header carries)."""
    key = key.strip()
    if not key:
        return (
            "An API key is empty (--api-key or an entry of TIANKONG_API_KEYS); give the key, "
            "or leave the setting out to run without keys."
        )
    if not (key.isascii() and key.isprintable()) or " " in key:
        return "An API key (--api-key, api_keys) must be printable ASCII without spaces."
    return None


def origin_problem(origin: str) -> str | None:
    """A ``--cors-origin``: an origin as a browser sends it (``scheme://host[:port]``: no path,
    not even a trailing slash) or ``*``; anything else would never match a request, and the
    server would run with CORS silently refused."""
    if origin == "*":
        return None
    parts = urlsplit(origin)
    if (
        parts.scheme in ("http", "https")
        and parts.hostname
        and origin == f"{parts.scheme}://{parts.netloc}"
        and "@" not in parts.netloc
    ):
        return None
    return (
        f"--cors-origin (cors_origins) '{origin}' is not an origin; write it as the browser "
        "sends it, scheme://host[:port] with no path or trailing slash (https://app.example)."
    )


HOST_LABEL = r"[a-z0-9_][a-z0-9_-]{0,62}"  # one part of a host name, as clients write them
HOST_NAME = re.compile(rf"(?=.{{1,253}}$){HOST_LABEL}(\.{HOST_LABEL})*\.?")


def ascii_host(name: str) -> str:
    """A host name as a ``Host`` header carries it: lower case, and a name written in another
    script in its ASCII form (IDNA with UTS #46, as browsers send it: 中文.com is
    xn--fiq228c.com); a name IDNA refuses is returned lower-cased, for ``host_name_problem``
    to refuse."""
    name = name.lower()
    if name.isascii():
        return name
    import idna  # small, and only for a name written in another script

    try:
        return str(idna.encode(name.removesuffix("."), uts46=True).decode("ascii")) + (
            "." if name.endswith(".") else ""
        )
    except idna.IDNAError:
        return name


def host_name_problem(name: str) -> str | None:
    """An ``--allowed-host``: a host name as a client types it (no scheme, no port; one in
    another script is taken in its ASCII form, ``ascii_host``), an IP address or ``*``;
    anything else would match no request's ``Host``."""
    if name == "*" or HOST_NAME.fullmatch(ascii_host(name)):
        return None
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return (
            f"--allowed-host (allowed_hosts) '{name}' is not a host name; give it as clients "
            "type it, without scheme or port (tiankong.example.com), or *."
        )
    return None


def proxy_problem(address: str) -> str | None:
    """A ``--forwarded-allow-ip``: an IP address, a network (``10.0.0.0/8``) or ``*``, the
    forms uvicorn matches a connection's address against; anything else would match nothing,
    and the proxy's X-Forwarded-For would be ignored without a word."""
    if address == "*":
        return None
    try:
        ipaddress.ip_network(address)  # strict, as uvicorn reads it: 10.0.0.1/8 matched nothing
    except ValueError:
        return (
            f"--forwarded-allow-ip (forwarded_allow_ips) '{address}' is not an IP address or "
            "network (a network is written by its first address, 10.0.0.0/8); give the "
            "reverse proxy's address (127.0.0.1), a network or *."
        )
    return None


@dataclass(frozen=True)
class Settings:
    # The flags of `tiankong serve`, in its --help order; predict, fill, eval and export take
    # the model and engine rows too (cli/options.py).
    model: str | None = setting(
        None,
        "--model",
        "-m",
        help="Bundled model name, local HF folder, or hub id (default: the bundled model).",
    )  # None = the bundled default model
    host: str = setting("127.0.0.1", "--host", help="Address to listen on (default {default}).")
    # 0: a free port the OS picks (the tests' `serve --port 0`; serve prints the one it got)
    port: int = setting(
        8000, "--port", help="TCP port (default {default}).", at_least=0, at_most=65535
    )
    engine: str = setting(
        "auto",
        "--engine",
        help="auto, torch, onnx or openvino (fake: a stand-in for benchmarks and tests).",
        shows_default=True,
        choices=ENGINES,
    )
    precision: str = setting(
        "auto",
        "--precision",
        help="auto (on the CPU: the fastest that passes the INT8 guard, measured once), fp32, "
        "int8, bf16, fp16.",
        shows_default=True,
        choices=PRECISIONS,
    )
    # --precision auto's split, two engines by batch size (engines.within_split): off unless
    # asked, since a text's numbers then depend on the batch it lands in, so on the load
    split_engines: bool = setting(
        False,
        "--split-engines/--one-engine",
        help="With --precision auto: serve small batches and full ones with two engines where "
        "each was measured faster at its own size (a second copy of the weights). A text's "
        "scores then depend on what else is in its batch, so one engine serves by default.",
        shows_default=True,
    )
    device: str = setting(
        "auto", "--device", help="auto, cpu or cuda.", shows_default=True, choices=DEVICES
    )
    threads: int = setting(  # 0: the engine's own choice (ONNX Runtime's, OpenVINO's)
        MISSING,
        "--threads",
        factory=lambda: min(usable_cores(), MAX_THREADS),  # a default within its own rule
        help="Intra-op threads (default: cores; 0: the engine's own choice).",
        at_least=0,
        at_most=MAX_THREADS,
    )
    # tokens in the window, [CLS] and [SEP] included
    max_length: int = setting(
        128, "--max-length", help="Token window (default {default}).", at_least=MIN_WINDOW
    )
    onnx_cache_dir: str | None = setting(
        None,
        "--onnx-cache-dir",
        help="Where ONNX exports are cached (default: the user cache dir).",
    )
    # which corpus index the decode stage mixes in (tiankong.index.grounding.choose_memory)
    index: str = setting(
        "auto",
        "--index",
        help="Corpus index: auto (the bundled index for a bundled model, none for others), "
        "bundled, none (any case), or a folder from `tiankong index build` "
        "(default {default}).",
    )
    max_batch_texts: int = setting(
        64,
        "--max-batch-texts",
        help="Most texts per /batch_predict or HF request (default {default}).",
        at_least=1,
    )
    max_body_bytes: int = setting(
        1_000_000,
        "--max-body-bytes",
        help="Largest request body; bigger ones get 413 (default {default}).",
        at_least=1,
    )
    log_level: str = setting(
        "info",
        "--log-level",
        help=f"{', '.join(LOG_LEVELS)} (default {{default}}).",
        choices=LOG_LEVELS,
    )
    warmup: bool = setting(
        True,
        "--warmup/--no-warmup",
        help="Run one inference before /ready answers 200.",
        shows_default=True,
    )
    batch_window_ms: float = setting(
        2.0,
        "--batch-window-ms",
        help="Once the engine was busy, wait this long for a batch to fill (default {default}; "
        "0 = never wait). A request to an idle engine runs at once.",
        at_least=0,
        at_most=MAX_BATCH_WINDOW_MS,
    )
    max_batch_size: int = setting(
        32, "--max-batch-size", help="Most texts per engine call (default {default}).", at_least=1
    )
    max_batch_tokens: int = setting(
        4096,
        "--max-batch-tokens",
        help="Most padded tokens (texts x longest) per engine call (default {default}).",
        at_least=1,
    )
    max_queue: int = setting(
        256,
        "--max-queue",
        help="Forward rows waiting for the engine (a plain text is one) before 503 + "
        "Retry-After (default {default}).",
        at_least=1,
    )
    request_timeout_s: float = setting(
        30.0,
        "--request-timeout",
        help="Seconds a request may queue and run before 504 (default {default}).",
        more_than=0,
        at_most=MAX_TIMEOUT_S,
    )
    # forward rows one request may ask for: PreparedRequest.forward_rows, summed over its texts
    max_request_cost: int = setting(
        16_384,
        "--max-request-cost",
        help="Most forward rows one request may cost (texts x masks x beam; default "
        "{default}); over it, 400 bad_option.",
        at_least=1,
    )
    result_cache_size: int = setting(
        1024,
        "--result-cache-size",
        help="Results of repeated identical requests kept (default {default}; 0 = off).",
        at_least=0,
    )
    token_cache_size: int = setting(
        4096,
        "--token-cache-size",
        help="Tokenized texts kept (default {default}; 0 = off).",
        at_least=0,
    )
    # A tuple setting's flag repeats; its env twin is a comma-separated list.
    api_keys: tuple[str, ...] = setting(
        (),
        "--api-key",
        help="Require this API key (repeatable; the env twin takes a comma-separated list). "
        "Sent as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'.",
        each=api_key_problem,
    )
    api_keys_file: str | None = setting(
        None,
        "--api-keys-file",
        help="Require one of the API keys in this file (one a line, # comments).",
    )
    cors_origins: tuple[str, ...] = setting(
        (),
        "--cors-origin",
        help="Allow cross-origin requests from this origin (repeatable; the env twin takes "
        "a comma-separated list). Default: no CORS.",
        each=origin_problem,
    )
    # the DNS-rebinding guard's names (server/middleware/hosts.py): who decides is host_check
    allowed_hosts: tuple[str, ...] = setting(
        (),
        "--allowed-host",
        help="A host name this server answers to besides localhost and IP addresses "
        "(repeatable; the env twin takes a comma-separated list; * for any). Default: on a "
        "loopback --host, only those; on any other, every name.",
        each=host_name_problem,
    )
    forwarded_allow_ips: tuple[str, ...] = setting(
        (),
        "--forwarded-allow-ip",
        help="A reverse proxy's address (or network, or *) whose X-Forwarded-For names the "
        "client (repeatable; the env twin takes a comma-separated list). Default: none, the "
        "connection's own address is the client's.",
        each=proxy_problem,
    )
    rate_limit_per_minute: int = setting(
        0,
        "--rate-limit-per-minute",
        help="Forward rows a minute per API key (per client address without keys): a plain "
        "text is 1, a search its rows, a check about 5 a sentence; over it, 429 + Retry-After "
        "(default {default} = off).",
        at_least=0,
    )
    client_timeout_s: float = setting(
        10.0,
        "--client-timeout",
        help="Seconds a client has to send a request's headers, and again its body "
        "(default {default}).",
        # under it every connection was closed before its headers could come, /ready's too,
        # where 1e-9 was taken (a review)
        at_least=MIN_CLIENT_TIMEOUT_S,
        at_most=MAX_TIMEOUT_S,
    )
    drain_timeout_s: float = setting(
        10.0,
        "--drain-timeout",
        help="Seconds requests in flight get to finish after SIGTERM (default {default}).",
        more_than=0,
        at_most=MAX_TIMEOUT_S,
    )
    # No flag: set in code, or by the env twin where Ray Serve builds the app.
    # Below 1 every text is refused, the servers' warm-up first (a startup traceback).
    max_masks: int = setting(16, at_least=1)
    max_text_chars: int = setting(10_000, at_least=1)
    # proofreading looks every character up in the corpus index: a longer text is refused
    max_check_chars: int = setting(2_000, at_least=1)
    # below 1 every call was refused ("from 1 to 0"), after the model had loaded
    default_top_k: int = setting(5, at_least=1)
    max_top_k: int = setting(50, at_least=1)
    int8_min_agreement: float = setting(0.98)  # the INT8 guard: least top-1 agreement with FP32

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def __post_init__(self) -> None:
        """A path given as a ``pathlib.Path`` (the library's ``model=``, ``index=``,
        ``onnx_cache_dir=``) is kept as its string, as the CLI gives it; an index keyword is
        read in any case, as the choices are (``--index NONE`` was looked for as a folder)."""
        for row in fields(self):
            value = getattr(self, row.name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, row.name, os.fspath(value))
        if isinstance(self.index, str) and self.index.strip().lower() in INDEX_KEYWORDS:
            object.__setattr__(self, "index", self.index.strip().lower())


@dataclass(frozen=True)
class ScaleOptions:
    """``replicas`` fixed, or autoscaling between ``replicas`` and ``max_replicas``.

    The autoscaler adds replicas while the replicas average more than
    ``target_ongoing_requests`` requests each (default: a quarter of ``max_batch_size``, a
    starting point to tune with a load test).
    """

    replicas: int = setting(
        2,
        "--replicas",
        help="With --ray: replicas, or the fewest when autoscaling (default {default}).",
        shows_default=True,
    )
    max_replicas: int | None = setting(
        None,
        "--max-replicas",
        help="With --ray: autoscale between --replicas and this many replicas.",
    )
    target_ongoing_requests: float | None = setting(None)

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas is not None and self.max_replicas != self.replicas

    @property
    def most_replicas(self) -> int:
        return self.max_replicas if self.max_replicas is not None else self.replicas

    def checked(self) -> ScaleOptions:
        if self.autoscaling:
            if self.replicas < 0 or self.most_replicas < max(1, self.replicas):
                raise BadOptionError(
                    "Autoscaling needs 0 <= replicas <= max_replicas and max_replicas >= 1 "
                    "(--replicas, --max-replicas); "
                    f"got {self.replicas} and {self.max_replicas}."
                )
        elif self.replicas < 1:
            raise BadOptionError(f"replicas (--replicas) must be at least 1; got {self.replicas}.")
        if self.target_ongoing_requests is not None and self.target_ongoing_requests <= 0:
            raise BadOptionError("target_ongoing_requests must be above 0.")
        return self


def rows(table: type) -> Iterator[tuple[Field[Any], Flag]]:
    """A settings table's fields, in order, each with its Flag."""
    for row in fields(table):
        yield row, row.metadata.get("flag", Flag())


def default_of(row: Field[Any]) -> Any:
    if row.default_factory is not MISSING:
        return row.default_factory()
    return None if row.default is MISSING else row.default


def shown(value: Any) -> str:
    """A default as help text writes it: 2.0 as 2, 1000000 in full."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def help_text(row: Field[Any], flag: Flag) -> str | None:
    if flag.help is None or row.default_factory is not MISSING:
        return flag.help
    return flag.help.format(default=shown(row.default))


def env_twin(name: str) -> str:
    """TIANKONG_REQUEST_TIMEOUT for ``request_timeout_s``: the unit suffix is left out."""
    return ENV_PREFIX + name.removesuffix("_s").upper()


def label(row: Field[Any], flag: Flag) -> str:
    """How an error names a setting: its flag, with its field's name where the two differ by
    more than the dashes (a library caller of ``Settings(request_timeout_s=...)`` was told of
    --request-timeout alone), or its name where it has no flag."""
    if not flag.names:
        return row.name
    name = flag.names[0].split("/")[0]
    return name if name.lstrip("-").replace("-", "_") == row.name else f"{name} ({row.name})"


# Settings instances already checked: they are frozen, so each is checked once per process
# however many entry points it passes (the CLI's flags, create_app, the Predictor, Ray).
CHECKED: set[Any] = set()


def check_settings(values: Any) -> None:
    """Every row's rule, on a settings table instance; the first broken one is a BadOptionError.
    An instance is checked once: later calls with an equal one return at once."""
    # the values' types are part of the key: Settings(threads=1.0) == Settings(threads=1), and
    # one checked let the other through
    key = (values, tuple(type(getattr(values, row.name)) for row, _ in rows(type(values))))
    with suppress(TypeError):  # an unhashable table is checked every time
        if key in CHECKED:
            return
    check_rows(values)
    if isinstance(values, Settings) and values.default_top_k > values.max_top_k:
        # each row passed, and every request that names no top_k was refused (a review)
        raise BadOptionError(
            f"default_top_k ({values.default_top_k}) is more than max_top_k "
            f"({values.max_top_k}): every request without a top_k would be refused."
        )
    if isinstance(values, Settings) and values.split_engines and values.precision != "auto":
        # a split is --precision auto's: with another precision it was taken and did nothing
        # (a verifying review)
        raise BadOptionError(
            f"--split-engines applies to --precision auto (the measured choice); with "
            f"--precision {values.precision} one engine serves, so leave it out."
        )
    with suppress(TypeError):
        CHECKED.add(key)


def type_problem(value: Any, kind: Any) -> str | None:
    """What a setting's value should be where it is not of the row's type (``kind``, from the
    table's annotations), or None. The library takes any Python value: max_length="128" was a
    TypeError from the limit's comparison, FillMasker.load(123) an AttributeError. None is a
    value only where the row may be unset (``int | None``): max_top_k=None was a TypeError."""
    optional = False
    if get_origin(kind) in (UnionType, Union):
        kinds = [k for k in get_args(kind) if k is not type(None)]
        optional = len(kinds) < len(get_args(kind))
        kind = kinds[0] if len(kinds) == 1 else Any
    if value is None:
        return None if optional or kind is Any else "given"
    if kind is bool:
        return None if isinstance(value, bool) else "true or false"
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "a number"
    if kind is str:
        return None if isinstance(value, str) else "a string"
    if get_origin(kind) is tuple:
        ok = isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)
        return None if ok else "a list of strings"
    return None


def check_rows(values: Any) -> None:
    kinds = get_type_hints(type(values))
    for row, flag in rows(type(values)):
        value = getattr(values, row.name)
        wanted = type_problem(value, kinds[row.name])
        if wanted == "given":
            raise BadOptionError(
                f"{label(row, flag)} can't be None; give a value or leave it out (the "
                "default is used then)."
            )
        if wanted is not None:
            raise BadOptionError(
                f"{label(row, flag)} must be {wanted}, not {type(value).__name__} ({value!r})."
            )
        if value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):  # nan, inf: never a setting
            raise BadOptionError(f"{label(row, flag)} must be a finite number; got {value}.")
        if isinstance(value, str) and not value.strip():  # '' fell back to the default, or
            # read as a path: --model "" served the bundled model, " " the working folder
            raise BadOptionError(f"{label(row, flag)} is empty; give a value or leave it out.")
        low, high = flag.at_least, flag.at_most
        if low is not None and high is not None and not low <= value <= high:
            raise BadOptionError(
                f"{label(row, flag)} must be from {shown(low)} to {shown(high)}; "
                f"got {shown(value)}."
            )
        if low is not None and not value >= low:
            raise BadOptionError(
                f"{label(row, flag)} must be {shown(low)} or more; got {shown(value)}."
            )
        if high is not None and not value <= high:
            raise BadOptionError(
                f"{label(row, flag)} must be {shown(high)} or less; got {shown(value)}."
            )
        if flag.more_than is not None and not value > flag.more_than:
            raise BadOptionError(
                f"{label(row, flag)} must be more than {shown(flag.more_than)}; got {shown(value)}."
            )
        if flag.each is not None:
            check_entries(value, flag.each)
        if flag.choices and value not in flag.choices:
            raise BadOptionError(
                f"{label(row, flag)}: unknown value '{value}'; use one of "
                f"{', '.join(flag.choices)}."
            )


def check_entries(entries: Sequence[str], rule: Callable[[str], str | None]) -> None:
    """A list setting's entries, each held to its row's ``each`` rule."""
    for entry in entries:
        problem = rule(entry)
        if problem is not None:
            raise BadOptionError(problem)


def split_commas(value: Any) -> Any:
    """An env twin's (or ``serve run`` argument's) comma-separated list, as a tuple
    (``comma_list``)."""
    if isinstance(value, str):
        return comma_list([value])
    return value


def comma_list(items: Sequence[str]) -> tuple[str, ...]:
    """Repeated flag values or an env twin's comma-separated list (click splits an env value at
    whitespace first) as one tuple, blanks dropped; but values given that are all blank
    (``--api-key "$UNSET"``, ``TIANKONG_API_KEYS=" , "``) are one empty entry, for the setting's
    own check to refuse: an API key list of blanks must not read as no keys."""
    parts = [part.strip() for item in items for part in item.split(",")]
    kept = tuple(part for part in parts if part)
    return kept or (("",) if parts else ())


def from_environment(table: type[T], given: Mapping[str, object] | None = None) -> T:
    """A settings table from ``given`` (field names to text or values) over its TIANKONG_* env
    twins over its defaults. A value that doesn't convert, or an unknown name: BadOptionError."""
    return table(**read_environment(table, given))


# Settings whose env twin set but blank is refused rather than read as unset: a secret missing
# from a manifest (TIANKONG_API_KEYS=$KEYS with KEYS unset) must not start the server open.
SECRET_SETTINGS = ("api_keys", "api_keys_file")


def check_blank_secrets(environment: Mapping[str, str]) -> None:
    """A ``SECRET_SETTINGS`` twin that is set but blank: the API key rule's one sentence. Both
    readers of the environment (the CLI through click, Ray through ``read_environment``) read
    any other blank twin as unset."""
    for name in SECRET_SETTINGS:
        value = environment.get(env_twin(name))
        if value is not None and not value.replace(",", "").strip():
            if name == "api_keys_file":  # not "an API key is empty": a path is (a review)
                raise BadOptionError(
                    f"{env_twin(name)} is set but empty; give the keys file's path, or unset "
                    "it to run without keys."
                )
            problem = api_key_problem("")
            assert problem is not None
            raise BadOptionError(problem.replace("TIANKONG_API_KEYS", env_twin(name), 1))


def read_environment(
    table: type, given: Mapping[str, object] | None = None, only: Sequence[str] | None = None
) -> dict[str, Any]:
    """The rows of ``table`` set by ``given`` or by their TIANKONG_* env twins, converted to the
    rows' types by pydantic-settings; ``only``: those rows alone (the CLI's rows without a
    flag, whose twins click doesn't read)."""
    import pydantic
    from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

    class Environment(BaseSettings):
        # an empty variable is unset, as the CLI (click) reads it: TIANKONG_THREADS= is the
        # default on both, not an error on Ray alone
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX, extra="forbid", env_ignore_empty=True
        )

    if table is Settings and (only is None or set(SECRET_SETTINGS) & set(only)):
        # (not for the CLI's flagless rows: a predict does not read the API keys)
        check_blank_secrets(os.environ)
    given = dict(given or {})
    names = {
        env_twin(row.name).removeprefix(ENV_PREFIX).lower(): row.name
        for row, _ in rows(table)
        if only is None or row.name in only
    }
    unknown = sorted(set(given) - set(names.values()))
    if unknown:
        raise BadOptionError(
            f"Unknown setting(s) {', '.join(unknown)}; use {', '.join(names.values())}."
        )
    twins: dict[str, Any] = {}
    for twin, name in names.items():  # every twin optional: an unset one keeps the default
        kind = get_type_hints(table)[name]
        if get_origin(kind) is tuple:
            kind = Annotated[kind, NoDecode, pydantic.BeforeValidator(split_commas)]
        twins[twin] = (kind | None, None)
    model = pydantic.create_model(f"{table.__name__}Twins", __base__=Environment, **twins)
    try:
        read = model(**{twin: given[name] for twin, name in names.items() if name in given})
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        name = names.get(str(first["loc"][0]), str(first["loc"][0]))
        raise BadOptionError(
            f"{name}: '{first.get('input')}' is not valid ({first['msg'][:1].lower()}"
            f"{first['msg'][1:]})."
        ) from None
    return {names[k]: v for k, v in read.model_dump().items() if v is not None}
