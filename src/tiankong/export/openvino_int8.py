"""OpenVINO INT8 for ``--precision auto``: NNCF's post-training quantization of the FP32 export.

The ``openvino int8`` candidate of ``precision_choice``. OpenVINO reads the FP32 mask-gather
graph (the one every engine here runs), NNCF quantizes it (``nncf.quantize``, its transformer
model type) with SmoothQuant off, and the result is saved as OpenVINO IR (``IR_FILE`` and its
``.bin``) in the ``auto`` cache entry, where the engine reads it when it is the choice. With
SmoothQuant on (NNCF's default) the guard's top-1 agreement was 82–97.9% on both models measured,
with it off 100% on bert-base's shape (docs/PERFORMANCE.md, "Engines per CPU kind"). The
candidate is held to the same guard as every other: it serves only where it passes and is
fastest. NNCF is needed only here, at export time (``pip install 'tiankong[nncf]'``); serving
the IR needs OpenVINO alone.

Calibration (NNCF's activation ranges) reads training-side text only:
``resources/calibration_sentences.txt`` (modern sentences written for it) and lines of the
bundled corpus (classical poems and idioms) with one character masked; never the guard's
sentences the quantized model is then judged on, nor any eval set. Each is cut to the rows the
model reads, as the guard's are (``quality_guard.model_encoder``).

>>> texts = calibration_texts()
>>> len(texts), all("[MASK]" in text for text in texts)
(126, True)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import lzma
from pathlib import Path
from typing import Any

from tiankong.core.models import BUNDLED_CORPUS, PACKAGE_ROOT
from tiankong.core.text import TextEncoder
from tiankong.engines.base import EncodedBatch, pad_prepared
from tiankong.export.quality_guard import model_encoder, prepare_to_fit

IR_FILE = "openvino-int8.xml"  # and openvino-int8.bin beside it
INSTALL_HINT = "pip install 'tiankong[nncf]'"
CALIBRATION_FILE = PACKAGE_ROOT / "resources" / "calibration_sentences.txt"
CORPUS_LINES = {"classical.txt.xz": 32, "idioms.txt.xz": 32}  # lines taken, evenly spaced
CORPUS_READ = 4000  # of the first lines of each file
LINE_CHARS = 40  # a corpus line is cut to this many characters; its 4th is masked
CALIBRATION_BATCH = 8
SETTINGS = {"model_type": "transformer", "smooth_quant": "off", "batch": CALIBRATION_BATCH}


def has_nncf() -> bool:
    """Whether the optional ``nncf`` package is installed (found, not imported)."""
    return importlib.util.find_spec("nncf") is not None


def nncf_version() -> str | None:
    if not has_nncf():
        return None
    try:
        return importlib.metadata.version("nncf")
    except importlib.metadata.PackageNotFoundError:
        return None


def recipe() -> dict[str, Any]:
    """What shapes the quantized model, for the ``auto`` entry's cache key."""
    return {
        "nncf": nncf_version(),
        "calibration": hashlib.sha256(CALIBRATION_FILE.read_bytes()).hexdigest()[:16],
        "corpus_lines": CORPUS_LINES,
        **SETTINGS,
    }


def calibration_texts() -> list[str]:
    """The calibration sentences, then the corpus lines, each with at least one [MASK]."""
    lines = CALIBRATION_FILE.read_text(encoding="utf-8").splitlines()
    texts = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for name, count in CORPUS_LINES.items():
        with lzma.open(BUNDLED_CORPUS / name, "rt", encoding="utf-8") as stream:
            read = [line.strip() for _, line in zip(range(CORPUS_READ), stream, strict=False)]
        read = [line for line in read if len(line) >= 4]
        for line in read[:: max(1, len(read) // count)][:count]:
            short = line[:LINE_CHARS]
            texts.append(short[:3] + "[MASK]" + short[4:])
    return texts


def calibration_batches(encoder: TextEncoder) -> list[EncodedBatch]:
    prepared = prepare_to_fit(encoder, calibration_texts())
    return [
        pad_prepared(prepared[start : start + CALIBRATION_BATCH], encoder.pad_id)
        for start in range(0, len(prepared), CALIBRATION_BATCH)
    ]


def quantize(fp32_file: Path, model_folder: Path, out_folder: Path) -> Path:
    """Quantize the FP32 export ``fp32_file`` of the model in ``model_folder`` (its tokenizer
    makes the calibration batches) and save it as ``out_folder / IR_FILE``; returns that path."""
    import nncf
    import openvino as ov
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters,
        AdvancedSmoothQuantParameters,
    )

    batches = calibration_batches(model_encoder(model_folder))
    model = ov.Core().read_model(str(fp32_file))
    names = [port.get_any_name() for port in model.inputs]
    quantized = nncf.quantize(
        model,
        nncf.Dataset(batches, lambda batch: batch.feed(names)),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(batches),
        # an alpha of -1 turns SmoothQuant off for MatMuls
        advanced_parameters=AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=-1)
        ),
    )
    path = out_folder / IR_FILE
    ov.save_model(quantized, str(path), compress_to_fp16=False)
    return path
