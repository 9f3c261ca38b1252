# SPDX-License-Identifier: MIT
# Description: `ringfeed pack NAME=FILE.npy` then `ringfeed export` gives back
# the same .npy, byte for byte, for every numpy dtype the tool takes and
# several shapes (scalars, 1-d to 4-d values, many chunks, no samples); b1
# comes back as u1 and V<n> as S<n> with the same bytes; .npy versions 2.0
# and 3.0 pack as well; many fields packed together export each unchanged.
import os

import numpy as np

from clitest import TempDir, check, finish, npy_data, run

DTYPES = ["|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"]
SHAPES = [(7,), (5, 3), (4, 2, 3), (3, 1, 1, 2), (0, 2)]

rng = np.random.default_rng(1234)


def sample(dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "SV":
        return np.frombuffer(rng.bytes(int(np.prod(shape)) * dt.itemsize),
                             dtype=dt).reshape(shape).copy()
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


def roundtrip(tmp, name, arr, pack_args=(), same_file=True, want_descr=None):
    src = os.path.join(tmp, name + ".npy")
    out = os.path.join(tmp, name + ".rfs")
    back = os.path.join(tmp, name + "-back.npy")
    np.save(src, arr)
    rc, _, err = run("pack", "-q", "-o", out, *pack_args, "f=" + src, expect=0)
    if rc != 0:
        return
    rc, _, err = run("export", out, "--field", "f", "-o", back, expect=0)
    if rc != 0:
        return
    got = np.load(back)
    check(got.shape == arr.shape, "%s: shape %s != %s" % (name, got.shape, arr.shape))
    check(npy_data(back) == npy_data(src), "%s: data bytes differ" % name)
    if want_descr:
        check(got.dtype.str == want_descr, "%s: dtype %s, want %s" % (name, got.dtype.str,
                                                                        want_descr))
    else:
        check(got.dtype == arr.dtype, "%s: dtype %s != %s" % (name, got.dtype, arr.dtype))
        check(np.array_equal(got, arr, equal_nan=arr.dtype.kind == "f"),
              "%s: arrays differ" % name)
    if same_file:
        with open(src, "rb") as a, open(back, "rb") as b:
            check(a.read() == b.read(), "%s: exported file differs from the original" % name)


with TempDir() as tmp:
    for dt in DTYPES:
        for shape in SHAPES:
            name = "a%s_%s" % (dt[1:], "x".join(map(str, shape)))
            roundtrip(tmp, name, sample(dt, shape))

    # Many chunks (a few samples each), and one sample larger than a chunk.
    roundtrip(tmp, "manychunks", sample("<f4", (3000, 5)), ("--chunk-bytes", "4K"))
    roundtrip(tmp, "bigvalue", sample("<u2", (3, 5000)), ("--chunk-bytes", "4K"))

    # Types the format keeps as plain bytes.
    roundtrip(tmp, "bool", sample("|b1", (9, 3)), same_file=False, want_descr="|u1")
    roundtrip(tmp, "bytes", sample("|S5", (6, 2)), same_file=True)
    roundtrip(tmp, "void", sample("|V3", (6,)), same_file=False, want_descr="|S3")

    # .npy versions 2.0 and 3.0 are read too.
    for ver in [(2, 0), (3, 0)]:
        arr = sample("<i4", (10, 3))
        src = os.path.join(tmp, "v%d.npy" % ver[0])
        with open(src, "wb") as f:
            np.lib.format.write_array(f, arr, version=ver)
        out = os.path.join(tmp, "v%d.rfs" % ver[0])
        back = os.path.join(tmp, "v%d-back.npy" % ver[0])
        run("pack", "-q", "-o", out, "f=" + src, expect=0)
        run("export", out, "--field", "f", "-o", back, expect=0)
        check(np.array_equal(np.load(back), arr), "npy version %d.0 round trip" % ver[0])

    # All dtypes as fields of one dataset.
    n = 257
    arrays = {"f_" + dt[1:]: sample(dt, (n, 3)) for dt in DTYPES}
    args = []
    for k, a in arrays.items():
        p = os.path.join(tmp, k + ".npy")
        np.save(p, a)
        args.append("%s=%s" % (k, p))
    multi = os.path.join(tmp, "multi.rfs")
    run("pack", "-q", "--chunk-bytes", "8K", "-o", multi, *args, expect=0)
    for k, a in arrays.items():
        back = os.path.join(tmp, k + "-multi.npy")
        run("export", multi, "--field", k, "-o", back, expect=0)
        with open(os.path.join(tmp, k + ".npy"), "rb") as x, open(back, "rb") as y:
            check(x.read() == y.read(), "multi-field: %s differs" % k)
    # No temporary files left next to the outputs.
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "temporary files left behind")
finish()
