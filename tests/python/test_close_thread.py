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
from rftest import check, slow_full_loader, small_dataset, threads

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

# A `with` block closes the loader while another thread iterates it and
# drops each batch after a little work: the last batch may go back while
# close() stops the loader (the GIL let go), which must leave the close to
# close() (it once closed the loader twice: a crash or a hang in a join).
# Whatever the moment, the consumer ends its pass or gets an error that
# says the loader is closed.
base = threads()
for rep in range(30):
    out = []
    with ringfeed.Loader(p, 8, fields=["x", "y"], shuffle="window", device="cpu",
                         decode_threads=2) as lo:
        def consume():
            try:
                for b in lo:
                    time.sleep(0.002)
                    del b
                out.append("ended")
            except (RuntimeError, ValueError) as e:
                out.append(str(e))
        th = threading.Thread(target=consume)
        th.start()
        time.sleep(0.002 * (rep % 10))
    th.join(10)
    check(not th.is_alive(), "rep %d: the consumer still runs 10 s after close()" % rep)
    check(out and (out[0] == "ended" or "closed" in out[0]), "rep %d: %r" % (rep, out))

# close() from another thread while the consumer spins through ready
# batches: it lands inside next() at any point (waiting, or making a host
# batch ready without the GIL), and always closes.
big = os.path.join(os.path.dirname(p), "big.rfs")
small_dataset(big, n=20000)
failed = []
for rep in range(60):
    lo = ringfeed.Loader(big, 4, fields=["x", "y"], shuffle="window", window=2, direct=True,
                         device="cpu")

    def fire():
        try:
            lo.close()
        except RuntimeError as e:
            failed.append(str(e))
    tm = threading.Timer(0.001 * (rep % 20), fire)
    tm.start()
    try:
        for b in lo:
            pass
    except (RuntimeError, ValueError):
        pass
    tm.join()
    lo.close()
check(not failed, "close() from another thread failed %d of 60 times: %s"
      % (len(failed), failed[:1]))
# io_uring's kernel workers (iou-wrk) leave lazily, after their ring.
t_end = time.monotonic() + 5
while threads() > base and time.monotonic() < t_end:
    time.sleep(0.05)
left = threads()
check(left <= base, "threads after the closes: %d, before: %d" % (left, base))
print("ok")
