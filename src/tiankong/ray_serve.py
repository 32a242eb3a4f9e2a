"""The Ray Serve entry point that ``serve run`` and Ray config files name, kept at this stable
path: ``serve run tiankong.ray_serve:app`` (settings from TIANKONG_* variables) or
``tiankong.ray_serve:build_app``. The deployment itself lives in ``tiankong.server.ray_serve``.
"""

# PEP 562: ``serve run`` asks this module for ``app``, which ``__getattr__`` builds on demand.
from tiankong.server.ray_serve import __getattr__, build_app  # noqa: F401
