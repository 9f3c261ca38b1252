# SPDX-License-Identifier: MIT
# Description: batch buffer lifetime in ringfeed.Loader: releasing a batch's
# arrays and tensors in any order gives its buffer back once, when the last
# goes; holding depth batches and asking for another raises ringfeed.Error
# EHELD saying what to do, and the stream goes on once one is released; while
# depth batches are held the loader's spare buffer still receives the next; an
# exception mid-iteration, a break, and the collection of a live loader leak
# no thread, file or memory (1000 open/iterate/close cycles at flat RSS).
import gc
import itertools
import os
import sys
import time

import numpy as np

import ringfeed
from rftest import check, fds, need_torch, rss_kib, small_dataset, threads, tmpdir

torch = need_torch()
d = tmpdir()
p = os.path.join(d, "small.rfs")
x, y, v = small_dataset(p, n=300)
B = 10
opts = dict(device="cpu", pinned_bytes=1 << 20, decode_threads=1, io_depth=4)

# The baseline after one loader has come and gone: runtimes (a sanitizer's
# background thread, say) start their own threads on first use.
ringfeed.Loader(p, B, **opts).close()
base_threads, base_fds = threads(), fds()

# --- any release order
ld = ringfeed.Loader(p, B, **opts)
it = iter(ld)
expect_first = 0
for order in itertools.permutations(range(4)):
    batch = next(it)
    check(int(np.asarray(batch["y"])[0]) == expect_first, "order of batches")
    expect_first += B
    off, dat = batch["v"]
    objs = [torch.from_dlpack(batch["x"]), np.from_dlpack(batch["y"]),
            off.__dlpack__(), dat]
    del batch, off, dat
    check(ld.held == 1, "held %d" % ld.held)
    for n, i in enumerate(order):
        objs[i] = None
        want = 1 if n < 3 else 0
        check(ld.held == want, "after dropping %d of %r: held %d" % (n + 1, order, ld.held))
    check(ld.stats()["held"] == 0, "the library still counts a held batch")
del it, objs

# --- depth + 1
for depth in (1, 2, 3):
    ld = ringfeed.Loader(p, B, depth=depth, **opts)
    it = iter(ld)
    held = [next(it) for _ in range(depth)]
    try:
        next(it)
        check(False, "depth %d: a batch beyond depth was handed out" % depth)
    except ringfeed.Error as e:
        check(e.code == ringfeed.EHELD, "code %d" % e.code)
        msg = str(e)
        check("depth" in msg and "clone" in msg and "del" in msg,
              "the message says how to fix it: %s" % msg)
    # The spare buffer: while the consumer holds all `depth` batches the
    # loader still copies the next one into a buffer of its own (a for loop
    # holds its previous batch while asking for the next).  Without the
    # spare no batch could become ready here, however long we wait.
    st = ld.stats()
    check(st["depth"] == depth and st["buffers"] == depth + 1,
          "depth %d, buffers %d" % (st["depth"], st["buffers"]))
    # The host device hands batches out in their ring slots: no device
    # buffers at all (the ring here has room to lend them).
    check(st["in_place"] is True and st["device_bytes"] == 0,
          "host: in_place %r, device bytes %d" % (st["in_place"], st["device_bytes"]))
    deadline = time.monotonic() + 60
    while ld.stats()["ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    check(ld.stats()["ready"] == 1,
          "depth %d, %d held: the next batch was not copied (ready %d)" % (
              depth, depth, ld.stats()["ready"]))
    last = int(np.asarray(held[-1]["y"])[0])
    held.pop(0)
    b = next(it)
    check(int(np.asarray(b["y"])[0]) == last + B, "the stream goes on after EHELD")
    del b, held, it
    ld.close()

# --- an exception mid-iteration, then a new pass starts the epoch over
ld = ringfeed.Loader(p, B, **opts)
try:
    for i, batch in enumerate(ld):
        t = torch.from_dlpack(batch["x"])
        if i == 3:
            raise KeyError("boom")
except KeyError:
    pass
del batch, t
check(ld.held == 0, "held after the exception: %d" % ld.held)
first = next(iter(ld))
check(int(np.asarray(first["y"])[0]) == 0, "a new pass restarts the epoch")
del first
ld.close()
try:
    iter(ld)
    check(False, "iterating a closed loader")
except ValueError:
    pass

# --- collection of a live loader while a tensor still uses its memory
ld = ringfeed.Loader(p, B, **opts)
t = torch.from_dlpack(next(iter(ld))["x"])
del ld
gc.collect()
check(torch.equal(t, torch.from_numpy(x[:B])), "the tensor outlives its loader")
del t
gc.collect()
check(threads() == base_threads, "threads %d, %d before" % (threads(), base_threads))
check(fds() == base_fds, "fds %d, %d before" % (fds(), base_fds))


# --- many cycles, four endings: complete, break, exception, dropped live
def cycle(k):
    ld = ringfeed.Loader(p, 100, **opts)
    kind = k % 4
    n = 0
    try:
        for batch in ld:
            a = torch.from_dlpack(batch["x"])
            n += 1
            if kind == 1 and n == 2:
                break
            if kind == 2 and n == 2:
                raise RuntimeError("mid-iteration")
    except RuntimeError:
        pass
    if kind == 0:
        check(n == len(ld), "complete pass")
        ld.close()
    elif kind == 3:
        it = iter(ld)
        keep = next(it)  # noqa: F841  (dropped with the loader)


for k in range(100):
    cycle(k)
gc.collect()
rss0, blocks0 = rss_kib(), sys.getallocatedblocks()
for k in range(900):
    cycle(k)
gc.collect()
rss1, blocks1 = rss_kib(), sys.getallocatedblocks()
print("RSS after 100 cycles %d KiB, after 1000 %d KiB; Python blocks %d, %d" % (
    rss0, rss1, blocks0, blocks1))
# Leaked batch dicts, arrays or capsules would be thousands of blocks.
check(blocks1 - blocks0 < 300, "Python blocks grew by %d" % (blocks1 - blocks0))
if "libasan" in os.environ.get("LD_PRELOAD", ""):
    print("RSS not checked: AddressSanitizer keeps freed memory in quarantine")
else:
    check(rss1 - rss0 < 2048, "RSS grew by %d KiB over 900 cycles" % (rss1 - rss0))
check(threads() == base_threads, "threads %d, %d before" % (threads(), base_threads))
check(fds() == base_fds, "fds %d, %d before" % (fds(), base_fds))
print("ok")
