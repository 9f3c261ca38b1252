#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: the rule that `epochs` counts from the config's epoch whether
# or not a run resumes, as `ringfeed cat` and the Python module see it.
# cat: a state saved at the end of its epoch resumes to nothing (not the
# next epoch), and one resumed without the --epoch of the run that saved it
# is refused with the loader's message (exit 1).  Python (when the module is
# built): a training loop of 3 epochs, checkpointed in the middle of the
# second and resumed the documented way (load_state_dict, then the epochs
# from loader.epoch on), yields exactly the batches of the uninterrupted
# loop.
# Usage: test_epochs_tools.py RINGFEED LT_PACK [PYTHONPATH]
import functools
import subprocess
import sys
import tempfile

import numpy as np

from ltpy import cat as cat_in, check, finish

ringfeed, lt_pack = sys.argv[1], sys.argv[2]
pypath = sys.argv[3] if len(sys.argv) > 3 else ""
cat = functools.partial(cat_in, ringfeed)

N = 301
with tempfile.TemporaryDirectory(dir=".") as top:
    r = subprocess.run([lt_pack, top, "s", str(N), "0", "4096", "16384", "0"])
    check(r.returncode == 0, "lt-pack")
    ds = top + "/s-*.rfs"
    state = top + "/pos.state"
    base = [ds, "--field", "y", "--raw", "--batch", "8", "--device", "host",
            "--pinned", "1M", "--shuffle", "chunks", "--seed", "4", "--epoch", "3"]
    whole = cat(base)
    check(whole.returncode == 0 and len(whole.stdout) == 8 * N, "whole epoch")
    # Saved at the end of the epoch: nothing follows, and no second epoch.
    r = cat(base + ["--state-out", state])
    check(r.returncode == 0 and r.stdout == whole.stdout, "epoch with --state-out")
    r = cat(base + ["--state-in", state])
    check(r.returncode == 0 and r.stdout == b"", "resumed at the end: %d bytes, %s"
          % (len(r.stdout), r.stderr.decode()))
    # Saved mid-epoch; resumed without the run's --epoch: refused, loudly.
    r = cat(base + ["--batches", "5", "--state-out", state])
    check(r.returncode == 0 and r.stdout == whole.stdout[:40 * 8], "five batches")
    r = cat([ds, "--field", "y", "--raw", "--batch", "8", "--device", "host", "--pinned", "1M",
             "--state-in", state])
    check(r.returncode == 1 and b"outside" in r.stderr, "resumed with another --epoch: %d %s"
          % (r.returncode, r.stderr.decode()))
    r = cat(base + ["--state-in", state])
    check(r.returncode == 0 and r.stdout == whole.stdout[40 * 8:], "resumed with the same --epoch")

    if pypath:
        sys.path.insert(0, pypath)
        import ringfeed as rf

        opts = dict(shuffle="chunks", seed=4, device="cpu", drop_last=False)

        def run(ld, epochs, start=0, stop_at=None):
            out = []
            for e in range(start, epochs):
                ld.set_epoch(e)
                for k, b in enumerate(ld):
                    out.append(np.asarray(b["y"]).tolist())
                    if stop_at == (e, k):
                        return out, ld.state_dict()
            return out, None

        ld = rf.Loader(ds, 8, **opts)
        ref, _ = run(ld, 3)
        ld.close()
        ld = rf.Loader(ds, 8, **opts)
        head, st = run(ld, 3, stop_at=(1, 6))
        ld.close()
        ld = rf.Loader(ds, 8, **opts)
        ld.load_state_dict(st)
        check(ld.epoch == 1, "restored epoch %d" % ld.epoch)
        tail, _ = run(ld, 3, start=ld.epoch)
        ld.close()
        check(head + tail == ref, "python: %d + %d batches, uninterrupted %d"
              % (len(head), len(tail), len(ref)))

finish()
