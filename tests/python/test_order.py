# SPDX-License-Identifier: MIT
# Description: the order of ringfeed.Loader's batches matches the C loader
# (order_ref, the same settings): pass after pass, with drop_last on and
# off; len() is the number of batches a pass yields; set_epoch relabels or
# restarts; state_dict/load_state_dict resume exactly at the next batch,
# within an epoch and at its end, and refuse a state of another loader;
# shuffled (chunks) and sharded orders match the C loader rank by rank and
# the ranks cover disjoint samples (all of them with drop_last off); a
# shuffled state resumes, also into a job of another world size with the
# same global batch; full shuffling
# matches the C loader, sharded, and resumes into another world size; a
# window and a full pass deliver distinct samples; map=True gives the same
# batches.
import os
import subprocess
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

ref = sys.argv[1]
d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 1000
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64),
                  "z": np.zeros((N, 3), dtype=np.float32)}, chunk_bytes=1024)
opts = dict(device="cpu", pinned_bytes=1 << 20)


def c_order(batch, drop_last, epochs, shuffle="none", seed=0, epoch=0, rank=0, world=1):
    """The C loader's batches, per epoch (from `epoch`)."""
    out = subprocess.run([ref, p, str(batch), str(int(drop_last)), str(epochs), shuffle,
                          str(seed), str(epoch), str(rank), str(world)],
                         check=True, capture_output=True, text=True).stdout
    per = {}
    for line in out.splitlines():
        e, vals = line.split(":")
        per.setdefault(int(e), []).append([int(v) for v in vals.split()])
    return [per.get(e, []) for e in sorted(per)] if per else []


def py_pass(ld):
    return [np.asarray(b["y"]).tolist() for b in ld]


for B, drop_last in ((64, True), (64, False), (1000, True), (7, False)):
    want = c_order(B, drop_last, 3)
    ld = ringfeed.Loader(p, B, drop_last=drop_last, fields=["y"], **opts)
    for e in range(3):
        check(ld.epoch == e, "epoch %d before pass %d" % (ld.epoch, e))
        got = py_pass(ld)
        check(got == want[e], "B=%d drop_last=%s epoch %d differs from C" % (B, drop_last, e))
        check(len(got) == len(ld), "len %d, pass %d" % (len(ld), len(got)))
    ld.close()

# set_epoch: a fresh loader jumps; the order of "none" is the same.
want = c_order(64, True, 1)[0]
ld = ringfeed.Loader(p, 64, **opts)
ld.set_epoch(5)
check(ld.epoch == 5 and py_pass(ld) == want and ld.epoch == 6, "set_epoch")
it = iter(ld)
next(it)
ld.set_epoch(2)  # mid-pass: the pass restarts at epoch 2
check(ld.epoch == 2 and py_pass(ld) == want, "set_epoch mid-pass")
ld.close()

# Resume within an epoch, at an epoch's last batch and at its end.
B = 64
ref_passes = c_order(B, True, 3)
for epoch, k in ((1, 5), (0, 1), (1, len(ref_passes[1]) - 1), (2, 0)):
    ld = ringfeed.Loader(p, B, **opts)
    for _ in range(epoch):
        py_pass(ld)
    it = iter(ld)
    for _ in range(k):
        next(it)
    state = ld.state_dict()
    check(state["epoch"] == epoch and state["batch"] == k, "state %r" % state)
    # Mid-epoch the library's position blob comes along (resume reads
    # nothing skipped); at an epoch's start none is needed.
    check((state["blob"] is not None and state["blob"][:8] == b"RFSTATE\0") == (k > 0),
          "blob %r" % (state["blob"],))
    rest = [np.asarray(b["y"]).tolist() for b in it]
    ld.close()

    ld2 = ringfeed.Loader(p, B, **opts)
    ld2.load_state_dict(state)
    check(ld2.epoch == epoch, "restored epoch %d" % ld2.epoch)
    got = py_pass(ld2)
    check(got == rest == ref_passes[epoch][k:], "resume at epoch %d batch %d" % (epoch, k))
    check(py_pass(ld2) == ref_passes[epoch + 1 if epoch < 2 else 0], "the epoch after resume")
    ld2.close()

for bad in (dict(batch_size=32), dict(seed=1)):
    args = dict(batch_size=B, **opts)
    args.update(bad)
    ld = ringfeed.Loader(p, **args)
    try:
        ld.load_state_dict(state)
        check(False, "a state of another loader was accepted: %r" % bad)
    except ValueError:
        pass
    ld.close()

