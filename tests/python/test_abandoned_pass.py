# SPDX-License-Identifier: MIT
# Description: what docs/python.md says of the notebook pattern.  A batch
# kept from an abandoned pass (break, then a new pass) keeps that pass's
# memory until the batch is dropped but none of its threads, and
# loader.held counts the current pass's batches only.
import gc
import os
import time

import numpy as np

import ringfeed
from rftest import check, tmpdir


def threads():
    return len(os.listdir("/proc/self/task"))


def settle(want, timeout=5.0):
    end = time.time() + timeout
    while threads() > want and time.time() < end:
        time.sleep(0.01)
    return threads()


d = tmpdir()
p = os.path.join(d, "data.rfs")
ringfeed.pack(p, {"y": np.arange(4096, dtype=np.int64)}, chunk_bytes=4096)
base = threads()
ld = ringfeed.Loader(p, 16, device="cpu", pinned_bytes=1 << 20, decode_threads=1)
one = threads() - base
check(one > 0, "the loader runs threads")
for kept in ld:
    break
check(ld.held == 1, "held %d with one batch of the pass" % ld.held)
it = iter(ld)           # a new pass: the abandoned one's pipeline is retired
b = next(it)
check(ld.held == 1, "held %d: the abandoned pass's batch is not counted" % ld.held)
# The abandoned pipeline's threads stop at once; the kept batch keeps
# only its memory, and its values.
n = threads()
check(n <= base + one, "the kept batch keeps the old pipeline's threads: %d vs %d + %d"
      % (n, base, one))
check(np.array_equal(np.asarray(kept["y"]), np.arange(16)), "the kept batch changed")
del kept
gc.collect()
n = settle(base + one)
check(n <= base + one, "dropping the batch frees the old pipeline: %d threads, want %d"
      % (n, base + one))
del b, it
ld.close()
check(settle(base) <= base, "close frees everything")
print("ok")
