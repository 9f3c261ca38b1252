# SPDX-License-Identifier: MIT
# Description: `ringfeed pack --llmc GLOB --seq-len T` on synthetic llm.c
# shards of both kinds (magic 20240520 v1 uint16 tokens, 20240801 v7 uint32):
# shards are taken in sorted order, each cut on its own into samples of T+1
# tokens every T tokens (checked token by token), the short tail is dropped
# and reported; bad headers, sizes that disagree with the header, and mixed
# token types fail with exit 1 and no output.
import os

import numpy as np

from clitest import TempDir, check, finish, run

rng = np.random.default_rng(99)


def write_shard(path, magic, version, tokens, ntokens=None):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1] = magic, version
    header[2] = len(tokens) if ntokens is None else ntokens
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def expected(streams, t):
    rows = []
    for tok in streams:
        i = 0
        while i * t + t + 1 <= len(tok):
            rows.append(tok[i * t:i * t + t + 1])
            i += 1
    return np.array(rows, dtype=streams[0].dtype).reshape(len(rows), t + 1)


with TempDir() as tmp:
    for magic, version, dt in [(20240520, 1, "<u2"), (20240801, 7, "<u4")]:
        d = os.path.join(tmp, "v%d" % version)
        os.mkdir(d)
        hi = 50257 if dt == "<u2" else 128256
        lens = [1000, 64, 3, 777]
        streams = [rng.integers(0, hi, size=n, dtype=dt) for n in lens]
        # Written out of order: the tool must sort the glob's matches.
        for i in reversed(range(len(lens))):
            write_shard(os.path.join(d, "tok_%03d.bin" % i), magic, version, streams[i])
        t = 16
        out = os.path.join(tmp, "v%d.rfs" % version)
        rc, _, err = run("pack", "--llmc", os.path.join(d, "tok_*.bin"), "--seq-len", t,
                         "-o", out, expect=0)
        want = expected(streams, t)
        tail = sum(n - ((n - 1) // t) * t - 1 if n > t else n for n in lens)
        check(("%d tokens" % tail) in err and "dropped" in err, "tail report: %r" % err)
        back = os.path.join(tmp, "v%d.npy" % version)
        if run("export", out, "--field", "tokens", "-o", back, expect=0)[0]:
            continue
        got = np.load(back)
        check(got.dtype == np.dtype(dt), "v%d: dtype %s" % (version, got.dtype))
        check(got.shape == want.shape, "v%d: shape %s != %s" % (version, got.shape, want.shape))
        if got.shape == want.shape:
            bad = np.argwhere(got != want)
            check(len(bad) == 0, "v%d: tokens differ at %s" % (version, bad[:5].tolist()))
            # inputs [0,T) and targets [1,T+1) of consecutive samples in a shard line up.
            check(np.array_equal(got[1:62, 0], got[0:61, t]), "v%d: windows overlap" % version)

        # Header count disagreeing with the file size, either way.
        for n_hdr, label in [(len(streams[0]) + 1, "truncated"), (len(streams[0]) - 1, "bytes")]:
            bd = os.path.join(tmp, "bad%d" % version)
            os.makedirs(bd, exist_ok=True)
            write_shard(os.path.join(bd, "x.bin"), magic, version, streams[0], n_hdr)
            bad_out = os.path.join(tmp, "bad.rfs")
            rc, _, err = run("pack", "-q", "--llmc", os.path.join(bd, "*.bin"), "--seq-len", t,
                             "-o", bad_out, expect=1)
            check(label in err and "x.bin" in err, "size mismatch message: %r" % err)
            check(not os.path.exists(bad_out), "output left after a failure")
        # Wrong version for the magic.
        write_shard(os.path.join(bd, "x.bin"), magic, 3, streams[0])
        rc, _, err = run("pack", "-q", "--llmc", os.path.join(bd, "*.bin"), "--seq-len", t,
                         "-o", bad_out, expect=1)
        check("version" in err, "version message: %r" % err)

    # Mixed token types.
    md = os.path.join(tmp, "mixed")
    os.mkdir(md)
    write_shard(os.path.join(md, "a.bin"), 20240520, 1, np.arange(100, dtype="<u2"))
    write_shard(os.path.join(md, "b.bin"), 20240801, 7, np.arange(100, dtype="<u4"))
    rc, _, err = run("pack", "-q", "--llmc", os.path.join(md, "*.bin"), "--seq-len", 8,
                     "-o", os.path.join(tmp, "m.rfs"), expect=1)
    check("u32" in err and "u16" in err, "mixed message: %r" % err)
    # Not an llm.c shard; no match; missing --seq-len.
    with open(os.path.join(md, "c.txt"), "wb") as f:
        f.write(b"hello" * 300)
    rc, _, err = run("pack", "-q", "--llmc", os.path.join(md, "c.txt"), "--seq-len", 8,
                     "-o", os.path.join(tmp, "m.rfs"), expect=1)
    check("magic" in err, "bad magic message: %r" % err)
    rc, _, err = run("pack", "-q", "--llmc", os.path.join(md, "none*"), "--seq-len", 8,
                     "-o", os.path.join(tmp, "m.rfs"), expect=1)
    check("no file matches" in err, "no match message: %r" % err)
    rc, _, err = run("pack", "-q", "--llmc", os.path.join(md, "a.bin"),
                     "-o", os.path.join(tmp, "m.rfs"), expect=2)
    check("--seq-len" in err, "missing seq-len: %r" % err)
finish()
