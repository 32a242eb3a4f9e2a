"""transformers ``pipeline("fill-mask")`` behind FastAPI, as most deployments start out.

python -m bench.contenders.pipeline_app --model DIR --port 8001 --threads 1
"""

from __future__ import annotations

from typing import Any

from bench.contenders.common import parse_args, serve


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    import torch
    from transformers import pipeline

    torch.set_num_threads(args.threads)
    # transformers 5 loads a checkpoint in its saved dtype; an FP16 one would run in FP16 on
    # the CPU (slow, and not the FP32 deployment this stands for).
    fill_mask = pipeline("fill-mask", model=args.model, device="cpu", dtype=torch.float32)

    def fill(text: str, k: int) -> list[list[dict[str, Any]]]:
        answer = fill_mask(text, top_k=k)
        per_mask = answer if answer and isinstance(answer[0], list) else [answer]
        return [
            [{"token": c["token_str"], "token_id": c["token"], "score": c["score"]} for c in row]
            for row in per_mask
        ]

    serve(fill, args)


if __name__ == "__main__":
    main()
