"""`tiankong train`: masked-LM pretraining on raw text and cloze fine-tuning on CSV.

A plain torch loop on top of transformers' model classes and masking collator. The MLM head is
computed only at masked positions: on a 21,128-entry vocabulary the projection costs more than
a small encoder, so this is the single biggest saving on a CPU.

Example::

    tiankong train --config mini --data corpus.txt.xz --heldout heldout.txt.xz \\
        --out runs/mini --max-time 60m
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tiankong.errors import BadOptionError
from tiankong.training.train_batches import (
    cloze_batches,
    heldout_batches,
    prefetched_batches,
    pretraining_batches,
)
from tiankong.training.train_data import ClozeRow, read_cloze_csv
from tiankong.training.train_options import (
    CHECKPOINT_DIR,
    MODEL_CONFIGS,
    TrainOptions,
    validate_options,
)

__all__ = ["CHECKPOINT_DIR", "MODEL_CONFIGS", "TrainOptions", "TrainSummary", "train"]


@dataclass
class TrainState:
    step: int = 0
    sequences_seen: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class TrainSummary:
    out: str
    steps: int
    tokens: int
    wall_time_s: float
    tokens_per_s: float
    final_train_loss: float
    heldout_loss: float | None
    heldout_accuracy: float | None
    history: list[dict[str, float]]


def load_starting_point(options: TrainOptions) -> tuple[Any, Any]:
    """Model and tokenizer from --init (folder or hub id) or a named --config."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertForMaskedLM

    from tiankong.core.models import VOCAB_FILE
    from tiankong.model_sources import resolve_model

    if options.resume and (options.out / CHECKPOINT_DIR / "config.json").is_file():
        folder = options.out / CHECKPOINT_DIR
        model = AutoModelForMaskedLM.from_pretrained(folder, dtype=torch.float32)
        return model, AutoTokenizer.from_pretrained(folder)
    if options.init:
        resolved = resolve_model(options.init)
        # FP32 master weights whatever the file holds: the bundled model is stored in float16,
        # and training float16 weights under bf16 autocast fails on mixed dtypes.
        model = AutoModelForMaskedLM.from_pretrained(resolved.path, dtype=torch.float32)
        return model, AutoTokenizer.from_pretrained(resolved.path)
    name = options.config or ""  # validate_options: --init or --config unless resuming
    if name not in MODEL_CONFIGS:
        raise BadOptionError(
            f"Unknown --config '{name}'; choose one of {', '.join(MODEL_CONFIGS)} or pass --init."
        )
    from transformers import BertTokenizer  # the tokenizers-backed (fast) class in v5

    tokenizer = BertTokenizer(str(VOCAB_FILE), do_lower_case=False)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, max_position_embeddings=512, **MODEL_CONFIGS[name]
    )
    model = BertForMaskedLM(config)
    if options.position_init == "sinusoidal":
        sinusoidal_positions(model.bert.embeddings.position_embeddings.weight, config)
    return model, tokenizer


def sinusoidal_positions(weight: Any, config: Any) -> None:
    """Initialise learned position embeddings with (scaled) sinusoids.

    Random position vectors give attention nothing to tell neighbours apart with, and a small
    BERT then sits for a long time on a unigram plateau; sinusoids make relative offsets a
    linear map from the start. They are scaled to the norm of the word embeddings so that
    token identity still dominates after the embedding LayerNorm. Still trainable.
    """
    import torch

    positions, hidden = weight.shape
    position = torch.arange(positions, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, hidden, 2, dtype=torch.float32) * (-math.log(1e4) / hidden)
    )
    table = torch.zeros(positions, hidden)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    scale = config.initializer_range * math.sqrt(2.0)  # sinusoid entries have RMS 1/sqrt(2)
    with torch.no_grad():
        weight.copy_(table * scale)


