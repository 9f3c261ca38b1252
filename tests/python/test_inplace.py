# SPDX-License-Identifier: MIT
# Description: batches handed out in place (Loader(map=True, inplace=True)
# on the CPU; off by default, so map=True alone copies): their arrays are read-only and hold the packed
# values; numpy.asarray reads them without a copy and read-only (a write
# raises, the page cache is untouched); DLPack consumers get a copy of their
# own (legacy capsules cannot say read-only; PyTorch has no read-only
# tensors), a DLPack 1.0 consumer that asks for no copy gets the memory with
# the read-only flag, and copy=False without DLPack 1.0 is refused with the
# way out; torch.from_dlpack works on them and a write into the tensor does
# not reach the loader's memory; an array outlives the Loader's close;
# inplace=False and tensors="torch" copy
# every batch into writable memory.
import ctypes

import numpy as np

import ringfeed
from rftest import DLTensor, check, tmpdir, capsule_tensor, consume_capsule

d = tmpdir()
N, B = 2000, 16
rng = np.random.default_rng(5)
img = rng.integers(0, 256, (N, 64), dtype=np.uint8)
y = np.arange(N, dtype=np.int64) * 3 - 7
p = d + "/ip.rfs"
# Chunks of 100 samples (72 bytes each): batches of 16 lie whole in one chunk
# except those that straddle two.
check(ringfeed.pack(p, {"img": img, "y": y}, chunk_bytes=100 * 72) == N, "pack")

ld = ringfeed.Loader(p, B, device="cpu", map=True, inplace=True, drop_last=False)
check(ld.stats()["inplace"] is True, "stats: inplace")
ro = rw = 0
pos = 0
for epoch in range(2):
    for batch in ld:
        a, b = np.asarray(batch["img"]), np.asarray(batch["y"])
        n = len(b)
        check(np.array_equal(a, img[pos:pos + n]) and np.array_equal(b, y[pos:pos + n]),
              "values of batch at %d" % pos)
        check(not a.flags.writeable and not b.flags.writeable, "numpy sees them read-only")
        check(batch["img"].readonly == batch["y"].readonly, "one flag per batch")
        if batch["img"].readonly:
            ro += 1
            check(a.ctypes.data == batch["img"].data_ptr, "numpy.asarray: no copy")
            try:
                a[0, 0] = 1
                check(False, "a write into a read-only array")
            except ValueError as e:
                if ro == 1:
                    print("->", e)
        else:
            rw += 1
        pos = (pos + n) % N
print("epochs of %d batches: %d in place, %d copied" % (len(ld), ro, rw))
check(ro > 0 and rw > 0, "some batches in place, some copied")

# DLPack on a batch in place.
it = iter(ld)
batch = next(it)
arr = batch["img"]
check(arr.readonly, "the first batch of a chunk is in place")
want = img[:B]
# Legacy capsule: a copy.
cap = arr.__dlpack__()
m, t = capsule_tensor(cap)
check(t["data"] != arr.data_ptr and t["shape"] == (B, 64), "legacy: a copy")
check(np.array_equal(np.ctypeslib.as_array(ctypes.cast(t["data"], ctypes.POINTER(ctypes.c_uint8)),
                                           shape=(B, 64)), want), "the copy's values")
done = consume_capsule(cap)
done()
del cap
# copy=False without DLPack 1.0: refused with the way out.
try:
    arr.__dlpack__(copy=False)
    check(False, "copy=False of a read-only array to a legacy consumer")
except BufferError as e:
    print("->", e)
    check("inplace=False" in str(e) and "numpy.asarray" in str(e), "the message says what to do")


# DLPack 1.0: the memory itself, read-only, when no copy is asked for; else a
# copy flagged as one.
class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype = ctypes.c_void_p
_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_setname = ctypes.pythonapi.PyCapsule_SetName
_setname.restype = ctypes.c_int
_setname.argtypes = [ctypes.py_object, ctypes.c_char_p]


def versioned(cap):
    m = ctypes.cast(_get(cap, b"dltensor_versioned"), ctypes.POINTER(DLManagedTensorVersioned))
    return m, m.contents


for copy, flag in ((False, 1), (None, 2)):
    cap = arr.__dlpack__(max_version=(1, 0), copy=copy)
    m, v = versioned(cap)
    t = v.dl_tensor
    check(v.version.major == 1 and v.flags == flag, "flags %d for copy=%r" % (v.flags, copy))
    check((t.data == arr.data_ptr) == (copy is False), "shared only with copy=False")
    check(tuple(t.shape[i] for i in range(t.ndim)) == (B, 64), "shape")
    got = np.ctypeslib.as_array(ctypes.cast(t.data, ctypes.POINTER(ctypes.c_uint8)), shape=(B, 64))
    check(np.array_equal(got, want), "values through DLPack 1.0")
    check(_setname(cap, b"used_dltensor_versioned") == 0, "consume")
    m.contents.deleter(m)
    del cap
# A capsule nobody consumed is freed by its destructor.
cap = arr.__dlpack__(max_version=(1, 0), copy=False)
del cap

# numpy.from_dlpack takes the copy (or, with DLPack 1.0, the memory
# read-only): the values either way, and nothing written reaches the map.
f = np.from_dlpack(arr)
check(np.array_equal(f, want), "numpy.from_dlpack")
if f.flags.writeable:
    f[0, 0] ^= 1
    check(np.array_equal(np.asarray(arr), want), "a write into numpy's copy stays there")
del f, arr, batch, it

try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    batch = next(iter(ld))
    check(batch["img"].readonly, "in place")
    t = torch.from_dlpack(batch["img"])
    check(torch.equal(t, torch.from_numpy(img[:B])), "torch.from_dlpack: the values")
    t.add_(1)  # a copy of its own: no fault, and the batch is unchanged
    check(np.array_equal(np.asarray(batch["img"]), img[:B]), "the batch is unchanged")
    del t, batch
    tl = ringfeed.Loader(p, B, device="cpu", map=True, inplace=True, tensors="torch")
    tb = next(iter(tl))
    check(torch.equal(tb["img"], torch.from_numpy(img[:B])), "tensors='torch' values")
    tb["img"].add_(1)  # writable: tensors="torch" batches are copied
    del tb
    tl.close()
else:
    print("torch not installed: its part skipped")
# The map outlives the Loader while an array of a batch in place lives.
batch = next(iter(ld))
kept = np.asarray(batch["img"])
check(batch["img"].readonly, "in place")
del batch
ld.close()
check(np.array_equal(kept, img[:B]), "a batch's array after close")
del kept

# inplace=False: every batch copied, writable memory behind a read-only view.
for kw in ({"inplace": False}, {}):
    d = ringfeed.Loader(p, B, device="cpu", map=True, **kw)
    check(d.stats()["inplace"] is False, "stats: inplace off (%s)" % kw)
    for batch in d:
        check(not batch["img"].readonly, "map=True alone copies (%s)" % kw)
    d.close()
ld = ringfeed.Loader(p, B, device="cpu", map=True, inplace=False)
for batch in ld:
    check(not batch["img"].readonly, "inplace=False copies")
    cap = batch["img"].__dlpack__()
    _, t = capsule_tensor(cap)
    check(t["data"] == batch["img"].data_ptr, "a copied batch is exported without a copy")
    del cap
ld.close()
print("ok")
