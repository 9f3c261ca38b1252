#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: `ringfeed cat` end to end: packs .npy inputs with `ringfeed
# pack` and the loader tests' dataset (with a variable-length field) with
# lt-pack, then checks that cat --raw writes exactly the packed bytes and
# --text exactly one line per sample, in order, for batch sizes that do and
# do not divide the dataset (the last partial batch is kept), on the host
# backend and, when the cudart emulator is given, with --device cuda in
# both pin modes; the exit status of bad usage (2) and of a missing field
# (1); and a default window shuffle whose order does not depend on --depth
# (two ranks with different depths receive disjoint samples).
# Usage: test_cat.py RINGFEED LT_PACK [EMULATOR]
import functools
import os
import subprocess
import sys
import tempfile

import numpy as np

from ltpy import cat as cat_in, check, finish

ringfeed, lt_pack = sys.argv[1], sys.argv[2]
emulator = sys.argv[3] if len(sys.argv) > 3 else ""
cat = functools.partial(cat_in, ringfeed)

def tok(g):
    n = ((g * 2654435761) & (2**64 - 1)) >> 7
    n %= 7
    return [np.int32(np.int64(g * 31 + j).astype(np.int32)) for j in range(n)]


with tempfile.TemporaryDirectory(dir=".") as top:
    d = top + "/np"
    v = top + "/var"
    os.mkdir(d)
    os.mkdir(v)
    n = 1003
    a = (np.arange(n * 6, dtype=np.float32) * 0.25 - 7).reshape(n, 2, 3)
    lab = np.arange(n, dtype=np.int64) * -3
    h = np.arange(n * 2, dtype=np.float16).reshape(n, 2)
    np.save(f"{top}/a.npy", a)
    np.save(f"{top}/l.npy", lab)
    np.save(f"{top}/h.npy", h)
    r = subprocess.run([ringfeed, "pack", "-q", "-o", f"{d}/np.rfs", "--chunk-bytes", "4K",
                        "--shard-bytes", "16K", "--zstd", "1",
                        f"a={top}/a.npy", f"l={top}/l.npy", f"h={top}/h.npy"], capture_output=True)
    check(r.returncode == 0, "pack: " + r.stderr.decode())
    shards = sorted(f"{d}/{x}" for x in os.listdir(d) if x.startswith("np-"))
    check(len(shards) > 1, "several shards")

    devices = [("host", {})]
    if emulator:
        devices.append(("cuda", {"RINGFEED_CUDART": emulator, "RINGFEED_EMU_BW": "1G",
                                 "RINGFEED_EMU_JITTER": "0.3"}))
    for dev, env in devices:
        for batch, pin in ((7, "ring"), (17, "transient"), (1003, "ring"), (2000, "transient")):
            common = ["--batch", str(batch), "--device", dev, "--pin", pin, "--pinned", "2M",
                      "--depth", "3"]
            r = cat(shards + ["--field", "a", "--raw"] + common, env)
            check(r.returncode == 0 and r.stdout == a.tobytes(),
                  f"raw a {dev} B={batch}: rc {r.returncode} {r.stderr.decode()}")
            r = cat([d + "/np-*.rfs", "--field", "l", "--text"] + common, env)
            want = "".join(f"{v}\n" for v in lab)
            check(r.returncode == 0 and r.stdout.decode() == want, f"text l {dev} B={batch}")
            r = cat([d, "--field", "h", "--text"] + common, env)
            want = "".join(" ".join(f"{float(x):.9g}" for x in row) + "\n" for row in h)
            check(r.returncode == 0 and r.stdout.decode() == want, f"text f16 {dev} B={batch}")

        # A variable-length field, raw and text.
        r = subprocess.run([lt_pack, v, "var", "777", "1", "4096", "12288", "1"])
        check(r.returncode == 0, "lt-pack")
        r = cat([v + "/var-*.rfs", "--field", "tok", "--text", "--batch", "10", "--device", dev], env)
        want = "".join(" ".join(str(int(v)) for v in tok(g)) + "\n" for g in range(777))
        check(r.returncode == 0 and r.stdout.decode() == want,
              f"text tok {dev}: {r.stderr.decode()}")
        r = cat([v + "/var-*.rfs", "--field", "tok", "--batch", "64", "--device", dev], env)
        want = b"".join(np.array(tok(g), dtype=np.int32).tobytes() for g in range(777))
        check(r.returncode == 0 and r.stdout == want, f"raw tok {dev}")

    r = cat([d, "--field", "nope"])
    check(r.returncode == 2 and b"nope" in r.stderr and b"its fields are:" in r.stderr,
          "missing field is bad usage (2), naming it and the fields: %r" % r.stderr)
    r = cat([d, "--field", "a", "--device", "gpu"])
    check(r.returncode == 2, "bad --device exits 2")
    r = cat([d])
    check(r.returncode == 2, "missing --field exits 2")
    r = cat([d, "--field", "a", "--pinned", "4K", "--batch", "1000"])
    check(r.returncode == 1 and b"memory plan" in r.stderr, "a pinned budget too small says so")

    # The default window: the same order whatever the depth, so ranks of
    # one job that differ in it still get disjoint samples.
    w = top + "/w"
    os.makedirs(w)
    np.save(f"{top}/w.npy", np.arange(509, dtype=np.int64))
    r = subprocess.run([ringfeed, "pack", "-q", "-o", f"{w}/w.rfs", "--chunk-bytes", "40",
                        f"y={top}/w.npy"], capture_output=True)
    check(r.returncode == 0, "pack of 102 small chunks")
    win = [w, "--field", "y", "--text", "--device", "host", "--shuffle", "window",
           "--seed", "2", "-q"]
    outs = [cat(win + ["--batch", "64", "--depth", d]).stdout for d in ("1", "2", "4")]
    check(outs[0] and outs[0] == outs[1] == outs[2], "default window order independent of depth")
    ranks = [cat(win + ["--batch", "8", "--world", "2", "--rank", str(k), "--depth", d]).stdout
             for k, d in ((0, "1"), (1, "2"))]
    vals = [int(x) for o in ranks for x in o.split()]
    # 31 global batches of 16, and the 13 left: 7 on rank 0, 6 and a
    # repeat of its last on rank 1 (every sample delivered).
    check(len(vals) == 510 and len(set(vals)) == 509 and vals[-1] == vals[-2],
          "ranks of different depths are disjoint, every sample delivered")

finish()
