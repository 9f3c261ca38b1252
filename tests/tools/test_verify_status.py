# SPDX-License-Identifier: MIT
# Description: `ringfeed verify`'s exit status, the part of it a script
# relies on (0 all good, 1 a problem was found, 2 bad usage), for every kind
# of problem and at every verbosity (-q, default, -v): a flipped byte in a
# chunk of the last shard, a shard whose header does not open, an empty
# file, shards that are each sound but do not form one dataset (different
# schemas), a path that does not exist; good shards alone still exit 0 after
# those, and a missing PATH or an unknown option is 2.
import os
import shutil

import numpy as np

from clitest import TempDir, check, finish, run, shard_chunks

VERBOSITY = ([], ["-q"], ["-v"])


def status(*paths, want):
    for v in VERBOSITY:
        rc, out, err = run("verify", *v, *paths)
        check(rc == want, "verify %s %s: exit %d, expected %d\nstdout: %s\nstderr: %s"
              % (" ".join(v), " ".join(os.path.basename(p) for p in paths), rc, want, out, err))
        if want == 1:
            check(err.strip() != "", "verify %s: exit 1 with no message" % " ".join(v))


with TempDir() as tmp:
    n = 3000
    a = np.arange(n * 6, dtype="<i4").reshape(n, 6)
    b = (np.arange(n, dtype="<u8") * 7) % 1000
    ap, bp = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
    np.save(ap, a)
    np.save(bp, b)
    ds = os.path.join(tmp, "ds")
    os.mkdir(ds)
    run("pack", "-q", "--chunk-bytes", "8K", "--shard-bytes", "32K", "-o",
        os.path.join(ds, "d.rfs"), "a=" + ap, "b=" + bp, expect=0)
    shards = sorted(os.path.join(ds, f) for f in os.listdir(ds) if f.endswith(".rfs"))
    check(len(shards) >= 3, "shards: %s" % shards)
    status(ds, want=0)
    status(*shards, want=0)

    # A flipped byte in the last chunk of the last shard: the problem found
    # last, after every good one.
    last = shards[-1]
    with open(last, "rb") as f:
        orig = f.read()
    off, stored, _ = shard_chunks(last)[-1]
    bad = bytearray(orig)
    bad[off + stored - 1] ^= 0x01
    with open(last, "wb") as f:
        f.write(bad)
    status(ds, want=1)
    status(last, want=1)
    status(shards[0], want=0)

    # A header that does not open (its checksum fails): reported, counted.
    bad = bytearray(orig)
    bad[40] ^= 0xFF
    with open(last, "wb") as f:
        f.write(bad)
    status(last, want=1)
    status(ds, want=1)
    with open(last, "wb") as f:
        f.write(orig)
    status(ds, want=0)

    # An empty file among good shards.
    empty = os.path.join(ds, "zz-empty.rfs")
    open(empty, "wb").close()
    status(ds, want=1)
    status(empty, want=1)
    os.remove(empty)

    # A shard name of the pack that its manifest does not list (a leftover,
    # or copied in): not read, with a warning; without the manifest, the
    # listing finds it and the shards are not one pack.
    extra = os.path.join(ds, "d-00009.rfs")
    shutil.copyfile(shards[0], extra)
    status(ds, want=0)
    _, _, err = run("verify", ds)
    check("d-00009.rfs: not listed" in err, "no warning for an unlisted shard: %r" % err)
    manifest = os.path.join(ds, "d.rfm")
    with open(manifest, "rb") as f:
        saved = f.read()
    os.remove(manifest)
    status(ds, want=1)
    with open(manifest, "wb") as f:
        f.write(saved)
    os.remove(extra)

    # Each shard sound, together not one dataset: another schema.
    other = os.path.join(tmp, "other.rfs")
    run("pack", "-q", "-o", other, "b=" + bp, expect=0)
    status(other, want=0)
    status(shards[0], other, want=1)

    # A path that does not exist, alone and beside good shards.
    status(os.path.join(tmp, "nothing.rfs"), want=1)
    status(shards[0], os.path.join(tmp, "nothing.rfs"), want=1)

    # Good shards after all of that.
    status(ds, want=0)

    # Bad usage.
    rc, _, _ = run("verify")
    check(rc == 2, "verify with no PATH: exit %d, expected 2" % rc)
    rc, _, _ = run("verify", "--no-such-option", ds)
    check(rc == 2, "verify --no-such-option: exit %d, expected 2" % rc)

finish()
