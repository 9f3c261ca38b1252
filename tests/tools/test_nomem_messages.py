# SPDX-License-Identifier: MIT
# Description: under allocation failure every command says what failed.
# `ringfeed verify FILE` and `ringfeed cat --device host|auto` are run with
# an LD_PRELOAD shim that fails the N-th allocation of the process, for
# every N until a run makes fewer allocations: a run that fails must print a
# message whose reason is not empty (no "...: " with nothing after it), and
# with --device auto (no CUDA device here, so host) must not blame CUDA for a
# host failure.  Crashes fail the test too, except with --device auto, whose
# probe runs the CUDA runtime's own initialisation (where one is installed),
# which may not survive a failed allocation: ringfeed's own paths after the
# probe are those of --device host.
import os
import re
import subprocess
import sys

from clitest import EXE, TempDir, check, fail, finish, run

import numpy as np

SHIM = os.path.abspath(sys.argv[2])


def sweep(name, args, tmp, extra_check=None, step=1, limit=4000, signals_ok=False):
    hit = os.path.join(tmp, "hit")
    n = 1
    runs = 0
    while n < limit:
        if os.path.exists(hit):
            os.unlink(hit)
        env = dict(os.environ, LD_PRELOAD=SHIM, RF_FAIL_ALLOC_AT=str(n), RF_FAIL_ALLOC_HIT=hit)
        p = subprocess.run([EXE] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, env=env, timeout=60)
        runs += 1
        if not os.path.exists(hit):
            break
        err = p.stderr.strip()
        where = "%s, allocation %d failed" % (name, n)
        if p.returncode < 0 and not signals_ok:
            fail("%s: killed by signal %d: %r" % (where, -p.returncode, err[-300:]))
        elif p.returncode > 0:
            check(err != "", "%s: exit %d with no message" % (where, p.returncode))
            for line in err.splitlines():
                check(not re.search(r":\s*$", line), "%s: an empty reason: %r" % (where, line))
            if extra_check:
                extra_check(where, err)
        n += step
    print("%s: %d runs" % (name, runs))
    check(n < limit, "%s: still allocating after %d" % (name, limit))


def no_cuda_blame(where, err):
    check("cuda" not in err.lower(), "%s: a host failure blamed on CUDA: %r" % (where, err))


with TempDir() as tmp:
    src = os.path.join(tmp, "x.npy")
    np.save(src, np.arange(300 * 8, dtype="<i4").reshape(300, 8))
    shard = os.path.join(tmp, "d.rfs")
    run("pack", "-q", "--chunk-bytes", "4K", "-o", shard, "x=" + src, expect=0)
    sweep("verify", ["verify", "-q", shard], tmp)
    for dev in ("host", "auto"):
        sweep("cat --device " + dev,
              ["cat", shard, "--field", "x", "--raw", "--device", dev, "--batch", "50"], tmp,
              extra_check=no_cuda_blame if dev == "auto" else None, signals_ok=dev == "auto")

finish()
