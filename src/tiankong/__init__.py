"""tiankong (填空): fast Chinese fill-in-the-blank with BERT masked language models.

>>> from tiankong import FillMasker
>>> fm = FillMasker.load()  # the bundled demo model; or a folder / hub id  # doctest: +SKIP
>>> fm.predict("春眠不觉晓，处处闻啼[MASK]。", top_k=5).masks[0][0].token  # doctest: +SKIP
"""

import os

from tiankong.config import Settings
from tiankong.core.options import PredictOptions
from tiankong.core.results import FillResult, TokenScore
from tiankong.errors import BadInputError, BadOptionError, TiankongError
from tiankong.service import FillMasker

# An offline, self-hosted service sends nothing home: the engines' vendor telemetry is off
# unless the user set the variable first (a review saw ONNX Runtime 1.32 write a device id and
# queue usage events for Microsoft, and look up its host, from `tiankong serve`; NNCF, which
# quantizes for OpenVINO INT8, reports to Google Analytics unless NNCF_CI or NNCF_DEV is set).
# Set here, before any engine is made: both read their variable when they start.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("NNCF_CI", "1")

__version__ = "0.1.0"
__all__ = [
    "BadInputError",
    "BadOptionError",
    "FillMasker",
    "FillResult",
    "PredictOptions",
    "Settings",
    "TiankongError",
    "TokenScore",
    "__version__",
]
