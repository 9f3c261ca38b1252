# SPDX-License-Identifier: MIT
# Description: several Loaders open at once in one process, as a notebook's
# train and validation loaders are.  Left at the default pinned_bytes they
# share the process's budget (512 MiB, 256 MiB at most each): two open and
# read side by side, a third raises ringfeed.Error EMEMPLAN saying the
# budget is spent and how to free it; closing one (or del) lets it open; a
# Loader given its own pinned_bytes is outside the count.
import gc

import numpy as np
import ringfeed
from rftest import check, tmpdir

MIB = 1 << 20
d = tmpdir()
p = d + "/wide.rfs"
# Samples of 64 KiB: a batch of 256 is 16 MiB, so a default ring is 256 MiB.
ringfeed.pack(p, {"x": np.zeros((264, 64 << 10), dtype=np.uint8)})


def loader(**kw):
    ld = ringfeed.Loader(p, 256, device="cpu", **kw)
    b = next(iter(ld))
    check(b["x"].shape == (256, 64 << 10), "a batch")
    del b
    return ld


train = loader()
val = loader()
for ld in (train, val):
    check(ld.stats()["pinned_bytes"] == 256 * MIB, "a full share: %d" % ld.stats()["pinned_bytes"])
try:
    loader()
    check(False, "a third loader over the default budget opened")
except ringfeed.Error as e:
    print("->", e)
    check(e.code == ringfeed.EMEMPLAN, "EMEMPLAN, not %s" % e.name)
    for words in ("default pinned budget", "2 other loader(s)", "512 MiB", "close()",
                  "pinned_bytes"):
        check(words in str(e), "the message says %r" % words)
own = loader(pinned_bytes=64 * MIB)
check(own.stats()["pinned_bytes"] == 64 * MIB, "its own budget")
val.close()
test = loader()
check(test.stats()["pinned_bytes"] == 256 * MIB, "the closed loader's share")
del test
gc.collect()
again = loader()
check(again.stats()["pinned_bytes"] == 256 * MIB, "a collected loader's share")
for ld in (train, own, again):
    ld.close()
print("ok")
