# SPDX-License-Identifier: MIT
# Description: a host batch's arrays reach NumPy without a copy on every
# CPython the wheel serves: numpy.asarray (through __array_interface__, and
# the buffer protocol from 3.11 on, where memoryview works too; before 3.11
# memoryview refuses), numpy.from_dlpack, and __dlpack__ called with
# keywords; bf16 and the wrong calls are refused with a reason.  pack reads
# NumPy arrays, bytes and array.array alike.  The module's types cannot be
# instantiated from Python (on 3.9 too, whose type flags lack that).
# len() of an array is its first dimension, as in NumPy and torch.
import array
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
N, B = 40, 8
x = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
bits = np.arange(N, dtype=np.uint16)
p = d + "/h.rfs"
check(ringfeed.pack(p, {"x": x, "h": (bits, "bf16"), "b": [bytes([i] * (i % 3 + 1)) for i in range(N)],
                        "a": [array.array("h", [i, -i]) for i in range(N)]}) == N, "pack")
with ringfeed.open(p) as ds:
    check(bytes(ds[5]["b"]) == bytes([5] * 3), "bytes packed")
    check(list(ds[7]["a"]) == [7, -7], "array.array packed")

ld = ringfeed.Loader(p, B, device="cpu", fields=["x", "h"])
batch = next(iter(ld))
a = np.asarray(batch["x"])
check(a.ctypes.data == batch["x"].data_ptr and not a.flags.writeable, "no copy, read-only")
check(np.array_equal(a, x[:B]), "the values")
check(len(batch["x"]) == B == len(batch["h"]) and bool(batch["x"]), "len() is shape[0]")
ai = batch["x"].__array_interface__
check(ai["shape"] == (B, 3) and ai["typestr"] == "<f4" and ai["version"] == 3, repr(ai))
check(ai["data"] == (batch["x"].data_ptr, True) and ai["strides"] is None, repr(ai))
check(np.array_equal(np.from_dlpack(batch["x"]), x[:B]), "numpy.from_dlpack")
cap = batch["x"].__dlpack__(stream=None, max_version=None, dl_device=(1, 0), copy=None)
check(type(cap).__name__ == "PyCapsule", "a capsule")
del cap
try:
    batch["x"].__dlpack__(None)
    check(False, "a positional argument to __dlpack__")
except TypeError as e:
    print("->", e)
try:
    batch["x"].__dlpack__(streem=None)
    check(False, "an unknown keyword to __dlpack__")
except TypeError as e:
    print("->", e)
if sys.version_info >= (3, 11):
    m = memoryview(batch["x"])
    check(m.readonly and m.format.endswith("f") and m.shape == (B, 3), "memoryview")
    m.release()
else:
    try:
        memoryview(batch["x"])
        check(False, "memoryview before 3.11")
    except TypeError as e:
        print("->", e)
try:
    batch["h"].__array_interface__
    check(False, "bf16 has an array interface")
except AttributeError as e:
    check("bf16" in str(e), str(e))
try:
    np.asarray(batch["h"])
    check(False, "NumPy read bf16")
except TypeError as e:
    print("->", e)
    check("bf16" in str(e), str(e))
del a, batch
ld.close()

for t in (ringfeed.Array, ringfeed.Dataset):
    try:
        t()
        check(False, "made a %s" % t.__name__)
    except TypeError as e:
        print("->", e)
        check("cannot create" in str(e), str(e))
print("ok")
