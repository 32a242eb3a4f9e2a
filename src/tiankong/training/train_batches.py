"""Training batches: streamed pretraining text, CSV cloze rows, and the fixed held-out set."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from tiankong.errors import BadDataFileError
from tiankong.training.masking import MaskingPlan, word_masked_batches
from tiankong.training.train_data import (
    ClozeRow,
    TextSource,
    is_csv,
    mixed_lines,
    packed_sequences,
    read_cloze_csv,
    read_lines,
    shuffled,
    spec_path,
)
from tiankong.training.train_options import TrainOptions


def prefetched_batches(
    options: TrainOptions, tokenizer: Any, collator: Any, device: Any
) -> Iterator[dict[str, Any]]:
    """Pretraining batches prepared by ``options.data_workers`` processes (a torch DataLoader).

    Worker ``n`` runs its own stream seeded with ``seed + n`` over its own share of each file's
    lines (every ``data_workers``-th line), and the loader takes batches from the workers in
    turn, so a run is repeatable for a given worker count. Without the shares every worker
    would read the same lines at about the same time: the run would see each line once per
    worker in a short span instead of spread over the whole run.
    """
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class BatchStream(IterableDataset):
        def __iter__(self) -> Iterator[dict[str, Any]]:
            worker = get_worker_info()
            offset = worker.id if worker is not None else 0
            shards = worker.num_workers if worker is not None else 1
            torch.manual_seed(options.seed + offset)
            rng = random.Random(options.seed + offset)
            return pretraining_batches(options, tokenizer, collator, rng, offset, shards)

    loader = DataLoader(
        BatchStream(),
        batch_size=None,
        num_workers=options.data_workers,
        pin_memory=device.type == "cuda",
        prefetch_factor=4,
        persistent_workers=True,
        worker_init_fn=leave_signals_to_the_run,
    )
    return iter(loader)


def leave_signals_to_the_run(worker: int) -> None:
    """A worker ignores Ctrl-C and SIGTERM: sent to the whole process group (a terminal, a
    container's stop), they killed the workers first, and the run's next batch failed with
    "DataLoader worker exited unexpectedly" before it could stop after its step and save."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def pretraining_batches(
    options: TrainOptions,
    tokenizer: Any,
    collator: Any,
    rng: random.Random,
    shard: int = 0,
    shards: int = 1,
) -> Iterator[dict[str, Any]]:
    sources = [TextSource.parse(spec) for spec in options.data]
    pieces = mixed_lines(sources, rng, shard, shards, options.seq_len * LINE_WINDOW_PER_TOKEN)
    lines = shuffled(pieces, options.shuffle_buffer, rng)
    if options.masking != "token":
        plan = MaskingPlan(
            rate=options.mask_rate,
            kind=options.masking,
            mask_id=tokenizer.mask_token_id,
            vocab_size=len(tokenizer),
            special_ids=frozenset(tokenizer.all_special_ids),
        )
        yield from word_masked_batches(
            lines, tokenizer, options.seq_len, options.batch_size, plan, rng
        )
        return

    def token_lists() -> Iterator[list[int]]:
        chunk: list[str] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) == 256:
                encoded = tokenizer(chunk, add_special_tokens=False)["input_ids"]
                yield from encoded
                chunk = []

    sequences = packed_sequences(
        token_lists(), options.seq_len, tokenizer.cls_token_id, tokenizer.sep_token_id, rng
    )
    while True:
        group = [next(sequences) for _ in range(options.batch_size)]
        yield collator([{"input_ids": ids} for ids in group])


# A line longer than this many characters a token of --seq-len is read as consecutive pieces
# of that many (``train_data.pieces``), before the shuffle buffer holds it: a sequence takes one
# window of a piece's tokens anyway (``packed_sequences``), and the buffer of --shuffle-buffer
# whole lines grew with their length (lines of 5,000 characters took 2.6 GB, one of 40,000 17.7
# GB); cut into pieces, a line's every part is drawn (a random window of it was, until the
# thirty-sixth session), and a file of a few long lines is not read again for each line the
# buffer takes. Even Latin text, several characters a token, fills a sequence from such a
# piece; lines of ordinary length are untouched.
LINE_WINDOW_PER_TOKEN = 16


