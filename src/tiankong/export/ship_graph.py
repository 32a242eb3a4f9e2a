"""Write the FP32 ONNX graph a model folder ships: ``python -m tiankong.export.ship_graph [DIR]``.

The graph is the exporter's own output (``export_worker.build_export``, as for a cache entry),
packed with xz next to the model files as ``export_cache.SHIPPED_GRAPH``, and its manifest as
``SHIPPED_MANIFEST``. The export cache unpacks it instead of exporting, so serving the bundled
model never needs torch. Run it (with torch installed) whenever the bundled model's files change
(scripts/install_bundled.sh does); tests/export/test_shipped_graph.py fails until then.
"""

from __future__ import annotations

import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tiankong.core.models import resolve_model
from tiankong.export.export_cache import (
    CACHE_FORMAT,
    MANIFEST_FILE,
    ONNX_FILE,
    SHIPPED_GRAPH,
    SHIPPED_MANIFEST,
    export_key,
    library_versions,
    model_fingerprint,
)
from tiankong.export.export_worker import BuildRequest, build_export

XZ_PRESET = 9 | lzma.PRESET_EXTREME  # once per model release: ~1 min for 35 MB, 16 MB out


def export_fp32(model_dir: Path, out: Path) -> dict[str, Any]:
    """Export ``model_dir`` to FP32 into the new folder ``out`` (``model.onnx`` and the cache
    manifest) exactly as the export cache would; returns the manifest."""
    model = resolve_model(str(model_dir))
    fingerprint = model_fingerprint(model.path)
    versions = library_versions()
    out.parent.mkdir(parents=True, exist_ok=True)
    request = BuildRequest(
        model_name=model.name,
        model_path=str(model.path),
        fp32_file=None,
        threads=1,
        entry=str(out),
        key=export_key(fingerprint, "fp32", versions),
        fingerprint=fingerprint,
        versions=versions,
        cpu="",
        min_agreement=0.0,
    )
    build_export(request)
    manifest: dict[str, Any] = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    return manifest


def ship(model_dir: Path) -> dict[str, Any]:
    """Export ``model_dir`` and write its shipped graph and manifest into it."""
    with tempfile.TemporaryDirectory() as temp:
        made = export_fp32(model_dir, Path(temp) / "entry")
        assert made["cache_format"] == CACHE_FORMAT
        graph_file = Path(temp) / "entry" / ONNX_FILE
        packed_file = model_dir / SHIPPED_GRAPH
        with graph_file.open("rb") as graph, lzma.open(packed_file, "wb", preset=XZ_PRESET) as out:
            shutil.copyfileobj(graph, out, 1 << 20)
    # What the cache needs; the key and times are a cache entry's own, written on unpacking.
    kept = {k: v for k, v in made.items() if k not in ("key", "export_seconds", "created")}
    text = json.dumps(kept, indent=2, ensure_ascii=False) + "\n"
    (model_dir / SHIPPED_MANIFEST).write_text(text, encoding="utf-8")
    return kept


def main() -> int:
    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else resolve_model(None).path
    kept = ship(model_dir)
    size = (model_dir / SHIPPED_GRAPH).stat().st_size
    print(f"wrote {model_dir / SHIPPED_GRAPH} ({size / 1e6:.1f} MB) and {SHIPPED_MANIFEST}")
    print(f"graph sha256 {kept['files'][ONNX_FILE]['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
