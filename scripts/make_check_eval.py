"""Make the proofreading evaluation set: data/eval/check_{dev,test}.jsonl.

Run from the repository root (the shared corpus folder is given on the command line):

    python scripts/make_check_eval.py CORPUS_DIR CSC_DIR

Sentences come from licensed held-out text only: the classical held-out file (chinese-poetry,
MIT) and the dialogue lines of the wiki_dialogue held-out file (CrossWOZ and KdConv,
Apache-2.0: lines 91-153); never the reviews or news, never SIGHAN. Idiom and poem typos come
from the bundled idiom list and the bundled classical text (both MIT, the text the corpus
index holds, so these items test what the index remembers).

Half of the sentences stay untouched; the other half get one or two errors drawn from the
confusion sets (same sound 70%, same shape 30%), each replacement weighted by how common the
character is in the dialogue training text, so the errors are the plausible ones. A sentence
goes to dev or test by a hash of its text; thresholds are chosen on dev only.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import random
import re
import sys
from collections import Counter
from pathlib import Path

SEED = 21
HAN = re.compile(r"[\u4e00-\u9fff]")
CUT = re.compile(r"(?<=[。！？])")
DIALOGUE_LINES = range(91, 154)  # CrossWOZ + KdConv (Apache-2.0) in wiki_dialogue.heldout
TEMPLATES = (
    "这件事真是{}。",
    "老师说我们做事不能{}。",
    "他的表现可以说是{}。",
    "大家都觉得这是{}的好例子。",
    "{}，说的就是这个道理。",
)


def read_lines(path: Path) -> list[str]:
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def confusion_sets(csc: Path, vocab: set[str]) -> dict[str, dict[str, list[str]]]:
    sound: dict[str, set[str]] = {}
    for line in (csc / "same_pinyin.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        head, *fields = line.split("\t")
        sound.setdefault(head, set()).update("".join(fields))
    shape: dict[str, set[str]] = {}
    for line in (csc / "same_stroke.txt").read_text(encoding="utf-8").splitlines():
        group = [char for char in line.split("\t") if char]
        for char in group:
            shape.setdefault(char, set()).update(other for other in group if other != char)
    heads = set(sound) | set(shape)
    return {
        head: {
            "sound": sorted(c for c in sound.get(head, ()) if c in vocab and c != head),
            "shape": sorted(c for c in shape.get(head, ()) if c in vocab and c != head),
        }
        for head in heads
        if head in vocab
    }


def sentences(lines: list[str], low: int, high: int) -> list[str]:
    found = []
    for line in lines:
        for piece in CUT.split(line):
            piece = piece.strip()
            han = len(HAN.findall(piece))
            if low <= len(piece) <= high and han >= 0.8 * len(piece):
                found.append(piece)
    return found


def corrupt(
    text: str,
    count: int,
    sets: dict[str, dict[str, list[str]]],
    freq: Counter[str],
    rng: random.Random,
) -> str | None:
    positions = [i for i, char in enumerate(text) if char in sets and freq[char] >= 3]
    if len(positions) < count:
        return None
    chars = list(text)
    chosen = sorted(rng.sample(positions, count))
    if count == 2 and chosen[1] - chosen[0] < 2:
        return None
    for position in chosen:
        entry = sets[chars[position]]
        kind = "sound" if entry["sound"] and (not entry["shape"] or rng.random() < 0.7) else "shape"
        options = [c for c in entry[kind] if freq[c] >= 3]
        if not options:
            return None
        weights = [freq[c] ** 0.5 for c in options]
        chars[position] = rng.choices(options, weights)[0]
    return "".join(chars)


def split_of(text: str) -> str:
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 5 < 2 else "test"


def main() -> None:
    corpus, csc = Path(sys.argv[1]), Path(sys.argv[2])
    root = Path(__file__).resolve().parent.parent
    vocab = set((root / "src/tiankong/resources/vocab.txt").read_text(encoding="utf-8").split())
    sets = confusion_sets(csc, vocab)
    freq = Counter("".join(read_lines(corpus / "wiki_dialogue.txt.xz")))
    rng = random.Random(SEED)
    heldout = read_lines(corpus / "wiki_dialogue.heldout.txt.xz")
    dialogue = sentences([heldout[i - 1] for i in DIALOGUE_LINES], 8, 40)
    classical = [
        s
        for s in sentences(read_lines(corpus / "classical.heldout.txt.xz"), 10, 34)
        if all(char in vocab for char in s)
    ]
    rng.shuffle(dialogue)
    rng.shuffle(classical)
    items: list[dict[str, str]] = []
    for family, pool, take in (("modern", dialogue, 440), ("classical", classical, 360)):
        for number, text in enumerate(pool[:take]):
            if number % 2 == 0:
                items.append({"text": text, "correct": text, "category": f"{family}_clean"})
                continue
            wrong = corrupt(text, 1 if rng.random() < 0.7 else 2, sets, freq, rng)
            if wrong is not None:
                items.append({"text": wrong, "correct": text, "category": f"{family}_error"})
    idioms = read_lines(root / "src/tiankong/bundled/corpus/idioms.txt.xz")
    misspelled = {
        line.split("\t")[0]
        for line in (root / "src/tiankong/tasks/check/data/idiom_misspellings.txt")
        .read_text(encoding="utf-8")
        .splitlines()
    }
    common = [
        idiom for idiom in idioms if all(freq[c] >= 20 for c in idiom) and idiom not in misspelled
    ]
    rng.shuffle(common)
    for number, idiom in enumerate(common[:150]):
        sentence = TEMPLATES[number % len(TEMPLATES)].format(idiom)
        if number % 3 == 0:
            items.append({"text": sentence, "correct": sentence, "category": "idiom_clean"})
            continue
        wrong = corrupt(idiom, 1, sets, freq, rng)
        if wrong is not None:
            text = TEMPLATES[number % len(TEMPLATES)].format(wrong)
            items.append({"text": text, "correct": sentence, "category": "idiom_typo"})
    poems = sentences(
        read_lines(root / "src/tiankong/bundled/corpus/classical.txt.xz")[:60000], 10, 24
    )
    poems = [p for p in poems if all(char in vocab for char in p)]
    rng.shuffle(poems)
    for number, line in enumerate(poems[:150]):
        if number % 3 == 0:
            items.append({"text": line, "correct": line, "category": "poem_clean"})
            continue
        wrong = corrupt(line, 1, sets, freq, rng)
        if wrong is not None:
            items.append({"text": wrong, "correct": line, "category": "poem_typo"})
    out = root / "data" / "eval"
    for split in ("dev", "test"):
        chosen = [item for item in items if split_of(item["correct"]) == split]
        with (out / f"check_{split}.jsonl").open("w", encoding="utf-8") as handle:
            for item in chosen:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        print(split, len(chosen), Counter(item["category"] for item in chosen))


if __name__ == "__main__":
    main()
