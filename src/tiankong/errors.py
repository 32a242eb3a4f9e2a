"""Typed errors and the one table that maps them to HTTP status codes and CLI exit codes.

Every error a user can cause or meet is a ``TiankongError`` subclass with a stable ``code``.
The server and the CLI never decide status codes themselves: they look them up in ``ERROR_TABLE``.
Messages are single readable sentences and never contain tracebacks or file-system internals
beyond what the user typed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


MESSAGE_CHARS = 900  # the most of an error message kept (``TiankongError``)


class TiankongError(Exception):
    """Base class: ``code`` is stable and machine-readable, ``str(err)`` is one sentence."""

    code = "internal_error"
    error_id: str | None = None  # set on server faults: the key to the traceback in the log

    def __init__(self, message: str) -> None:
        if len(message) > MESSAGE_CHARS:
            # a message that quotes what a client sent quoted it whole: a 100 kB "mode" was a
            # 100 kB 400 (a review); its start and its advice at the end are kept
            message = f"{message[: MESSAGE_CHARS * 2 // 3]} … {message[-MESSAGE_CHARS // 3 :]}"
        super().__init__(message)
        self.message = message


# --- bad input (the user can fix the request) ---------------------------------------------


class BadInputError(TiankongError):
    code = "bad_input"


class EmptyTextError(BadInputError):
    code = "empty_text"


class NoMaskError(BadInputError):
    code = "no_mask"


class TooManyMasksError(BadInputError):
    code = "too_many_masks"


class MasksDoNotFitError(BadInputError):
    code = "masks_do_not_fit"


class TextTooLongError(BadInputError):
    code = "text_too_long"


class TopKOutOfRangeError(BadInputError):
    code = "top_k_out_of_range"


class BadOptionError(BadInputError):
    code = "bad_option"


class InvalidRequestError(BadInputError):
    """The request itself is malformed: bad JSON, a wrong type, a missing field."""

    code = "invalid_request"


class BatchTooLargeError(BadInputError):
    code = "batch_too_large"


class BadRangeError(BadInputError):
    """A static file asked for with a Range header that can't be read (400), or that starts
    past the file's end (416): Starlette's own answers were plain text (a review)."""

    code = "bad_range"


class RangeNotSatisfiableError(BadRangeError):
    """``file_size``: the 416's ``Content-Range: bytes */SIZE``."""

    code = "range_not_satisfiable"

    def __init__(self, message: str, file_size: int) -> None:
        super().__init__(message)
        self.file_size = file_size


class BodyTooLargeError(BadInputError):
    code = "body_too_large"


class HeadersTooLargeError(BadInputError):
    code = "headers_too_large"


class UrlTooLongError(BadInputError):
    code = "url_too_long"


class UnsupportedMediaTypeError(BadInputError):
    """A body this server can't read as sent: compressed (``Content-Encoding``), or not JSON."""

    code = "unsupported_media_type"


class BadDataFileError(BadInputError):
    code = "bad_data_file"


class BadHostError(BadInputError):
    """A ``Host`` header this server does not answer to (the DNS-rebinding guard: 400)."""

    code = "bad_host"


