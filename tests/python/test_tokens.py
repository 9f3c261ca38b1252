# SPDX-License-Identifier: MIT
# Description: Loader(tokens="inputs_targets"): a "tokens" field of T + 1
# u16 or u32 tokens per sample arrives as int32 "inputs" [B, T] (tokens
# [0, T)) and "targets" [B, T] (tokens [1, T + 1)), contiguous, in file order
# equal to the rows built here from the token streams (u16 values above
# 32767 included), with and without map; the default keeps the stored field;
# a bad value raises ValueError, a dataset without "tokens" ringfeed.Error.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
T = 12
rng = np.random.default_rng(4)
for dt in (np.uint16, np.uint32):
    stream = rng.integers(0, np.iinfo(dt).max, size=40 * T + 5, dtype=dt, endpoint=True)
    n = (len(stream) - 1) // T
    rows = np.stack([stream[i * T:i * T + T + 1] for i in range(n)])
    p = os.path.join(d, "tok-%s.rfs" % np.dtype(dt).name)
    ringfeed.pack(p, {"tokens": rows}, chunk_bytes=256)
    want_in = rows[:, :T].view(np.int32) if dt == np.uint32 else rows[:, :T].astype(np.int32)
    want_tg = rows[:, 1:].view(np.int32) if dt == np.uint32 else rows[:, 1:].astype(np.int32)
    for m in (False, True):
        ld = ringfeed.Loader(p, 7, device="cpu", drop_last=False, tokens="inputs_targets",
                             map=m, pinned_bytes=1 << 20)
        at = 0
        for batch in ld:
            check(sorted(batch.keys()) == ["inputs", "targets"], "fields %s" % list(batch))
            a = np.from_dlpack(batch["inputs"])
            b = np.from_dlpack(batch["targets"])
            k = a.shape[0]
            check(a.dtype == np.int32 and b.dtype == np.int32, "dtype %s" % a.dtype)
            check(a.shape == (k, T) and b.shape == (k, T), "shape %s" % (a.shape,))
            check(a.flags["C_CONTIGUOUS"] and b.flags["C_CONTIGUOUS"], "contiguous")
            check(np.array_equal(a, want_in[at:at + k]), "inputs at row %d" % at)
            check(np.array_equal(b, want_tg[at:at + k]), "targets at row %d" % at)
            at += k
            del a, b, batch
        check(at == n, "rows %d of %d" % (at, n))
        ld.close()
    ld = ringfeed.Loader(p, 7, device="cpu")
    for batch in ld:
        check(list(batch.keys()) == ["tokens"], "default layout")
        del batch
        break
    ld.close()

try:
    ringfeed.Loader(p, 7, device="cpu", tokens="int32")
except ValueError:
    pass
else:
    raise AssertionError("tokens='int32' did not raise")
px = os.path.join(d, "x.rfs")
ringfeed.pack(px, {"x": np.zeros((10, 4), np.uint16)})
try:
    ringfeed.Loader(px, 2, device="cpu", tokens="inputs_targets")
except ringfeed.Error as e:
    check("tokens" in str(e), "message: %s" % e)
else:
    raise AssertionError("a dataset without 'tokens' was accepted")
print("ok")
