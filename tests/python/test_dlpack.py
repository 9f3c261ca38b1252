# SPDX-License-Identifier: MIT
# Description: batches from ringfeed.Loader (host device) round-trip through
# torch.from_dlpack and numpy.from_dlpack, with no copy, equal to the packed
# data for every dtype (f16 and bf16 included) and for variable fields
# (offsets, data); the capsule's DLTensor fields (device, pointer, shape,
# strides NULL, dtype) are read back with ctypes; an unconsumed capsule's
# destructor and a consumer's deleter each give the batch back exactly once.
import gc
import os

import numpy as np

import ringfeed
from rftest import (DL_DTYPES, capsule_tensor, check, consume_capsule, kDLCPU, need_torch,
                    tmpdir)

torch = need_torch()
d = tmpdir()
N, B = 203, 16
rng = np.random.default_rng(3)

numpy_names = {"u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "u32": "u4", "i32": "i4",
               "u64": "u8", "i64": "i8", "f16": "f2", "f32": "f4", "f64": "f8"}
# PyTorch 1.13 has no uint16/32/64 tensors: those go through NumPy only.
torch_types = {"u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
               "i64": torch.int64, "f16": torch.float16, "f32": torch.float32,
               "f64": torch.float64, "bf16": torch.bfloat16}

cols, data = {}, {}
for rf, npn in numpy_names.items():
    dt = np.dtype("<" + npn)
    if dt.kind == "f":
        a = rng.standard_normal((N, 3, 5)).astype(dt)
    else:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, size=(N, 3, 5), dtype=dt, endpoint=True)
    cols[rf] = data[rf] = a
bf = torch.randn(N, 7).to(torch.bfloat16)
data["bf16"] = bf.view(torch.int16).numpy().view(np.uint16)
cols["bf16"] = (data["bf16"], "bf16")
tok = [rng.integers(0, 1000, size=(i % 9,), dtype=np.int64) for i in range(N)]
cols["tok"] = tok
pairs = [rng.standard_normal((i % 4, 3)).astype(np.float32) for i in range(N)]
cols["pairs"] = pairs
p = os.path.join(d, "all.rfs")
ringfeed.pack(p, cols, chunk_bytes=2048)

# Both paths per dtype, drop_last=False: the last batch is partial.
loader = ringfeed.Loader(p, B, device="cpu", drop_last=False, pinned_bytes=4 << 20)
check(len(loader) == (N + B - 1) // B, "len %d" % len(loader))
check(loader.device == "cpu", "device %s" % loader.device)
got_np = {k: [] for k in data}
got_t = {k: [] for k in torch_types}
toks = []
got_pairs = []
nb = 0
for batch in loader:
    nb += 1
    for k in data:
        arr = batch[k]
        check(arr.__dlpack_device__() == (kDLCPU, 0), "device of %s" % k)
        check(arr.dtype == k, "dtype name %s" % arr.dtype)
        if k != "bf16":
            a = np.from_dlpack(arr)
            check(a.ctypes.data == arr.data_ptr, "numpy made a copy of %s" % k)
            got_np[k].append(a.copy())
        if k in torch_types:
            t = torch.from_dlpack(arr)
            check(t.data_ptr() == arr.data_ptr, "torch made a copy of %s" % k)
            check(t.dtype == torch_types[k], "torch dtype of %s: %s" % (k, t.dtype))
            got_t[k].append(t.clone())
    off, dat = batch["tok"]
    o = torch.from_dlpack(off)
    v = torch.from_dlpack(dat)
    check(o.dtype == torch.int64 and int(o[0]) == 0 and int(o[-1]) == dat.nbytes,
          "offsets %r" % o)
    for i in range(len(o) - 1):
        toks.append(v[int(o[i]) // 8:int(o[i + 1]) // 8].numpy().copy())
    # A variable first dimension: data is [rows, 3], a row 12 bytes.
    off, dat = batch["pairs"]
    o2 = np.from_dlpack(off)
    rows = torch.from_dlpack(dat)
    check(rows.shape == (int(o2[-1]) // 12, 3), "pairs data shape %r" % (rows.shape,))
    for i in range(len(o2) - 1):
        got_pairs.append(rows[int(o2[i]) // 12:int(o2[i + 1]) // 12].numpy().copy())
check(nb == len(loader), "batches %d" % nb)
del batch, arr, off, dat, o, v, t, a, rows, o2
for k in data:
    if k != "bf16":
        check(np.array_equal(np.concatenate(got_np[k]), data[k], equal_nan=True),
              "numpy round trip of %s" % k)
for k, tt in torch_types.items():
    t = torch.cat(got_t[k])
    if k == "bf16":
        check(torch.equal(t, bf), "torch round trip of bf16")
    else:
        check(np.array_equal(t.numpy(), data[k]), "torch round trip of %s" % k)
check(len(toks) == N and all(np.array_equal(a, b) for a, b in zip(toks, tok)),
      "variable field round trip")
check(len(got_pairs) == N and all(np.array_equal(a, b) for a, b in zip(got_pairs, pairs)),
      "variable rows round trip")

# The buffer protocol on the host: read-only, no copy.
it = iter(loader)
batch = next(it)
a = np.asarray(batch["f32"])
check(a.ctypes.data == batch["f32"].data_ptr and not a.flags.writeable, "buffer protocol")
check(np.array_equal(a, data["f32"][:B]), "buffer protocol data")
del a

# The capsule itself.
for k, (code, bits) in DL_DTYPES.items():
    if k not in batch:
        continue
    arr = batch[k]
    cap = arr.__dlpack__()
    _, t = capsule_tensor(cap)
    check(t["device"] == (kDLCPU, 0), "capsule device %r" % (t["device"],))
    check(t["data"] == arr.data_ptr, "capsule pointer")
    check(t["shape"] == arr.shape and t["ndim"] == len(arr.shape), "capsule shape %r" % (t,))
    check(not t["strides"] and t["byte_offset"] == 0, "strides NULL")
    check(t["dtype"] == (code, bits, 1), "capsule dtype of %s: %r" % (k, t["dtype"]))
    del cap
del arr
check(repr(loader).startswith("<ringfeed.Loader samples=%d" % N), repr(loader))
batch["f32"].__dlpack__(dl_device=(kDLCPU, 0))
try:
    batch["f32"].__dlpack__(dl_device=(2, 0))
    check(False, "exported to another device")
except BufferError:
    pass
try:
    batch["f32"].__dlpack__(stream=5)
    check(False, "a CPU array accepted a stream")
except ValueError:
    pass

# Lifetime through capsules: one batch held, its arrays dropped, capsules
# (unconsumed and consumed) keep it until they are gone.
check(loader.held == 1, "held %d" % loader.held)
c_unused = batch["f32"].__dlpack__()
c_used = batch["i64"].__dlpack__()
done = consume_capsule(c_used)
del batch
gc.collect()
check(loader.held == 1, "capsules keep the batch: held %d" % loader.held)
del c_unused
check(loader.held == 1, "the consumed capsule still keeps it")
del c_used  # renamed: its destructor must not call the deleter
check(loader.held == 1, "destructor of a consumed capsule released the batch")
done()
check(loader.held == 0, "the deleter released the batch: held %d" % loader.held)

# A torch tensor alone keeps its batch.
batch = next(it)
t = torch.from_dlpack(batch["f64"])
del batch
check(loader.held == 1, "tensor keeps the batch")
del t
check(loader.held == 0, "tensor gone, batch released")
del it
loader.close()
print("ok")
