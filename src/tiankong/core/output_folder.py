"""An output folder a command makes (``export -o``, ``index build -o``, ``train -o``), checked
before the work: a file where it or a folder above it should be, or no permission to write
there, is one sentence and exit 2, not a traceback after minutes of work. What no check can
foresee (a name the file system refuses, a full disk) is caught where the folder is made
(``made_here``)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tiankong.errors import BadOptionError, TiankongError


def check_output_folder(path: Path, flag: str, replaced: bool) -> None:
    """Refuse ``path`` (given as ``flag``) when it can't be made or written: it is a file, a
    folder above it is a file, or where it is written can't be. ``replaced``: the folder is
    built beside itself and renamed into place (export, index build), so its parent must be
    writable and it may not be a link (the link would be replaced, not what it points to);
    else it is written in place (train), so an existing folder must be writable itself."""
    if os.path.exists(path) and not os.path.isdir(path):  # os.path: False for refused names
        raise BadOptionError(f"{flag} '{path}' is a file; name a folder.")
    if replaced and os.path.islink(path):
        raise BadOptionError(
            f"{flag} '{path}' is a link, which the new folder would replace; name the folder "
            "it points to."
        )
    absolute = Path(os.path.abspath(path))
    here = absolute if not replaced and os.path.isdir(absolute) else absolute.parent
    existing = next(folder for folder in (here, *here.parents) if os.path.exists(folder))
    if not os.path.isdir(existing):
        raise BadOptionError(
            f"{flag} '{path}' can't be made: '{existing}' is a file, not a folder."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadOptionError(
            f"{flag} '{path}' can't be written in '{existing}' (permission denied)."
        )


def replaced_path(path: Path) -> Path:
    """Where a folder that is replaced whole (export, index build) goes, as an absolute path
    through its real parent: ``-o idx/../idx`` named the new folder through the old one, so
    once the old was removed the rename found no path and the index was lost (a review). The
    parent is read as the system reads it: ``link/../new`` is beside what ``link`` points to
    (folding ``..`` by name first put it beside the link: a verifying review)."""
    path = path.expanduser()
    if path.name in ("", ".", ".."):  # "x/..": the folder itself is a parent
        return Path(os.path.realpath(path))
    return Path(os.path.realpath(path.parent)) / path.name


def replace_folder(new: Path, out: Path) -> None:
    """Put the finished folder ``new`` (made beside ``out``) in ``out``'s place: an old ``out``
    is renamed aside first, removed only once ``new`` is in, and put back if ``new`` can't be;
    so a failure leaves the old folder, never none. Another build that put its own ``out`` in
    between is one sentence (``made_here``'s OSError: "Directory not empty" said nothing)."""
    old = out.with_name(f".old-{out.name}-{uuid.uuid4().hex[:8]}") if out.exists() else None
    if old is not None:
        os.rename(out, old)
    try:
        os.rename(new, out)
    except OSError as error:
        if old is not None:
            os.rename(old, out)
        if out.exists():
            raise OSError(
                f"another run wrote '{out.name}' meanwhile; run one at a time ({os_reason(error)})"
            ) from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def check_not_working_folder(path: Path, flag: str, error: type[TiankongError]) -> None:
    """A folder that is replaced whole (export, index build) may not be the working folder or
    one above it: ``-o .`` deleted the files the shell sat among, then failed renaming over
    ``.``."""
    where = Path(os.path.abspath(path)).resolve()
    here = Path.cwd().resolve()
    if where == here or where in here.parents:
        raise error(
            f"{flag} '{path}' is the working folder or one above it, which would be replaced "
            "whole; name a new folder."
        )


def holds_only(folder: Path, own: Iterable[str]) -> bool:
    """Whether ``folder`` holds nothing but the plain files named in ``own`` (a folder that is
    replaced whole may hold only what the command itself wrote there)."""
    names = set(own)
    return all(
        entry.name in names and not entry.is_symlink() and entry.is_file()
        for entry in folder.iterdir()
    )


@contextmanager
def made_here(path: Path, flag: str) -> Iterator[None]:
    """Around making and writing ``path``'s folders: an OSError is one sentence naming
    ``flag``."""
    try:
        yield
    except OSError as error:
        raise BadOptionError(f"{flag} '{path}' can't be written ({os_reason(error)}).") from None


@contextmanager
def cache_written(
    folder: Path, what: str, remedy: str, error: type[TiankongError]
) -> Iterator[None]:
    """Around writing one of tiankong's own caches (the ONNX exports, the bundled index) into
    ``folder``: an OSError (a read-only or full file system) is one sentence naming the folder,
    the reason and ``remedy``, raised as ``error`` (a read-only cache mount was a 118-line
    traceback and exit 1)."""
    try:
        yield
    except TimeoutError:  # a lock's wait (filelock's Timeout is an OSError too): not a write
        raise
    except OSError as problem:
        raise error(
            f"{what} can't be written in '{folder}' ({os_reason(problem)}); {remedy}."
        ) from None


def os_reason(error: OSError) -> str:
    """The system's reason (numpy's full-disk OSError has no ``strerror``, only its text)."""
    return error.strerror or str(error) or type(error).__name__


def folder_mode() -> int:
    """The mode a folder asked for gets, as ``mkdir`` would make it (0777 less the umask): a
    folder built in ``mkdtemp`` (0700) and renamed into place is set to it, so others may read
    it where the umask lets them (the image's server, uid 10001, reading a mounted index) and
    not where it doesn't (umask 077)."""
    return 0o777 & ~current_umask()


def file_mode() -> int:
    """The mode a new file gets from ``open`` (0666 less the umask): one a library writes
    private (safetensors' ``save_file``, 0600) is set to it, as ``folder_mode`` for folders."""
    return 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
