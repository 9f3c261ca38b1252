# SPDX-License-Identifier: MIT
# Description: ringfeed.pack(..., shuffle=SEED) writes the samples in a
# permuted order: an `id` column gives the order, which holds every sample
# exactly once and is not the identity; a fixed and a variable field follow
# it; a class-sorted label field comes out mixed; the same seed gives the
# same bytes, another seed another order; shuffle=None keeps the order; a
# bad seed raises.
import filecmp
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
n, classes = 2000, 10
rng = np.random.default_rng(3)
ids = np.arange(n, dtype=np.uint32)
labels = np.repeat(np.arange(classes, dtype=np.uint8), n // classes)
x = rng.standard_normal((n, 3)).astype(np.float32)
var = [np.full(i % 7, i % 251, dtype=np.uint8) for i in range(n)]
cols = {"id": ids, "label": labels, "x": x, "v": var}


def order(path):
    ds = ringfeed.open(path)
    got = [ds[i] for i in range(len(ds))]
    return got


p42 = os.path.join(d, "s42.rfs")
check(ringfeed.pack(p42, cols, chunk_bytes=2048, shuffle=42) == n, "count")
rows = order(p42)
perm = np.array([int(r["id"][()]) for r in rows])
check(np.array_equal(np.sort(perm), ids), "every sample exactly once")
check(not np.array_equal(perm, ids), "not shuffled")
for pos, r in enumerate(rows):
    i = perm[pos]
    check(int(r["label"][()]) == labels[i], "label follows id at %d" % pos)
    check(np.array_equal(r["x"], x[i]), "x follows id at %d" % pos)
    check(np.array_equal(r["v"], var[i]), "v follows id at %d" % pos)
got_l = np.array([int(r["label"][()]) for r in rows])
tv = [0.5 * np.abs(np.bincount(got_l[i:i + 64], minlength=classes) / 64 - 0.1).sum()
      for i in range(0, n - 63, 64)]
check(np.mean(tv) < 0.25, "labels not mixed: mean TV %.3f" % np.mean(tv))

again = os.path.join(d, "again.rfs")
ringfeed.pack(again, cols, chunk_bytes=2048, shuffle=42)
check(filecmp.cmp(p42, again, shallow=False), "same seed, same bytes")
p43 = os.path.join(d, "s43.rfs")
ringfeed.pack(p43, {"id": ids}, shuffle=43)
perm43 = np.array([int(r["id"][()]) for r in order(p43)])
check(not np.array_equal(perm, perm43), "another seed, another order")
# The order depends on the number of samples and the seed, not the fields.
p42b = os.path.join(d, "s42b.rfs")
ringfeed.pack(p42b, {"id": ids}, shuffle=42)
check(np.array_equal(np.array([int(r["id"][()]) for r in order(p42b)]), perm),
      "same seed and count, another schema: same order")
# More samples than one block of the order (4096): still each exactly once.
big = np.arange(10000, dtype=np.uint32)
pbig = os.path.join(d, "big.rfs")
ringfeed.pack(pbig, {"id": big, "twice": big.astype(np.uint64) * 2}, shuffle=5)
rows_big = order(pbig)
pb = np.array([int(r["id"][()]) for r in rows_big])
check(np.array_equal(np.sort(pb), big), "10000 samples: each exactly once")
check(all(int(r["twice"][()]) == 2 * int(r["id"][()]) for r in rows_big), "fields agree")
plain = os.path.join(d, "plain.rfs")
ringfeed.pack(plain, {"id": ids}, shuffle=None)
check(np.array_equal(np.array([int(r["id"][()]) for r in order(plain)]), ids),
      "shuffle=None keeps the order")
for seed in (0, 2**64 - 1):
    ringfeed.pack(os.path.join(d, "e.rfs"), {"id": ids[:5]}, shuffle=seed)
ringfeed.pack(os.path.join(d, "empty.rfs"), {"id": ids[:0]}, shuffle=1)

# Out of range is an OverflowError naming the argument, as docs/python.md
# says of every integer argument.
for bad, exc in [(-1, OverflowError), (2**64, OverflowError), (True, TypeError),
                 ("7", TypeError), (1.5, TypeError)]:
    try:
        ringfeed.pack(os.path.join(d, "bad.rfs"), {"id": ids}, shuffle=bad)
    except exc as e:
        if exc is OverflowError:
            assert "shuffle" in str(e), str(e)
    else:
        raise AssertionError("shuffle=%r did not raise %s" % (bad, exc.__name__))
print("ok")
