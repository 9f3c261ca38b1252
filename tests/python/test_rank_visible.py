# SPDX-License-Identifier: MIT
# Description: the rank and world a Loader takes are visible: loader.rank,
# .world and .rank_source, repr() and stats() show them and where they came
# from.  A world above 1 from a batch system's variables (SLURM_*, OMPI_*,
# PMI_*: inherited by a notebook kernel started in an allocation) warns
# with ringfeed.RingfeedWarning at the default warning level; arguments and
# torchrun's RANK/WORLD_SIZE do not warn, nor a world of 1.
import os
import warnings

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 1000
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=4096)
opts = dict(device="cpu", pinned_bytes=1 << 20, decode_threads=1)
VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
        "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


def make(env, **kw):
    for v in VARS:
        os.environ.pop(v, None)
    os.environ.update(env)
    args = dict(opts)
    args.update(kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        ld = ringfeed.Loader(p, 10, **args)
    ours = [w for w in caught if issubclass(w.category, ringfeed.RingfeedWarning)]
    return ld, ours


cases = [
    ({}, {}, 0, 1, "default", False),
    ({}, dict(rank=1, world=2), 1, 2, "arguments", False),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}, {}, 0, 4,
     "SLURM_PROCID/SLURM_NTASKS", True),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, {}, 1, 2,
     "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", True),
    ({"PMI_RANK": "2", "PMI_SIZE": "3"}, {}, 2, 3, "PMI_RANK/PMI_SIZE", True),
    # A Slurm step of one task: the whole dataset, nothing to say.
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, {}, 0, 1, "SLURM_PROCID/SLURM_NTASKS", False),
    # torchrun: the normal distributed case.
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, {}, 1, 2, "RANK/WORLD_SIZE", False),
    # The arguments win over the batch system's variables: no warning.
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, dict(rank=0, world=1), 0, 1, "arguments",
     False),
    # A rank given, the world from Slurm: still 1/4 of the data.
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, dict(rank=1), 1, 4,
     "arguments+SLURM_PROCID/SLURM_NTASKS", True),
]
for env, kw, rank, world, src, warn in cases:
    ld, ours = make(env, **kw)
    what = "%r %r" % (env, kw)
    check((ld.rank, ld.world, ld.rank_source) == (rank, world, src),
          "%s: rank %r world %r source %r" % (what, ld.rank, ld.world, ld.rank_source))
    r = repr(ld)
    check("rank=%d world=%d rank_source=%r" % (rank, world, src) in r, "%s: repr %s" % (what, r))
    st = ld.stats()
    check((st["rank"], st["world"], st["rank_source"]) == (rank, world, src),
          "%s: stats %r" % (what, {k: st[k] for k in ("rank", "world", "rank_source")}))
    check(len(ld) == N // (10 * world), "%s: len %d" % (what, len(ld)))
    check(bool(ours) == warn, "%s: warnings %r" % (what, [str(w.message) for w in ours]))
    if ours:
        m = str(ours[0].message)
        check("1/%d" % world in m and "rank=0, world=1" in m and src.split("+")[-1] in m,
              "%s: message %s" % (what, m))
        print(m)
    ld.close()

# A process whose torch.distributed (or mpi4py) is initialised is a real
# distributed job: no warning.  (A stand-in module: the rule only calls
# is_initialized() on what the program imported.)
import sys  # noqa: E402
import types  # noqa: E402

for name, fn in (("torch.distributed", "is_initialized"), ("mpi4py.MPI", "Is_initialized")):
    saved = sys.modules.get(name)
    fake = types.ModuleType(name)
    setattr(fake, fn, lambda: True)
    sys.modules[name] = fake
    ld, ours = make({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"})
    check(ld.world == 2 and not ours, "%s initialised: %r" % (name, [str(w.message) for w in ours]))
    ld.close()
    setattr(fake, fn, lambda: False)
    ld, ours = make({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"})
    check(ours, "%s not initialised: a warning" % name)
    ld.close()
    if saved is None:
        del sys.modules[name]
    else:
        sys.modules[name] = saved

check(issubclass(ringfeed.RingfeedWarning, RuntimeWarning), "RingfeedWarning is a RuntimeWarning")
# Made an error by the user's filter: the Loader is not created.
for v in VARS:
    os.environ.pop(v, None)
os.environ.update({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
with warnings.catch_warnings():
    warnings.simplefilter("error", ringfeed.RingfeedWarning)
    try:
        ringfeed.Loader(p, 10, **opts)
        check(False, "the warning as an error")
    except ringfeed.RingfeedWarning:
        pass
print("ok")
