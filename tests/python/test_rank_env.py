# SPDX-License-Identifier: MIT
# Description: ringfeed.Loader reads the launcher's rank and world as the
# library does and refuses what the library refuses: a malformed launcher
# variable (RANK=abc) is ringfeed.Error EUSAGE naming it, never rank 0 of 1,
# raised before the dataset is opened (a missing dataset does not hide it),
# and len() counts the batches of the rank and world the environment gives.
# The settings' limits are the library's (RF_*_MAX) and its names are the
# library's ("host" as well as Python's "cpu").
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 1000
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=4096)
opts = dict(device="cpu", pinned_bytes=1 << 20, decode_threads=1)
for v in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
          "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
    os.environ.pop(v, None)


def refused(what, exc=ValueError, path=p, **kw):
    args = dict(opts)
    args.update(kw)
    try:
        ld = ringfeed.Loader(path, 10, **args)
    except exc as e:
        return e
    ld.close()
    check(False, "accepted %s" % what)
    return None


missing = os.path.join(d, "missing.rfs")
for rank, world, bad in (("abc", "2", "RANK"), ("1", "two", "WORLD_SIZE"), ("-1", "2", "RANK"),
                         ("1x", "2", "RANK"), ("3", "2", "RANK")):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = rank, world
    for path in (p, missing):
        e = refused("RANK=%s WORLD_SIZE=%s" % (rank, world), ringfeed.Error, path)
        check(e is not None and e.code == ringfeed.EUSAGE and bad in str(e),
              "RANK=%s WORLD_SIZE=%s (%s): EUSAGE naming %s: %r" % (rank, world, path, bad, e))
    print("RANK=%s WORLD_SIZE=%s: %s" % (rank, world, e))

# A good launcher pair: this rank's share of the epoch.
os.environ["RANK"], os.environ["WORLD_SIZE"] = "1", "4"
with ringfeed.Loader(p, 10, **opts) as ld:
    check(len(ld) == N // (10 * 4), "len with RANK=1 WORLD_SIZE=4: %d" % len(ld))
    n = sum(1 for _ in ld)
    check(n == len(ld), "batches %d, len %d" % (n, len(ld)))
with ringfeed.Loader(p, 10, drop_last=False, **opts) as ld:
    check(len(ld) == 25, "len drop_last=False, world 4: %d" % len(ld))
del os.environ["RANK"], os.environ["WORLD_SIZE"]

# The library's limits, and its device name "host".
for kw in (dict(depth=64), dict(window=1025), dict(io_depth=4097), dict(decode_threads=65),
           dict(rank=0, world=(1 << 24) + 1)):
    refused(repr(kw), **kw)
for kw in (dict(depth=63), dict(window=1024), dict(io_depth=4096), dict(device="host")):
    args = dict(opts)
    args.update(kw)
    with ringfeed.Loader(p, 10, **args) as ld:
        check(len(ld) == N // 10, "%r: len %d" % (kw, len(ld)))
