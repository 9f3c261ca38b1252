# SPDX-License-Identifier: MIT
# Description: `ringfeed pack --shuffle SEED` writes the input samples in a
# permuted order, for every kind of input: an `id` field packed beside the
# data gives the order P; every other field must then equal the input at P
# (.npy fields, --raw records split into fields, over several chunks), P
# holds every input sample exactly once and is not the identity; llm.c
# windows (two shards of each token width) come out as the unshuffled pack's
# rows in the order of an .npy pack of as many samples with the same seed;
# the same seed gives the same bytes, another seed another order; a label
# field sorted by class comes out mixed (each batch of 64 holds about the
# class histogram of the whole); and a bad seed is a usage error.
import filecmp
import os

import numpy as np

from clitest import TempDir, check, finish, run

rng = np.random.default_rng(5)


def export(path, field, tmp):
    back = os.path.join(tmp, "x-%s.npy" % field)
    if run("export", path, "--field", field, "-o", back, expect=0)[0]:
        return None
    return np.load(back)


def check_perm(p, n, what):
    ok = check(p is not None and p.shape == (n,), "%s: order shape" % what)
    ok = ok and check(np.array_equal(np.sort(p), np.arange(n)),
                      "%s: not every sample exactly once" % what)
    ok = ok and check(not np.array_equal(p, np.arange(n)), "%s: not shuffled" % what)
    return ok


def write_llmc(path, magic, version, tokens):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


