# SPDX-License-Identifier: MIT
# Description: several Loaders open at once in one process, as a notebook's
# train and validation loaders are.  Left at the default pinned_bytes they
# share the process's budget (512 MiB, 256 MiB at most each, and only what
# each runs at full speed with): a notebook's train and validation loaders
# of Fashion-MNIST's size take a fraction of it, so re-running their cell
# while the old ones live works; two that need a whole share open and read
# side by side, a third raises ringfeed.Error EMEMPLAN saying, whole, the
# budget is spent, which loaders hold it and how to free it (the cell
# re-run's `del train`); closing one (or del) lets it open; a Loader given
# its own pinned_bytes is outside the count.
import gc

import numpy as np
import ringfeed
from rftest import check, tmpdir

MIB = 1 << 20
d = tmpdir()
p = d + "/wide.rfs"
# Samples of 64 KiB: a batch of 256 is 16 MiB and a chunk 64 MiB, so a
# default ring is a whole share, short of less than a slot (a chunk's read
# and the staged batches need more), and what two leave holds no read slot
# and staging slot (80 MiB).
ringfeed.pack(p, {"x": np.zeros((1024, 64 << 10), dtype=np.uint8)}, chunk_bytes=64 * MIB)


def whole(n):
    return 192 * MIB < n <= 256 * MIB

# A notebook cell run twice: the names are rebound only after the new
# Loaders are built, and the old ones may live on (Out[], a traceback).
rng = np.random.default_rng(0)
for name, n in (("train", 60000), ("val", 10000)):
    ringfeed.pack("%s/%s.rfs" % (d, name), {
        "image": rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
        "label": rng.integers(0, 10, n).astype(np.int64)})
kept = []
for run in range(2):
    train = ringfeed.Loader([d + "/train.rfs"], 256, device="cpu")
    val = ringfeed.Loader([d + "/val.rfs"], 256, device="cpu")
    t, v = train.stats()["pinned_bytes"], val.stats()["pinned_bytes"]
    print("cell run %d: train %d MiB, val %d MiB" % (run, t // MIB, v // MIB))
    check(t <= 128 * MIB and v <= 64 * MIB, "only what they need: %d, %d" % (t, v))
    check(sum(1 for _ in val) >= 10000 // 256, "val reads")
    kept += [train, val]
for ld in kept:
    ld.close()
del kept, train, val


def loader(**kw):
    ld = ringfeed.Loader(p, 256, device="cpu", **kw)
    b = next(iter(ld))
    check(b["x"].shape == (256, 64 << 10), "a batch")
    del b
    return ld


train = loader()
val = loader()
for ld in (train, val):
    check(whole(ld.stats()["pinned_bytes"]), "a full share: %d" % ld.stats()["pinned_bytes"])
try:
    loader()
    check(False, "a third loader over the default budget opened")
except ringfeed.Error as e:
    print("->", e)
    check(e.code == ringfeed.EMEMPLAN, "EMEMPLAN, not %s" % e.name)
    for words in ("default pinned budget", "2 other loader(s)", "512 MiB", "close()",
                  "pinned_bytes", "wide.rfs (2", " MiB), ", "del train"):
        check(words in str(e), "the message says %r" % words)
    # Whole: the library's text to its end (the module may add a note).
    check("Or give this loader its own pinned_bytes" in str(e), "the message is whole")
own = loader(pinned_bytes=128 * MIB)
check(64 * MIB < own.stats()["pinned_bytes"] <= 128 * MIB, "its own budget")
val.close()
test = loader()
check(whole(test.stats()["pinned_bytes"]), "the closed loader's share")
del test
gc.collect()
again = loader()
check(again.stats()["pinned_bytes"] == 256 * MIB, "a collected loader's share")
for ld in (train, own, again):
    ld.close()
print("ok")