def not_utf8(what: str, error: UnicodeDecodeError, line: int = 0) -> str:
    """The one sentence for an input file that isn't UTF-8 (``fill``, ``check``, ``eval``,
    ``index build``, ``train``), with the way out: a UTF-16 file (Windows' "Unicode", with NUL
    bytes or its byte-order mark) was told to convert from GBK. ``line``: the first line that
    isn't UTF-8, where the caller found it (``what`` names it; 0: not known)."""
    data = bytes(error.object)
    start = data[:256]
    whole = line <= 1  # the file's start: past its first line, the bytes are one line's
    if whole and (
        start.startswith((b"\xff\xfe", b"\xfe\xff")) or (b"\x00" in start and reads_as_utf16(start))
    ):
        hint = "it looks like UTF-16: convert it (iconv -f UTF-16 -t UTF-8)"
    elif whole and b"\x00" in start:  # NUL bytes, and not UTF-16's pattern of them: no text
        hint = "it doesn't look like a text file (it has NUL bytes); give a UTF-8 text file"
    elif error.reason == "unexpected end of data" and error.end >= len(data):
        # valid UTF-8 cut short in its last character (a truncated copy), told to be GBK
        hint = "it ends in the middle of a character, as a file cut short does; copy it again"
    elif reads_as_gbk(data[error.start : error.start + 64]):
        hint = "save it as UTF-8 (from GBK: iconv -f GBK -t UTF-8)"
        if line > 1:  # a GBK CSV under an ASCII header, or one GBK line in a UTF-8 file
            hint = (
                "that line reads as GBK: if the whole file is GBK, save it as UTF-8 (iconv -f "
                "GBK -t UTF-8); if only that line is, write that line again in UTF-8"
            )
    elif line > 1:  # UTF-8 up to that line: converting the whole file would garble the rest
        hint = (
            "the lines before it are UTF-8, so mend or remove that line's bytes rather than "
            "convert the whole file"
        )
    else:  # Latin-1's café was told to convert from GBK
        hint = "save it as UTF-8 from the encoding it was written in (iconv -f ENCODING -t UTF-8)"
    return f"{what} can't be read as UTF-8 text ({error.reason}); {hint}."


def reads_as_gbk(data: bytes) -> bool:
    """Whether ``data`` (from a byte UTF-8 refused) reads as GBK text: the advice to convert from
    GBK only where it would work. A character cut at the end of ``data`` is left out."""
    import codecs

    try:
        text = codecs.getincrementaldecoder("gbk")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return any("\u4e00" <= char <= "\u9fff" for char in text)