# Shuffled and sharded orders: the same batches as the C loader, pass by
# pass; the ranks together cover disjoint samples, and with drop_last=False
# every sample: the ranks past the first (N % (world x B)) % world end their
# kept tail on a repeat of their sample before it.
for shuffle, seed, world, drop_last in (("chunks", 1, 1, True), ("chunks", 2, 3, True),
                                        ("chunks", 2, 3, False), ("none", 0, 4, False),
                                        ("full", 4, 1, False), ("full", 5, 3, True)):
    union = []
    m = N % (B * world) % world
    for rank in range(world):
        want = c_order(B, drop_last, 2, shuffle, seed, 3, rank, world)
        ld = ringfeed.Loader(p, B, shuffle=shuffle, seed=seed, epoch=3, rank=rank,
                             world=world, drop_last=drop_last, **opts)
        got = [py_pass(ld), py_pass(ld)]
        check(got == want, "%s seed %d rank %d/%d drop_last %s differs from C" % (
            shuffle, seed, rank, world, drop_last))
        check(len(got[0]) == len(ld), "len %d vs %d batches" % (len(ld), len(got[0])))
        mine = [v for b in got[0] for v in b]
        if not drop_last and m and rank >= m:
            check(mine[-1] == mine[-2], "rank %d/%d: the tail's pad is no repeat" % (rank, world))
            mine = mine[:-1]
        union += mine
        if shuffle != "none":
            check(got[0] != got[1], "two epochs in the same order")
        ld.close()
    check(len(set(union)) == len(union), "ranks overlap")
    if not drop_last:
        check(sorted(union) == list(range(N)), "%s world %d: %d of %d samples delivered" % (
            shuffle, world, len(set(union)), N))

# Resume in a shuffled order, also with another world of the same global batch.
want = c_order(32, True, 2, "chunks", 9, 0, 0, 2)
ld = ringfeed.Loader(p, 32, shuffle="chunks", seed=9, rank=0, world=2, **opts)
it = iter(ld)
for _ in range(4):
    next(it)
state = ld.state_dict()
ld.close()
ld = ringfeed.Loader(p, 32, shuffle="chunks", seed=9, rank=0, world=2, **opts)
ld.load_state_dict(state)
check(py_pass(ld) == want[0][4:], "shuffled resume")
ld.close()
full = c_order(64, True, 1, "chunks", 9, 0, 0, 1)[0]
ld = ringfeed.Loader(p, 64, shuffle="chunks", seed=9, world=1, **opts)
ld.load_state_dict(state)
check(py_pass(ld) == full[4:], "resume into one rank of twice the batch")
ld.close()

# A damaged blob is refused by the library.
bad = dict(state, blob=state["blob"][:20] + bytes([state["blob"][20] ^ 1]) + state["blob"][21:])
ld = ringfeed.Loader(p, 32, shuffle="chunks", seed=9, rank=0, world=2, **opts)
try:
    ld.load_state_dict(bad)
    check(False, "a damaged blob was accepted")
except ringfeed.Error as e:
    check(e.code == ringfeed.ESTATE, "code %d: %s" % (e.code, e))
ld.close()

# Full shuffling resumes exactly, also into another world of the same
# global batch.
want = c_order(16, True, 1, "full", 6, 0, 0, 1)[0]
ld = ringfeed.Loader(p, 8, shuffle="full", seed=6, rank=1, world=2, **opts)
it = iter(ld)
for _ in range(5):
    next(it)
state = ld.state_dict()
ld.close()
ld = ringfeed.Loader(p, 16, shuffle="full", seed=6, world=1, **opts)
ld.load_state_dict(state)
check(py_pass(ld) == want[5:], "full: resume into one rank of twice the batch")
ld.close()

for mode in ("window", "full"):
    try:
        ld = ringfeed.Loader(p, B, shuffle=mode, seed=3, **opts)
    except ValueError as e:
        check("not supported by this build" in str(e), "message: %s" % e)
        continue
    got = sorted(v for b in py_pass(ld) for v in b)
    check(len(got) == len(ld) * B and len(set(got)) == len(got), "a %s pass" % mode)
    ld.close()
# map=True (chunks read through memory maps): the same batches as the C
# loader's read calls; with direct=True it is refused, with the reason.
want = c_order(32, True, 2, "chunks", 4)
ld = ringfeed.Loader(p, 32, shuffle="chunks", seed=4, map=True, fields=["y"], **opts)
check([py_pass(ld), py_pass(ld)] == want, "map=True: the order differs from C")
check(ld.stats()["io_engine"] == "mmap", "map=True: engine %s" % ld.stats()["io_engine"])
check(ld.stats()["decode_threads"] >= 1, "decode_threads %d" % ld.stats()["decode_threads"])
ld.close()
try:
    ringfeed.Loader(p, 32, map=True, direct=True, **opts)
    check(False, "map=True with direct=True was accepted")
except ringfeed.Error as e:
    check("map" in str(e), "message: %s" % e)
print("ok")