def masked_lm_loss(model: Any, batch: dict[str, Any], bf16: bool = False) -> tuple[Any, Any, Any]:
    """Cross-entropy at labelled positions, projecting to the vocabulary only there.

    With ``bf16`` the forward pass runs under bfloat16 autocast; weights and loss stay FP32.
    """
    import torch
    import torch.nn.functional as F

    labels = batch["labels"]
    with torch.autocast(labels.device.type, dtype=torch.bfloat16, enabled=bf16):
        head = getattr(model, "cls", None) or getattr(model, "lm_head", None)
        if head is None:  # an unfamiliar architecture: let it compute its own loss
            output = model(**batch)
            return output.loss, output.logits[labels != -100], labels[labels != -100]
        hidden = model.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        selected = labels != -100
        logits = head(hidden[selected])
    return F.cross_entropy(logits.float(), labels[selected]), logits, labels[selected]


def training_device(options: TrainOptions) -> Any:
    """The torch device to train on: --device, where auto takes CUDA when there is one."""
    import torch

    if options.device == "cuda" and not torch.cuda.is_available():
        raise BadOptionError("--device cuda was given but torch sees no CUDA GPU here.")
    use_cuda = options.device == "cuda" or (options.device == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda else "cpu")


def trains_in_bf16(precision: str, device_type: str, pretraining: bool) -> bool:
    """bf16 autocast: asked for, or ``auto`` on CUDA, or ``auto`` when pretraining on a CPU with
    bf16 units (AVX512-BF16 or AMX), where it is 1.6x the tokens/s of FP32 (docs/TRAINING.md).

    CSV fine-tuning on a CPU stays FP32 under ``auto``: it is short, so speed matters less than
    the rounding, which kept a tiny model from memorising three masks at a high LR (the CSV test).
    """
    from tiankong.export.int8_recipe import cpu_has_bf16

    if precision != "auto":
        return precision == "bf16"
    return device_type == "cuda" or (pretraining and cpu_has_bf16())


