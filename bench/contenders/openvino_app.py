"""The hand-written OpenVINO recipe, as a user would write it: OpenVINO's CPU plugin with its
defaults (on a CPU with bf16 units that means bf16) on the hand-written ORT recipe's FP32 graph
(``bench/contenders/ort_recipe_app.py`` exports it: full logits, BERT fusions), softmax at the
mask in numpy, one infer request per FastAPI worker thread, a plain-``def`` handler.

    python -m bench.contenders.openvino_app --model OUT_DIR --port 8005 --threads 2

OUT_DIR is the ORT recipe's export folder (``model-fp32.onnx`` and the tokenizer); serving
needs openvino and the tokenizer only.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from bench.contenders.common import parse_args, serve, top_k_at_masks


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    import openvino
    from transformers import AutoTokenizer

    core = openvino.Core()
    compiled = core.compile_model(
        f"{args.model}/model-fp32.onnx", "CPU", {"INFERENCE_NUM_THREADS": str(args.threads)}
    )
    wanted = [port.get_any_name() for port in compiled.inputs]
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    local = threading.local()  # an infer request is not shared between threads

    def fill(text: str, k: int) -> list[list[dict[str, Any]]]:
        request = getattr(local, "request", None)
        if request is None:
            request = local.request = compiled.create_infer_request()
        encoded = tokenizer(text, return_tensors="np")
        request.infer({name: encoded[name].astype(np.int64) for name in wanted})
        logits = request.get_output_tensor(0).data[0]
        positions = np.flatnonzero(encoded["input_ids"][0] == tokenizer.mask_token_id)
        return top_k_at_masks(logits[positions], k, tokenizer.convert_ids_to_tokens)

    serve(fill, args)


if __name__ == "__main__":
    main()
