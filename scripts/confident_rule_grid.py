"""Right answers turned wrong, and wrong ones right, under settings of the index's rule for a
sure model against a short match (index.combine: CONFIDENT_MODEL, CONFIDENT_MODEL_RATIO,
SHORT_MATCH_HAN; docs/INDEX.md, "A confident answer against a short match").

    python scripts/confident_rule_grid.py reviews --corpus CORPUS_DIR [SETTINGS ...]
    python scripts/confident_rule_grid.py data/eval/check_dev.jsonl [SETTINGS ...]

Each SETTING is ``confident/floor/short`` (e.g. ``0.4/0.1/8``); ``off`` is the rule off. Every
Han character of the texts is masked in turn and filled with the bundled model, with the index
and without. ``reviews``: 400 review lines of CORPUS_DIR's modern.txt after the first 5,000 that
scripts/user_index_flips.py measures (so the two don't share a line), against an index of
modern.heldout and classical.heldout; a split file: its clean sentences against the bundled
index (scripts/index_flips.py). The dev split is where a rule may be chosen; test is reported.
"""

from __future__ import annotations

import argparse
import lzma
import tempfile
from collections import Counter
from pathlib import Path

import index_flips
import user_index_flips

from tiankong import FillMasker, Settings
from tiankong.index import build_index, combine

BATCH = 64
SKIP_LINES = 5000
REVIEW_LINES = 400


def review_lines(corpus: Path) -> list[str]:
    """The 400 usable review lines after the first 5,000 (user_index_flips draws from those),
    by its rule: 10 to 60 characters, not in modern.heldout."""
    with lzma.open(corpus / "modern.heldout.txt.xz", "rt", encoding="utf-8") as handle:
        held = set(handle.read().splitlines())
    usable = 0
    lines: list[str] = []
    with lzma.open(corpus / "modern.txt.xz", "rt", encoding="utf-8") as handle:
        for raw in handle:
            line = raw.strip()
            if 10 <= len(line) <= 60 and line not in held:
                usable += 1
                if usable > SKIP_LINES:
                    lines.append(line)
            if len(lines) >= REVIEW_LINES:
                break
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("texts", help="'reviews' or a proofreading split (JSONL)")
    parser.add_argument("settings", nargs="*", default=["off", "0.4/0.1/8"])
    parser.add_argument("--corpus", type=Path, help="the public corpus folder (for reviews)")
    args = parser.parse_intermixed_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.texts == "reviews":
            if args.corpus is None:
                parser.error("reviews needs --corpus")
            items = [
                (f"{line[:at]}[MASK]{line[at + 1 :]}", char, "review")
                for line in review_lines(args.corpus)
                for at, char in enumerate(line)
                if user_index_flips.is_han(char)
            ]
            sources = [args.corpus / f"{name}.heldout.txt.xz" for name in ("modern", "classical")]
            build_index(sources, Path(folder) / "idx", progress=False)
            index = str(Path(folder) / "idx")
        else:
            items = index_flips.masked_items(Path(args.texts))
            index = "bundled"
        masker = FillMasker.load(index=index, settings=Settings(result_cache_size=0))

        def answers(use_index: bool) -> list[str]:
            found = []
            for start in range(0, len(items), BATCH):
                texts = [text for text, _, _ in items[start : start + BATCH]]
                results = masker.predict_batch(texts, top_k=1, index=use_index)
                found += [result.masks[0][0].token for result in results]
            return found

        alone = answers(False)
        for setting in args.settings:
            if setting == "off":
                combine.CONFIDENT_MODEL = 2.0  # no model is that sure
            else:
                sure, floor, short = setting.split("/")
                combine.CONFIDENT_MODEL, combine.CONFIDENT_MODEL_RATIO = float(sure), float(floor)
                combine.SHORT_MATCH_HAN = int(short)
            counts: Counter[tuple[str, str]] = Counter()
            for (_, answer, category), off, on in zip(items, alone, answers(True), strict=True):
                counts[category, "blanks"] += 1
                counts[category, "right_to_wrong"] += off == answer != on
                counts[category, "wrong_to_right"] += off != answer == on
            shown = ", ".join(
                f"{category} {counts[category, 'right_to_wrong']} / "
                f"{counts[category, 'wrong_to_right']}"
                for category in dict.fromkeys(category for _, _, category in items)
            )
            print(f"{setting}: {shown}", flush=True)


if __name__ == "__main__":
    main()
