# SPDX-License-Identifier: MIT
# Description: calls in an unusual order or with bad values get a clear
# answer, never a silently wrong stream: set_epoch after a restore within an
# epoch jumps to that epoch's start (shuffle "none" too); set_epoch inside a
# pass makes that pass raise RuntimeError at its next step instead of ending
# it early; a restore whose skip fails midway leaves the loader to start the
# epoch over, not to go on from where the skip stopped; negative or too large
# integers raise OverflowError (they used to wrap); a dl_device that is not
# a tuple raises TypeError; ds[i] from several threads at once, with a close
# racing them, reads right values or raises "closed"; loader[i] (what a
# DataLoader given the Loader as its dataset does) raises TypeError naming
# the recipe for DataLoader workers.
import os
import threading

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N, B = 1000, 100
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64),
                  "z": np.zeros((N, 3), dtype=np.float32)}, chunk_bytes=1024)
opts = dict(device="cpu", pinned_bytes=1 << 20)


def firsts(ld):
    return [int(np.asarray(b["y"])[0]) for b in ld]


want = list(range(0, N, B))

# set_epoch after a restore within an epoch: the jump, not a relabel of the
# restored position, with and without the library's position blob.
for blob in (True, False):
    ld = ringfeed.Loader(p, B, **opts)
    it = iter(ld)
    for _ in range(3):
        next(it)
    state = ld.state_dict()
    del it
    ld.close()
    if not blob:
        state["blob"] = None
    ld = ringfeed.Loader(p, B, **opts)
    ld.load_state_dict(state)
    ld.set_epoch(0)  # the restored epoch: the position stays
    check(firsts(ld) == want[3:], "set_epoch(restored epoch) keeps the position")
    ld.load_state_dict(state)
    ld.set_epoch(7)
    got = firsts(ld)
    check(got == want and ld.epoch == 8,
          "set_epoch(7) after a restore (blob %s): %r, epoch %d" % (blob, got, ld.epoch))
    ld.close()

# set_epoch inside a pass ends it with an error, not in silence.
ld = ringfeed.Loader(p, B, **opts)
seen = 0
err = None
try:
    for batch in ld:
        seen += 1
        if seen == 2:
            ld.set_epoch(5)
except RuntimeError as e:
    err = e
check(err is not None and seen == 2, "set_epoch mid-pass: %d batches, %r" % (seen, err))
check("set_epoch" in str(err), "the message names set_epoch: %s" % err)
check(firsts(ld) == want and ld.epoch == 6, "the next pass iterates epoch 5")
# A newer pass ends an older one the same way; a finished pass stays finished.
it1 = iter(ld)
next(it1)
it2 = iter(ld)
next(it2)
try:
    next(it1)
    check(False, "an older pass went on beside a newer one")
except RuntimeError:
    pass
for _ in it2:
    pass
try:
    next(it2)
    check(False, "a finished pass yielded again")
except StopIteration:
    pass
ld.close()

# A restore that skips batches (no position blob) and fails midway, at a
# corrupt chunk: the loader starts the epoch over at the next pass.
q = os.path.join(d, "bad.rfs")
ringfeed.pack(q, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=1024)
with ringfeed.open(q) as ds:
    ci = ds.chunk_info(3)
with open(q, "r+b") as f:
    f.seek(ci["offset"] + 10)
    byte = f.read(1)
    f.seek(ci["offset"] + 10)
    f.write(bytes([byte[0] ^ 0xFF]))
bad_batch = ci["first_sample"] // B  # the first batch that needs the chunk
check(0 < bad_batch < 8, "corrupt chunk at batch %d" % bad_batch)
ld = ringfeed.Loader(q, B, **opts)
state = ld.state_dict()
state.update(batch=8, blob=None)
try:
    ld.load_state_dict(state)
    check(False, "the skip read past a corrupt chunk")
except ringfeed.Error as e:
    check(e.code == ringfeed.ECHECKSUM, "skip error %s" % e.name)
check(ld.state_dict()["batch"] == 0, "state after a failed restore: %r" % ld.state_dict())
got = []
try:
    for batch in ld:
        got.append(int(np.asarray(batch["y"])[0]))
except ringfeed.Error:
    pass
check(got == want[:bad_batch], "after a failed restore the pass starts over: %r" % got)
ld.close()

# Integers out of range raise instead of wrapping; NumPy integers are ints.
for kw in ({"epoch": -1}, {"seed": -1}, {"seed": 1 << 64}, {"pinned_bytes": -1},
           {"var_bytes": -1}):
    try:
        ringfeed.Loader(p, B, **dict(opts, **kw)).close()
        check(False, "Loader(%r) accepted" % kw)
    except OverflowError:
        pass
ld = ringfeed.Loader(p, B, seed=np.uint64(3), epoch=np.int64(2), **opts)
check(ld.epoch == 2, "NumPy integer epoch")
try:
    ringfeed.Loader(p, B, seed=1.5, **opts)
    check(False, "a float seed was accepted")
except TypeError:
    pass
for kw in ({"shard_bytes": -1}, {"chunk_bytes": -1}):
    try:
        ringfeed.pack(os.path.join(d, "w.rfs"), {"y": np.arange(10)}, **kw)
        check(False, "pack(%r) accepted" % kw)
    except OverflowError:
        pass
try:
    ringfeed.strerror(1 << 40)
    check(False, "strerror of a code beyond int")
except OverflowError:
    pass

# dl_device must be a tuple.
batch = next(iter(ld))
for bad in ([1, 0], 1):
    try:
        batch["y"].__dlpack__(dl_device=bad)
        check(False, "dl_device=%r accepted" % (bad,))
    except TypeError:
        pass
check(batch["y"].__dlpack__(dl_device=(1, 0)) is not None, "dl_device (1, 0)")
del batch
ld.close()

# ds[i] from several threads, one of them closing the dataset midway.
ds = ringfeed.open(p)
errors = []
closed = [0]


def reader(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        i = int(rng.integers(0, N))
        try:
            v = int(ds[i]["y"])
        except ValueError as e:
            if "closed" in str(e):
                closed[0] += 1
                return
            errors.append(repr(e))
            return
        if v != i:
            errors.append("ds[%d] = %d" % (i, v))
            return


def run_readers(close_after=None):
    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    if close_after is not None:
        threading.Event().wait(close_after)
        ds.close()
    for t in threads:
        t.join()


run_readers()
check(not errors and closed[0] == 0, "concurrent reads: %r" % errors[:3])
run_readers(close_after=0.01)
check(not errors, "reads racing a close: %r" % errors[:3])
try:
    ds[0]
    check(False, "a closed dataset read")
except ValueError:
    pass
print("ok")

# A Loader is iterated, not indexed: a DataLoader given it as its dataset
# indexes it, and is told what to do instead.
ld = ringfeed.Loader(p, B, **opts)
try:
    ld[0]
    check(False, "loader[0] accepted")
except TypeError as e:
    check("Processes and DataLoader workers" in str(e), "loader[0]: %s" % e)
check(sum(1 for _ in ld) == len(ld), "the loader still iterates")
ld.close()
