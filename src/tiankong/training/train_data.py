"""Training data: streamed raw text for pretraining, and validated CSV rows for fine-tuning.

Raw text (``.txt`` / ``.txt.xz``, one passage per line) is read lazily, mixed across sources by
weight, shuffled through a bounded buffer and packed into fixed-length token sequences, so memory
depends on the buffer size and never on the corpus size.
"""

from __future__ import annotations

import lzma
import math
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tiankong.core.compression import compression_of, first_line_not_utf8
from tiankong.core.text import normalize_masks
from tiankong.errors import BadDataFileError, BadOptionError, not_utf8
from tiankong.index.sources import CsvRecords

MASK = "[MASK]"
XZ_HEADER = b"\xfd7zXZ\x00"
XZ_FOOTER = b"YZ"  # an xz stream's last two bytes (before any zero padding)
JSON_SUFFIXES = (".json", ".jsonl")
TEXT_SUFFIXES = (".txt", ".txt.xz")  # raw text (CSV: ``is_csv``); any other name is refused


def file_noun(flag: str) -> str:
    """How a message names a file given with ``flag``: --data's or --heldout's."""
    return "Held-out file" if flag == "--heldout" else "Training file"


def csv_noun(flag: str) -> str:
    return "Held-out CSV file" if flag == "--heldout" else "CSV file"


def split_spec(spec: str) -> tuple[str, str | None]:
    """``FILE`` or ``FILE:WEIGHT`` to the file's name and the weight's text (None: no weight).

    A file whose own name has a colon is taken whole; otherwise the text after the last colon is
    the weight when what comes before it is a file or it reads as a number (so a missing
    ``corpus.txt:2`` is named as ``corpus.txt``)."""
    name, separator, weight = spec.rpartition(":")
    if not separator or os.path.exists(spec):
        return spec, None
    if os.path.exists(name) or weight.replace(".", "", 1).isdigit():
        return name, weight
    return spec, None


def spec_path(spec: str) -> Path:
    """The file a ``--data``/``--heldout`` spec names, without its weight."""
    return Path(split_spec(spec)[0])


def is_csv(spec: str) -> bool:
    """The one test of CSV fine-tuning data: ``.csv`` in any case, with or without a weight."""
    return spec_path(spec).name.lower().endswith(".csv")


@dataclass(frozen=True)
class TextSource:
    """One raw-text file and its relative sampling weight (per line)."""

    path: Path
    weight: float = 1.0

    @classmethod
    def parse(cls, spec: str, flag: str = "--data") -> TextSource:
        """``corpus.txt.xz`` or ``corpus.txt.xz:2.5``; a missing file, a folder or a weight
        that is not a number more than 0 is one sentence."""
        name, weight = split_spec(spec)
        path = Path(name)
        if os.path.isdir(path):
            raise BadDataFileError(
                f"{file_noun(flag)} '{name}' is a folder; {flag} takes a file "
                "(.txt, .txt.xz or .csv)."
            )
        if not path.is_file():
            raise BadDataFileError(f"{file_noun(flag)} '{name}' does not exist.")
        if name.lower().endswith(JSON_SUFFIXES):
            raise BadDataFileError(
                f"{file_noun(flag)} '{name}' is JSON; {flag} takes raw text (.txt or .txt.xz, "
                "one passage per line) or a CSV with text,label columns."
            )
        named = name.lower().endswith(TEXT_SUFFIXES) or is_csv(name)
        if not named and compression_of(path) in (None, "xz"):  # gzip & co: check_text_file's
            # it was read as raw text: a .tsv's or a .csv.xz's rows trained as passages
            raise BadDataFileError(
                f"{file_noun(flag)} '{name}' is named neither .txt, .txt.xz nor .csv; {flag} "
                "reads raw text (one passage a line) from .txt or .txt.xz files and text,label "
                "rows from plain .csv files: name it for what it holds."
            )
        if weight is None:
            return cls(path)
        try:
            value = float(weight)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise BadOptionError(
                f"A {flag} weight (FILE:WEIGHT) must be a finite number; got '{weight}' in "
                f"'{spec}'."
            )
        if value <= 0:
            raise BadOptionError(
                f"A {flag} weight (FILE:WEIGHT) must be more than 0; got '{weight}' in '{spec}'."
            )
        return cls(path, value)


def is_xz(path: Path) -> bool:
    """``.xz`` in any case, as ``is_csv`` reads ``.csv``: corpus.txt.XZ was read as plain text
    and refused as not UTF-8 (a review)."""
    return path.name.lower().endswith(".xz")


def open_text(path: Path) -> TextIO:
    if is_xz(path):
        return lzma.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def read_lines(path: Path, flag: str = "--data") -> Iterator[str]:
    """The file's non-empty lines, stripped; a file not in UTF-8 or a damaged xz file is one
    sentence (lzma's EOFError would otherwise reach click, which prints only "Aborted.")."""
    try:
        with open_text(path) as handle:
            for line in handle:
                line = line.strip()
                if line:
                    yield line
    except UnicodeDecodeError as error:
        raise BadDataFileError(not_utf8(f"{file_noun(flag)} '{path}'", error)) from None
    except (EOFError, lzma.LZMAError):
        raise BadDataFileError(damaged_xz(path, flag)) from None


