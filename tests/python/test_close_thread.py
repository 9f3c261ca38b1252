# SPDX-License-Identifier: MIT
# Description: close() from another thread while the consumer waits in
# next() for a batch that is slow to come (shuffle full from memory, the
# loader's thread made slow by RINGFEED_FULL_FILL_DELAY_MS, no filler
# threads): the wait ends within a second with RuntimeError, close()
# returns once the loader is stopped (after that thread's batch), nothing stays held, the closed loader
# says so, and a new loader delivers every sample of an epoch.
import os
import threading
import time

import numpy as np
import ringfeed
from rftest import check, slow_full_loader

p, ld = slow_full_loader(2500)
closed = []


def close_it():
    t0 = time.monotonic()
    ld.close()
    closed.append((t0, time.monotonic()))


timer = threading.Timer(0.5, close_it)
caught, err, n = None, None, 0
timer.start()
try:
    for batch in ld:
        n += 1
        del batch
except RuntimeError as e:
    caught, err = time.monotonic(), e
timer.join()
check(closed, "close() from the other thread did not return")
check(caught is not None, "the pass went on after close() from another thread (%d batches)" % n)
t0, t1 = closed[0]
print("close() took %.0f ms; next() raised %.0f ms after it was called: %s"
      % ((t1 - t0) * 1e3, (caught - t0) * 1e3, err))
check(caught - t0 < 1.0, "next() raised %.2f s after close() (the loader's thread takes "
      "2.5 s a batch)" % (caught - t0))
# close() stops the loader's threads: here the full thread finishes its
# 2.5 s batch first.
check(t1 - t0 < 3.5, "close() took %.2f s" % (t1 - t0))
check("closed" in str(err), "the error says the loader was closed: %s" % err)
check(ld.held == 0, "held after close: %d" % ld.held)
try:
    ld.stats()
    check(False, "stats() of a closed loader")
except ValueError:
    pass
ld.close()  # a no-op the second time

# Another thread's close() while nothing waits closes at once, as before.
os.environ["RINGFEED_FULL_FILL_DELAY_MS"] = "5"
lo = ringfeed.Loader(p, 16, fields=["x", "y"], shuffle="full", map=True, device="cpu",
                     decode_threads=1)
ys = np.concatenate([np.asarray(b["y"]).copy() for b in lo])
check(sorted(ys.tolist()) == list(range(640)), "an epoch delivers each sample once")
th = threading.Thread(target=lo.close)
th.start()
th.join()
try:
    next(iter(lo))
    check(False, "next() of a loader closed by another thread")
except ValueError:
    pass
del os.environ["RINGFEED_FULL_FILL_DELAY_MS"]
print("ok")
