# SPDX-License-Identifier: MIT
# Description: the options both `ringfeed pack` front ends share (-o, --zstd,
# --chunk-bytes, --shard-bytes, -j, --shuffle, -q, -v, -h) act the same on
# NAME=FILE.npy inputs and on --images DIR: each bad value exits 2 with
# usage, the message naming the option and the value; each good value does
# what it says (zstd codec, more chunks, shards, the same samples with -j 2,
# a seed's permutation, silence with -q, more words with -v); --help shows
# every shared option under both; --raw, --field, --llmc and --seq-len
# with --images say they do not mix.
import json
import os
import struct
import zlib

import numpy as np

from clitest import TempDir, check, finish, run

N = 40


def png(path, value):
    """A valid 4x4 grey PNG whose pixels are all `value`."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    rows = b"".join(b"\x00" + bytes([value]) * 4 for _ in range(4))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def info(path):
    rc, out, _ = run("info", "--json", path, expect=0)
    return json.loads(out) if rc == 0 else {}


def values(path, field):
    rc, out, _ = run("cat", path, "--field", field, "--text", "--batch", "7", "--shuffle",
                     "none", "--device", "host", expect=0)
    return out.splitlines()


with TempDir() as tmp:
    ids = os.path.join(tmp, "id.npy")
    np.save(ids, np.arange(N, dtype="<i8") * 1000003)
    root = os.path.join(tmp, "folder")
    for i in range(N):
        d = os.path.join(root, "class%d" % (i % 2))
        os.makedirs(d, exist_ok=True)
        png(os.path.join(d, "%03d.png" % i), i)
    # Each front end: its inputs and the field whose values tell samples apart.
    ends = {"npy": (["id=" + ids], "id"), "images": (["--images", root], "name")}

    for end, (inputs, field) in ends.items():
        out = os.path.join(tmp, end + ".rfs")
        bad = [
            (["--zstd", "23"], "--zstd", "'23'"),
            (["--zstd", "x"], "--zstd", "'x'"),
            (["--chunk-bytes", "1X"], "--chunk-bytes", "'1X'"),
            (["--chunk-bytes", "0"], "--chunk-bytes", "'0'"),
            (["--chunk-bytes", "5G"], "--chunk-bytes", "4G"),
            (["--shard-bytes", "1X"], "--shard-bytes", "'1X'"),
            (["--shard-bytes", "99999999T"], "--shard-bytes", "too large"),
            (["-j", "0"], "-j", "'0'"),
            (["--threads", "300"], "-j", "'300'"),
            (["--shuffle", "x"], "--shuffle", "'x'"),
            (["--shuffle", "-1"], "--shuffle", "'-1'"),
            (["--zstd"], "'--zstd'", "requires"),
            (["-o", ""], "-o", "missing"),
            (["-j"], "'-j'", "requires"),
        ]
        for args, opt, what in bad:
            a = (["-o", out] if "-o" not in args else []) + args + inputs
            if args[-1] in ("--zstd", "-j"):
                a = ["-o", out] + inputs + args  # the option last: no argument
            rc, _, err = run("pack", *a, expect=2)
            check(err.startswith("ringfeed pack: ") and opt in err and what in err
                  and "usage:" in err, "%s %s: message %r" % (end, args, err))
        check(not os.path.exists(out), "%s: output written on bad usage" % end)

        rc, help_text, _ = run("pack", *inputs, "--help", expect=0)
        for opt in ("--output", "--zstd LEVEL", "--chunk-bytes SIZE", "--shard-bytes SIZE",
                    "--threads N", "--shuffle SEED", "--quiet", "--verbose", "--help"):
            check(opt in help_text, "%s --help lacks %s" % (end, opt))

        # Good values.
        rc, _, err = run("pack", "-o", out, *inputs, expect=0)
        check(os.path.exists(out) and out in err, "%s: -o and its summary: %r" % (end, err))
        plain = values(out, field)
        check(len(plain) == N, "%s: %d samples" % (end, len(plain)))
        default_chunks = info(out).get("chunks")

        rc, _, err = run("pack", "-q", "-o", out, *inputs, expect=0)
        check(err == "", "%s -q: %r" % (end, err))
        rc, _, verr = run("pack", "-v", "-o", out, *inputs, expect=0)
        check(len(verr.splitlines()) > 1, "%s -v: %r" % (end, verr))

        run("pack", "-q", "--zstd", "3", "-o", out, *inputs, expect=0)
        check(info(out).get("codec") == "zstd", "%s --zstd 3: %s" % (end, info(out)))
        check(values(out, field) == plain, "%s --zstd 3 changed the samples" % end)

        run("pack", "-q", "--chunk-bytes", "64", "-o", out, *inputs, expect=0)
        chunks = info(out).get("chunks", 0)
        check(chunks > default_chunks, "%s --chunk-bytes 64: %d chunks" % (end, chunks))

        sh = os.path.join(tmp, end + "-sh.rfs")
        run("pack", "-q", "--chunk-bytes", "64", "--shard-bytes", "1K", "-o", sh, *inputs,
            expect=0)
        shards = sorted(f for f in os.listdir(tmp) if f.startswith(end + "-sh-"))
        check(len(shards) > 1 and shards[0] == end + "-sh-00000.rfs",
              "%s --shard-bytes: %s" % (end, shards))
        got = values(os.path.join(tmp, shards[0]).replace("-00000", "-*"), field) \
            if shards else []
        check(got == plain, "%s --shard-bytes changed the samples" % end)

        run("pack", "-q", "-j", "2", "--zstd", "1", "-o", out, *inputs, expect=0)
        check(values(out, field) == plain, "%s -j 2 changed the samples" % end)

        run("pack", "-q", "--shuffle", "9", "-o", out, *inputs, expect=0)
        s9 = values(out, field)
        check(sorted(s9) == sorted(plain) and s9 != plain,
              "%s --shuffle 9: not a new order of the samples" % end)
        ends[end] = (inputs, field, [plain.index(v) for v in s9])

    # The other front end's options are named as such, not as unknown.
    for opt in ("--raw", "--field", "--llmc", "--seq-len"):
        rc, _, err = run("pack", "-o", os.path.join(tmp, "o.rfs"), "--images", root, opt, "x",
                         expect=2)
        check(opt + " does not mix with --images" in err, "%s with --images: %r" % (opt, err))

    # One seed, one permutation, whichever front end packs.
    check(ends["npy"][2] == ends["images"][2], "--shuffle 9: the front ends' orders differ")

finish()
