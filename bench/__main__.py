"""``python -m bench``: see bench/suite.py and docs/PERFORMANCE.md#benchmark."""

import sys

from bench.suite import main

sys.exit(main())
