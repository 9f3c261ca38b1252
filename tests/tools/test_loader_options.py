# SPDX-License-Identifier: MIT
# Description: cat and bench take the loader's settings with the library's
# vocabulary and bounds: every shuffle, device and pinning name the library
# parses is accepted by both (the run then fails on the missing dataset,
# exit 1, not bad usage), other spellings exit 2; --depth, --io-depth,
# --decode-threads, --window and --world are accepted up to the library's
# limits (RF_DEPTH_MAX 64, RF_IO_DEPTH_MAX 4096, RF_DECODE_THREADS_MAX 64,
# RF_WINDOW_MAX 1024, RF_WORLD_MAX 2^24) and refused one above with exit 2
# naming the limit; a rank not below the world is refused with the library's
# reason; bench's --in-place needs --map.
from clitest import check, finish, run

MISSING = "/nonexistent/ringfeed-test/none.rfs"
CAT = ["cat", "--field", "x"]
BENCH = ["bench", "--seconds", "0.1"]

NAMES = {
    "--shuffle": ["none", "chunks", "window", "full"],
    "--device": ["auto", "host", "cuda"],
    "--pin": ["ring", "transient"],
}
for opt, names in NAMES.items():
    for cmd in (CAT, BENCH):
        for name in names:
            rc, _, err = run(*(cmd + [opt, name, MISSING]))
            check(rc == 1, "%s %s %s: exit %d, expected 1 (accepted)\n%s"
                  % (cmd[0], opt, name, rc, err))
        for bad in ("cpu", "NONE", "Ring", "cuda:0", ""):
            rc, _, err = run(*(cmd + [opt, bad, MISSING]))
            check(rc == 2 and opt in err, "%s %s %r: exit %d, expected 2\n%s"
                  % (cmd[0], opt, bad, rc, err))

LIMITS = [
    (CAT, "--depth", 64),
    (BENCH, "--depth", 64),
    (BENCH, "--io-depth", 4096),
    (BENCH, "--decode-threads", 64),
    (CAT, "--window", 1024),
    (CAT, "--world", 1 << 24),
]
for cmd, opt, top in LIMITS:
    rc, _, err = run(*(cmd + [opt, str(top), MISSING]))
    check(rc == 1, "%s %s %d: exit %d, expected 1 (accepted)\n%s" % (cmd[0], opt, top, rc, err))
    rc, _, err = run(*(cmd + [opt, str(top + 1), MISSING]))
    check(rc == 2 and opt in err and str(top) in err,
          "%s %s %d: exit %d, expected 2 naming %d\n%s" % (cmd[0], opt, top + 1, rc, top, err))

rc, _, err = run(*(CAT + ["--rank", "2", "--world", "2", MISSING]))
check(rc == 2 and "not below the world size" in err, "cat --rank 2 --world 2: exit %d\n%s"
      % (rc, err))
rc, _, err = run(*(CAT + ["--rank", "1", "--world", "2", MISSING]))
check(rc == 1, "cat --rank 1 --world 2: exit %d, expected 1\n%s" % (rc, err))

# Batches in place lie in the maps: --in-place alone is bad usage, with
# --map it is accepted.
rc, _, err = run(*(BENCH + ["--in-place", MISSING]))
check(rc == 2 and "add --map" in err, "bench --in-place: exit %d\n%s" % (rc, err))
rc, _, err = run(*(BENCH + ["--map", "--in-place", MISSING]))
check(rc == 1, "bench --map --in-place: exit %d, expected 1\n%s" % (rc, err))

finish()
