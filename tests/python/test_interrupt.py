# SPDX-License-Identifier: MIT
# Description: Ctrl-C while ringfeed.Loader waits for a batch: with every
# copy made slow (the cudart emulator's latency), SIGINT raises
# KeyboardInterrupt inside the wait, before any batch is returned; the
# loader then closes cleanly (nothing left allocated, no hazard).  A signal
# handler may use the loader during that wait (state_dict() on SIGUSR1, as a
# checkpoint on SIGTERM would): the wait goes on and delivers the batch; a
# handler that closes the loader ends the wait with RuntimeError.
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


def in_wait(handler, latency="600ms"):
    """next() on a fresh pass of a loader whose copies take `latency`, with
    SIGUSR1 calling handler(loader) 0.2 s into the wait."""
    # The latency first: a copy issued before it would be done at once.
    emu.set_option("RINGFEED_EMU_LATENCY", latency)
    lo = ringfeed.Loader(p, 8, device="cuda", pinned_bytes=1 << 20, decode_threads=1)
    old = signal.signal(signal.SIGUSR1, lambda *_: handler(lo))
    t = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    it = iter(lo)
    t.start()
    try:
        return lo, it, next(it), None
    except Exception as e:  # noqa: BLE001 (the test looks at which)
        return lo, it, None, e
    finally:
        t.join()
        signal.signal(signal.SIGUSR1, old)
        emu.set_option("RINGFEED_EMU_LATENCY", "0")


saved = []
lo, it, b, e = in_wait(lambda lo: saved.append(lo.state_dict()))
check(e is None and b is not None, "state_dict() in a handler broke the wait: %r" % e)
check(len(saved) == 1 and saved[0]["batch"] == 0, "state saved in the handler: %r" % saved)
check(b["y"].shape == (8,), "the batch delivered: shape %r" % (b["y"].shape,))
del b, it
lo.close()

lo, it, b, e = in_wait(lambda lo: lo.close())
check(b is None and isinstance(e, RuntimeError) and "closed" in str(e),
      "close() in a handler: %r" % e)
del it
emu.check_clean()
print("ok")
