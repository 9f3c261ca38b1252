# SPDX-License-Identifier: MIT
# Description: with drop_last=False the ranks of a job together deliver
# every sample of an epoch: for each shuffle mode, worlds 2, 3 and 4 and a
# dataset whose size no global batch divides, the labels of all ranks' first
# pass are every sample once, plus one repeat on each rank past the first
# (N % (world x B)) % world, the last sample of its pass repeating the one
# before it; every rank has len() batches, the same on all, and the same
# last batch size.  Ranks set by rank=/world= and, in processes of their
# own, by RANK/WORLD_SIZE as torchrun sets them.  drop_last=True still
# drops exactly the last N % (world x B) samples of the global order.  A
# mixture of two sources in the proportions of their sizes (an epoch draws
# each sample once) keeps the same promise.
import collections
import os
import subprocess
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 1001
ringfeed.pack(p, {"label": np.arange(N, dtype=np.int64), "x": np.zeros((N, 3), np.float32)},
              chunk_bytes=2048)
opts = dict(device="cpu", pinned_bytes=1 << 20, seed=11)


def one_pass(ld):
    out, sizes = [], []
    for b in ld:
        labels = np.from_dlpack(b["label"]).tolist()
        out += labels
        sizes.append(len(labels))
    return out, sizes


def check_job(shuffle, world, B, passes, n=N):
    """passes: each rank's (labels, batch sizes, len) of one pass of n samples."""
    G = world * B
    rem = n % G
    m = rem % world
    what = "%s world %d B %d" % (shuffle, world, B)
    counts = collections.Counter()
    nb = {len(s) for _, s, _ in passes} | {n for _, _, n in passes}
    check(len(nb) == 1, "%s: batch counts and len() differ across ranks: %s" % (what, nb))
    check(len({s[-1] for _, s, _ in passes}) == 1, "%s: last batch sizes differ" % what)
    for r, (labels, _, _) in enumerate(passes):
        if m and r >= m:
            check(labels[-1] == labels[-2], "%s: rank %d: the pad is no repeat" % (what, r))
            labels = labels[:-1]
        counts.update(labels)
    missing = [i for i in range(n) if counts[i] == 0]
    twice = [i for i in range(n) if counts[i] > 1]
    check(not missing and not twice and len(counts) == n,
          "%s: %d samples never delivered (%s...), %d more than once" % (
              what, len(missing), missing[:5], len(twice)))


for shuffle in ("none", "chunks", "window", "full"):
    for world in (2, 3, 4):
        for B in (7, 16):
            passes = []
            for r in range(world):
                with ringfeed.Loader(p, B, shuffle=shuffle, rank=r, world=world, drop_last=False,
                                     **opts) as ld:
                    labels, sizes = one_pass(ld)
                    passes.append((labels, sizes, len(ld)))
            check_job(shuffle, world, B, passes)

    # drop_last=True: unchanged, the last N % (world x B) of the global order
    # are dropped and nothing is repeated.
    world, B = 3, 16
    seen = []
    for r in range(world):
        with ringfeed.Loader(p, B, shuffle=shuffle, rank=r, world=world, drop_last=True,
                             **opts) as ld:
            seen += one_pass(ld)[0]
    check(len(seen) == N - N % (world * B) and len(set(seen)) == len(seen),
          "%s drop_last=True: %d delivered, %d distinct" % (shuffle, len(seen), len(set(seen))))

# A mixture: its epoch of N + N2 draws dealt out the same way.
p2 = os.path.join(d, "more.rfs")
N2 = 500
ringfeed.pack(p2, {"label": np.arange(N, N + N2, dtype=np.int64),
                   "x": np.ones((N2, 3), np.float32)}, chunk_bytes=2048)
for shuffle in ("none", "chunks", "window"):
    world, B = 3, 16
    passes = []
    for r in range(world):
        with ringfeed.Loader([ringfeed.Source(p, N), ringfeed.Source(p2, N2)], B,
                             shuffle=shuffle, rank=r, world=world, drop_last=False,
                             **opts) as ld:
            labels, sizes = one_pass(ld)
            passes.append((labels, sizes, len(ld)))
    check_job(shuffle + " (mixture)", world, B, passes, N + N2)

# A torchrun-style job: three processes, rank and world from RANK/WORLD_SIZE.
child = r"""
import sys, numpy as np, ringfeed
ld = ringfeed.Loader(sys.argv[1], 16, shuffle=sys.argv[2], seed=11, device="cpu",
                     pinned_bytes=1 << 20, drop_last=False)
assert ld.rank_source == "RANK/WORLD_SIZE", ld.rank_source
labels = []
for b in ld:
    labels += np.from_dlpack(b["label"]).tolist()
print(len(ld), " ".join(map(str, labels)))
"""
for shuffle in ("none", "chunks", "window", "full"):
    procs = []
    for r in range(3):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="3", LOCAL_RANK=str(r))
        for v in ("SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "PMI_RANK", "PMI_SIZE"):
            env.pop(v, None)
        procs.append(subprocess.Popen([sys.executable, "-c", child, p, shuffle], env=env,
                                      stdout=subprocess.PIPE))
    passes = []
    for pr in procs:
        out, _ = pr.communicate()
        check(pr.returncode == 0, "RANK/WORLD_SIZE child failed (%s)" % shuffle)
        n, *labels = out.split()
        labels = [int(v) for v in labels]
        # Batch sizes are not printed: every batch but the last has 16.
        last = len(labels) - 16 * (int(n) - 1)
        passes.append((labels, [16] * (int(n) - 1) + [last], int(n)))
    check_job(shuffle + " (RANK/WORLD_SIZE)", 3, 16, passes)
print("ok")
