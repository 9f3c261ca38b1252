# SPDX-License-Identifier: MIT
# Description: numpy.asarray on a batch array.  On the host it is the array
# itself (same memory, same values, read-only), as before; a bf16 host array
# and a CUDA array (under the cudart emulator) raise TypeError saying why
# instead of turning silently into a 0-d object array.  The library's advice
# to "set device_index" reads as device="cuda:N" in Python.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 64
y = np.arange(N, dtype=np.int64)
h = (np.arange(N * 2, dtype=np.uint16) + 0x3f80).reshape(N, 2)
ringfeed.pack(p, {"y": y, "h": (h, "bf16")})

# Host: the buffer, no copy.
ld = ringfeed.Loader(p, 16, device="cpu")
b = next(iter(ld))
a = np.asarray(b["y"])
check(a.dtype == np.int64 and a.shape == (16,) and a.tolist() == list(range(16)),
      "np.asarray of a host array: %r" % (a,))
check(a.ctypes.data == b["y"].data_ptr and not a.flags.writeable, "no copy, read-only")
c = np.array(b["y"])
check(c.tolist() == list(range(16)) and c.ctypes.data != b["y"].data_ptr, "np.array copies")
try:
    r = np.asarray(b["h"])
    check(False, "np.asarray of a bf16 array gave %r (dtype %s)" % (r, r.dtype))
except TypeError as e:
    check("bf16" in str(e), "bf16 message: %s" % e)
del a, c, b
ld.close()

cudart = os.environ.get("RINGFEED_CUDART")
if cudart:
    ld = ringfeed.Loader(p, 16, device="cuda", pinned_bytes=1 << 20)
    b = next(iter(ld))
    try:
        r = np.asarray(b["y"])
        check(False, "np.asarray of a CUDA array gave %r (dtype %s)" % (r, r.dtype))
    except TypeError as e:
        check("device memory" in str(e) and "from_dlpack" in str(e), "CUDA message: %s" % e)
    del b
    ld.close()

    # A malformed LOCAL_RANK picks no device: the advice names the Python
    # argument.
    os.environ["LOCAL_RANK"] = "x"
    try:
        ringfeed.Loader(p, 16, device="cuda", pinned_bytes=1 << 20)
        check(False, "a malformed LOCAL_RANK was accepted")
    except ringfeed.Error as e:
        msg = str(e)
        check("LOCAL_RANK" in msg and 'device="cuda:N"' in msg and "device_index" not in msg,
              "message: %s" % msg)
    del os.environ["LOCAL_RANK"]
print("ok")
