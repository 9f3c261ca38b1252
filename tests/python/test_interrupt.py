# SPDX-License-Identifier: MIT
# Description: Ctrl-C while ringfeed.Loader waits for a batch: with every
# copy made slow (the cudart emulator's latency), SIGINT raises
# KeyboardInterrupt inside the wait, before any batch is returned; the
# loader then closes cleanly (nothing left allocated, no hazard).
import os
import signal
import threading

import ringfeed
from rftest import Emulator, check, small_dataset, tmpdir

emu = Emulator()
d = tmpdir()
p = os.path.join(d, "small.rfs")
small_dataset(p, n=64)

emu.set_option("RINGFEED_EMU_LATENCY", "1s")
ld = ringfeed.Loader(p, 8, device="cuda", pinned_bytes=1 << 20, decode_threads=1)
it = iter(ld)
timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
got = None
interrupted = False
timer.start()
try:
    got = next(it)
except KeyboardInterrupt:
    interrupted = True
timer.join()
check(interrupted, "SIGINT did not interrupt the wait")
check(got is None, "a batch was returned before the interrupt was raised")
emu.set_option("RINGFEED_EMU_LATENCY", "0")
del it
ld.close()
emu.check_clean()
print("ok")
