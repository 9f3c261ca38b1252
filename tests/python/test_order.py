# SPDX-License-Identifier: MIT
# Description: the order of ringfeed.Loader's batches matches the C loader
# (order_ref, the same settings): pass after pass, with drop_last on and
# off; len() is the number of batches a pass yields; set_epoch relabels or
# restarts; state_dict/load_state_dict resume exactly at the next batch,
# within an epoch and at its end, and refuse a state of another loader;
# shuffle modes either match the C loader or are refused as unsupported.
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


def c_order(batch, drop_last, epochs):
    out = subprocess.run([ref, p, str(batch), str(int(drop_last)), str(epochs)],
                         check=True, capture_output=True, text=True).stdout
    per = [[] for _ in range(epochs)]
    for line in out.splitlines():
        e, vals = line.split(":")
        per[int(e)].append([int(v) for v in vals.split()])
    return per


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

for mode in ("chunks", "window", "full"):
    try:
        ld = ringfeed.Loader(p, B, shuffle=mode, seed=3, **opts)
    except ValueError as e:
        check("not supported by this build" in str(e), "message: %s" % e)
        continue
    got = sorted(v for b in py_pass(ld) for v in b)
    check(len(got) == len(ld) * B and len(set(got)) == len(got), "a %s pass" % mode)
    ld.close()
print("ok")
