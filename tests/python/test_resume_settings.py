# SPDX-License-Identifier: MIT
# Description: load_state_dict refuses a state saved with another window or
# drop_last (ValueError naming the setting and both values) instead of
# adopting the saved order, leaving the refusing loader's order, order_id and
# len() as they were; a state of the same settings (an explicit window, the
# default window, either drop_last) resumes exactly the rest of the pass; an
# elastic resume (world 2 x B into world 1 x 2B) still loads; and len()
# equals the batches every pass yields.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N, B = 1000, 32          # N % B != 0: drop_last changes the batch count
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=512)
opts = dict(fields=["y"], device="cpu", pinned_bytes=4 << 20, shuffle="window", seed=1)


def loader(**kw):
    return ringfeed.Loader(p, B, **dict(opts, **kw))


def one_pass(ld):
    return [np.asarray(b["y"]).tolist() for b in ld]


def saved(stop=5, **kw):
    ld = loader(**kw)
    got = []
    for i, b in enumerate(ld):
        got.append(np.asarray(b["y"]).tolist())
        if i == stop - 1:
            break
    del b
    st = ld.state_dict()
    ld.close()
    return got, st


def refused(st, what, vals, **kw):
    ld = loader(**kw)
    oid, n = ld.order_id, len(ld)
    try:
        ld.load_state_dict(st)
    except ValueError as e:
        msg = str(e)
        check(what in msg and all(v in msg for v in vals),
              "the message names %s and both values: %s" % (what, msg))
    else:
        check(False, "a state of another %s was accepted" % what)
    check(ld.order_id == oid and len(ld) == n, "the refusing loader keeps its order")
    passes = one_pass(ld)
    check(len(passes) == len(ld), "len %d, a pass yields %d" % (len(ld), len(passes)))
    ld.close()


# Another window: explicit 4 saved, the default (more chunks) at load, and
# the other way round.
_, st = saved(window=4)
dflt = loader()
wd = dflt.state_dict().get("window")
dflt.close()
check(wd is not None and wd > 4, "the dataset's default window is above 4: %r" % wd)
refused(st, "window", ["4", str(wd)])
_, st = saved()
refused(st, "window", [str(wd), "8"], window=8)

# Another drop_last, both ways.
_, st = saved(drop_last=True)
refused(st, "drop_last", ["True", "False"], drop_last=False)
_, st = saved(drop_last=False)
refused(st, "drop_last", ["True", "False"], drop_last=True)

# The same settings resume exactly, and len() is what the passes yield.
for kw in (dict(window=4), dict(), dict(drop_last=False), dict(window=4, drop_last=False)):
    ref_ld = loader(**kw)
    ref = one_pass(ref_ld)
    nxt = one_pass(ref_ld)
    check(len(ref) == len(ref_ld), "%r: len %d, pass %d" % (kw, len(ref_ld), len(ref)))
    ref_ld.close()
    got, st = saved(**kw)
    ld = loader(**kw)
    ld.load_state_dict(st)
    rest = one_pass(ld)
    check(got + rest == ref, "%r: resumed pass differs" % kw)
    again = one_pass(ld)
    check(again == nxt and len(again) == len(ld), "%r: next pass after resume" % kw)
    ld.close()

# Elastic: world 2 of B into world 1 of 2B (same global batch) still loads.
ld = ringfeed.Loader(p, B, rank=0, world=2, **opts)
it = iter(ld)
next(it)
st = ld.state_dict()
ld.close()
ld = ringfeed.Loader(p, 2 * B, rank=0, world=1, **opts)
ld.load_state_dict(st)
rest = one_pass(ld)
check(len(rest) == len(ld) - 1, "elastic resume: %d batches left of %d" % (len(rest), len(ld)))
ld.close()
print("ok")
