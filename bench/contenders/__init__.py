"""The usual deployments the bench compares tiankong with, each a small FastAPI server.

These modules run as ``python -m bench.contenders.NAME`` in their own process, some in a
different virtual environment (optimum's), so they import nothing from tiankong or the rest of
the bench except ``bench.contenders.common``.
"""
