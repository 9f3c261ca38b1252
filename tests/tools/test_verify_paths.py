# SPDX-License-Identifier: MIT
# Description: what `ringfeed verify` and `info` make of the paths a user
# gives.  With several PATHs, a pack missing a shard is reported beside the
# other PATHs' problems, not only alone; a PATH ending in '/' prints shard
# paths with one slash.  A directory holding two packs (train.rfs and
# test.rfs) is refused by info and verify, naming both; each opens by its
# name, and a sharded pack by the name it was packed to (BASE.rfs).
import os
import shutil

import numpy as np

from clitest import TempDir, check, finish, run, shard_chunks


def pack(out, src, *extra):
    run("pack", "-q", "--chunk-bytes", "8K", *extra, "-o", out, "a=" + src, expect=0)


with TempDir() as tmp:
    n = 3000
    src = os.path.join(tmp, "a.npy")
    np.save(src, np.arange(n * 6, dtype="<i4").reshape(n, 6))
    dirs = []
    for name in ("sh1", "sh2", "sh3"):
        d = os.path.join(tmp, name)
        os.mkdir(d)
        pack(os.path.join(d, "z.rfs"), src, "--shard-bytes", "32K")
        dirs.append(d)
    shards1 = sorted(f for f in os.listdir(dirs[0]) if f.endswith(".rfs"))
    check(len(shards1) >= 3, "shards: %s" % shards1)

    # sh1 loses a shard; sh2 gets a flipped byte in a chunk.
    os.remove(os.path.join(dirs[0], shards1[1]))
    s2 = os.path.join(dirs[1], shards1[0])
    off, stored, _ = shard_chunks(s2)[0]
    with open(s2, "r+b") as f:
        f.seek(off + stored - 1)
        b = f.read(1)
        f.seek(off + stored - 1)
        f.write(bytes([b[0] ^ 1]))

    slashed = [d + "/" for d in dirs]
    for args in (slashed[:1], slashed, [slashed[1], slashed[0], slashed[2]]):
        rc, out, err = run("verify", *args)
        check(rc == 1, "verify %s: exit %d\n%s%s" % (args, rc, out, err))
        check(shards1[1] in err, "verify %s: the missing shard %s is not reported:\n%s"
              % (args, shards1[1], err))
        check("//" not in err, "verify %s: a double slash:\n%s" % (args, err))
        if len(args) > 1:
            check(os.path.join(dirs[1], shards1[0]) in err,
                  "verify %s: sh2's flipped byte is not reported:\n%s" % (args, err))
    rc, out, err = run("verify", slashed[2])
    check(rc == 0, "verify sh3/: exit %d\n%s" % (rc, err))

    # Two packs in one directory.
    fm = os.path.join(tmp, "fm")
    os.mkdir(fm)
    pack(os.path.join(fm, "train.rfs"), src)
    pack(os.path.join(fm, "test.rfs"), src)
    for cmd in ("info", "verify"):
        rc, out, err = run(cmd, fm)
        check(rc == 1, "%s fm: exit %d, expected 1\n%s%s" % (cmd, rc, out, err))
        check("train.rfm" in err and "test.rfm" in err,
              "%s fm: the packs are not named:\n%s" % (cmd, err))
    rc, out, err = run("info", "--json", os.path.join(fm, "train.rfs"))
    check(rc == 0 and '"samples": %d' % n in out, "info train.rfs: %d\n%s%s" % (rc, out, err))
    rc, out, err = run("info", "--json", os.path.join(fm, "train.rfs"),
                       os.path.join(fm, "test.rfs"))
    check(rc == 0 and '"samples": %d' % (2 * n) in out, "info both: %d\n%s%s" % (rc, out, err))
    rc, out, err = run("verify", os.path.join(fm, "train.rfs"), os.path.join(fm, "test.rfs"))
    check(rc == 0, "verify both: exit %d\n%s" % (rc, err))

    # A sharded pack by the name it was packed to.
    z = os.path.join(dirs[2], "z.rfs")
    check(not os.path.exists(z), "z.rfs exists")
    rc, out, err = run("info", "--json", z)
    check(rc == 0 and '"samples": %d' % n in out, "info z.rfs: %d\n%s%s" % (rc, out, err))
    rc, out, err = run("verify", z)
    check(rc == 0, "verify z.rfs: exit %d\n%s" % (rc, err))

finish()
