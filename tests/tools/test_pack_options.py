# SPDX-License-Identifier: MIT
# Description: `ringfeed pack` options: --zstd 3 -j 2 round trips and is
# reported as zstd with a ratio above 1 on compressible data; --shard-bytes
# gives several shards named OUT-00000.rfs ... that open as one dataset
# (info --json counts; export via a glob and via a directory round trips);
# size suffixes; no temporary files left.
import glob
import json
import os

import numpy as np

from clitest import TempDir, check, finish, run

with TempDir() as tmp:
    n = 20000
    x = (np.arange(n * 16, dtype="<i4") // 7).reshape(n, 16)   # compressible
    y = np.arange(n, dtype="<f8") * 0.5
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    np.save(yp, y)

    # zstd with two compression threads.
    z = os.path.join(tmp, "z.rfs")
    run("pack", "-q", "--zstd", "3", "-j", "2", "--chunk-bytes", "64K", "-o", z,
        "x=" + xp, "y=" + yp, expect=0)
    rc, out, _ = run("info", "--json", z, expect=0)
    info = json.loads(out)
    check(info["codec"] == "zstd", "codec %s" % info["codec"])
    check(info["samples"] == n, "samples %s" % info["samples"])
    check(info["chunks"] > 1, "chunks %s" % info["chunks"])
    check(info["ratio"] > 1.5, "ratio %s" % info["ratio"])
    check(info["raw_bytes"] > info["stored_bytes"], "raw <= stored")
    for field, arr, src in [("x", x, xp), ("y", y, yp)]:
        back = os.path.join(tmp, "z-%s.npy" % field)
        run("export", z, "--field", field, "-o", back, expect=0)
        with open(src, "rb") as a, open(back, "rb") as b:
            check(a.read() == b.read(), "zstd round trip of %s" % field)
    run("verify", "-q", z, expect=0)

    # Several shards.
    sdir = os.path.join(tmp, "shards")
    os.mkdir(sdir)
    base = os.path.join(sdir, "train.rfs")
    run("pack", "-q", "--chunk-bytes", "32KiB", "--shard-bytes", "256K", "-o", base,
        "x=" + xp, "y=" + yp, expect=0)
    shards = sorted(glob.glob(os.path.join(sdir, "train-*.rfs")))
    check(len(shards) >= 3, "only %d shards" % len(shards))
    check(os.path.basename(shards[0]) == "train-00000.rfs", "first shard %s" % shards[0])
    check(sorted(os.listdir(sdir)) == [os.path.basename(s) for s in shards] + ["train.rfm"],
          "unexpected files: %s" % os.listdir(sdir))
    for paths in ([os.path.join(sdir, "train-*.rfs")], [sdir], shards):
        rc, out, _ = run("info", "--json", *paths, expect=0)
        if rc:
            continue
        info = json.loads(out)
        check(info["shards"] == len(shards), "shards %s via %s" % (info["shards"], paths))
        check(info["samples"] == n, "samples %s via %s" % (info["samples"], paths))
        check([os.path.basename(p) for p in info["shard_paths"]] ==
              [os.path.basename(p) for p in shards], "shard_paths %s" % info["shard_paths"])
    for label, path in [("glob", os.path.join(sdir, "train-*.rfs")), ("dir", sdir)]:
        back = os.path.join(tmp, "sh-%s.npy" % label)
        run("export", path, "--field", "x", "-o", back, expect=0)
        with open(xp, "rb") as a, open(back, "rb") as b:
            check(a.read() == b.read(), "sharded export via %s" % label)
    run("verify", "-q", sdir, expect=0)

    # Sizes with suffixes, and bad ones.
    for s in ["1M", "1MiB", "1048576", "1mb"]:
        run("pack", "-q", "--chunk-bytes", s, "-o", os.path.join(tmp, "s.rfs"), "y=" + yp,
            expect=0)
    for s in ["1Q", "", "-5", "1.5M", "99999999999999999999", "17179869184G"]:
        rc, _, err = run("pack", "-q", "--chunk-bytes", s, "-o", os.path.join(tmp, "s.rfs"),
                         "y=" + yp, expect=2)
        check("--chunk-bytes" in err, "bad size %r: message %r" % (s, err))
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "temporary files left behind")
finish()
