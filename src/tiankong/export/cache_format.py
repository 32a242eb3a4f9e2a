"""The export cache's on-disk format, shared by the cache (``export_cache``, which reads and
checks entries) and its child process (``export_worker``, which writes one): the file names, the
format number and the checksum. Its own module, so neither of the two imports the other's."""

from __future__ import annotations

import hashlib
from pathlib import Path

CACHE_FORMAT = 1  # bump when the graph or the recipe changes in a way the key can't see
ONNX_FILE = "model.onnx"
MANIFEST_FILE = "tiankong-export.json"
# what to do where the cache folder can't be written (read-only, full)
CACHE_REMEDY = "set TIANKONG_ONNX_CACHE_DIR to a writable folder with room for it"


def file_sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
