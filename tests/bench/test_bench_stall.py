# SPDX-License-Identifier: MIT
# Description: `ringfeed bench` reports the consumer's stall as it is.  With
# no training step the consumer does nothing but wait for batches, so its
# stall share is large (and never 0); with a slow step (--step-us 2000) the
# loader keeps ahead and the share is smaller.  The stall seconds account
# for most of the waits in rf_loader_next that the tool itself timed
# (--timings) when the consumer only waits.
import json
import os
import shutil
import sys
import tempfile

from benchtest import check, exe, failures, need_numpy, run

np = need_numpy()

exe()


def bench(tmp, path, step_us):
    tfile = os.path.join(tmp, "timings-%d.txt" % step_us)
    rc, out, err = run("bench", "--json", "-q", "--device", "host", "--pinned", "16M",
                       "--batch", "64", "--epochs", "2", "--step-us", step_us,
                       "--timings", tfile, path)
    if not check(rc == 0, "step %d: exit %d\n%s" % (step_us, rc, err)):
        sys.exit(1)
    ld = json.loads(out)["loader"]
    with open(tfile) as f:
        waits = [float(ln.split()[4]) for ln in f if not ln.startswith("#")]
    check(len(waits) == ld["batches"], "step %d: %d timings for %d batches"
          % (step_us, len(waits), ld["batches"]))
    stall_us = ld["stall_s"] * 1e6
    waited_us = sum(waits)
    print("step %5d us: stall share %.4f, stall %.0f us, the tool timed %.0f us in next"
          % (step_us, ld["stall_share"], stall_us, waited_us))
    check(0 <= ld["stall_share"] <= 1, "step %d: stall share %s" % (step_us, ld["stall_share"]))
    # No upper bound from the timings: the last call, the one that finds
    # the end of the data, waits too and has no line.
    return ld, stall_us, waited_us


tmp = tempfile.mkdtemp(prefix="rf-bench-stall-")
try:
    n = 4000
    rng = np.random.default_rng(3)
    np.save(os.path.join(tmp, "img.npy"), rng.integers(0, 4, (n, 28, 28), dtype=np.uint8))
    np.save(os.path.join(tmp, "lbl.npy"), np.arange(n, dtype=np.int64))
    path = os.path.join(tmp, "d.rfs")
    rc, _, err = run("pack", "-q", "-o", path, "--chunk-bytes", "256K",
                     "image=" + os.path.join(tmp, "img.npy"),
                     "label=" + os.path.join(tmp, "lbl.npy"))
    if not check(rc == 0, "pack: %s" % err):
        sys.exit(1)

    idle, idle_stall, idle_waited = bench(tmp, path, 0)
    busy, _, _ = bench(tmp, path, 2000)
    check(idle["stall_s"] > 0 and idle["stall_share"] > 0,
          "no step: stall %s s, share %s: a consumer that only waits never stalled?"
          % (idle["stall_s"], idle["stall_share"]))
    # Most of it: a preemption just before a call that finds its batch
    # ready is a wait the tool sees and the loader rightly does not count.
    check(idle_stall >= 0.2 * idle_waited,
          "no step: stall %.1f us, under a fifth of the %.1f us the tool waited in next"
          % (idle_stall, idle_waited))
    check(busy["stall_share"] < idle["stall_share"],
          "a 2 ms step stalls %.4f of the time, no step %.4f: a slower consumer must wait less"
          % (busy["stall_share"], idle["stall_share"]))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("ok")