def to_device(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


def evaluate(model: Any, batches: list[dict[str, Any]], bf16: bool = False) -> tuple[float, float]:
    """Held-out masked-token loss and top-1 accuracy."""
    import torch

    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.inference_mode():
        for batch in batches:
            loss, logits, labels = masked_lm_loss(model, batch, bf16)
            total_loss += float(loss) * len(labels)
            correct += int((logits.argmax(-1) == labels).sum())
            count += len(labels)
    model.train()
    if count == 0:
        return math.nan, math.nan
    return total_loss / count, correct / count


def save_checkpoint(
    folder: Path, model: Any, tokenizer: Any, optimizer: Any, scheduler: Any, state: TrainState
) -> None:
    """Write a resumable checkpoint atomically (into a temp folder, then rename)."""
    import shutil

    import torch

    temp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(temp, ignore_errors=True)
    model.save_pretrained(temp)
    tokenizer.save_pretrained(temp)
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "state": asdict(state),
        },
        temp / "trainer_state.pt",
    )
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    temp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def train(
    options: TrainOptions,
    on_progress: Callable[[TrainState, dict[str, float]], None] | None = None,
) -> TrainSummary:
    """Run training to ``options.out``; returns the summary also written to training.json."""
    import torch
    from transformers import DataCollatorForLanguageModeling

    validate_options(options)
    device = training_device(options)
    is_csv = all(spec.endswith(".csv") for spec in options.data)
    bf16 = trains_in_bf16(options.precision, device.type, pretraining=not is_csv)
    if options.threads:
        torch.set_num_threads(options.threads)
    torch.manual_seed(options.seed)
    rng = random.Random(options.seed)
    model, tokenizer = load_starting_point(options)
    collator = DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=options.mask_rate, return_tensors="pt"
    )
    if is_csv:
        rows: list[ClozeRow] = []
        for spec in options.data:
            rows += read_cloze_csv(Path(spec), tokenizer.get_vocab(), options.skip_bad_rows)[0]
        batches = cloze_batches(rows, tokenizer, options.batch_size, rng)
    elif options.data_workers > 0:
        batches = prefetched_batches(options, tokenizer, collator, device)
    else:
        batches = pretraining_batches(options, tokenizer, collator, rng)
    model.to(device)
    eval_set = [to_device(batch, device) for batch in heldout_batches(options, tokenizer, collator)]

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": options.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=options.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
        fused=device.type == "cuda",
    )
    state = TrainState()
    clock = {"started": time.monotonic()}

    def lr_factor(step: int) -> float:
        """Linear warmup, then linear decay to zero at whichever budget runs out first.

        With --max-time the decay follows the clock, so a time-boxed run still ends its schedule
        (decay is worth a lot on a short budget); for a bit-exact rerun use --max-steps alone.
        """
        if step < options.warmup_steps:
            return (step + 1) / options.warmup_steps
        progress = step / options.max_steps
        if options.max_time_s:
            progress = max(progress, (time.monotonic() - clock["started"]) / options.max_time_s)
        return max(0.0, 1.0 - progress)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    checkpoint = options.out / CHECKPOINT_DIR
    if options.resume and (checkpoint / "trainer_state.pt").is_file():
        saved = torch.load(checkpoint / "trainer_state.pt", weights_only=False, map_location=device)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        state = TrainState(**saved["state"])
        for _ in range(state.step):  # replay the data stream to where it stopped
            next(batches)
        torch.set_rng_state(saved["torch_rng"].cpu())

    model.train()
    started = time.monotonic() - state.elapsed_s
    clock["started"] = started
    loss_value = math.nan
    heldout_loss: float | None = None
    heldout_accuracy: float | None = None
    while state.step < options.max_steps:
        if options.max_time_s and time.monotonic() - started >= options.max_time_s:
            break
        if options.stop_after_steps and state.step >= options.stop_after_steps:
            break
        batch = next(batches)
        tokens = int(batch["attention_mask"].sum())
        loss = masked_lm_loss(model, to_device(batch, device), bf16)[0]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state.step += 1
        state.tokens_seen += tokens
        state.elapsed_s = time.monotonic() - started
        loss_value = float(loss.detach())
        metrics: dict[str, float] = {
            "step": state.step,
            "loss": loss_value,
            "lr": float(scheduler.get_last_lr()[0]),
        }
        if eval_set and (state.step % options.eval_every == 0 or state.step == options.max_steps):
            heldout_loss, heldout_accuracy = evaluate(model, eval_set, bf16)
            metrics.update(heldout_loss=heldout_loss, heldout_accuracy=heldout_accuracy)
            state.history.append(
                {**metrics, "elapsed_s": state.elapsed_s, "tokens": state.tokens_seen}
            )
        if state.step % options.save_every == 0:
            save_checkpoint(checkpoint, model, tokenizer, optimizer, scheduler, state)
        if on_progress:
            on_progress(state, metrics)

    save_checkpoint(checkpoint, model, tokenizer, optimizer, scheduler, state)
    if eval_set and (heldout_loss is None or state.history[-1]["step"] != state.step):
        heldout_loss, heldout_accuracy = evaluate(model, eval_set, bf16)
        state.history.append(
            {
                "step": state.step,
                "loss": loss_value,
                "heldout_loss": heldout_loss,
                "heldout_accuracy": heldout_accuracy,
                "elapsed_s": state.elapsed_s,
                "tokens": state.tokens_seen,
            }
        )
    model.to("cpu")
    if options.save_fp16:
        model = model.half()
    model.save_pretrained(options.out)
    tokenizer.save_pretrained(options.out)
    summary = TrainSummary(
        out=str(options.out),
        steps=state.step,
        tokens=state.tokens_seen,
        wall_time_s=round(state.elapsed_s, 1),
        tokens_per_s=round(state.tokens_seen / max(state.elapsed_s, 1e-9), 1),
        final_train_loss=loss_value,
        heldout_loss=heldout_loss,
        heldout_accuracy=heldout_accuracy,
        history=state.history,
    )
    record = {
        "summary": asdict(summary),
        "options": {k: str(v) for k, v in asdict(options).items()},
    }
    (options.out / "training.json").write_text(json.dumps(record, indent=1, ensure_ascii=False))
    return summary
