"""Write the bundled model's MODEL_CARD.md from its training record and eval reports.

    python scripts/model_card.py MODEL_DIR EVAL_JSON [BLANK_EVAL_JSON] [--index-report JSON]

MODEL_DIR holds training.json (written by `tiankong train`); EVAL_JSON is the `--json` report of
`tiankong eval data/eval/public_cloze.jsonl --model MODEL_DIR --index none` (the model alone);
the index report is that of `tiankong eval data/eval/public_cloze.jsonl --compare-index --json`
(the bundled model by name, with and without the bundled index).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path


def table(report: dict) -> list[str]:
    lines = ["| category | items | top-1 | top-5 | MRR |", "|---|---:|---:|---:|---:|"]
    for row in [*report["categories"], report["overall"]]:
        name = f"**{row['category']}**" if row["category"] == "overall" else row["category"]
        figures = f"{row['top1']:.1%} | {row['top5']:.1%} | {row['mrr']:.3f}"
        lines.append(f"| {name} | {row['items']} | {figures} |")
    return lines


def index_table(without: dict, grounded: dict, changes: dict | None = None) -> list[str]:
    """The side-by-side table; with ``changes`` (the report's ``index_changes``), the items the
    index turned right -> wrong and wrong -> right."""
    extra = " right→wrong | wrong→right |" if changes else ""
    lines = [
        "| category | items | top-1 | +index top-1 | top-5 | +index top-5 |" + extra,
        "|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if changes else ""),
    ]
    for alone, mixed in zip(
        [*without["categories"], without["overall"]],
        [*grounded["categories"], grounded["overall"]],
        strict=True,
    ):
        name = f"**{alone['category']}**" if alone["category"] == "overall" else alone["category"]
        row = (
            f"| {name} | {alone['items']} | {alone['top1']:.1%} | {mixed['top1']:.1%} | "
            f"{alone['top5']:.1%} | {mixed['top5']:.1%} |"
        )
        if changes:
            moved = changes[alone["category"]]
            row += f" {moved['right_to_wrong']} | {moved['wrong_to_right']} |"
        lines.append(row)
    return lines


def grounded_example() -> str:
    """The idiom the issue asks about, through the default (bundled model, bundled index)."""
    from tiankong import FillMasker, Settings

    best = FillMasker.load(settings=Settings(threads=1)).predict("画龙点[MASK]").masks[0][0]
    memory = json.dumps(best.memory, ensure_ascii=False)
    return (
        f"「画龙点[MASK]」 with the bundled index (the default) → {best.token} {best.score:.1%} "
        f"(the model alone: {best.model_score:.4%}), memory {memory}."
    )


def example_and_int8(folder: Path) -> list[str]:
    """The poem the issue asks about, and what the INT8 quality guard decided for this model.

    The INT8 figures are the ones stored with the export when it was made (its manifest), read
    through the served engine: the same data `tiankong serve` logs and reports in /info.
    """
    from tiankong import FillMasker, Settings

    fp32 = FillMasker.load(str(folder), Settings(engine="torch", threads=1), index="none")
    top = fp32.predict("春眠不觉晓，处处闻啼[MASK]。", top_k=5).masks[0]
    shown = ", ".join(f"{c.token} {c.score:.1%}" for c in top)
    served = FillMasker.load(str(folder), Settings(threads=1))
    quality = getattr(served.engine, "quality", {})
    lines = [f"「春眠不觉晓，处处闻啼[MASK]。」 → {shown} (torch FP32, the model alone).", ""]
    decision = f"By default tiankong runs it on {served.engine.name} {served.engine.precision}"
    if not quality:
        return [*lines, decision + "."]
    if "choice" in quality:  # --precision auto: every engine and precision measured here
        return [*lines, *auto_choice(decision, quality["choice"])]
    cpu = quality["cpu"]
    decision += (
        f". The INT8 export was made on a CPU of kind `{cpu['kind']}` "
        f"({', '.join(cpu['flags']) or 'no AVX2'}), which tries these recipes in order until one "
        f"reaches the guard's {quality['min_agreement']:.0%} top-1 agreement with FP32 on its "
        f"{quality['masks']} masks ({quality['sentences']} sentences):"
    )
    lines += [decision, "", "| recipe | top-1 agreement | top-5 overlap |", "|---|---:|---:|"]
    for attempt in quality["attempts"]:
        lines.append(
            f"| {attempt['recipe']} | {attempt['top1_agreement']:.1%} | "
            f"{attempt['top5_overlap']:.1%} |"
        )
    kept = quality["recipe"]["name"]
    verdict = "passes, and is served" if quality["passed"] else "fails; FP32 is served"
    lines += [
        "",
        f"Kept: **{kept}**, which {verdict}. Other CPU kinds try other recipes "
        '(docs/PERFORMANCE.md, "The INT8 recipe and its quality guard").',
    ]
    return lines


def file_weights(spec: str | list[str]) -> list[tuple[str, str]]:
    """``training.json``'s --data or --heldout list (a tuple's repr before 2026-12-07) to (file
    name, weight) pairs, each read as `tiankong train` reads it (``train_data.split_spec``; no
    weight: 1)."""
    from tiankong.training.train_data import split_spec

    names = []
    for item in spec if isinstance(spec, list) else ast.literal_eval(spec):
        name, weight = split_spec(item)
        names.append((Path(name).name.removesuffix(".txt.xz"), weight or "1"))
    return names


def stage_lines(stage: dict, last: bool = True) -> list[str]:
    """One training stage (a `tiankong train` run) in words, from its record; the last stage's
    held-out figure, the shipped weights', is the one in bold."""
    summary, options = stage["summary"], stage["options"]
    mix = ", ".join(f"{name} {float(weight):.2f}" for name, weight in file_weights(options["data"]))
    heldout = ", ".join(name for name, _ in file_weights(options["heldout"]))
    start = (
        f"From scratch (`--config {options['config']}`, {options.get('position_init', 'random')} "
        "position-embedding init)"
        if options.get("init") in (None, "None")
        else "From the stage before (`--init`)"
    )
    precision = options.get("precision", "fp32")
    if precision == "auto":  # train.trains_in_bf16: auto is bf16 on a GPU
        precision = "bf16" if options.get("device") == "cuda" else "auto (the CPU's choice)"
    history = summary["history"]
    curve = ", ".join(
        f"{h['step']:.0f}: {h['heldout_accuracy']:.1%}"
        for h in history[:: max(1, len(history) // 8)]
    )
    device = options.get("device")
    machine = stage.get("machine") or {"cuda": "a CUDA GPU", "cpu": "a CPU"}.get(
        str(device), f"a machine the record does not name (--device {device})"
    )
    budget = (
        f"at the end of the wall-time budget ({float(options['max_time_s']) / 60:.1f} min)"
        if options.get("max_time_s") not in (None, "None", "0", "0.0")
        else f"at --max-steps {stage.get('resolved', {}).get('step_limit', options['max_steps'])}"
    )
    bold = "**" if last else ""
    heldout_figure = (
        f"- held-out masked-token accuracy: {bold}{summary['heldout_accuracy']:.1%}{bold} "
        f"(loss {summary['heldout_loss']:.3f}) on the first {int(options['eval_lines']):,} "
        f"lines of each of {heldout}, {options['seq_len']} tokens at most"
        if summary.get("heldout_accuracy") is not None
        else "- no held-out set"
    )
    lines = [
        f"**{stage.get('name', 'The run')}.** {start}; lines sampled with weights "
        f"{mix} (per line); batch {options['batch_size']} × {options['seq_len']} tokens; peak LR "
        f"{options['lr']} after {options['warmup_steps']} warmup steps, then linear decay to zero "
        f"{budget}; "
        f"{options['mask_rate']} masking ({options.get('masking', 'token')}) with the 80/10/10 "
        f"split; forward pass precision {precision} (weights and "
        f"optimizer FP32). Seed {options['seed']}.",
        "",
        f"- on {machine}",
        f"- steps: {summary['steps']:,}; tokens: {summary['tokens']:,}; "
        f"{summary['tokens_per_s']:,.0f} tokens/s",
        heldout_figure,
        *([f"- held-out accuracy by step: {curve}"] if curve else []),
    ]
    if "command" in stage:
        lines.append(f"- command: `{stage['command']}`")
    return [*lines, ""]


def reads_wiki(record: dict) -> bool:
    """Whether a stage of the run read wiki_dialogue (the Wikipedia and dialogue text)."""
    stages = record.get("stages") or [record]
    return any(
        name == "wiki_dialogue"
        for stage in stages
        for name, _ in file_weights(stage["options"]["data"])
    )


def training_lines(record: dict) -> list[str]:
    """The card's Data and Recipe sections: each stage of ``training.json`` (a record with
    ``stages``), or its one run."""
    stages = record.get("stages") or [record]
    wiki = "Wikipedia paragraphs and dialogues (wiki_dialogue); " if reads_wiki(record) else ""
    return [
        "## Data",
        "The public corpus described in docs/TRAINING.md (files, sources, licences): classical "
        "poetry and classics (全唐诗, 宋词, 元曲, 诗经, 论语, 蒙学 …); modern product/hotel/food "
        f"reviews, MSRA news sentences and xiehouyu; {wiki}and a list of 29,502 four-character "
        "idioms. Lines are shuffled through a 300k-line buffer and packed into fixed-length "
        "sequences. The held-out files (`*.heldout.txt.xz`) were never trained on.",
        "",
        "## Recipe",
        "The MLM head is computed only at masked positions; AdamW (β2 0.98, weight decay 0.01).",
        "",
        *(
            line
            for number, stage in enumerate(stages, 1)
            for line in stage_lines(stage, last=number == len(stages))
        ),
        "Retrain it, and the figures of the model before it beside this one's with their "
        'commands: docs/TRAINING.md, "On a lent GPU".',
        "",
    ]


def auto_choice(decision: str, quality: dict) -> list[str]:
    """What ``--precision auto`` measured on this CPU and chose (the engine's own record)."""
    lines = [
        f"{decision}, the fastest candidate that reaches the guard's "
        f"{quality['min_agreement']:.0%} top-1 agreement with FP32 on this CPU (kind "
        f"`{quality['cpu']}`), measured when the model was first served here:",
        "",
        f"| engine | precision | batch 1 ms | batch {quality['full_batch']} ms | top-1 agreement "
        "| not served because |",
        "|---|---|---:|---:|---:|---|",
    ]
    for row in quality["candidates"]:
        timed = f"{row['b1_ms']:.2f} | {row['batch_ms']:.2f}" if row["b1_ms"] else "— | —"
        agreement = f"{row['top1_agreement']:.1%}" if row["b1_ms"] else "—"
        reason = quality["rejected"].get(f"{row['engine']} {row['precision']}", "")
        lines.append(f"| {row['engine']} | {row['precision']} | {timed} | {agreement} | {reason} |")
    return [
        *lines,
        "",
        f'Its startup line: "{quality["line"]}". Other CPU kinds measure their own candidates '
        '(docs/PERFORMANCE.md, "The INT8 recipe and its quality guard").',
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("eval_json", type=Path)
    parser.add_argument("blank_json", type=Path, nargs="?")
    parser.add_argument("--index-report", type=Path)
    args = parser.parse_args()
    folder = args.model_dir
    record = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    evaluation = json.loads(args.eval_json.read_text(encoding="utf-8"))["reports"][0]
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    size_mb = sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 1e6
    lines = [
        "# tiankong-mini-zh",
        "",
        "A small Chinese BERT masked language model trained by tiankong itself (`tiankong train`) "
        "so that the service works offline out of the box. **It is a demo-quality model.** For "
        "production use `google-bert/bert-base-chinese` or another Chinese masked LM via "
        "`--model`.",
        "",
        "## Architecture",
        f"BERT, {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, intermediate {config['intermediate_size']}, "
        f"the bert-base-chinese vocabulary ({config['vocab_size']:,} tokens, same tokenizer), "
        f"tied input/output embeddings; weights stored as float16 safetensors ({size_mb:.1f} MB).",
        "",
        *training_lines(record),
        "## Cloze evaluation (`data/eval/public_cloze.jsonl`)",
        f"`tiankong eval` with engine {evaluation['engine']} {evaluation['precision']}, "
        f"mode {evaluation['mode']}:",
        "",
        *table(evaluation),
    ]
    if args.blank_json:
        blank = json.loads(args.blank_json.read_text(encoding="utf-8"))["reports"][0]
        lines += [
            "",
            "Unknown-length blanks (`--blank`: each item's masks become one [BLANK]):",
            "",
        ]
        lines += table(blank)
    if args.index_report:
        report = json.loads(args.index_report.read_text(encoding="utf-8"))
        without, grounded = report["reports"]
        lines += [
            "",
            "## With the bundled corpus index (the default)",
            "By default tiankong mixes this model with the bundled corpus index (classical "
            "poetry, xiehouyu, idioms; docs/INDEX.md). `tiankong eval "
            "data/eval/public_cloze.jsonl --compare-index`, engine "
            f"{grounded['engine']} {grounded['precision']}:",
            "",
            *index_table(without, grounded, report.get("index_changes")),
            "",
            grounded_example(),
        ]
    lines += ["", "## Example and INT8", *example_and_int8(folder)]
    lines += [
        "",
        "## Limits",
        "- Small and briefly trained: it knows frequent characters, common collocations and some "
        "famous lines, and often misses rarer idioms, facts and long-range sense.",
        "- Probabilities are not calibrated for decisions.",
        "- Trained on public text only; it reflects the style of classical poetry, online "
        f"reviews and news{', Wikipedia and everyday dialogue' if reads_wiki(record) else ''}. "
        "It was trained on simplified characters only: traditional input is answered through "
        "the corpus index and script conversion, not by the model.",
    ]
    (folder / "MODEL_CARD.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {folder / 'MODEL_CARD.md'}")


if __name__ == "__main__":
    main()
