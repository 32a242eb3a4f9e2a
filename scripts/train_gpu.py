"""Train the next bundled model on a lent GPU in one call of the device tool.

The device machine has its own Python with torch (CUDA), transformers and tokenizers, but not
tiankong's CLI dependencies and no network, so this drives `tiankong.training.train` directly with
``PYTHONPATH=src``. Its weights come back through $OUT, where a file may be at most 16 MiB: the
final model is saved in float16 and sent back as a tar file in pieces (docs/TRAINING.md, "On a
lent GPU").

    # here, once: the training text (one passage a line) and jieba's sdist, into ignored folders
    bash scripts/train_gpu.sh --prepare CORPUS_DIR
    # there (device tool): run(command="bash scripts/train_gpu.sh", carry=[".train-corpus", ".whl"])
    # a self-check of this script on a CPU, a few seconds:
    python scripts/train_gpu.py --corpus .train-corpus --out /tmp/gpu-check --device cpu --quick

It writes the trained HF folder (float16 weights, tokenizer, ``training.json``) as one tar file
cut into pieces of at most 15 MB, ``OUT/NAME.tar.00``, ``OUT/NAME.tar.01``, ..., and a log of the
held-out curve on stdout; here, ``cat OUT/NAME.tar.* | tar -x -C runs/NAME`` puts it back
together. The device tool returns at most 8 files, so two runs side by side (``--name a`` and
``--name b``, each with half the data workers) come back whole with their logs. A run ends by
``--minutes`` of training wall time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tarfile
import time
from pathlib import Path
from typing import Any


def training_modules() -> tuple[Any, Any]:
    """`tiankong.training.train` without the package's ``__init__``, which imports the serving
    stack (pydantic-settings, the corpus index), absent on the device machine; training needs
    only torch, transformers, tokenizers and jieba."""
    import types

    package = types.ModuleType("tiankong")
    package.__path__ = [str(Path(__file__).resolve().parent.parent / "src" / "tiankong")]
    sys.modules.setdefault("tiankong", package)
    from tiankong.training.train import TrainOptions, train

    return TrainOptions, train


# The recipe for the next bundled model: same shape as tiankong-mini-zh (so the same speed per
# sentence), per-character masking (the ablation in docs/TRAINING.md), the modern text (reviews,
# news, Wikipedia and dialogue) weighted up against the 21 M classical characters. The weights
# are per line: wiki_dialogue's lines are about 2.5 times as long as the others, so 0.10 of the
# lines is about a quarter of the tokens (its 2.4 M characters would otherwise be read hundreds
# of times over). On a GPU the batch is larger and the sequences longer; the LR decays over the
# time budget.
SOURCES = {
    "classical.txt.xz": 0.40,
    "modern.txt.xz": 0.35,
    "wiki_dialogue.txt.xz": 0.10,
    "idioms.txt.xz": 0.15,
}
HELDOUT = ("classical.heldout.txt.xz", "modern.heldout.txt.xz", "wiki_dialogue.heldout.txt.xz")
PIECE = 15 * 1000 * 1000  # bytes: the device tool returns files of at most 16 MiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder with the .txt.xz files")
    parser.add_argument("--out", type=Path, required=True, help="what comes back: model, log")
    parser.add_argument("--name", default="model", help="names the run's files in OUT")
    parser.add_argument("--work", type=Path, default=None, help="default /tmp/tiankong-gpu-NAME")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--minutes", type=float, default=7.0, help="training wall time")
    parser.add_argument("--config", default="mini")
    parser.add_argument("--masking", default="token")  # docs/TRAINING.md, the ablation
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)  # 44.2% against 1e-3's 42.4%
    parser.add_argument("--data-workers", type=int, default=12)
    parser.add_argument("--init", default=None, help="continue from this model instead")
    parser.add_argument("--quick", action="store_true", help="a tiny self-check on a CPU")
    args = parser.parse_args()

    missing = [name for name in [*SOURCES, *HELDOUT] if not (args.corpus / name).is_file()]
    if missing:
        print(f"train_gpu: {args.corpus} lacks {', '.join(missing)}", file=sys.stderr)
        return 2
    TrainOptions, train = training_modules()
    quick = dict(config="tiny", batch_size=8, seq_len=32, data_workers=0, minutes=0.2)
    settings = {**vars(args), **(quick if args.quick else {})}
    options = TrainOptions(
        out=args.work or Path(f"/tmp/tiankong-gpu-{args.name}"),
        data=tuple(f"{args.corpus / name}:{weight}" for name, weight in SOURCES.items()),
        heldout=tuple(str(args.corpus / name) for name in HELDOUT),
        init=args.init,
        config=None if args.init else settings["config"],
        position_init="random" if args.init else "sinusoidal",
        max_steps=10_000_000,
        max_time_s=settings["minutes"] * 60,
        batch_size=settings["batch_size"],
        seq_len=settings["seq_len"],
        lr=args.lr,
        warmup_steps=20 if args.quick else 500,
        eval_every=20 if args.quick else 1000,
        eval_lines=200 if args.quick else 2000,
        save_every=10**9,  # one call is the whole run: no resumable checkpoints to carry back
        shuffle_buffer=2_000 if args.quick else 300_000,
        seed=42,
        device=args.device,
        precision="auto",
        masking=args.masking,
        data_workers=settings["data_workers"],
        save_fp16=True,
    )
    started = time.monotonic()

    def report(state: object, metrics: dict[str, float]) -> None:
        if "heldout_accuracy" in metrics:
            line = {key: round(value, 4) for key, value in metrics.items()}
            line["wall_s"] = round(time.monotonic() - started, 1)
            print(json.dumps(line), flush=True)

    summary = train(options, report)
    record_machine(options.out / "training.json", args.device)
    pieces = save_pieces(options.out, args.out, args.name)
    print(
        f"train_gpu: {summary.steps} steps, {summary.tokens:,} tokens at "
        f"{summary.tokens_per_s:,.0f} tokens/s; held-out accuracy {summary.heldout_accuracy}; "
        f"{', '.join(pieces)}"
    )
    return 0


def record_machine(record_file: Path, device: str) -> None:
    """The machine and the command, in the run's training.json, for its model card
    (``scripts/training_stages.py`` keeps them per stage)."""
    import platform
    import shlex

    import torch

    record = json.loads(record_file.read_text(encoding="utf-8"))
    if device == "cuda" and torch.cuda.is_available():
        record["machine"] = (
            f"one {torch.cuda.get_device_name(0)} (bf16 autocast), "
            f"{os.cpu_count()} CPU cores for the data workers"
        )
    else:
        record["machine"] = f"{platform.machine()} CPU, {os.cpu_count()} cores"
    record["command"] = "python3 scripts/train_gpu.py " + shlex.join(sys.argv[1:])
    record_file.write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")


def save_pieces(run: Path, out: Path, name: str) -> list[str]:
    """The trained HF folder (train() saved it in float16), without the resumable checkpoint,
    as one tar file cut into pieces small enough for the device tool to send back."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(run.iterdir()):
            if path.is_file():
                archive.add(path, arcname=path.name)
    data = buffer.getvalue()
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for number, start in enumerate(range(0, len(data), PIECE)):
        piece = out / f"{name}.tar.{number:02d}"
        piece.write_bytes(data[start : start + PIECE])
        names.append(piece.name)
    return names


if __name__ == "__main__":
    raise SystemExit(main())
