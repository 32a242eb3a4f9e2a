"""The popular "optimized" recipe behind FastAPI: ``BertForMaskedLM``, traced with TorchScript,
softmax only at the mask; ``--precision int8`` applies torch dynamic INT8 to the Linear layers
first.

    python -m bench.contenders.torchscript_app --model DIR --port 8002 --precision int8

transformers 5 dropped ``from_pretrained(..., torchscript=True)``, so a small wrapper returns
the logits as a plain tensor for ``torch.jit.trace``. The trace is made on one sentence and
serves any length (checked against eager in the bench's tests of this app).
"""

from __future__ import annotations

from typing import Any

from bench.contenders.common import WARMUP_TEXT, parse_args, serve, top_k_at_masks


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = BertForMaskedLM.from_pretrained(
        args.model, attn_implementation="eager", dtype=torch.float32
    ).eval()  # FP32 even from an FP16 checkpoint (transformers 5 keeps the saved dtype)
    if args.precision == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)

    class LogitsOnly(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, return_dict=False
            )[0]

    example = tokenizer(WARMUP_TEXT, return_tensors="pt")
    with torch.inference_mode():
        traced = torch.jit.trace(
            LogitsOnly(model).eval(), (example["input_ids"], example["attention_mask"])
        )
        traced = torch.jit.freeze(traced)
    mask_id = tokenizer.mask_token_id

    def fill(text: str, k: int) -> list[list[dict[str, Any]]]:
        encoded = tokenizer(text, return_tensors="pt")
        input_ids = encoded["input_ids"]
        with torch.inference_mode():
            logits = traced(input_ids, encoded["attention_mask"])[0]
            positions = (input_ids[0] == mask_id).nonzero().flatten()
            at_masks = logits[positions].numpy()
        return top_k_at_masks(at_masks, k, tokenizer.convert_ids_to_tokens)

    for _ in range(2):  # TorchScript's profiling executor optimises after the first runs
        fill(WARMUP_TEXT, 5)
    serve(fill, args)


if __name__ == "__main__":
    main()
