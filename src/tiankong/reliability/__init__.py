"""Load and soak suites against a real `tiankong serve` on loopback.

    python -m tiankong.reliability load|soak|all [--quick] [--model M] [--engine E] [--out DIR]

``--quick`` runs the short versions that CI runs (seconds each); without it the full ones run
(load: 60 s at c=20 and 60 s at c=200, then recovery; soak: 100,000 requests or 30 minutes).
See docs/RELIABILITY.md.
"""
