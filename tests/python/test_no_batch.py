# SPDX-License-Identifier: MIT
# Description: a Loader that would deliver no batch (batch_size above the
# samples with drop_last=True, or a world whose global batch is larger than
# the data with drop_last=True) raises ValueError at construction naming the
# samples, the batch size and the world, instead of passes that silently
# yield nothing; the same data with a batch that fits (or drop_last=False,
# even in a world above the samples: every rank gets a batch) loads, and
# len() equals what a pass yields.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 50
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)})


def refused(**kw):
    try:
        ld = ringfeed.Loader(p, device="cpu", **kw)
    except ValueError as e:
        msg = str(e)
        want = ["%d samples" % N, "batch_size %d" % kw["batch_size"],
                "world %d" % kw.get("world", 1)]
        check(all(w in msg for w in want), "%r: the message names %s: %s" % (kw, want, msg))
        return
    n = sum(1 for _ in ld)
    ld.close()
    check(False, "%r: constructed, len %d, a pass yields %d" % (kw, len(ld), n))


refused(batch_size=64)
refused(batch_size=51, drop_last=True)
refused(batch_size=32, rank=1, world=2)
refused(batch_size=1, rank=3, world=64, drop_last=True)

for kw, want in ((dict(batch_size=64, drop_last=False), 1), (dict(batch_size=50), 1),
                 (dict(batch_size=16), 3), (dict(batch_size=20, rank=1, world=2), 1),
                 (dict(batch_size=1, rank=3, world=64, drop_last=False), 1),
                 (dict(batch_size=1, rank=63, world=64, drop_last=False), 1)):
    ld = ringfeed.Loader(p, device="cpu", **kw)
    n = sum(1 for _ in ld)
    check(len(ld) == want and n == want, "%r: len %d, pass %d, want %d" % (kw, len(ld), n, want))
    ld.close()
print("ok")