def cloze_batches(
    rows: list[ClozeRow], tokenizer: Any, batch_size: int, rng: random.Random
) -> Iterator[dict[str, Any]]:
    """Fine-tuning batches: labels only at the [MASK]s, in order, padded per batch."""
    import torch

    order = list(range(len(rows)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            chunk = [rows[index] for index in order[start : start + batch_size]]
            yield encode_cloze_rows(chunk, tokenizer, torch)


def encode_cloze_rows(rows: list[ClozeRow], tokenizer: Any, torch: Any) -> dict[str, Any]:
    """Rows padded to the longest; never cut: ``read_csv_rows`` kept them within the model."""
    encoded = tokenizer([row.text for row in rows], padding=True, return_tensors="pt")
    labels = torch.full_like(encoded["input_ids"], -100)
    for index, row in enumerate(rows):
        positions = (encoded["input_ids"][index] == tokenizer.mask_token_id).nonzero().flatten()
        count = min(len(positions), len(row.label_ids))
        labels[index, positions[:count]] = torch.tensor(row.label_ids[:count])
    return {
        "input_ids": encoded["input_ids"],
        "attention_mask": encoded["attention_mask"],
        "labels": labels,
    }


def read_csv_rows(
    specs: tuple[str, ...], tokenizer: Any, positions: int, skip_bad_rows: bool, flag: str
) -> tuple[list[ClozeRow], int]:
    """The good rows of ``specs``' CSV files and how many bad ones were skipped; a row longer
    than the model's ``positions`` is a bad row (by line number, like the others)."""
    vocab = tokenizer.get_vocab()

    def count_tokens(text: str) -> int:
        return len(tokenizer(text)["input_ids"])

    rows: list[ClozeRow] = []
    skipped = 0
    for spec in specs:
        good, problems = read_cloze_csv(
            spec_path(spec), vocab, skip_bad_rows, flag, count_tokens, positions
        )
        rows += good
        skipped += len(problems)
    return rows, skipped


def heldout_batches(
    options: TrainOptions, tokenizer: Any, collator: Any, positions: int
) -> tuple[list[dict[str, Any]], int]:
    """A fixed evaluation set: the same masks every time, without touching the training RNG;
    and the number of bad held-out CSV rows skipped (--skip-bad-rows, as for --data)."""
    import torch

    if not options.heldout:
        return [], 0
    if all(is_csv(spec) for spec in options.heldout):
        rows, skipped = read_csv_rows(
            options.heldout, tokenizer, positions, options.skip_bad_rows, "--heldout"
        )
        batches = [
            encode_cloze_rows(rows[start : start + 64], tokenizer, torch)
            for start in range(0, len(rows), 64)
        ]
        return batches, skipped
    lines: list[str] = []
    for spec in options.heldout:
        source = TextSource.parse(spec, "--heldout")
        for count, line in enumerate(read_lines(source.path, "--heldout")):
            if count >= options.eval_lines:
                break
            lines.append(line)
    encoded = tokenizer(
        lines, add_special_tokens=True, truncation=True, max_length=options.seq_len
    )["input_ids"]
    batches = []
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        for start in range(0, len(encoded), 64):
            batches.append(collator([{"input_ids": ids} for ids in encoded[start : start + 64]]))
    if not any(bool((batch["labels"] != -100).any()) for batch in batches):
        # its loss and accuracy were NaN, in the summary and training.json, exit 0 (a review)
        raise BadDataFileError(
            f"--heldout {', '.join(options.heldout)} gives no token to score: its lines are too "
            "short for a mask, or hold only characters the vocabulary lacks (emoji, rare "
            "symbols); give more held-out text."
        )
    return batches, 0