def damaged_xz(path: Path, flag: str) -> str:
    return f"{file_noun(flag)} '{path}' is a damaged or incomplete xz file."


def check_text_file(path: Path, flag: str) -> None:
    """Before any model loads: an xz file's first and last bytes are an xz stream's (a cut-off
    download is found here, not hours into a run at the end of the first pass), and the file
    has a text line in UTF-8."""
    packed = compression_of(path)
    if packed and packed != "xz":  # a .gz was told "it looks like UTF-16: convert it"
        raise BadDataFileError(
            f"{file_noun(flag)} '{path}' is {packed}-compressed; train reads plain text or "
            "xz: decompress it (or recompress it with xz)."
        )
    if packed == "xz" and not is_xz(path):  # it "has NUL bytes", of a .txt holding xz
        raise BadDataFileError(
            f"{file_noun(flag)} '{path}' is xz-compressed; name it .txt.xz (train reads xz by "
            "its name) or decompress it."
        )
    if packed is None and is_xz(path):  # it was "a damaged or incomplete xz file"
        raise BadDataFileError(
            f"{file_noun(flag)} '{path}' is named .xz but isn't xz-compressed; if it is plain "
            "text, name it .txt (or compress it with xz)."
        )
    if is_xz(path):
        with path.open("rb") as handle:
            head = handle.read(len(XZ_HEADER))
            handle.seek(max(0, path.stat().st_size - 4096))
            tail = handle.read().rstrip(b"\0")
        if head != XZ_HEADER or not tail.endswith(XZ_FOOTER):
            raise BadDataFileError(damaged_xz(path, flag))
    check_utf8_lines(path, flag, unpack_xz=is_xz(path))
    if next(read_lines(path, flag), None) is None:
        raise BadDataFileError(f"{file_noun(flag)} '{path}' has no text lines.")


def check_utf8_lines(path: Path, flag: str, unpack_xz: bool = False) -> None:
    """Every line of a --data or --heldout file (raw text or CSV) is UTF-8, before any model
    loads: a bad one 3,000 lines in ended a run at step 740 with no line to look at, and the
    file, fixed, no longer matched the run for --resume (a review); a bad line 51 was read with
    the first line's buffer and called GBK (a verifying review)."""
    found = first_line_not_utf8(path, unpack_xz=unpack_xz)
    if found is None:
        return
    line, error = found
    # the one sentence every command gives (its GBK advice only where the bytes read as GBK: a
    # GBK file under an ASCII first line was told only to fix line 2, "where the 1 lines
    # before it are", a verifying review)
    where = f" (line {line:,})" if line > 1 else ""
    raise BadDataFileError(not_utf8(f"{file_noun(flag)} '{path}'{where}", error, line))


def endless_lines(
    path: Path, shard: int = 0, shards: int = 1, piece: int | None = None
) -> Iterator[str]:
    """Cycle through a file forever (each pass streams it again).

    With ``shards`` > 1 only every ``shards``-th line from the ``shard``-th is kept, so the data
    workers read disjoint parts of the file and do not all start on the same lines; a file with
    fewer lines than that leaves some shards empty, and those take the whole file. ``piece``: a
    line longer than that many characters is read as its consecutive pieces of that length, so
    a pass yields lines as a file of shorter lines does (a novel with no line breaks, 3 M
    characters on one line, was read whole for each line the shuffle buffer drew: 100,000 reads
    of 7 MB, half an hour, before the first step; a review)."""
    while True:
        kept = seen = 0
        for index, line in enumerate(pieces(read_lines(path), piece)):
            seen += 1
            if index % shards == shard:
                kept += 1
                yield line
        if seen == 0:
            raise BadDataFileError(f"Training file '{path}' has no text lines.")
        if kept == 0:
            shard, shards = 0, 1


def pieces(lines: Iterator[str], piece: int | None) -> Iterator[str]:
    """Each of ``lines``, or its consecutive pieces of ``piece`` characters where it is longer."""
    for line in lines:
        if piece is None or len(line) <= piece:
            yield line
        else:
            yield from (line[start : start + piece] for start in range(0, len(line), piece))


def mixed_lines(
    sources: list[TextSource],
    rng: random.Random,
    shard: int = 0,
    shards: int = 1,
    piece: int | None = None,
) -> Iterator[str]:
    """Draw lines from several sources in proportion to their weights, forever; with
    ``shards``, from the ``shard``-th share of each file, a long line in ``piece``-character
    pieces (see `endless_lines`)."""
    streams = [endless_lines(source.path, shard, shards, piece) for source in sources]
    weights = [source.weight for source in sources]
    while True:
        (stream,) = rng.choices(streams, weights=weights)
        yield next(stream)


