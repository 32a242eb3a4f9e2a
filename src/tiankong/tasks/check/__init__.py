"""Proofreading (校对): find wrong characters and propose fixes (docs/PROOFREADING.md).

>>> from tiankong import FillMasker
>>> from tiankong.tasks.check import Proofreader
>>> Proofreader(FillMasker.load()).check("守株待免").corrected  # doctest: +SKIP
'守株待兔'
"""

from tiankong.tasks.check.confusion import ConfusionSets
from tiankong.tasks.check.proofreader import CheckMethod, Proofreader
from tiankong.tasks.check.request import CheckRequest, prepare_check
from tiankong.tasks.check.results import Alternative, CheckResult, Edit

__all__ = [
    "Alternative",
    "CheckMethod",
    "CheckRequest",
    "CheckResult",
    "ConfusionSets",
    "Edit",
    "Proofreader",
    "prepare_check",
]
