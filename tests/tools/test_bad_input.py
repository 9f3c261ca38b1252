# SPDX-License-Identifier: MIT
# Description: the tool's command line and its refusals: help and version;
# bad usage exits 2 naming the option (unknown options, missing arguments,
# bad values, mixed inputs, unknown commands); bad .npy inputs (Fortran
# order, object dtype, big-endian, truncated data, trailing bytes,
# mismatched lengths, not a .npy, bad field name) exit 1 with a clear message
# and leave no output file; export of a missing field fails cleanly.  A
# directory or glob that also holds a pipe named *.rfs, a dot-file and a
# subdirectory named *.rfs: info, verify and cat read its one shard and do not
# block on the pipe; the pipe named alone is "not a regular file".  pack
# refuses a pipe as input (exit 1), an output that is one of its inputs or
# whose shard names are (exit 2, the input intact), -j above 256, a chunk
# above 4G and an empty -o (exit 2); its summary's "stored" is the size of
# what it wrote.  export will not rename over a link, a pipe or a device and
# keeps a file's mode; info --json stays valid JSON for a path that is not
# UTF-8; cat saves no position when its reader went away.
import os
import subprocess

import numpy as np

from clitest import EXE, TempDir, check, finish, run

with TempDir() as tmp:
    # Help and version.
    rc, out, _ = run("--help", expect=0)
    for cmd in ["pack", "info", "verify", "export"]:
        check(cmd in out, "--help lacks %s" % cmd)
    for cmd in ["pack", "info", "verify", "export"]:
        rc, out1, _ = run("help", cmd, expect=0)
        rc, out2, _ = run(cmd, "--help", expect=0)
        check(out1 == out2 and ("ringfeed " + cmd) in out1, "help for %s" % cmd)
    rc, out, _ = run("--version", expect=0)
    check(out.strip().count(".") == 2 and out.strip().replace(".", "").isdigit(),
          "version %r" % out)
    run("help", "nosuch", expect=2)
    rc, _, err = run("nosuch", expect=2)
    check("nosuch" in err, "unknown command message %r" % err)
    run(expect=2)

    good = os.path.join(tmp, "good.npy")
    np.save(good, np.arange(10, dtype="<i4"))
    out = os.path.join(tmp, "out.rfs")

    usage_cases = [
        (["pack", "--foo", "-o", out, "a=" + good], "'--foo'"),
        (["pack", "--foo=3", "-o", out, "a=" + good], "'--foo'"),
        (["pack", "-Z", "-o", out, "a=" + good], "'-Z'"),
        (["pack", "-o", out, "a=" + good, "--zstd"], "'--zstd'"),
        (["pack", "-o", out, "--zstd", "23", "a=" + good], "--zstd"),
        (["pack", "-o", out, "--zstd", "x", "a=" + good], "--zstd"),
        (["pack", "-o", out, "-j", "0", "a=" + good], "-j"),
        (["pack", "-o", out, "--shard-bytes", "1X", "a=" + good], "--shard-bytes"),
        (["pack", "a=" + good], "-o"),
        (["pack", "-o", out], "input"),
        (["pack", "-o", out, good], "NAME=FILE"),
        (["pack", "-o", out, "a=" + good, "--raw", good, "--field", "x:u8"], "mix"),
        (["pack", "-o", out, "--seq-len", "4", "a=" + good], "--seq-len"),
        (["info", "--bogus", out], "'--bogus'"),
        (["info"], "PATH"),
        (["info", "--json=1", out], "'--json'"),
        (["verify", "-x", out], "'-x'"),
        (["export", out, "-o", out + ".npy"], "--field"),
        (["export", out, "--field", "a"], "-o"),
        (["export", "--what", out], "'--what'"),
    ]
    for args, needle in usage_cases:
        rc, _, err = run(*args, expect=2)
        check(needle in err and "usage:" in err, "%s: message %r" % (args, err))
        check(err.startswith("ringfeed " + args[0] + ": "), "%s: prefix %r" % (args, err))
    check(not os.path.exists(out), "output written on bad usage")

    def bad_npy(name, content_fn, needle):
        p = os.path.join(tmp, name + ".npy")
        content_fn(p)
        rc, _, err = run("pack", "-q", "-o", out, "b=" + good, "a=" + p, expect=1)
        check(needle.lower() in err.lower() and name in err, "%s: message %r" % (name, err))
        check(not os.path.exists(out), "%s: output left behind" % name)

    bad_npy("fortran", lambda p: np.save(p, np.asfortranarray(np.ones((10, 3), "<f4"))),
            "Fortran order")
    bad_npy("object", lambda p: np.save(p, np.array([1, "a", None] * 3 + [2], dtype=object),
                                        allow_pickle=True), "object")
    bad_npy("bigendian", lambda p: np.save(p, np.ones(10, ">f8")), "big-endian")

    def truncated(p):
        np.save(p, np.ones((10, 4), "<f4"))
        with open(p, "r+b") as f:
            f.truncate(os.path.getsize(p) - 3)
    bad_npy("truncated", truncated, "truncated")

    def trailing(p):
        np.save(p, np.ones((10, 4), "<f4"))
        with open(p, "ab") as f:
            f.write(b"\0" * 8)
    bad_npy("trailing", trailing, "after the array data")
    bad_npy("mismatch", lambda p: np.save(p, np.ones((11, 2), "<u1")), "samples")
    bad_npy("notnpy", lambda p: open(p, "wb").write(b"hello, world" * 10), "not a .npy")
    bad_npy("empty", lambda p: open(p, "wb").close(), "truncated")
    bad_npy("scalar", lambda p: np.save(p, np.float32(3)), "samples axis")
    bad_npy("unicode", lambda p: np.save(p, np.array(["ab"] * 10)), "unicode")
    rc, _, err = run("pack", "-q", "-o", out, "a=" + os.path.join(tmp, "missing.npy"), expect=1)
    check("missing.npy" in err, "missing file message %r" % err)
    rc, _, err = run("pack", "-q", "-o", out, "bad name=" + good, expect=1)
    check("field name" in err, "bad name message %r" % err)
    rc, _, err = run("pack", "-q", "-o", out, "a=" + good, "a=" + good, expect=1)
    check("twice" in err, "duplicate name message %r" % err)
    check(not os.path.exists(out), "output left behind")

    # The writer's own failure (no such directory) is reported with its message.
    rc, _, err = run("pack", "-q", "-o", os.path.join(tmp, "no", "such", "dir.rfs"), "a=" + good,
                     expect=1)
    check("no/such/dir.rfs" in err, "writer open message %r" % err)

    # Export: a missing field, an unreadable dataset.
    run("pack", "-q", "-o", out, "a=" + good, expect=0)
    npy = os.path.join(tmp, "x.npy")
    rc, _, err = run("export", out, "--field", "nope", "-o", npy, expect=2)
    check("nope" in err and "a" in err, "missing field message %r" % err)
    check(not os.path.exists(npy), "export output left after a failure")
    rc, _, err = run("export", good, "--field", "a", "-o", npy, expect=1)
    check(not os.path.exists(npy), "export output left after a failure")
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "temporary files left behind")

    # What a directory or a glob may hold beside its shards.
    odd = os.path.join(tmp, "odd")
    os.mkdir(odd)
    run("pack", "-q", "-o", os.path.join(odd, "a.rfs"), "a=" + good, expect=0)
    os.mkfifo(os.path.join(odd, "b.rfs"))
    with open(os.path.join(odd, ".partial.rfs"), "wb") as f:
        f.write(b"RFS" * 100)
    os.mkdir(os.path.join(odd, "old.rfs"))
    for args in (["info", odd], ["info", os.path.join(odd, "*.rfs")], ["verify", odd],
                 ["verify", os.path.join(odd, "*.rfs")],
                 ["cat", os.path.join(odd, "*.rfs"), "--field", "a", "--text"]):
        rc, out_, err = run(*args, expect=0)
        check("b.rfs" not in err + out_ and "partial" not in err + out_,
              "%s: %r %r" % (args, out_[:200], err))
    rc, out_, err = run("info", os.path.join(odd, "b.rfs"), expect=1)
    check("not a regular file" in err, "a pipe named alone: %r" % err)
    rc, out_, err = run("verify", os.path.join(odd, "b.rfs"), expect=1)
    check("not a regular file" in err and err.count("b.rfs") == 1, "verify of a pipe: %r" % err)

    # pack's refusals of its inputs and output.
    rc, _, err = run("pack", "-q", "-o", os.path.join(tmp, "p.rfs"),
                     "a=" + os.path.join(odd, "b.rfs"), expect=1)
    check("not a regular file" in err, "a pipe as pack input: %r" % err)
    same = os.path.join(tmp, "same.npy")
    np.save(same, np.arange(10, dtype="<i4"))
    before = open(same, "rb").read()
    rc, _, err = run("pack", "-q", "-o", same, "a=" + same, expect=2)
    check("one of the inputs" in err and open(same, "rb").read() == before,
          "output == input: %r" % err)
    shard1 = os.path.join(tmp, "sh-00001.rfs")
    np.save(shard1 + ".npy", np.arange(10, dtype="<i4"))
    os.rename(shard1 + ".npy", shard1)
    run("pack", "-q", "-o", os.path.join(tmp, "sh-00000.rfs"), "a=" + good, expect=0)
    rc, _, err = run("pack", "-q", "-o", os.path.join(tmp, "sh.rfs"), "--shard-bytes", "8K",
                     "a=" + shard1, expect=2)
    check("one of the inputs" in err and os.path.exists(shard1), "a shard name as input: %r" % err)
    for args in (["-j", "300"], ["--chunk-bytes", "5G"]):
        rc, _, err = run("pack", "-q", "-o", os.path.join(tmp, "p.rfs"), *args, "a=" + good,
                         expect=2)
        check(args[0] in err, "%s: %r" % (args, err))
    run("pack", "-q", "-o", "", "a=" + good, expect=2)
    big = os.path.join(tmp, "big.npy")
    np.save(big, np.arange(20000, dtype="<i4"))
    for extra in ([], ["--shard-bytes", "16K", "--chunk-bytes", "4K"]):
        rc, _, err = run("pack", "-o", os.path.join(tmp, "st.rfs"), *extra, "a=" + big, expect=0)
        files = [f for f in os.listdir(tmp) if f.startswith("st") and f.endswith(".rfs")]
        total = sum(os.path.getsize(os.path.join(tmp, f)) for f in files)
        words = err.split()
        stored = words[words.index("stored,") - 2:words.index("stored,")] if "stored," in words \
            else []
        check(stored and abs(float(stored[0]) * {"B": 1, "KiB": 1024, "MiB": 1 << 20}[stored[1]]
                             - total) <= 0.01 * total + 64,
              "summary %r against %d bytes written" % (err, total))
        for f in files:
            os.unlink(os.path.join(tmp, f))
    # export's output: not over a link or a pipe; an existing file keeps its mode.
    ex = os.path.join(tmp, "ex.rfs")
    run("pack", "-q", "-o", ex, "a=" + good, expect=0)
    link = os.path.join(tmp, "link.npy")
    os.symlink(good, link)
    rc, _, err = run("export", ex, "--field", "a", "-o", link, expect=1)
    check("symbolic link" in err and os.path.islink(link), "export over a link: %r" % err)
    rc, _, err = run("export", ex, "--field", "a", "-o", os.path.join(odd, "b.rfs"), expect=1)
    check("not a regular file" in err, "export over a pipe: %r" % err)
    kept = os.path.join(tmp, "kept.npy")
    open(kept, "wb").close()
    os.chmod(kept, 0o600)
    run("export", ex, "--field", "a", "-o", kept, expect=0)
    check(os.stat(kept).st_mode & 0o777 == 0o600 and np.array_equal(np.load(kept), np.load(good)),
          "export keeps the mode: %o" % (os.stat(kept).st_mode & 0o777))

    # JSON of a path that is not UTF-8.
    import json
    bad = os.path.join(tmp.encode(), b"bad\xff\xfe")
    os.mkdir(bad)
    os.rename(ex, os.path.join(bad, b"ex.rfs"))
    p = subprocess.run([EXE.encode(), b"info", b"--json", os.path.join(bad, b"ex.rfs")],
                       capture_output=True)
    try:
        info = json.loads(p.stdout)
    except ValueError as e:
        info = None
        check(False, "info --json of a non-UTF-8 path: %s" % e)
    check(p.returncode == 0 and info is not None and "\ufffd" in json.dumps(info, ensure_ascii=False),
          "the bad bytes as U+FFFD")

    # cat into a pipe closed early: no position saved.
    big = os.path.join(tmp, "seq.npy")
    np.save(big, np.arange(200000, dtype="<i8"))
    seq = os.path.join(tmp, "seq.rfs")
    run("pack", "-q", "-o", seq, "y=" + big, expect=0)
    st = os.path.join(tmp, "pos.st")
    c = subprocess.Popen([EXE, "cat", seq, "--field", "y", "--batch", "100", "--batches", "1500",
                          "--state-out", st], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    c.stdout.read(16)
    c.stdout.close()
    err = c.stderr.read().decode()
    c.wait(timeout=60)
    check(c.returncode == 1 and not os.path.exists(st) and "not saved" in err,
          "cat into a closed pipe: %d %r" % (c.returncode, err))
finish()
