"""optimum-onnx's ``ORTModelForMaskedLM`` behind FastAPI, softmax only at the mask.

Runs in the bench's own virtual environment (``bench/.venv-optimum``: optimum-onnx pins
transformers < 4.58), on a folder that ``bench.contenders.optimum_export`` made there.

    bench/.venv-optimum/bin/python -m bench.contenders.optimum_app --model DIR --port 8003
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.contenders.common import parse_args, serve, top_k_at_masks

ONNX_FILES = {"fp32": "model.onnx", "int8": "model_quantized.onnx"}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    import onnxruntime
    from optimum.onnxruntime import ORTModelForMaskedLM
    from transformers import AutoTokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = ORTModelForMaskedLM.from_pretrained(
        args.model, file_name=ONNX_FILES[args.precision], session_options=options
    )
    mask_id = tokenizer.mask_token_id

    def fill(text: str, k: int) -> list[list[dict[str, Any]]]:
        encoded = tokenizer(text, return_tensors="np")
        logits = np.asarray(model(**encoded).logits)[0]
        positions = np.flatnonzero(encoded["input_ids"][0] == mask_id)
        return top_k_at_masks(logits[positions], k, tokenizer.convert_ids_to_tokens)

    serve(fill, args)


if __name__ == "__main__":
    main()
