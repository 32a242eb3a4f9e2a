"""Masking for pretraining: per character, whole words, or n-grams of whole words.

The Chinese vocabulary is one token per character, so BERT's per-token masking hides single
characters of words whose other characters stay visible: the model learns to finish a word it
can half see. Whole-word masking (Chinese-BERT-wwm) hides every character of a word together,
with words from jieba's segmentation; n-gram masking (MacBERT) hides runs of one to four whole
words, the longer runs less often. Both keep BERT's 80/10/10 split, decided once per masked
span, and the same masked share of the tokens.

Example::

    words = segmented_lines(["春眠不觉晓"], tokenizer)   # [[[id, id], [id, id], [id]]]
    ids, word_ids = next(packed_word_sequences(words, 64, cls_id, sep_id, random.Random(0)))
    batch = mask_spans([ids], [word_ids], MaskingPlan(...), random.Random(0))
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MASKING_KINDS = ("token", "word", "ngram")
# MacBERT's n-gram lengths (in words) and their probabilities.
NGRAM_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
IGNORE = -100  # the label of a position the loss skips


@dataclass(frozen=True)
class MaskingPlan:
    """What to hide: the share of tokens, the unit, and the ids the replacements use."""

    rate: float
    kind: str  # word | ngram
    mask_id: int
    vocab_size: int
    special_ids: frozenset[int]


def segmented_lines(
    lines: Iterable[str], tokenizer: Any, chunk: int = 256
) -> Iterator[list[list[int]]]:
    """Each line as a list of words, each word as its token ids (jieba's default mode).

    Tokenization runs on chunks of lines with the words pre-split, so a token never straddles
    two words; a word the tokenizer drops (whitespace) is left out.
    """
    import jieba

    jieba.setLogLevel(60)  # the dictionary-loading messages are not the user's business
    batch: list[list[str]] = []
    for line in lines:
        batch.append(jieba.lcut(line))
        if len(batch) == chunk:
            yield from _word_tokens(batch, tokenizer)
            batch = []
    if batch:
        yield from _word_tokens(batch, tokenizer)


def _word_tokens(batch: list[list[str]], tokenizer: Any) -> Iterator[list[list[int]]]:
    encoded = tokenizer(batch, is_split_into_words=True, add_special_tokens=False)
    for index, ids in enumerate(encoded["input_ids"]):
        words: list[list[int]] = []
        previous = None
        for token, word in zip(ids, encoded.word_ids(index), strict=True):
            if word != previous:
                words.append([])
                previous = word
            words[-1].append(token)
        yield words


def packed_word_sequences(
    lines: Iterator[list[list[int]]], seq_len: int, cls_id: int, sep_id: int, rng: random.Random
) -> Iterator[tuple[list[int], list[int]]]:
    """Pack segmented passages into ``[CLS] a [SEP] b [SEP] ...`` of exactly ``seq_len`` ids.

    The same packing as ``train_data.packed_sequences`` (a long passage gives a random window of
    whole words), with a word number per position beside the ids: -1 for the special tokens.
    """
    body = seq_len - 2  # [CLS] and one [SEP]
    ids: list[int] = [cls_id]
    word_ids: list[int] = [-1]
    word = 0
    for words in lines:
        if sum(len(item) for item in words) > body:
            words = _window(words, body, rng)
        size = sum(len(item) for item in words)
        if len(ids) + size + 1 > seq_len:
            ids.extend([sep_id] * (seq_len - len(ids)))
            word_ids.extend([-1] * (seq_len - len(word_ids)))
            yield ids, word_ids
            ids, word_ids, word = [cls_id], [-1], 0
        for item in words:
            ids.extend(item)
            word_ids.extend([word] * len(item))
            word += 1
        ids.append(sep_id)
        word_ids.append(-1)


def _window(words: list[list[int]], body: int, rng: random.Random) -> list[list[int]]:
    """A random run of whole words that fits ``body`` tokens (a too-long word is cut)."""
    start = rng.randrange(len(words))
    taken: list[list[int]] = []
    size = 0
    for item in words[start:]:
        if size + len(item) > body:
            break
        taken.append(item)
        size += len(item)
    if not taken:
        taken = [words[start][:body]]
    return taken


def mask_spans(
    batch_ids: list[list[int]],
    batch_word_ids: list[list[int]],
    plan: MaskingPlan,
    rng: random.Random,
) -> dict[str, Any]:
    """A training batch: ``input_ids``, ``attention_mask`` and ``labels`` tensors.

    Spans of whole words are drawn in random order until ``plan.rate`` of the sequence's
    non-special tokens are chosen (a span that would overshoot is skipped, as in BERT's
    ``create_pretraining_data``). Each chosen span becomes [MASK] (80%), random tokens (10%) or
    stays as it is (10%); the labels are the original ids there and ignored elsewhere.
    """
    import torch

    inputs = torch.tensor(batch_ids)
    labels = torch.full_like(inputs, IGNORE)
    for row, (ids, word_ids) in enumerate(zip(batch_ids, batch_word_ids, strict=True)):
        for start, end in _chosen_spans(ids, word_ids, plan, rng):
            labels[row, start:end] = inputs[row, start:end]
            draw = rng.random()
            if draw < 0.8:
                inputs[row, start:end] = plan.mask_id
            elif draw < 0.9:
                inputs[row, start:end] = torch.tensor(
                    [rng.randrange(plan.vocab_size) for _ in range(end - start)]
                )
    return {
        "input_ids": inputs,
        "attention_mask": torch.ones_like(inputs),
        "labels": labels,
    }


def _chosen_spans(
    ids: list[int], word_ids: list[int], plan: MaskingPlan, rng: random.Random
) -> list[tuple[int, int]]:
    words: list[tuple[int, int]] = []  # [start, end) of each word, in order
    for position, (token, word) in enumerate(zip(ids, word_ids, strict=True)):
        if word < 0 or token in plan.special_ids:
            continue
        if words and word_ids[words[-1][0]] == word:
            words[-1] = (words[-1][0], position + 1)
        else:
            words.append((position, position + 1))
    tokens = sum(end - start for start, end in words)
    budget = max(1, round(tokens * plan.rate)) if tokens else 0
    order = list(range(len(words)))
    rng.shuffle(order)
    covered = [False] * len(words)
    spans: list[tuple[int, int]] = []
    chosen = 0
    for first in order:
        if chosen >= budget:
            break
        length = 1
        if plan.kind == "ngram":
            length = rng.choices(range(1, len(NGRAM_WEIGHTS) + 1), weights=NGRAM_WEIGHTS)[0]
        last = first + 1  # a run of words never crosses a [SEP] into the next passage
        while last < min(first + length, len(words)) and words[last][0] == words[last - 1][1]:
            last += 1
        if any(covered[first:last]):
            continue
        size = words[last - 1][1] - words[first][0]
        if chosen + size > budget:
            continue
        covered[first:last] = [True] * (last - first)
        spans.append((words[first][0], words[last - 1][1]))
        chosen += size
    return spans


def word_masked_batches(
    lines: Iterator[str],
    tokenizer: Any,
    seq_len: int,
    batch_size: int,
    plan: MaskingPlan,
    rng: random.Random,
) -> Iterator[dict[str, Any]]:
    """Endless pretraining batches with whole-word (or n-gram) masks, from shuffled lines."""
    sequences = packed_word_sequences(
        segmented_lines(lines, tokenizer),
        seq_len,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        rng,
    )
    while True:
        group = [next(sequences) for _ in range(batch_size)]
        yield mask_spans([ids for ids, _ in group], [words for _, words in group], plan, rng)
