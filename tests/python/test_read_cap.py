# SPDX-License-Identifier: MIT
# Description: a Loader with the default io_depth (0: the library's choice)
# keeps many chunk reads in flight through the page cache (32, or as many as
# its read slots allow), in file and chunk order; the io_depth a caller
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


def run(**kw):
    ld = ringfeed.Loader(p, B, device="cpu", direct=False, seed=3, **kw)
    rows = [y for b in ld for y in np.asarray(b["y"]).tolist()]
    st = ld.stats()
    ld.close()
    return rows, st["reads_inflight_max"]


for shuffle in ("none", "chunks"):
    rows, q = run(shuffle=shuffle)
    check(q > 8, "%s: %d reads in flight by default" % (shuffle, q))
    check(sorted(rows) == list(range(N)), "%s: every row once" % shuffle)
    rows3, q3 = run(shuffle=shuffle, io_depth=3)
    check(q3 == 3, "%s: %d reads in flight at io_depth=3" % (shuffle, q3))
    check(rows3 == rows, "%s: the same rows at io_depth=3" % shuffle)
