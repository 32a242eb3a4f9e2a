"""Modern usage, read from jieba's dictionary (MIT; word frequencies counted in modern text),
for the scripts that decide which of two idiom forms is a misspelling.

The shipped text that counts attestation is mostly classical, so on its own it takes standard
modern forms for misspellings of their classical variants (吃里扒外 of 吃里爬外, 不值一钱 of
不直一钱, 心如刀绞 of 心如刀搅). A form is a misspelling of another only where modern usage
agrees: the other is at least ``MODERN_RATIO`` times as common in jieba's dictionary, and the
form itself is rare there (at most ``RARE_IN_USE``; ``FLOOR`` is the frequency of a word the
dictionary lists from a dictionary only, never seen written). Needs jieba (tiankong[train]).
"""

from __future__ import annotations

from pathlib import Path

MODERN_RATIO = 5
RARE_IN_USE = 10
FLOOR = 3
DECISIVE_RATIO = 20  # the other form this many times as common: modern usage decides alone


def modern_usage() -> dict[str, int]:
    """jieba's dictionary: word -> frequency."""
    import jieba

    path = Path(jieba.__file__).resolve().parent / "dict.txt"
    usage = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        word, frequency, *_ = line.split()
        usage[word] = int(frequency)
    return usage


def agreed(wrong: str, right: str, usage: dict[str, int]) -> bool:
    """Whether modern usage agrees that ``wrong`` is a misspelling of ``right``: 画龙点晴 (3)
    of 画龙点睛 (26) yes; 吃里扒外 (20) of 吃里爬外 (3) no; 逼不得已 (3) of 必不得已 (3) no."""
    seen = max(usage.get(wrong, 0), FLOOR)
    return seen <= RARE_IN_USE and usage.get(right, 0) >= MODERN_RATIO * seen


def decisive(wrong: str, right: str, usage: dict[str, int]) -> bool:
    """Whether modern usage alone says ``wrong`` is a misspelling of ``right``, whatever the
    (mostly classical) training text writes: ``wrong`` rare and ``right`` at least
    ``DECISIVE_RATIO`` times as common. 按步就班 (3) of 按部就班 (90) yes, though the training
    text writes them once and twice; 名符其实 (38) of 名副其实 (819) no: a variant in use."""
    seen = max(usage.get(wrong, 0), FLOOR)
    return seen <= RARE_IN_USE and usage.get(right, 0) >= DECISIVE_RATIO * seen
