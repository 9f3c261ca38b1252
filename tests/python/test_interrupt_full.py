# SPDX-License-Identifier: MIT
# Description: Ctrl-C while iterating a full-shuffle loader from memory on
# the CPU, a tiny step a batch, so that the consumer's own thread fills
# batches and waits for their turn behind the loader's thread, made slow
# here (RINGFEED_FULL_FILL_DELAY_MS, no filler threads): SIGINT raises
# KeyboardInterrupt within a second (not after that thread's batch), the
# loader then closes, and a new loader delivers every sample of an epoch.
import os
import signal
import threading
import time

import numpy as np
import ringfeed
from rftest import check, slow_full_loader

p, ld = slow_full_loader(2500)
sent = []


def interrupt():
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)


timer = threading.Timer(0.5, interrupt)
total, caught, batch = 0, None, None
timer.start()
try:
    for batch in ld:
        total += int(np.asarray(batch["y"]).sum())  # the step
except KeyboardInterrupt:
    caught = time.monotonic()
timer.join()
check(caught is not None and sent, "SIGINT did not interrupt the pass")
lag = caught - sent[0]
print("KeyboardInterrupt %.0f ms after SIGINT" % (lag * 1e3))
check(lag < 1.0, "KeyboardInterrupt %.2f s after SIGINT (the full thread takes 2.5 s "
      "a batch)" % lag)
del batch
ld.close()
check(ld.held == 0, "held after close: %d" % ld.held)

# The stream itself is whole when nothing interrupts it.
os.environ["RINGFEED_FULL_FILL_DELAY_MS"] = "5"
with ringfeed.Loader(p, 16, fields=["x", "y"], shuffle="full", map=True, device="cpu",
                     decode_threads=1) as lo:
    ys = np.concatenate([np.asarray(b["y"]).copy() for b in lo])
check(sorted(ys.tolist()) == list(range(640)), "an epoch delivers each sample once")
del os.environ["RINGFEED_FULL_FILL_DELAY_MS"]
print("ok")
