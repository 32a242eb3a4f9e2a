"""The confusion sets: for a character, the characters it is commonly mistaken for.

Read from pycorrector's ``same_pinyin.txt`` (same sound) and ``same_stroke.txt`` (same shape),
shipped in ``data/`` with their licence (Apache-2.0; ``data/README.md``). Every line of both
files counts: a head's same-sound set is the union of all its lines, a same-shape group is
symmetric. Only characters in the model's vocabulary are kept, so each candidate has a token id.

>>> sets = ConfusionSets.shipped()
>>> "们" in sets.of("门")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class ConfusionSets:
    """Same-sound and same-shape candidates per character."""

    sound: Mapping[str, frozenset[str]]
    shape: Mapping[str, frozenset[str]]

    @classmethod
    @cache
    def shipped(cls, extra: bool = True) -> ConfusionSets:
        """pycorrector's two files, and (``extra``) the groups they miss that tiankong adds
        (``confusion_extra.txt``: 己已巳, 问间, 的地得…; docs/PROOFREADING.md)."""
        pinyin, stroke = DATA / "same_pinyin.txt", DATA / "same_stroke.txt"
        return cls.read(pinyin, stroke, DATA / "confusion_extra.txt" if extra else None)

    @classmethod
    def read(cls, pinyin: Path, stroke: Path, extra: Path | None = None) -> ConfusionSets:
        sound: dict[str, set[str]] = {}
        for line in pinyin.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            head, *fields = line.split("\t")
            sound.setdefault(head, set()).update("".join(fields))
        shape: dict[str, set[str]] = {}
        for line in stroke.read_text(encoding="utf-8").splitlines():
            group = [char for char in line.split("\t") if char]
            for char in group:
                shape.setdefault(char, set()).update(group)
        lines = extra.read_text(encoding="utf-8").splitlines() if extra else []
        for line in lines:  # "shape" or "sound", then a group, every member for every other
            if not line.strip() or line.startswith("#"):
                continue
            kind, *group = [field for field in line.split("\t") if field]
            if kind not in ("shape", "sound"):  # a typo in the file would change what is read
                raise ValueError(f"{extra}: a group's kind is shape or sound, not {kind!r}")
            for char in group:
                (shape if kind == "shape" else sound).setdefault(char, set()).update(group)
        return cls(
            {head: frozenset(chars - {head}) for head, chars in sound.items()},
            {head: frozenset(chars - {head}) for head, chars in shape.items()},
        )

    def of(self, char: str) -> frozenset[str]:
        """Every character ``char`` is commonly mistaken for (sound or shape)."""
        return self.sound.get(char, frozenset()) | self.shape.get(char, frozenset())

    def kind(self, char: str, other: str) -> str | None:
        """``"sound"``, ``"shape"`` or None: why ``other`` is a candidate for ``char``."""
        if other in self.sound.get(char, ()):
            return "sound"
        if other in self.shape.get(char, ()):
            return "shape"
        return None

    def token_candidates(self, vocab: Mapping[str, int]) -> dict[int, tuple[int, ...]]:
        """Token id -> the candidates' token ids, for characters in ``vocab`` only."""
        table: dict[int, tuple[int, ...]] = {}
        for char in set(self.sound) | set(self.shape):
            if char in vocab:
                others = sorted(vocab[other] for other in self.of(char) if other in vocab)
                if others:
                    table[vocab[char]] = tuple(others)
        return table
