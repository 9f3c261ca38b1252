# SPDX-License-Identifier: MIT
# Description: stats()["batches_in_place"] counts the batches handed out
# read-only in the maps (Loader(map=True, inplace=True) on the CPU), as many
# as the batches whose arrays are read-only, the next epoch's first batch
# (taken early to end a pass) counted as it is in `batches`; 0 with
# inplace=False.  A closed loader stays closed: next() on a pass begun
# before close() raises ValueError ("closed"), not StopIteration, also when
# close() only stopped the C loader because a batch was still held (whose
# arrays stay readable), and stats() too; close() again does nothing.
import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
N, B = 1000, 16
img = (np.arange(N * 64, dtype=np.int64) % 251).astype(np.uint8).reshape(N, 64)
y = np.arange(N, dtype=np.int64)
p = d + "/ip.rfs"
# Chunks of 100 samples: batches of 16 lie whole in one chunk except those
# that straddle two.
check(ringfeed.pack(p, {"img": img, "y": y}, chunk_bytes=100 * 72) == N, "pack")

# --- batches_in_place
ld = ringfeed.Loader(p, B, device="cpu", map=True, inplace=True, drop_last=False)
st = ld.stats()
check("batches_in_place" in st and st["batches_in_place"] == 0, "before any batch: %r"
      % st.get("batches_in_place"))
it = iter(ld)
ro = 0
for k in range(20):
    batch = next(it)
    ro += batch["img"].readonly
st = ld.stats()
print("20 batches: %d read-only, stats %d of %d" % (ro, st["batches_in_place"], st["batches"]))
check(0 < ro < 20, "some batches in place, some copied: %d" % ro)
check(st["batches"] == 20 and st["batches_in_place"] == ro,
      "mid-epoch: %d of %d in place, %d read-only" % (st["batches_in_place"], st["batches"], ro))
for batch in it:
    ro += batch["img"].readonly
del batch
st = ld.stats()
# The pass ended on taking the next epoch's first batch (samples 0-15, in
# chunk 0: in place), counted in both.
check(st["batches"] == len(ld) + 1 and st["batches_in_place"] == ro + 1,
      "an epoch: %d of %d in place, %d read-only of %d yielded"
      % (st["batches_in_place"], st["batches"], ro, len(ld)))
ld.close()

for kw in ({"inplace": False}, {"map": False}):
    args = dict(device="cpu", map=True, drop_last=False)
    args.update(kw)
    with ringfeed.Loader(p, B, **args) as lo:
        n = sum(1 for _ in lo)
        st = lo.stats()
        check(st["batches_in_place"] == 0 and st["batches"] == n + 1,
              "%r: %d of %d in place" % (kw, st["batches_in_place"], st["batches"]))


# --- a closed loader stays closed
def closed(call, what):
    try:
        call()
    except ValueError as e:
        check("closed" in str(e), "%s: %s" % (what, e))
        return
    except StopIteration:
        check(False, "%s: StopIteration after close()" % what)
    check(False, "%s: no error after close()" % what)


for hold in (False, True):
    ld = ringfeed.Loader(p, B, device="cpu", map=True, inplace=True)
    it = iter(ld)
    first = next(it)
    kept = first if hold else None
    del first
    ld.close()
    closed(lambda: next(it), "next() on the pass, a batch %s" % ("held" if hold else "not held"))
    closed(lambda: next(it), "next() again")
    closed(ld.stats, "stats()")
    closed(lambda: iter(ld), "a new pass")
    if kept is not None:
        check(np.array_equal(np.asarray(kept["img"]), img[:B]), "the held batch's values")
        del kept
    ld.close()
print("ok")
