# SPDX-License-Identifier: MIT
# Description: Loader(..., tensors="torch") yields torch tensors directly:
# the same values, shapes and dtypes as torch.from_dlpack of the default
# Arrays, a variable field as an (offsets, data) pair of tensors; a tensor
# keeps its batch held until it is dropped; other values of tensors are
# refused by name.
import gc
import os

import numpy as np

import ringfeed
from rftest import check, need_torch, small_dataset, tmpdir

torch = need_torch()
d = tmpdir()
p = os.path.join(d, "data.rfs")
small_dataset(p)
opts = dict(device="cpu", pinned_bytes=1 << 20, drop_last=False)
a = ringfeed.Loader(p, 32, **opts)
t = ringfeed.Loader(p, 32, tensors="torch", **opts)
n = 0
for ba, bt in zip(a, t):
    check(set(ba) == set(bt), "the same fields")
    for k in ba:
        if isinstance(ba[k], tuple):
            check(isinstance(bt[k], tuple) and len(bt[k]) == 2, "%s: an (offsets, data) pair" % k)
            for x, y in zip(ba[k], bt[k]):
                check(isinstance(y, torch.Tensor) and torch.equal(torch.from_dlpack(x), y),
                      "%s: the pair's tensors" % k)
        else:
            check(isinstance(bt[k], torch.Tensor), "%s is a torch.Tensor" % k)
            ref = torch.from_dlpack(ba[k])
            check(bt[k].dtype == ref.dtype and bt[k].shape == ref.shape and torch.equal(bt[k], ref),
                  "%s: values, dtype and shape" % k)
    n += 1
check(n == len(t) and n > 0, "every batch")
del ba, bt
gc.collect()

# A tensor holds its batch.
it = iter(t)
b = next(it)
x = b["x"]
del b
gc.collect()
check(t.held == 1, "a tensor keeps its batch held (held=%d)" % t.held)
del x
gc.collect()
check(t.held == 0, "dropping the tensor releases the batch")
del it
t.close()
a.close()

for bad, exc in (("numpy", ValueError), (1, TypeError)):
    try:
        ringfeed.Loader(p, 8, tensors=bad, **opts)
        check(False, "tensors=%r is refused" % (bad,))
    except exc as e:
        check("tensors" in str(e), "the message names tensors: %s" % e)
print("ok")