with TempDir() as tmp:
    # .npy inputs: labels sorted by class, as an image-folder walk gives.
    n, classes = 5000, 10
    ids = np.arange(n, dtype="<u4")
    labels = np.repeat(np.arange(classes, dtype="u1"), n // classes)
    x = rng.standard_normal((n, 3, 5)).astype("<f4")
    files = {}
    for name, arr in [("id", ids), ("label", labels), ("x", x)]:
        files[name] = os.path.join(tmp, name + ".npy")
        np.save(files[name], arr)
    inputs = ["%s=%s" % (k, v) for k, v in files.items()]
    out = os.path.join(tmp, "npy.rfs")
    run("pack", "-q", "--chunk-bytes", "8K", "--shuffle", 42, "-o", out, *inputs, expect=0)
    p = export(out, "id", tmp)
    if check_perm(p, n, "npy"):
        check(np.array_equal(export(out, "label", tmp), labels[p]), "npy: labels follow id")
        got = export(out, "x", tmp)
        check(got is not None and got.tobytes() == x[p].tobytes(), "npy: x follows id")
        # Mixed: per batch of 64, the total-variation distance between the
        # label histogram and the uniform one stays near what a random
        # order gives (about 0.15 for 64 draws of 10 classes), far from a
        # sorted stream's (0.9).
        b = 64
        got_l = export(out, "label", tmp)
        tv = []
        for i in range(0, n - b + 1, b):
            h = np.bincount(got_l[i:i + b], minlength=classes) / b
            tv.append(0.5 * np.abs(h - 1.0 / classes).sum())
        check(np.mean(tv) < 0.25, "labels not mixed: mean TV %.3f" % np.mean(tv))
        check(min(len(set(got_l[:b].tolist())), 10) >= 8,
              "first batch holds %d classes" % len(set(got_l[:b].tolist())))

    # Deterministic: same seed, same bytes; another seed, another order.
    again = os.path.join(tmp, "again.rfs")
    run("pack", "-q", "--chunk-bytes", "8K", "--shuffle", 42, "-o", again, *inputs, expect=0)
    check(filecmp.cmp(out, again, shallow=False), "same seed, different bytes")
    other = os.path.join(tmp, "other.rfs")
    run("pack", "-q", "--chunk-bytes", "8K", "--shuffle", 43, "-o", other, *inputs, expect=0)
    p43 = export(other, "id", tmp)
    check(p43 is not None and p is not None and not np.array_equal(p, p43),
          "seeds 42 and 43 give the same order")
    # Seed 0 is a seed like any other, and the largest one parses.
    for seed in (0, 2**64 - 1):
        s_out = os.path.join(tmp, "s.rfs")
        run("pack", "-q", "--shuffle", seed, "-o", s_out, inputs[0], expect=0)
        check_perm(export(s_out, "id", tmp), n, "seed %d" % seed)

    # --raw: records of several fields, over two files.
    rec = np.dtype([("id", "<u4"), ("v", "<i2", (3,)), ("c", "u1")])
    r = np.zeros(3001, dtype=rec)
    r["id"] = np.arange(len(r))
    r["v"] = rng.integers(-30000, 30000, size=(len(r), 3))
    r["c"] = np.arange(len(r)) % 251
    ra, rb = os.path.join(tmp, "a.bin"), os.path.join(tmp, "b.bin")
    r[:1000].tofile(ra)
    r[1000:].tofile(rb)
    rout = os.path.join(tmp, "raw.rfs")
    run("pack", "-q", "--chunk-bytes", "4K", "--shuffle", 7, "-o", rout, "--raw", ra, "--raw",
        rb, "--field", "id:u32", "--field", "v:i16[3]", "--field", "c:u8", expect=0)
    rp = export(rout, "id", tmp)
    if check_perm(rp, len(r), "raw"):
        check(np.array_equal(export(rout, "v", tmp), r["v"][rp]), "raw: v follows id")
        check(np.array_equal(export(rout, "c", tmp), r["c"][rp]), "raw: c follows id")

    # --llmc: the windows of the unshuffled pack, in the order that seed
    # gives any input of as many samples (taken from an .npy pack of ids).
    t = 8
    for magic, version, dt in [(20240520, 1, "<u2"), (20240801, 7, "<u4")]:
        d = os.path.join(tmp, "llmc%d" % version)
        os.mkdir(d)
        for i, ntok in enumerate([801, 333]):
            write_llmc(os.path.join(d, "s%d.bin" % i), magic, version,
                       rng.integers(0, 50000, size=ntok, dtype=dt))
        plain = os.path.join(tmp, "plain%d.rfs" % version)
        shuf = os.path.join(tmp, "shuf%d.rfs" % version)
        glob = os.path.join(d, "*.bin")
        run("pack", "-q", "--llmc", glob, "--seq-len", t, "-o", plain, expect=0)
        run("pack", "-q", "--chunk-bytes", "1K", "--llmc", glob, "--seq-len", t, "--shuffle", 9,
            "-o", shuf, expect=0)
        rows = export(plain, "tokens", tmp)
        got = export(shuf, "tokens", tmp)
        if rows is None or got is None:
            continue
        m = len(rows)
        idf = os.path.join(tmp, "lid.npy")
        np.save(idf, np.arange(m, dtype="<u4"))
        lid = os.path.join(tmp, "lid.rfs")
        run("pack", "-q", "--shuffle", 9, "-o", lid, "id=" + idf, expect=0)
        lp = export(lid, "id", tmp)
        if check_perm(lp, m, "llmc v%d" % version):
            check(got.dtype == rows.dtype and np.array_equal(got, rows[lp]),
                  "llmc v%d: windows not in the seed's order" % version)
            # The multiset of windows is unchanged.
            check(sorted(map(bytes, got)) == sorted(map(bytes, rows)),
                  "llmc v%d: windows differ as a multiset" % version)

    # A seed that is not a number is a usage error.
    for bad in ["-1", "x", "18446744073709551616", ""]:
        rc, _, err = run("pack", "-q", "--shuffle", bad, "-o", os.path.join(tmp, "b.rfs"),
                         inputs[0], expect=2)
        check("--shuffle" in err, "bad seed %r: %r" % (bad, err))
    rc, help_text, _ = run("pack", "--help", expect=0)
    check("--shuffle SEED" in help_text and "sorted" in help_text, "help names --shuffle")

finish()
