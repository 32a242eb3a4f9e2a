"""The hand-written ONNX Runtime recipe of issue 13, as a user would write it in about 40 lines:
``torch.onnx.export`` of ``BertForMaskedLM`` with full logits, ``onnxruntime.transformers``
BERT fusions, ``quantize_dynamic`` per-channel QInt8, softmax at the mask in numpy, and a
plain-``def`` FastAPI handler.

    python -m bench.contenders.ort_recipe_app export MODEL_DIR OUT_DIR   # once, needs torch
    python -m bench.contenders.ort_recipe_app --model OUT_DIR --port 8004 --precision int8

The export writes ``model-fp32.onnx``, ``model-int8.onnx`` and the tokenizer into OUT_DIR
(through ``OUT_DIR.partial``, renamed when complete); serving needs only onnxruntime.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.contenders.common import WARMUP_TEXT, parse_args, serve, top_k_at_masks

NAMES = ("input_ids", "attention_mask", "token_type_ids")


def export(model_dir: Path, out: Path) -> None:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AutoTokenizer, BertForMaskedLM

    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # FP32 even from an FP16 checkpoint; eager attention is the graph the fusions match.
    model = BertForMaskedLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    model.config.return_dict = False  # a plain tuple out: (logits,)
    example = tokenizer(WARMUP_TEXT, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in NAMES}
    torch.onnx.export(
        model,
        tuple(example[name] for name in NAMES),
        str(partial / "raw.onnx"),
        dynamo=False,  # the TorchScript exporter: its graph is what the BERT fusions match
        opset_version=17,
        input_names=list(NAMES),
        output_names=["logits"],
        dynamic_axes={**axes, "logits": {0: "batch", 1: "sequence"}},
    )
    fused = optimizer.optimize_model(
        str(partial / "raw.onnx"),
        model_type="bert",
        num_heads=model.config.num_attention_heads,
        hidden_size=model.config.hidden_size,
    )
    fused.save_model_to_file(str(partial / "model-fp32.onnx"))
    quantize_dynamic(
        partial / "model-fp32.onnx",
        partial / "model-int8.onnx",
        per_channel=True,
        weight_type=QuantType.QInt8,
        # Shape inference can't see through the fused contrib ops; their outputs are float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    (partial / "raw.onnx").unlink()
    tokenizer.save_pretrained(partial)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)


def main() -> None:
    if sys.argv[1:2] == ["export"]:
        export(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    args = parse_args(__doc__.splitlines()[0])
    import onnxruntime
    from transformers import AutoTokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        f"{args.model}/model-{args.precision}.onnx", options, providers=["CPUExecutionProvider"]
    )
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    wanted = [i.name for i in session.get_inputs()]  # the fused graph may drop an unused input

    def fill(text: str, k: int) -> list[list[dict[str, Any]]]:
        encoded = tokenizer(text, return_tensors="np")
        feed = {name: encoded[name].astype(np.int64) for name in wanted}
        logits = session.run(["logits"], feed)[0][0]
        positions = np.flatnonzero(encoded["input_ids"][0] == tokenizer.mask_token_id)
        return top_k_at_masks(logits[positions], k, tokenizer.convert_ids_to_tokens)

    serve(fill, args)


if __name__ == "__main__":
    main()
