"""tiankong (填空): fast Chinese fill-in-the-blank with BERT masked language models.

>>> from tiankong import FillMasker
>>> fm = FillMasker.load()  # the bundled demo model; or a folder / hub id  # doctest: +SKIP
>>> fm.predict("春眠不觉晓，处处闻啼[MASK]。", top_k=5).masks[0][0].token  # doctest: +SKIP
"""

from tiankong.config import Settings
from tiankong.core.options import PredictOptions
from tiankong.core.results import FillResult, TokenScore
from tiankong.errors import BadInputError, BadOptionError, TiankongError
from tiankong.service import FillMasker

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
