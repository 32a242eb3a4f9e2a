"""Train the next bundled model on a lent GPU in one call of the device tool.

The device machine has its own Python with torch (CUDA), transformers and tokenizers, but not
tiankong's CLI dependencies and no network, so this drives `tiankong.training.train` directly with
``PYTHONPATH=src``. Its weights come back through $OUT, where a file may be at most 16 MiB: the
final model is saved in float16 and sharded (docs/TRAINING.md, "On a lent GPU").

    # here, once: the training text (one passage a line) and jieba's sdist, into ignored folders
    bash scripts/train_gpu.sh --prepare CORPUS_DIR
    # there (device tool): run(command="bash scripts/train_gpu.sh", carry=[".train-corpus", ".whl"])
    # a self-check of this script on a CPU, a few seconds:
    python scripts/train_gpu.py --corpus .train-corpus --out /tmp/gpu-check --device cpu --quick

It writes ``OUT/model`` (the HF folder, float16, shards of at most 15 MB), ``OUT/training.json``
and a log of the held-out curve on stdout. A run ends by ``--minutes`` of training wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
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
# news, Wikipedia and dialogue) weighted up against the 17.8 M classical characters. On a GPU
# the batch is larger and the sequences longer; the LR decays over the time budget.
SOURCES = {
    "classical.txt.xz": 0.30,
    "modern.txt.xz": 0.25,
    "wiki_dialogue.txt.xz": 0.30,
    "idioms.txt.xz": 0.15,
}
HELDOUT = ("classical.heldout.txt.xz", "modern.heldout.txt.xz", "wiki_dialogue.heldout.txt.xz")
SHARD = "15MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder with the .txt.xz files")
    parser.add_argument("--out", type=Path, required=True, help="what comes back: model, log")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tiankong-gpu-run"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--minutes", type=float, default=7.0, help="training wall time")
    parser.add_argument("--config", default="mini")
    parser.add_argument("--masking", default="token")  # docs/TRAINING.md, the ablation
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
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
        out=args.work,
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
    save_sharded(options.out, args.out / "model")
    (args.out / "training.json").write_text((options.out / "training.json").read_text())
    print(
        f"train_gpu: {summary.steps} steps, {summary.tokens:,} tokens at "
        f"{summary.tokens_per_s:,.0f} tokens/s; held-out accuracy {summary.heldout_accuracy}"
    )
    return 0


def save_sharded(run: Path, folder: Path) -> None:
    """The trained HF folder again, in shards small enough for the device tool to send back."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(run)
    model.half().save_pretrained(folder, max_shard_size=SHARD)
    AutoTokenizer.from_pretrained(run).save_pretrained(folder)


if __name__ == "__main__":
    raise SystemExit(main())
