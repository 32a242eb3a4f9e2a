"""Tokenizer side of the index: the default tokenizer, its fingerprint, and fast corpus encoding.

The index stores token ids, so it is only meaningful for a model with the same tokenizer. The
fingerprint (vocabulary in id order plus the ids of a probe string, which captures the
normaliser's casing and accent rules) is recorded in the manifest and checked on open.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from tiankong.errors import IndexInputError

VOCAB_FILE = Path(__file__).resolve().parent.parent / "resources" / "vocab.txt"
SEPARATOR = 0  # [PAD] in BERT vocabularies: between passages, so no match crosses one
DEFAULT_TOKENIZER = "bert-base-chinese"  # what default_tokenizer reads text with
TOKEN_DTYPE = np.dtype(">u2")  # big-endian: byte order equals token order for the suffix array
# Letters, digits, accents and width forms: the probe exposes the normaliser's rules.
FINGERPRINT_PROBE = "AbC ａＢ Éé ß 123 中文，。！“”—…"
_UNSAFE = -1  # a character whose token depends on its neighbours (letters, digits)
_DROPPED = -2  # whitespace and control characters: no token, and they only split words


def default_tokenizer() -> Tokenizer:
    """The bert-base-chinese tokenizer (cased, Chinese characters split), as the bundled model."""
    tokenizer = BertWordPieceTokenizer(
        str(VOCAB_FILE), lowercase=False, strip_accents=None, handle_chinese_chars=True
    )._tokenizer
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """sha256 over the vocabulary in id order and the probe's ids."""
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    probe = tokenizer.encode(FINGERPRINT_PROBE, add_special_tokens=False).ids
    digest = hashlib.sha256("\n".join(tokens).encode("utf-8"))
    digest.update(("\0" + ",".join(map(str, probe))).encode("ascii"))
    return digest.hexdigest()


class CorpusEncoder:
    """Encodes many passages to one separator-delimited id array, exactly as ``tokenizer`` would.

    Chinese text is nearly all characters that BERT splits off on their own (Han characters and
    punctuation), so those are looked up in a per-code-point table; a passage with any other
    character (a letter, a digit) goes through the real tokenizer. Both paths give the same ids
    (tests/index/test_tokens.py checks it against the tokenizer).
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        if tokenizer.get_vocab_size() > np.iinfo(TOKEN_DTYPE).max:
            raise IndexInputError(
                f"The tokenizer's vocabulary has {tokenizer.get_vocab_size():,} tokens, more "
                "than the 65,535 a corpus index can hold (its token ids are 2 bytes); use this "
                "model with --index none."
            )
        self.tokenizer = tokenizer
        self.table = np.full(0x110000, _UNSAFE - 1, dtype=np.int32)  # UNSAFE-1: not classified
        anchor = tokenizer.encode("a", add_special_tokens=False).ids
        self.anchor = anchor if len(anchor) == 1 else None

    def classify(self, code_points: np.ndarray) -> None:
        """Fill the table for code points not seen before."""
        new = np.unique(code_points[self.table[code_points] == _UNSAFE - 1])
        chars = [chr(int(c)) for c in new]
        alone = self.tokenizer.encode_batch(chars, add_special_tokens=False)
        framed = self.tokenizer.encode_batch([f"a{c}a" for c in chars], add_special_tokens=False)
        for code, one, three in zip(new, alone, framed, strict=True):
            if self.anchor is None:  # no single-token letter to frame with: always slow path
                self.table[code] = _UNSAFE
            elif not one.ids:
                self.table[code] = _DROPPED if three.ids == self.anchor * 2 else _UNSAFE
            elif (
                self.anchor
                and len(one.ids) == 1
                and three.ids
                == [
                    *self.anchor,
                    one.ids[0],
                    *self.anchor,
                ]
            ):
                self.table[code] = one.ids[0]
            else:
                self.table[code] = _UNSAFE

    def encode(self, passages: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, starts)``: SEPARATOR, then the ids of every passage each followed by
        SEPARATOR; ``starts`` says where each passage's ids begin. No passage may hold a newline.
        """
        if not passages:
            return np.array([SEPARATOR], dtype=TOKEN_DTYPE), np.ones(1, dtype=np.int64)
        joined = "\n".join(passages)
        code_points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        newline = code_points == 10
        self.classify(code_points[~newline])
        mapped = np.where(newline, SEPARATOR, self.table[np.where(newline, 0, code_points)])
        passage_of = np.cumsum(newline) - newline  # passage number of every code point
        unsafe = np.zeros(len(passages), dtype=bool)
        unsafe[passage_of[mapped == _UNSAFE]] = True
        slow = dict(self.slow_encode(passages, np.flatnonzero(unsafe)))
        # Every passage's code points, then a SEPARATOR where its newline is (and one after the
        # last): kept where they map to a token, so a run of fast passages is one slice; only
        # the slow passages are cut out and their tokenizer ids put in.
        tokens = np.append(mapped, SEPARATOR)
        bounds = np.concatenate([[0], np.flatnonzero(newline) + 1, [len(code_points) + 1]])
        pieces: list[np.ndarray] = [np.array([SEPARATOR], dtype=np.int64)]
        cursor = 0
        for i in sorted(slow):
            piece = tokens[cursor : bounds[i]]
            pieces += [piece[piece >= 0], slow[i], np.array([SEPARATOR], dtype=np.int64)]
            cursor = bounds[i + 1]
        piece = tokens[cursor:]
        pieces.append(piece[piece >= 0])
        # each passage's length: its kept code points (or its slow ids), and its SEPARATOR
        kept = (mapped >= 0) & ~newline
        lengths = np.bincount(passage_of[kept], minlength=len(passages)) + 1
        for i, ids in slow.items():
            lengths[i] = len(ids) + 1
        ids = np.concatenate(pieces).astype(TOKEN_DTYPE)
        starts = 1 + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return ids, starts

    def slow_encode(
        self, passages: Sequence[str], which: np.ndarray
    ) -> list[tuple[int, np.ndarray]]:
        encodings = self.tokenizer.encode_batch(
            [passages[i] for i in which], add_special_tokens=False
        )
        return [
            (int(i), np.array(e.ids, dtype=np.int64)) for i, e in zip(which, encodings, strict=True)
        ]
