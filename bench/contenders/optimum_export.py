"""Export a local model with optimum-onnx: ``OUT/model.onnx`` (FP32) and, quantized by
``ORTQuantizer`` with optimum's AVX2 dynamic recipe, ``OUT/model_quantized.onnx`` (INT8).

    bench/.venv-optimum/bin/python -m bench.contenders.optimum_export --model DIR --out OUT

The venv has no hub access, so the export reads the local folder only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    from optimum.onnxruntime import ORTModelForMaskedLM, ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig
    from transformers import AutoTokenizer

    started = time.perf_counter()
    partial = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model = ORTModelForMaskedLM.from_pretrained(args.model, export=True, local_files_only=True)
    model.save_pretrained(partial)
    AutoTokenizer.from_pretrained(args.model).save_pretrained(partial)
    exported = time.perf_counter()
    quantizer = ORTQuantizer.from_pretrained(partial)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=True)
    quantizer.quantize(save_dir=partial, quantization_config=config)
    (partial / "bench-export.json").write_text(
        json.dumps(
            {
                "export_seconds": round(exported - started, 1),
                "quantize_seconds": round(time.perf_counter() - exported, 1),
            }
        )
    )
    shutil.rmtree(args.out, ignore_errors=True)
    partial.rename(args.out)


if __name__ == "__main__":
    main()
