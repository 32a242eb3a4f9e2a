"""Compare suffix-array / FM-index libraries on an index's token stream (docs/INDEX.md).

Run in a scratch venv (these libraries are not tiankong dependencies):
    python -m venv /tmp/bench && /tmp/bench/bin/pip install numpy pydivsufsort fm-index
    nice -n 10 /tmp/bench/bin/python scripts/compare_suffix_libraries.py pydivsufsort|fm-index
It reads /tmp/h2-idx-full/tokens.bin (an index built with build_index); edit TOKENS to change.
"""

import random
import resource
import sys
import time

import numpy as np

TOKENS = "/tmp/h2-idx-full/tokens.bin"
tokens = np.fromfile(TOKENS, dtype=">u2")
lib = sys.argv[1]
rng = random.Random(0)
n = len(tokens)
pats = []
for _ in range(2000):
    p = rng.randrange(1, n - 10)
    pats.append(tokens[p : p + rng.randint(2, 6)].astype(np.int64))
pats = [p for p in pats if not (p == 0).any()][:1000]
if lib == "pydivsufsort":
    from pydivsufsort import divsufsort

    t = time.time()
    sa = divsufsort(tokens.astype(np.uint16))
    bt = time.time() - t
    sa = sa.astype("<i4")
    buf = tokens.tobytes()

    def count(p):
        key = p.astype(">u2").tobytes()
        m = len(p)
        lo, hi = 0, len(sa)
        while lo < hi:
            mid = (lo + hi) // 2
            s = 2 * int(sa[mid])
            if buf[s : s + 2 * m] < key:
                lo = mid + 1
            else:
                hi = mid
        f = lo
        hi = len(sa)
        while lo < hi:
            mid = (lo + hi) // 2
            s = 2 * int(sa[mid])
            if buf[s : s + 2 * m] <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo - f

    size = sa.nbytes + tokens.nbytes
    t = time.time()
    np.save("/tmp/h2-sa.npy", sa)
    x = np.load("/tmp/h2-sa.npy", mmap_mode="r")
    lt = time.time() - t
elif lib == "fm-index":
    from fm_index import FMIndex

    text = "".join(chr(int(t) + 0x100) if t else "\n" for t in tokens)  # token id -> one code point
    t = time.time()
    fm = FMIndex(text)
    bt = time.time() - t

    def count(p):
        return fm.count("".join(chr(int(t) + 0x100) for t in p))

    import pickle

    t = time.time()
    st = pickle.dumps(fm)
    size = len(st)
    fm2 = pickle.loads(st)
    lt = time.time() - t
ts = []
for p in pats:
    t = time.perf_counter()
    count(p)
    ts.append(time.perf_counter() - t)
print(
    lib,
    "build_s",
    round(bt, 1),
    "maxrss_MB",
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    "count_p50_us",
    round(np.median(ts) * 1e6, 1),
    "index_MB",
    size // 2**20,
    "reload_s",
    round(lt, 2),
)
