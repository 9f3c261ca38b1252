# SPDX-License-Identifier: MIT
# Description: ringfeed.pack takes what a notebook has: torch tensors (CPU,
# non-contiguous, requiring grad, bf16, and lists of them for a variable
# field) are packed as their values; arrays of strings or Python objects
# are refused with a TypeError that names the field and says how to store
# text; a bool array is stored as u8 0/1 (documented, as `ringfeed pack`
# does with .npy b1); a list or other non-array names the field and the
# ways to convert.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
n = [0]


def path():
    n[0] += 1
    return os.path.join(d, "p%d.rfs" % n[0])


def refused(columns, *needles):
    try:
        ringfeed.pack(path(), columns)
    except TypeError as e:
        m = str(e)
        check(all(x in m for x in needles), "message %r lacks %r" % (m, needles))
        print("->", m)
        return m
    check(False, "accepted %r" % (list(columns),))


refused({"name": np.array(["x", "yy"])}, "'name'", "strings", "bytes")
refused({"obj": np.array([{}, 1], dtype=object)}, "'obj'", "strings", "bytes")
refused({"b": np.array([b"ab", b"c"])}, "'b'", "strings")
refused({"c": np.zeros(4, dtype=np.complex64)}, "'c'", "unsupported array format")
refused({"l": [[1, 2], [3]]}, "'l'", "sample 0", "numpy.asarray")
refused({"i": 5}, "'i'", "torch tensor", "int")
refused({"nc": np.zeros((4, 6), np.float32)[:, ::2]}, "'nc'", "not C-contiguous")

# The text recipe the message gives works.
texts = ["x", "yy", ""]
p = path()
ringfeed.pack(p, {"t": ([np.frombuffer(s.encode(), np.uint8) for s in texts], "bytes")})
with ringfeed.open(p) as ds:
    check([bytes(ds[i]["t"]) for i in range(3)] == [s.encode() for s in texts], "text as bytes")

# bool: u8 0/1.
p = path()
ringfeed.pack(p, {"m": np.array([True, False, True])})
with ringfeed.open(p) as ds:
    check(ds.schema["m"]["dtype"] == "u8", "bool stored as u8: %r" % ds.schema)
    check([int(ds[i]["m"]) for i in range(3)] == [1, 0, 1], "bool values 0/1")

try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    x = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    w = torch.ones(6, 3, requires_grad=True) * 2
    cols = {"x": x, "xt": x.t().contiguous().t(),  # non-contiguous view
            "w": w, "bf": x.to(torch.bfloat16), "mask": x[:, 0] > 8,
            "v": [torch.arange(i + 1, dtype=torch.int16) for i in range(6)]}
    p = path()
    check(ringfeed.pack(p, cols) == 6, "6 samples")
    with ringfeed.open(p) as ds:
        check(ds.schema["bf"]["dtype"] == "bf16", "bf16 tensor kept bf16: %r" % ds.schema["bf"])
        check(ds.schema["v"]["dtype"] == "i16", "var field dtype")
        for i in range(6):
            s = ds[i]
            check(np.array_equal(s["x"], x[i].numpy()), "x[%d]" % i)
            check(np.array_equal(s["xt"], x[i].numpy()), "xt[%d]" % i)
            check(np.array_equal(s["w"], np.full(3, 2, np.float32)), "w[%d]" % i)
            bits = x[i].to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            check(np.array_equal(s["bf"].view(np.uint16), bits), "bf[%d]" % i)
            check(int(s["mask"]) == int(x[i, 0] > 8), "mask[%d]" % i)
            check(np.array_equal(s["v"], np.arange(i + 1, dtype=np.int16)), "v[%d]" % i)
    # A dtype override still applies to a tensor.
    p = path()
    ringfeed.pack(p, {"u": (torch.arange(4, dtype=torch.uint8), "bytes")})
    with ringfeed.open(p) as ds:
        check(ds.schema["u"]["dtype"] == "bytes", "override on a tensor")
print("ok")