def shuffled(lines: Iterator[str], buffer_size: int, rng: random.Random) -> Iterator[str]:
    """Bounded-buffer shuffle: corpus files are in source order, so mix before packing."""
    buffer: list[str] = []
    for line in lines:
        if len(buffer) < buffer_size:
            buffer.append(line)
            continue
        index = rng.randrange(buffer_size)
        yield buffer[index]
        buffer[index] = line


def packed_sequences(
    token_lists: Iterator[list[int]],
    seq_len: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
) -> Iterator[list[int]]:
    """Pack passages into ``[CLS] a [SEP] b [SEP] ...`` sequences of exactly ``seq_len`` ids.

    A passage longer than one sequence contributes a random window of it, so long lines do not
    crowd out short ones (idioms, reviews) and no padding is wasted.
    """
    body = seq_len - 1
    current: list[int] = [cls_id]
    for tokens in token_lists:
        if len(tokens) > body - 1:
            start = rng.randrange(len(tokens) - (body - 1) + 1)
            tokens = tokens[start : start + body - 1]
        if len(current) + len(tokens) + 1 > seq_len:
            current.extend([sep_id] * (seq_len - len(current)))
            yield current
            current = [cls_id]
        current.extend(tokens)
        current.append(sep_id)


@dataclass(frozen=True)
class ClozeRow:
    """One validated fine-tuning row: text with masks and the ids that fill them."""

    line: int
    text: str
    label_ids: list[int]


def read_cloze_csv(
    path: Path,
    vocab: dict[str, int],
    skip_bad_rows: bool,
    flag: str = "--data",
    count_tokens: Callable[[str], int] | None = None,
    positions: int = 0,
) -> tuple[list[ClozeRow], list[str]]:
    """Read and validate a ``text,label`` CSV. Returns the good rows and the error messages.

    A label is one character per mask, or a word spread over consecutive masks, so the label
    length must equal the number of masks. With ``count_tokens``, a text of more tokens (with
    [CLS] and [SEP]) than the model's ``positions`` is a bad row too: a row is never cut, since
    a cut could drop a mask or the context that decides it. Bad rows stop the run unless
    ``skip_bad_rows``.
    """
    rows: list[ClozeRow] = []
    problems: list[str] = []
    try:
        path.read_bytes().decode("utf-8")  # a fine-tuning CSV is small: checked whole, first
    except UnicodeDecodeError as error:
        raise BadDataFileError(not_utf8(f"{file_noun(flag)} '{path}'", error)) from None
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        # the one strict reading of CSV input (index build, fill): a quote never closed was
        # "line 2: the label is empty", a row with a value past the header trained silently
        reader = CsvRecords(handle, path, BadDataFileError)
        fields = reader.fieldnames or []
        missing = [name for name in ("text", "label") if name not in fields]
        if missing:
            raise BadDataFileError(
                f"{csv_noun(flag)} '{path.name}' is missing the column(s) {', '.join(missing)}; "
                "it needs a header line with 'text,label'."
            )
        for record in reader:
            line = reader.record_line
            # [mask], 【MASK】 ... are [MASK], as predict and eval read them (they were "no [MASK]")
            text = normalize_masks((record.get("text") or "").strip())
            label = (record.get("label") or "").strip()
            shape = reader.problem(record, "text") or reader.problem(record, "label")
            problem = shape or row_problem(text, label, vocab)
            if problem is None and count_tokens is not None:
                tokens = count_tokens(text)
                if tokens > positions:
                    problem = (
                        f"the text is {tokens} tokens with [CLS] and [SEP], more than the "
                        f"model's {positions} positions"
                    )
            if problem:
                problems.append(f"line {line}: {problem}")
                continue
            rows.append(ClozeRow(line, text, [vocab[char] for char in label]))
    if problems and not skip_bad_rows:
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise BadDataFileError(
            f"{csv_noun(flag)} '{path.name}' has {len(problems)} bad row(s): {shown}{more}. "
            "Fix them or pass --skip-bad-rows."
        )
    if not rows:
        raise BadDataFileError(f"{csv_noun(flag)} '{path.name}' has no usable rows.")
    return rows, problems


def row_problem(text: str, label: str, vocab: dict[str, int]) -> str | None:
    text, label = text.strip(), label.strip()
    masks = text.count(MASK)
    if not text:
        return "the text is empty"
    if masks == 0:
        return "the text has no [MASK]"
    if not label:
        return "the label is empty"
    if len(label) != masks:
        return f"the label '{label}' has {len(label)} character(s) but the text has {masks} [MASK]"
    unknown = [char for char in label if char not in vocab]
    if unknown:
        shown = ", ".join(repr(char) for char in unknown)  # a space was shown as nothing
        return f"the label character(s) {shown} are not in the model's vocabulary"
    return None
