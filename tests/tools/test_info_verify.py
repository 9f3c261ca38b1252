# SPDX-License-Identifier: MIT
# Description: `ringfeed info` (text and --json: keys, counts, schema) and
# `ringfeed verify`: exit 0 on good shards; after bytes are flipped inside two
# chunks of one shard (found from the index bytes), exit 1 with one line per
# bad chunk naming the shard, the chunk and its byte offset, the other shards
# still checked; a shard with a broken footer is reported and the rest checked;
# a flipped byte in a chunk's per-sample checksum table is reported (exit 1).
import json
import os

import numpy as np

from clitest import TempDir, check, finish, run, shard_chunks

with TempDir() as tmp:
    n = 4000
    img = np.arange(n * 12, dtype="<u2").reshape(n, 3, 4)
    lab = np.arange(n, dtype="<i8")
    ip, lp = os.path.join(tmp, "img.npy"), os.path.join(tmp, "lab.npy")
    np.save(ip, img)
    np.save(lp, lab)
    one = os.path.join(tmp, "one.rfs")
    run("pack", "-q", "--chunk-bytes", "16K", "-o", one, "image=" + ip, "label=" + lp, expect=0)

    rc, out, _ = run("info", one, expect=0)
    for s in ["samples:      %d" % n, "image", "u16", "[3, 4]", "label", "i64", "codec:        none"]:
        check(s in out, "info text lacks %r:\n%s" % (s, out))
    rc, out, _ = run("info", one, "--json", expect=0)  # options after paths too
    info = json.loads(out)
    chunks = shard_chunks(one)
    for key in ["version", "shards", "shard_paths", "samples", "chunks", "codec", "raw_bytes",
                "stored_bytes", "file_bytes", "ratio", "fields"]:
        check(key in info, "info --json lacks %s" % key)
    check(info["samples"] == n and info["shards"] == 1, "counts %s" % info)
    check(info["chunks"] == len(chunks) and len(chunks) > 3, "chunks %s" % info["chunks"])
    check(info["file_bytes"] == os.path.getsize(one), "file_bytes")
    check(info["stored_bytes"] == sum(c[1] for c in chunks), "stored_bytes")
    check(info["fields"] == [
        {"name": "image", "dtype": "u16", "shape": [3, 4], "var_dim": -1, "item_bytes": 24},
        {"name": "label", "dtype": "i64", "shape": [], "var_dim": -1, "item_bytes": 8},
    ], "fields %s" % info["fields"])

    # verify: good, then corrupt.
    sdir = os.path.join(tmp, "ds")
    os.mkdir(sdir)
    base = os.path.join(sdir, "d.rfs")
    run("pack", "-q", "--chunk-bytes", "16K", "--shard-bytes", "96K", "-o", base,
        "image=" + ip, "label=" + lp, expect=0)
    shards = sorted(os.path.join(sdir, f) for f in os.listdir(sdir))
    check(len(shards) >= 3, "shards: %s" % shards)
    rc, out, _ = run("verify", sdir, expect=0)
    check(out.startswith("ok"), "verify output %r" % out)

    victim = shards[1]
    ch = shard_chunks(victim)
    check(len(ch) >= 3, "chunks in the victim: %d" % len(ch))
    with open(victim, "r+b") as f:
        for k in (0, 2):
            off, stored, _ = ch[k]
            f.seek(off + stored // 2)
            b = f.read(1)
            f.seek(off + stored // 2)
            f.write(bytes([b[0] ^ 0x5A]))
    rc, out, err = run("verify", sdir, expect=1)
    lines = [l for l in err.splitlines() if os.path.basename(victim) in l]
    check(len(lines) == 2, "want 2 problem lines, got:\n%s" % err)
    for k, l in zip((0, 2), lines):
        check(("chunk %d" % k) in l and ("offset %d" % ch[k][0]) in l,
              "line for chunk %d lacks chunk/offset: %r" % (k, l))
    check(not any(os.path.basename(s) in err for s in shards if s != victim),
          "a good shard reported:\n%s" % err)
    # Also when named by a glob and by the file.
    run("verify", "-q", os.path.join(sdir, "d-*.rfs"), expect=1)
    run("verify", "-q", victim, expect=1)
    run("verify", "-q", shards[0], shards[2], expect=0)

    # A broken footer: that shard is reported, the others still checked.
    with open(shards[2], "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\0")
    rc, out, err = run("verify", sdir, expect=1)
    check(os.path.basename(shards[2]) in err, "footer problem not reported:\n%s" % err)
    check(len([l for l in err.splitlines() if os.path.basename(victim) in l]) == 2,
          "chunk problems lost after a bad shard:\n%s" % err)
    run("verify", "-q", shards[0], expect=0)
    rc, _, err = run("info", shards[2], expect=1)
    check(os.path.basename(shards[2]) in err, "info message %r" % err)
    run("verify", os.path.join(tmp, "nothing-*.rfs"), expect=1)

    # A flipped byte in a chunk's per-sample checksum table (format 2: it
    # follows the stored bytes at the next multiple of 64, 2 fields x 8
    # bytes per sample): the chunk's own checksum still holds, verify
    # reports the table, naming the chunk, and exits 1.
    run("verify", "-q", one, expect=0)
    off, stored, samples = chunks[1]
    table = off + (stored + 63) // 64 * 64
    with open(one, "r+b") as f:
        f.seek(table + 16 * (samples // 2) + 3)
        b = f.read(1)
        f.seek(table + 16 * (samples // 2) + 3)
        f.write(bytes([b[0] ^ 0x01]))
    rc, out, err = run("verify", one, expect=1)
    check("chunk 1 " in err and "per-sample checksum table" in err,
          "table flip not reported: %r" % err)
finish()
