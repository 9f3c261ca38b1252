# SPDX-License-Identifier: MIT
# Description: a Loader with the default io_depth keeps two chunk reads in
# flight when it reads through the page cache in file order from a device
# that reads 8 MiB ahead (RINGFEED_READAHEAD_KB sets it), and 32 in chunk
# order when its chunks are far smaller than that; the io_depth a caller
# passes is kept; the rows are the same either way.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N, B = 2000, 16
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=1024)
os.environ["RINGFEED_SEQ_MAP"] = "0"  # read calls, whatever the CPUs
os.environ["RINGFEED_READAHEAD_KB"] = "8192"


def run(**kw):
    ld = ringfeed.Loader(p, B, device="cpu", direct=False, seed=3, **kw)
    rows = [y for b in ld for y in np.asarray(b["y"]).tolist()]
    st = ld.stats()
    ld.close()
    return rows, st["reads_inflight_max"]


for shuffle in ("none", "chunks"):
    rows, q = run(shuffle=shuffle)
    want = 2 if shuffle == "none" else 32
    check(q == 2 if want == 2 else q > 8,
          "%s: %d reads in flight by default, want %d" % (shuffle, q, want))
    check(sorted(rows) == list(range(N)), "%s: every row once" % shuffle)
    rows8, q8 = run(shuffle=shuffle, io_depth=8)
    check(2 < q8 <= 8, "%s: %d reads in flight at io_depth=8" % (shuffle, q8))
    check(rows8 == rows, "%s: the same rows at io_depth=8" % shuffle)
