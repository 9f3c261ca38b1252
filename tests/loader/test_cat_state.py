#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: `ringfeed cat` with the order options.  For shuffle none,
# chunks, window and full: cat in pieces (--batches 40 --state-out FILE, then
# --state-in FILE --batches 40 --state-out FILE, ...) writes, concatenated,
# exactly what one uninterrupted cat writes, for one rank (and for rank 1
# of 3 with window and full shuffling); the shuffled orders are
# permutations of the dataset and differ from file order; --rank R
# --world 3 shares are disjoint and together cover the dataset; a damaged state file is refused (exit 1) and a bad --shuffle is
# bad usage (exit 2).  Runs on the host backend, and with --device cuda when
# the cudart emulator is given.
# Usage: test_cat_state.py RINGFEED LT_PACK [EMULATOR]
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

def samples(raw):
    # Field "y" of sample g is g * 1000003 - 5 (tests/loader/lt.h).
    y = np.frombuffer(raw, dtype=np.int64)
    return (y + 5) // 1000003


N = 1002
with tempfile.TemporaryDirectory(dir=".") as top:
    r = subprocess.run([lt_pack, top, "s", str(N), "0", "4096", "16384", "0"])
    check(r.returncode == 0, "lt-pack")
    ds = top + "/s-*.rfs"
    state = top + "/pos.state"
    devices = [("host", {})]
    if emulator:
        devices.append(("cuda", {"RINGFEED_CUDART": emulator, "RINGFEED_EMU_BW": "2G"}))
    for dev, env in devices:
        for mode in ("none", "chunks", "window", "full"):
            for rank, world in ((0, 1), (1, 3)) if mode in ("window", "full") else ((0, 1),):
                base = [ds, "--field", "y", "--raw", "--batch", "7", "--device", dev,
                        "--pinned", "1M", "--shuffle", mode, "--seed", "3", "--epoch", "1",
                        "--rank", str(rank), "--world", str(world)]
                if mode == "window":
                    base += ["--window", "4"]
                what = f"{mode} {dev} rank {rank}/{world}"
                ref = cat(base, env)
                check(ref.returncode == 0, f"{what}: {ref.stderr.decode()}")
                got = samples(ref.stdout)
                if world == 1:
                    check(sorted(got.tolist()) == list(range(N)), f"{what}: a permutation")
                    check((mode == "none") == (got.tolist() == list(range(N))),
                          f"{what}: file order only when not shuffled")
                # The same in pieces of 40 batches (the last ones shorter).
                if os.path.exists(state):
                    os.unlink(state)
                out = b""
                for piece in range(200):
                    args = base + ["--batches", "40", "--state-out", state]
                    if piece:
                        args += ["--state-in", state]
                    r = cat(args, env)
                    check(r.returncode == 0, f"{what} piece {piece}: {r.stderr.decode()}")
                    if r.returncode or not r.stdout:
                        break
                    out += r.stdout
                check(out == ref.stdout, f"{what}: pieces {len(out)} bytes, whole "
                      f"{len(ref.stdout)}")
                check(not [x for x in os.listdir(top) if ".tmp." in x], "no temporary left")

            # Shares of 3 ranks: disjoint, together the dataset (1002 = 3 x 334:
            # the kept tail splits evenly).
            seen = []
            for rank in range(3):
                r = cat([ds, "--field", "y", "--raw", "--batch", "5", "--device", dev,
                         "--shuffle", mode, "--seed", "8", "--rank", str(rank), "--world", "3",
                         "--pinned", "1M"], env)
                check(r.returncode == 0, f"{mode} share {rank}: {r.stderr.decode()}")
                seen += samples(r.stdout).tolist()
            check(sorted(seen) == list(range(N)), f"{mode} {dev}: shares disjoint and covering")

    with open(state, "r+b") as f:
        b = bytearray(f.read())
        b[20] ^= 1
        f.seek(0)
        f.write(b)
    r = cat([ds, "--field", "y", "--state-in", state])
    check(r.returncode == 1 and b"resume" in r.stderr, "a damaged state file is refused")
    r = cat([ds, "--field", "y", "--state-in", top + "/missing"])
    check(r.returncode == 1, "a missing state file exits 1")
    r = cat([ds, "--field", "y", "--shuffle", "random"])
    check(r.returncode == 2 and b"--shuffle" in r.stderr, "a bad --shuffle exits 2")
    r = cat([ds, "--field", "y", "--rank", "3", "--world", "3"])
    check(r.returncode == 2, "--rank >= --world exits 2")

finish()
