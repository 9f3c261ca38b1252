# SPDX-License-Identifier: MIT
# Description: state_dict/load_state_dict keep a shuffled stream's epoch and
# refuse another order, checked against the same loader's uninterrupted
# passes (no reference program): a state saved mid-pass in epoch 2 (chunks
# shuffle, seed 5) restores epoch 2 and yields exactly the rest of its pass,
# then epoch 3, with the library's position blob and without it (batches
# skipped); a state at an epoch's start restores that epoch; the dict's
# epoch is the one restored when there is no blob.  A state is refused
# (ValueError) by a loader of another seed, or when its own seed or shuffle
# was changed, and the refusing loader keeps its own order.
import os
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N, B = 960, 32
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=1024)
opts = dict(fields=["y"], device="cpu", pinned_bytes=1 << 20, shuffle="chunks")


def loader(seed=5, **kw):
    return ringfeed.Loader(p, B, seed=seed, **dict(opts, **kw))


def one_pass(ld):
    return [np.asarray(b["y"]).tolist() for b in ld]


# The reference: four passes, uninterrupted.
ld = loader()
ref = [one_pass(ld) for _ in range(4)]
ld.close()
check(len(ref[2]) == N // B, "batches per pass: %d" % len(ref[2]))
check(all(ref[e] != ref[e + 1] for e in range(3)), "shuffled epochs in the same order")
check(sorted(v for b in ref[2] for v in b) == list(range(N)), "a pass is every sample once")
other = loader(seed=6)
ref6 = one_pass(other)
other.close()
check(ref6 != ref[0], "seed 6 gives seed 5's order")


def state_at(epoch, k):
    ld = loader()
    for _ in range(epoch):
        one_pass(ld)
    it = iter(ld)
    for _ in range(k):
        next(it)
    st = ld.state_dict()
    del it
    ld.close()
    check(st["epoch"] == epoch and st["batch"] == k and st["seed"] == 5,
          "state at epoch %d batch %d: %r" % (epoch, k, st))
    return st


# Mid-pass in epoch 2: with the blob and without it.
st = state_at(2, 3)
for blob in (True, False):
    s = dict(st) if blob else dict(st, blob=None)
    ld = loader()
    ld.load_state_dict(s)
    check(ld.epoch == 2, "restored epoch %d, saved 2 (blob %s)" % (ld.epoch, blob))
    got = one_pass(ld)
    check(got == ref[2][3:], "the rest of epoch 2 after a restore (blob %s)" % blob)
    check(ld.epoch == 3, "epoch %d after the restored pass" % ld.epoch)
    check(one_pass(ld) == ref[3], "epoch 3 after the restored pass (blob %s)" % blob)
    ld.close()

# At an epoch's start.
st0 = state_at(2, 0)
ld = loader()
ld.load_state_dict(st0)
check(ld.epoch == 2 and one_pass(ld) == ref[2], "a state at epoch 2's start")
ld.close()

# Without a blob the dict's epoch is the position.
ld = loader()
ld.load_state_dict(dict(st, epoch=3, blob=None))
check(ld.epoch == 3 and one_pass(ld) == ref[3][3:], "epoch 3 batch 3 from the dict alone")
ld.close()

# Another order: refused, and the loader keeps its own.
for what, ld, s, own in (
        ("a loader of seed 6", loader(seed=6), st, ref6),
        ("a state whose seed was changed", loader(), dict(st, seed=6), ref[0]),
        ("a state whose seed was changed, no blob", loader(), dict(st, seed=6, blob=None), ref[0]),
        ("a state of another shuffle", loader(), dict(st, shuffle="none"), ref[0])):
    try:
        ld.load_state_dict(s)
        check(False, "%s: the state was accepted" % what)
    except ValueError as e:
        check("seed" in str(e) or "shuffle" in str(e), "%s: message %s" % (what, e))
    check(one_pass(ld) == own, "%s: the loader's own order after the refusal" % what)
    ld.close()

print("ok")
sys.exit(0)
