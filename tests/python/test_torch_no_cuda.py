# SPDX-License-Identifier: MIT
# Description: tensors="torch" on a machine with a CUDA device but a
# PyTorch without CUDA (a CPU-only build, as pip often installs): the
# default device="auto" falls back to the host with a RingfeedWarning and
# delivers correct CPU tensors, where it used to fail at the first batch
# with torch's "Torch not compiled with CUDA enabled"; an explicit "cuda"
# or "cuda:0" is refused at creation with a message naming device="cpu".
# The CUDA device is the cudart emulator's.
import gc
import os
import warnings

import numpy as np

import ringfeed
from rftest import Emulator, check, need_torch, skip, small_dataset, tmpdir

torch = need_torch()
if torch.cuda.is_available():
    skip("this PyTorch has CUDA")
emu = Emulator()
d = tmpdir()
p = os.path.join(d, "data.rfs")
x, y, v = small_dataset(p)
opts = dict(pinned_bytes=1 << 20, decode_threads=1)

# The library itself would deliver on the (emulated) GPU.
with ringfeed.Loader(p, 10, **opts) as ld:
    check(ld.device == "cuda:0", "dlpack batches on the emulator's device: %s" % ld.device)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    ld = ringfeed.Loader(p, 10, tensors="torch", **opts)
ours = [str(w.message) for w in caught if issubclass(w.category, ringfeed.RingfeedWarning)]
check(len(ours) == 1 and "device=\"cpu\"" in ours[0] and "is_available" in ours[0],
      "one warning naming the cause and device=\"cpu\": %r" % ours)
print(ours[0])
check(ld.device == "cpu", "fell back to the host: %s" % ld.device)
n = 0
for b in ld:
    check(b["x"].device.type == "cpu", "a CPU tensor")
    idx = b["y"].numpy()
    check(np.array_equal(b["x"].numpy(), x[idx]), "values")
    n += 1
check(n == len(ld) == len(x) // 10, "every batch: %d" % n)
del b
ld.close()

for dev in ("cuda", "cuda:0"):
    try:
        ringfeed.Loader(p, 10, tensors="torch", device=dev, **opts)
        check(False, "device=%r accepted with a CPU-only torch" % dev)
    except ValueError as e:
        check("device=\"cpu\"" in str(e) and "torch.cuda.is_available()" in str(e),
              "%s: %s" % (dev, e))
        print(dev, "->", e)

# device="cpu" says nothing.
with warnings.catch_warnings():
    warnings.simplefilter("error")
    with ringfeed.Loader(p, 10, tensors="torch", device="cpu", **opts) as ld:
        check(next(iter(ld))["x"].device.type == "cpu", "cpu")
gc.collect()
emu.check_clean()
print("ok")
