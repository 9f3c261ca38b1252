# SPDX-License-Identifier: MIT
# Description: a state saved after the last batch of an epoch, before the
# loop saw its end (a training loop that counts steps, or breaks on the
# last one), restores a loader whose epoch names the data it yields: the
# next pass is either the (empty) rest of that epoch and then the next
# epoch, or the next epoch itself with loader.epoch saying so.  Checked for
# the full, window and chunks shuffles against an uninterrupted loader.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N, B = 960, 32
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=1024)


def one_pass(ld):
    return [np.asarray(b["y"]).tolist() for b in ld]


for shuffle in ("full", "window", "chunks"):
    def loader():
        return ringfeed.Loader(p, B, fields=["y"], device="cpu", pinned_bytes=1 << 20,
                               shuffle=shuffle, seed=5, map=True)

    ld = loader()
    ref = [one_pass(ld) for _ in range(5)]
    ld.close()
    check(all(ref[e] != ref[e + 1] for e in range(4)), "%s: epochs differ" % shuffle)

    # Epoch 1 to its last batch, the state saved before the loop ends.
    ld = loader()
    ld.set_epoch(1)
    for i, b in enumerate(ld):
        if i + 1 == len(ld):
            break
    del b
    st = ld.state_dict()
    ld.close()
    check(st["epoch"] == 1 and st["batch"] == len(ref[1]), "%s: state %r" % (shuffle, st))

    ld = loader()
    ld.load_state_dict(st)
    seen = []
    for _ in range(3):
        e = ld.epoch
        seen.append((e, one_pass(ld)))
    ld.close()
    for e, got in seen:
        check(got == [] or (e < 5 and got == ref[e]),
              "%s: after restoring a state at epoch 1's end, a pass with loader.epoch %d "
              "yields %s" % (shuffle, e,
                             "epoch %d's batches" % ref.index(got) if got in ref else "other data"))
    flat = [x for _, got in seen for x in got]
    check(flat[:len(ref[2]) + len(ref[3])] == [x for x in ref[2] + ref[3]][:len(flat)],
          "%s: the restored stream is epoch 2 then epoch 3" % shuffle)
