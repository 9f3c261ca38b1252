# SPDX-License-Identifier: MIT
# Description: `ringfeed pack --raw FILE --field NAME:DTYPE[D0,...]`: records
# of several fields (a 2-d f32, a scalar u8, a bf16 vector, bytes) are split
# into fields exactly (checked by exporting each against a structured-array
# view of the input); repeated --raw files are concatenated; a file whose
# size is not a multiple of the record fails with exit 1, a message, and no
# output; bad field specs are usage errors.
import os

import numpy as np

from clitest import TempDir, check, finish, run

rng = np.random.default_rng(7)

with TempDir() as tmp:
    n = 3001
    rec = np.dtype([("x", "<f4", (3, 4)), ("y", "u1"), ("h", "<u2", (5,)), ("b", "V6")])
    data = np.frombuffer(rng.bytes(n * rec.itemsize), dtype=rec).copy()
    raw = os.path.join(tmp, "records.bin")
    data.tofile(raw)
    out = os.path.join(tmp, "raw.rfs")
    run("pack", "-q", "--chunk-bytes", "16K", "-o", out, "--raw", raw,
        "--field", "x:f32[3,4]", "--field", "y:u8", "--field", "h:bf16[5]",
        "--field", "b:bytes[6]", expect=0)
    want = {
        "x": np.ascontiguousarray(data["x"]).view("<u4"),
        "y": np.ascontiguousarray(data["y"]),
        "h": np.ascontiguousarray(data["h"]),
        "b": np.frombuffer(data["b"].tobytes(), dtype="S6"),
    }
    for name, arr in want.items():
        back = os.path.join(tmp, "raw-%s.npy" % name)
        if run("export", out, "--field", name, "-o", back, expect=0)[0]:
            continue
        got = np.load(back)
        if name == "x":
            check(got.dtype == np.dtype("<f4"), "x dtype %s" % got.dtype)
            got = got.view("<u4")  # compare bits: random bytes include NaNs
        check(got.shape == arr.shape, "%s: shape %s != %s" % (name, got.shape, arr.shape))
        check(got.tobytes() == arr.tobytes(), "%s: values differ" % name)

    # One field: the file is the column; two files concatenate.
    a = rng.integers(0, 1 << 30, size=(1000, 8), dtype="<i4")
    b = rng.integers(0, 1 << 30, size=(77, 8), dtype="<i4")
    pa, pb = os.path.join(tmp, "a.bin"), os.path.join(tmp, "b.bin")
    a.tofile(pa)
    b.tofile(pb)
    out2 = os.path.join(tmp, "two.rfs")
    run("pack", "-q", "-o", out2, "--raw", pa, "--raw", pb, "--field", "v:i32[8]", expect=0)
    back = os.path.join(tmp, "two.npy")
    run("export", out2, "--field", "v", "-o", back, expect=0)
    check(np.array_equal(np.load(back), np.concatenate([a, b])), "two raw files")

    # A size that is not a multiple of the record.
    with open(pb, "ab") as f:
        f.write(b"xyz")
    bad = os.path.join(tmp, "bad.rfs")
    rc, _, err = run("pack", "-q", "-o", bad, "--raw", pb, "--field", "v:i32[8]", expect=1)
    check("multiple of the record size" in err, "message: %r" % err)
    check(not os.path.exists(bad), "output left after a failure")

    # Bad specs.
    for spec in ["v", "v:i33", "v:i32[0]", "v:i32[2,]", "v:i32[2"]:
        rc, _, err = run("pack", "-q", "-o", bad, "--raw", pa, "--field", spec, expect=2)
        check("--field" in err, "spec %r: message %r" % (spec, err))
    rc, _, err = run("pack", "-q", "-o", bad, "--raw", pa, expect=2)
    check("--field" in err, "missing --field: %r" % err)
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "temporary files left behind")
finish()
