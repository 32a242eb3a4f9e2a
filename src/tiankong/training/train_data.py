"""Training data: streamed raw text for pretraining, and validated CSV rows for fine-tuning.

Raw text (``.txt`` / ``.txt.xz``, one passage per line) is read lazily, mixed across sources by
weight, shuffled through a bounded buffer and packed into fixed-length token sequences, so memory
depends on the buffer size and never on the corpus size.
"""

from __future__ import annotations

import csv
import lzma
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tiankong.errors import BadDataFileError

MASK = "[MASK]"


@dataclass(frozen=True)
class TextSource:
    """One raw-text file and its relative sampling weight (per line)."""

    path: Path
    weight: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> TextSource:
        """``corpus.txt.xz`` or ``corpus.txt.xz:2.5``."""
        name, separator, weight = spec.rpartition(":")
        if not separator or not weight.replace(".", "", 1).isdigit():
            name, weight = spec, ""
        path = Path(name)
        if not path.is_file():
            raise BadDataFileError(f"Training file '{name}' does not exist.")
        return cls(path, float(weight) if weight else 1.0)


def open_text(path: Path) -> TextIO:
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def read_lines(path: Path) -> Iterator[str]:
    with open_text(path) as handle:
        try:
            for line in handle:
                line = line.strip()
                if line:
                    yield line
        except UnicodeDecodeError:
            raise BadDataFileError(
                f"Training file '{path}' is not UTF-8 text; convert it (e.g. iconv -f GBK)."
            ) from None


def endless_lines(path: Path) -> Iterator[str]:
    """Cycle through a file forever (each pass streams it again)."""
    while True:
        empty = True
        for line in read_lines(path):
            empty = False
            yield line
        if empty:
            raise BadDataFileError(f"Training file '{path}' has no text lines.")


def mixed_lines(sources: list[TextSource], rng: random.Random) -> Iterator[str]:
    """Draw lines from several sources in proportion to their weights, forever."""
    streams = [endless_lines(source.path) for source in sources]
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
    path: Path, vocab: dict[str, int], skip_bad_rows: bool
) -> tuple[list[ClozeRow], list[str]]:
    """Read and validate a ``text,label`` CSV. Returns the good rows and the error messages.

    A label is one character per mask, or a word spread over consecutive masks, so the label
    length must equal the number of masks. Bad rows stop the run unless ``skip_bad_rows``.
    """
    rows: list[ClozeRow] = []
    problems: list[str] = []
    try:
        path.read_bytes().decode("utf-8")  # a fine-tuning CSV is small: checked whole, first
    except UnicodeDecodeError:
        raise BadDataFileError(
            f"Training file '{path}' is not UTF-8 text; convert it (e.g. iconv -f GBK)."
        ) from None
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        missing = [name for name in ("text", "label") if name not in fields]
        if missing:
            raise BadDataFileError(
                f"CSV file '{path.name}' is missing the column(s) {', '.join(missing)}; "
                "it needs a header line with 'text,label'."
            )
        for record in reader:
            line = reader.line_num
            problem = row_problem(record.get("text") or "", record.get("label") or "", vocab)
            if problem:
                problems.append(f"line {line}: {problem}")
                continue
            text, label = (record["text"] or "").strip(), (record["label"] or "").strip()
            rows.append(ClozeRow(line, text, [vocab[char] for char in label]))
    if problems and not skip_bad_rows:
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise BadDataFileError(
            f"CSV file '{path.name}' has {len(problems)} bad row(s): {shown}{more}. "
            "Fix them or pass --skip-bad-rows."
        )
    if not rows:
        raise BadDataFileError(f"CSV file '{path.name}' has no usable rows.")
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
        return f"the label character(s) {''.join(unknown)} are not in the model's vocabulary"
    return None
