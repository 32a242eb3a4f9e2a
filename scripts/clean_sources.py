"""Clean the bundled index's sources, by generic rules backed by attestation (docs/INDEX.md,
"Clean sources").

    python scripts/clean_sources.py variants CORPUS_DIR  # writes resources/variants.tsv
    python scripts/clean_sources.py idioms CORPUS_DIR    # rewrites bundled/corpus/idioms.txt.xz

``variants``: the regional and Japanese variant characters that OpenCC's own tables (its
JPShinjitai, TWVariantsRev and HKVariantsRev dictionaries, read with the wheel's
``opencc_dict``) map to a traditional form whose simplified form ``s`` differs from the
character ``c``, while OpenCC's t2s leaves ``c`` alone (隣 -> 鄰 -> 邻). Such a pair is only a
variant in Chinese text when the text says so: ``c -> s`` is kept when ``s`` is at least
VARIANT_ATTESTATION times as frequent as ``c`` in the shipped text (隣 542 : 邻 6,103 is kept;
芸 608 : 艺 2,393, a character of its own in Chinese, is not).

``idioms``: an entry of the idiom list that never occurs in the other text (classical poems and
prose, xiehouyu, and the corpus's modern text, counted only) while another entry of the list,
one character away, occurs there at least TYPO_ATTESTATION times is a typo of that entry
(画龙点晴 0 : 画龙点睛 1+), where modern usage agrees (scripts/modern_usage.py, jieba's
dictionary: the text is mostly classical, and took 吃里扒外, 惹是生非 and 不值一钱 for typos of
吃里爬外, 惹事生非 and 不直一钱): it is dropped, and so is every entry of the proofreader's
misspelling list (tasks/check/data/idiom_misspellings.txt, from make_idiom_misspellings.py,
which reads the list as published). The list is read as published, from
CORPUS_DIR/idioms.txt.xz. Nothing is special-cased.
"""

from __future__ import annotations

import argparse
import lzma
import subprocess
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

VARIANT_ATTESTATION = 10
TYPO_ATTESTATION = 2
BUNDLED = Path("src/tiankong/bundled/corpus")
VARIANTS = Path("src/tiankong/resources/variants.tsv")
TABLES = ("JPShinjitaiCharacters", "JPShinjitaiCharactersRev", "TWVariantsRev", "HKVariantsRev")


def lines_of(path: Path) -> list[str]:
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def opencc_table(name: str) -> list[tuple[str, list[str]]]:
    import opencc

    clib = Path(opencc.__file__).parent / "clib"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / f"{name}.txt"
        subprocess.run(
            [
                str(clib / "bin/opencc_dict"),
                "-i",
                str(clib / f"share/opencc/{name}.ocd2"),
                "-o",
                str(out),
                "-f",
                "ocd2",
                "-t",
                "text",
            ],
            check=True,
        )
        rows = [line.rstrip("\n").split("\t") for line in out.read_text("utf-8").splitlines()]
    return [(key, values.split(" ")) for key, values in rows]


def variants(corpus: Path) -> None:
    import opencc

    t2s = opencc.OpenCC("t2s")
    counts: Counter[str] = Counter()
    for name in ("classical.txt.xz", "xiehouyu.txt.xz", "idioms.txt.xz"):
        for line in lines_of(BUNDLED / name):
            counts.update(line)
    proposed: dict[str, set[str]] = defaultdict(set)
    for table in TABLES:
        for key, values in opencc_table(table):
            if len(key) != 1 or t2s.convert(key) != key:
                continue
            for value in values:
                simplified = t2s.convert(value)
                if len(simplified) == 1 and simplified != key:
                    proposed[key].add(simplified)
    kept = {}
    for char, targets in sorted(proposed.items()):
        best = max(sorted(targets), key=lambda s: counts[s])
        if counts[best] > 0 and counts[best] >= VARIANT_ATTESTATION * counts[char]:
            kept[char] = best
    header = (
        "# Variant characters folded to their standard simplified form at index build and lookup\n"
        "# (tiankong.core.script.standard). Made by scripts/clean_sources.py variants from\n"
        "# OpenCC's dictionaries (https://github.com/BYVoid/OpenCC, Apache License 2.0) and the\n"
        f"# shipped text's counts (kept when the standard form is >= {VARIANT_ATTESTATION}x as"
        " frequent).\n"
    )
    VARIANTS.write_text(header + "".join(f"{c}\t{s}\n" for c, s in kept.items()), "utf-8")
    print(f"{len(proposed)} variant characters proposed by OpenCC's tables, {len(kept)} kept")


def idioms(corpus: Path) -> None:
    from modern_usage import agreed, modern_usage

    entries = lines_of(corpus / "idioms.txt.xz")  # as published: the bundled one is cleaned
    usage = modern_usage()
    keys: dict[str, list[tuple[str, int]]] = defaultdict(list)  # one position blanked
    for entry in set(entries):
        for i in range(len(entry)):
            keys[entry[:i] + "\0" + entry[i + 1 :]].append((entry, i))
    lengths = {len(entry) for entry in entries}
    listed = set(entries)
    seen: Counter[str] = Counter()  # occurrences of each entry in the other text
    others = [BUNDLED / "classical.txt.xz", BUNDLED / "xiehouyu.txt.xz", corpus / "modern.txt.xz"]
    for path in others:
        for line in lines_of(path):
            for n in lengths:
                for start in range(len(line) - n + 1):
                    gram = line[start : start + n]
                    if gram in listed:
                        seen[gram] += 1
    typos = {}
    for entry in listed:
        if seen[entry]:
            continue
        near = [g for i in range(len(entry)) for g, _ in keys[entry[:i] + "\0" + entry[i + 1 :]]]
        attested = [(seen[g], g) for g in near if seen[g] >= TYPO_ATTESTATION]
        agreeing = [(count, g) for count, g in attested if agreed(entry, g, usage)]
        if agreeing:
            typos[entry] = max(agreeing)[1]
    # and every misspelling the proofreader fixes (make_idiom_misspellings.py), so the index
    # never answers with a form the checker calls wrong (打家截舍 is seen in the other text)
    misspellings = Path("src/tiankong/tasks/check/data/idiom_misspellings.txt")
    for line in misspellings.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            wrong, right, _count = line.split("\t")
            typos.setdefault(wrong, right)
    kept = [entry for entry in entries if entry not in typos]
    with lzma.open(BUNDLED / "idioms.txt.xz", "wt", encoding="utf-8", preset=9) as handle:
        handle.write("".join(f"{entry}\n" for entry in kept))
    print(f"{len(entries)} idiom entries, {len(typos)} dropped as typos, {len(kept)} kept")
    for entry, form in sorted(typos.items()):
        print(f"  {entry} -> {form} ({seen[form]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("variants", "idioms"))
    parser.add_argument("corpus", type=Path, help="the corpus folder (modern.txt.xz for counts)")
    args = parser.parse_args()
    (variants if args.what == "variants" else idioms)(args.corpus)


if __name__ == "__main__":
    main()
