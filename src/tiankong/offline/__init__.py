"""Whole-file jobs on the library: `tiankong fill` (local or on Ray) and `tiankong eval`."""
