# SPDX-License-Identifier: MIT
# Description: Loader.order_id names the order: equal on every rank of a job
# (whatever each rank's pinned_bytes, depth or decode_threads), and different
# when the seed, the window, the batch size, the world size or drop_last
# differ; the ranks' window passes are disjoint and cover the epoch even
# when their pinned budgets differ (the default window is the dataset's).
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 2048
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=1024)


def loader(**kw):
    opts = dict(device="cpu", batch_size=16, shuffle="window", seed=3, rank=0, world=2,
                drop_last=True, pinned_bytes=1 << 20)
    opts.update(kw)
    return ringfeed.Loader(p, **opts)


base = loader()
oid = base.order_id
check(isinstance(oid, int) and 0 < oid < 1 << 64, "order_id %r" % (oid,))
check(loader(rank=1, pinned_bytes=4 << 20, depth=4, decode_threads=2).order_id == oid,
      "ranks with other memory settings: another order id")
for kw in (dict(seed=4), dict(window=5), dict(batch_size=8), dict(world=1),
           dict(drop_last=False), dict(shuffle="chunks")):
    check(loader(**kw).order_id != oid, "order id unchanged by %r" % (kw,))

seen = []
for rank, pinned in ((0, 1 << 20), (1, 8 << 20)):
    ld = loader(rank=rank, pinned_bytes=pinned)
    for b in ld:
        seen.extend(np.from_dlpack(b["y"]).tolist())
check(sorted(seen) == list(range(N)), "ranks with other pinned budgets: %d samples, %d distinct"
      % (len(seen), len(set(seen))))
base.close()
print("ok")
