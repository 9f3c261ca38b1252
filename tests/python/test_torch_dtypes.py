# SPDX-License-Identifier: MIT
# Description: tensors="torch" with a field whose dtype the installed
# PyTorch has no dtype for (u16, u32, u64 before PyTorch 2.3) is refused
# when the Loader is created, naming the field and the ways out (fields=,
# tensors="dlpack"), where it used to fail at the first batch with torch's
# "Unsupported kUInt bits 16".  A field left out with fields=, and
# "tokens" delivered as int32 by tokens="inputs_targets", are fine.
import os

import numpy as np

import ringfeed
from rftest import check, need_torch, tmpdir

torch = need_torch()
d = tmpdir()
opts = dict(device="cpu", pinned_bytes=1 << 20, decode_threads=1)
n = 100
for dt, tname in (("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64")):
    p = os.path.join(d, dt + ".rfs")
    ringfeed.pack(p, {"x": np.arange(n, dtype=np.float32),
                      "tok": np.arange(n * 10, dtype=np.dtype(dt.replace("u", "uint")))
                      .reshape(n, 10)})
    if hasattr(torch, tname):
        with ringfeed.Loader(p, 10, tensors="torch", **opts) as ld:
            b = next(iter(ld))
            check(b["tok"].dtype == getattr(torch, tname), "%s: torch.%s" % (dt, tname))
        print(dt, "supported by this PyTorch")
        continue
    try:
        ringfeed.Loader(p, 10, tensors="torch", **opts)
        check(False, "%s field accepted with tensors=\"torch\"" % dt)
    except ValueError as e:
        m = str(e)
        check("'tok'" in m and dt in m and "fields=" in m and "tensors=\"dlpack\"" in m,
              "%s: the message names the field, dtype and ways out: %s" % (dt, m))
        print(dt, "->", m)
    # Without that field, or as DLPack arrays: fine.
    with ringfeed.Loader(p, 10, tensors="torch", fields=["x"], **opts) as ld:
        b = next(iter(ld))
        check(set(b) == {"x"} and b["x"].dtype == torch.float32, "fields=['x']")
    with ringfeed.Loader(p, 10, **opts) as ld:
        b = next(iter(ld))
        check(np.array_equal(np.asarray(b["tok"]), np.arange(100).reshape(10, 10)), "dlpack")
    del b

# u16 tokens delivered as int32 inputs/targets.
p = os.path.join(d, "tokens.rfs")
ringfeed.pack(p, {"tokens": np.arange(n * 9, dtype=np.uint16).reshape(n, 9)})
with ringfeed.Loader(p, 10, tensors="torch", tokens="inputs_targets", **opts) as ld:
    b = next(iter(ld))
    check(b["inputs"].dtype == torch.int32 and b["targets"].dtype == torch.int32, "int32 tokens")
    check(torch.equal(b["inputs"][0], torch.arange(8, dtype=torch.int32)), "inputs")
del b
print("ok")
