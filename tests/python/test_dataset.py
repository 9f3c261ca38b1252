# SPDX-License-Identifier: MIT
# Description: ringfeed.pack and ringfeed.open: every dtype, fixed and
# variable fields, shards and compression round-trip through ds[i]; bad
# input raises TypeError/ValueError; library failures raise ringfeed.Error
# with the code and a message naming the file (missing file, corrupt chunk).
import errno
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
N = 97
rng = np.random.default_rng(7)

cols = {}
for name in ("u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8"):
    dt = np.dtype("<" + name)
    if dt.kind == "f":
        a = rng.standard_normal((N, 3, 2)).astype(dt)
    else:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, size=(N, 3, 2), dtype=dt, endpoint=True)
    cols["c_" + name] = a
bf = rng.integers(0, 1 << 16, size=(N, 5), dtype=np.uint16)
cols["c_bf16"] = (bf, "bf16")
raw = rng.integers(0, 256, size=(N, 7), dtype=np.uint8)
cols["c_bytes"] = (raw, "bytes")
var = [rng.integers(-9, 9, size=(i % 6, 2), dtype=np.int32) for i in range(N)]
cols["c_var"] = var
cols["scalar"] = np.arange(N, dtype=np.float64)

expect_dtype = {"c_u1": "u8", "c_i1": "i8", "c_u2": "u16", "c_i2": "i16", "c_u4": "u32",
                "c_i4": "i32", "c_u8": "u64", "c_i8": "i64", "c_f2": "f16", "c_f4": "f32",
                "c_f8": "f64", "c_bf16": "bf16", "c_bytes": "bytes", "c_var": "i32",
                "scalar": "f64"}


def verify(paths, shards=None):
    with ringfeed.open(paths) as ds:
        check(len(ds) == N, "len %d" % len(ds))
        sch = ds.schema
        check(list(sch) == list(cols), "schema order %r" % list(sch))
        for k, v in expect_dtype.items():
            check(sch[k]["dtype"] == v, "dtype of %s: %s" % (k, sch[k]["dtype"]))
        check(sch["c_var"]["shape"] == (None, 2) and sch["c_var"]["variable"], "var shape")
        check(sch["scalar"]["shape"] == (), "scalar shape")
        if shards is not None:
            check(len(ds.shards) == shards, "shards %r" % ds.shards)
        for i in list(range(N)) + [-1]:
            s = ds[i]
            j = i % N
            for k, a in cols.items():
                if isinstance(a, tuple):
                    a = a[0]
                want = a[j]
                got = s[k]
                check(got.shape == want.shape, "%s[%d] shape %r != %r" % (k, i, got.shape,
                                                                           want.shape))
                check(got.tobytes() == np.ascontiguousarray(want).tobytes(),
                      "%s[%d] differs" % (k, i))
        try:
            ds[N]
            check(False, "ds[N] did not raise")
        except IndexError:
            pass
    try:
        len(ds)
        check(False, "len of a closed dataset")
    except ValueError:
        pass


p = os.path.join(d, "all.rfs")
check(ringfeed.pack(p, cols, chunk_bytes=1024) == N, "pack count")
verify(p, shards=1)

# zstd and several shards.
base = os.path.join(d, "sh.rfs")
ringfeed.pack(base, cols, zstd=3, chunk_bytes=2048, shard_bytes=8192)
shard_files = sorted(f for f in os.listdir(d) if f.startswith("sh-"))
check(len(shard_files) > 1, "shards written: %r" % shard_files)
verify([os.path.join(d, f) for f in shard_files], shards=len(shard_files))
verify(os.path.join(d, "sh-*.rfs"), shards=len(shard_files))

# Bad input.
for bad, exc in (({"x": np.zeros((3, 2)), "y": np.zeros(4)}, ValueError),
                 ({"x": np.zeros((4, 4))[:, ::2]}, TypeError),
                 ({"x": (np.zeros(3, np.float32), "f64")}, ValueError),
                 ({"x": (np.zeros(3, np.float32), "nope")}, ValueError),
                 ({"bad name": np.zeros(3)}, ValueError),
                 ({"x": [np.zeros((2, 3)), np.zeros((2, 4))]}, ValueError),
                 ({"x": np.zeros(3, dtype=">f4")}, TypeError),
                 ({"x": object()}, TypeError),
                 ({}, ValueError)):
    try:
        ringfeed.pack(os.path.join(d, "bad.rfs"), bad)
        check(False, "pack accepted %r" % (bad,))
    except exc:
        pass
check(not os.path.exists(os.path.join(d, "bad.rfs")), "a failed pack left a file")

# Library failures.
try:
    ringfeed.pack(os.path.join(d, "no", "such", "dir.rfs"), {"x": np.zeros(3)})
    check(False, "pack into a missing directory")
except ringfeed.Error as e:
    check(isinstance(e, RuntimeError) and e.code < 0, "Error is a RuntimeError with .code")
try:
    ringfeed.open(os.path.join(d, "missing.rfs"))
    check(False, "open of a missing file")
except ringfeed.Error as e:
    check(e.code == -errno.ENOENT, "code %d" % e.code)
    check("missing.rfs" in str(e), "message names the file: %s" % e)

# A corrupt chunk: flip a byte in the first chunk (at 4096, after the header).
p2 = os.path.join(d, "corrupt.rfs")
ringfeed.pack(p2, {"x": np.arange(4000, dtype=np.int64)})
with open(p2, "r+b") as f:
    f.seek(4096 + 10)
    b = f.read(1)
    f.seek(4096 + 10)
    f.write(bytes([b[0] ^ 0xFF]))
with ringfeed.open(p2) as ds:
    try:
        ds[0]
        check(False, "a corrupt chunk was read")
    except ringfeed.Error as e:
        check(e.code == ringfeed.ECHECKSUM, "code %d (%s)" % (e.code, e.name))
        check("corrupt.rfs" in str(e), "message names the file: %s" % e)
with ringfeed.open(p2, verify=False) as ds:
    ds[0]  # unverified: the flipped byte is returned as data

print("ok")
