"""Corpus index: fills grounded in a text collection (a suffix array over token ids).

>>> from tiankong.index import build_index, open_index, BlankLookup
>>> build_index(["notes.txt"], "notes-index")                       # doctest: +SKIP
>>> lookup = BlankLookup(open_index("notes-index"))                  # doctest: +SKIP
>>> match = lookup.lookup(left_ids, right_ids, fill_length=1)        # doctest: +SKIP
"""

from tiankong.index.build import build_index
from tiankong.index.combine import (
    FITTED_WEIGHT,
    IndexWeight,
    combine_distribution,
    combine_score,
)
from tiankong.index.lookup import BlankLookup, BlankMatch
from tiankong.index.store import CorpusIndex
from tiankong.index.tokens import default_tokenizer, tokenizer_fingerprint

open_index = CorpusIndex.open

__all__ = [
    "FITTED_WEIGHT",
    "BlankLookup",
    "BlankMatch",
    "CorpusIndex",
    "IndexWeight",
    "build_index",
    "combine_distribution",
    "combine_score",
    "default_tokenizer",
    "open_index",
    "tokenizer_fingerprint",
]
