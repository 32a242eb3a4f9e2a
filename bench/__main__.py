"""``python -m bench``: see bench/suite.py and docs/PERFORMANCE.md#benchmark."""

import sys

from bench.refusal import exit_code
from bench.suite import main

sys.exit(exit_code(main, None))
