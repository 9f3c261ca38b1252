# SPDX-License-Identifier: MIT
# Description: messages a user acts on carry the values: an out-of-range
# ds[i], ds.take(...) or chunk_info(c) names the index and the length; a
# rank not below the world names both; ringfeed.Error.name is the symbolic
# name ("EHELD" beside ringfeed.EHELD, "ENOENT" for an errno code) and
# .description what the code means (ringfeed.strerror).
import errno
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 100
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=4096)


def index_error(fn, *needles):
    try:
        fn()
    except IndexError as e:
        m = str(e)
        check(all(x in m for x in needles), "%r lacks %r" % (m, needles))
        print("->", m)
        return
    check(False, "no IndexError")


with ringfeed.open(p) as ds:
    index_error(lambda: ds[N], str(N), "100 samples")
    index_error(lambda: ds[-N - 1], "-101", "100 samples")
    index_error(lambda: ds.take([0, 5, 250]), "250", "100 samples")
    index_error(lambda: ds.chunk_info(ds.chunks), str(ds.chunks), "%d chunks" % ds.chunks)
    check(int(ds[-N]["y"]) == 0 and int(ds[N - 1]["y"]) == N - 1, "the ends still work")

for rank, world in ((2, 2), (5, 3)):
    try:
        ringfeed.Loader(p, 10, rank=rank, world=world, device="cpu")
        check(False, "rank %d world %d accepted" % (rank, world))
    except ValueError as e:
        check("rank=%d, world=%d" % (rank, world) in str(e), "rank message: %s" % e)
        print("->", e)

# Error.name and .description.
try:
    ringfeed.open(os.path.join(d, "missing.rfs"))
    check(False, "a missing file opened")
except ringfeed.Error as e:
    check(e.code == -errno.ENOENT and e.name == "ENOENT", "ENOENT: %r %r" % (e.code, e.name))
    check(e.description == ringfeed.strerror(e.code) and e.description, "description")
    check("missing.rfs" in str(e), "str names the path: %s" % e)
ld = ringfeed.Loader(p, 10, device="cpu", depth=1, pinned_bytes=1 << 20, decode_threads=1)
it = iter(ld)
keep = next(it)
try:
    next(it)
    check(False, "a second batch with depth=1")
except ringfeed.Error as e:
    check(e.code == ringfeed.EHELD and e.name == "EHELD", "EHELD: %r" % e.name)
    check(e.description == ringfeed.strerror(ringfeed.EHELD), "EHELD description")
    print("->", e.name, "|", e.description)
del keep
ld.close()
print("ok")