def reads_as_utf16(start: bytes) -> bool:
    """Whether bytes without a byte-order mark read as UTF-16 text, little- or big-endian
    (``not_utf8`` asks where they hold a NUL, as UTF-16's ASCII and line breaks do and GBK never):
    printable characters and line breaks throughout (a binary file's bytes decode to control
    characters, unassigned code points and lone surrogates)."""
    start = start[: len(start) // 2 * 2]
    if len(start) < 4:
        return False
    for codec in ("utf-16-le", "utf-16-be"):
        try:
            text = start.decode(codec)
        except UnicodeDecodeError:
            continue
        if all(char.isprintable() or char in "\r\n\t" for char in text[:-1]):
            return True  # (the last may be half a surrogate pair, cut at 256 bytes)
    return False


class IndexInputError(BadInputError):
    """An input file for ``index build`` is empty, unreadable or lacks the named field."""

    code = "bad_index_input"


# --- model availability ---------------------------------------------------------------------


class ModelUnavailableError(TiankongError):
    code = "model_unavailable"


class EngineUnavailableError(ModelUnavailableError):
    """The model can't run on the engine asked for: its ONNX export fails, or differs from the
    torch model (another engine may serve it: the message names one)."""

    code = "engine_unavailable"


class MissingPackageError(ModelUnavailableError):
    """A command needs a package this install lacks (an extra of ``pip install 'tiankong[...]'``):
    a plain install of the wheel gave tracebacks (ModuleNotFoundError) and advice to run
    scripts only a clone has (a review)."""

    code = "missing_package"


# --- corpus index availability ----------------------------------------------------------------


class IndexUnavailableError(TiankongError):
    """The corpus index can't be used: missing, or one of the more specific faults below."""

    code = "index_unavailable"


class IndexCorruptError(IndexUnavailableError):
    """Truncated, foreign or inconsistent index files."""

    code = "index_corrupt"


class IndexStaleError(IndexUnavailableError):
    """The sources named in the manifest no longer have the recorded sha256."""

    code = "index_stale"


class IndexTokenizerMismatchError(IndexUnavailableError):
    """The index was built with a different tokenizer than the model that would use it."""

    code = "index_tokenizer_mismatch"


# --- serving ----------------------------------------------------------------------------------


class UnauthorizedError(TiankongError):
    code = "unauthorized"


class RateLimitedError(TiankongError):
    code = "rate_limited"


class OverloadedError(TiankongError):
    """A full queue (503): ``retry_after_s``, when known, is how long the rows ahead take at
    the engine's recent pace (the ``Retry-After`` header; else 1 s)."""

    code = "overloaded"

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ShuttingDownError(TiankongError):
    code = "shutting_down"


class RequestTimeoutError(TiankongError):
    code = "timeout"


class ClientTimeoutError(TiankongError):
    """The client sent its request too slowly (a trickled body): 408, the worker is freed."""

    code = "client_timeout"


class EngineError(TiankongError):
    """The engine (or the batch it ran) failed: ``error_id`` finds the traceback in the log."""

    code = "engine_error"

    def __init__(self, message: str, error_id: str | None = None) -> None:
        super().__init__(message)
        self.error_id = error_id


@dataclass(frozen=True)
class ErrorMapping:
    http_status: int
    exit_code: int


EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_MODEL_UNAVAILABLE = 3
EXIT_INTERNAL = 1

# The ONE table. Order matters: the first entry the error is an instance of wins, so more
# specific classes come before their bases.
ERROR_TABLE: dict[type[TiankongError], ErrorMapping] = {
    BodyTooLargeError: ErrorMapping(413, EXIT_BAD_INPUT),
    HeadersTooLargeError: ErrorMapping(431, EXIT_BAD_INPUT),
    UrlTooLongError: ErrorMapping(414, EXIT_BAD_INPUT),
    UnsupportedMediaTypeError: ErrorMapping(415, EXIT_BAD_INPUT),
    RangeNotSatisfiableError: ErrorMapping(416, EXIT_BAD_INPUT),
    InvalidRequestError: ErrorMapping(422, EXIT_BAD_INPUT),
    BadInputError: ErrorMapping(400, EXIT_BAD_INPUT),
    ModelUnavailableError: ErrorMapping(503, EXIT_MODEL_UNAVAILABLE),
    IndexUnavailableError: ErrorMapping(503, EXIT_MODEL_UNAVAILABLE),  # an unusable index: exit 3
    UnauthorizedError: ErrorMapping(401, EXIT_BAD_INPUT),
    RateLimitedError: ErrorMapping(429, EXIT_INTERNAL),
    OverloadedError: ErrorMapping(503, EXIT_INTERNAL),
    ShuttingDownError: ErrorMapping(503, EXIT_INTERNAL),
    RequestTimeoutError: ErrorMapping(504, EXIT_INTERNAL),
    ClientTimeoutError: ErrorMapping(408, EXIT_INTERNAL),
    EngineError: ErrorMapping(500, EXIT_INTERNAL),
    TiankongError: ErrorMapping(500, EXIT_INTERNAL),
}


def new_error_id() -> str:
    """A short id for one server fault, logged with its traceback and sent to the client."""
    return uuid.uuid4().hex[:12]


def mapping_for(error: TiankongError) -> ErrorMapping:
    """Look up the status/exit code for an error instance via its class hierarchy."""
    for klass, mapping in ERROR_TABLE.items():
        if isinstance(error, klass):
            return mapping
    return ERROR_TABLE[TiankongError]


def each_text(texts: Sequence[str], make: Callable[[str], T], single: str) -> list[T]:
    """``make(text)`` for each of a batch's ``texts``; a BadInputError names its text by
    position, ``texts[1]: The text is empty…`` (which of 1,500 texts had no [MASK]: the error
    didn't say; ``predict_batch`` and ``check_batch``, whose one-text method is ``single``).
    ``texts`` must be a collection of texts: one string was read a character at a time, a
    dict's keys were filled, None was a TypeError from the loop (a review)."""
    batch = f"{single}_batch"
    if isinstance(texts, str | bytes):
        raise BadOptionError(
            f"{batch} takes a list of texts, not one string; use {single} for one text."
        )
    if isinstance(texts, Mapping) or not isinstance(texts, Iterable):
        raise BadOptionError(f"{batch} takes a list of texts, not {type(texts).__name__}.")
    return each_named(texts, make, "texts")


def each_named(texts: Iterable[str], make: Callable[[str], T], field: str) -> list[T]:
    """``make(text)`` for each of ``texts``; a BadInputError names its text by position in the
    list ``field``: ``texts[1]: …``, ``inputs[1]: …``."""
    made = []
    for number, text in enumerate(texts):
        try:
            made.append(make(text))
        except BadInputError as error:
            raise type(error)(f"{field}[{number}]: {error.message}") from None
    return made
