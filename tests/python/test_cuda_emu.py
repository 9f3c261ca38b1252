# SPDX-License-Identifier: MIT
# Description: the CUDA path of ringfeed.Loader under the cudart emulator
# (no GPU): arrays report the CUDA DLPack device; the capsule's DLTensor has
# the device type and index, the device pointer, the shape, NULL strides and
# the dtype; __dlpack__(stream=s) makes the consumer's stream wait for the
# batch and the batch goes back on that stream (a consumer still reading on
# a non-blocking stream when its arrays are dropped is not overwritten: the
# emulator's hazard counters stay zero); closing, an exception and the
# collection of a live loader leave no device memory, pinned memory, stream
# or event behind.  A batch given to a thread's per-thread default stream
# (stream=2) and dropped on another thread is released after that work too.
import gc
import os
import threading

import ringfeed
from rftest import (DL_DTYPES, Emulator, capsule_tensor, check, consume_capsule, kDLCUDA,
                    small_dataset, tmpdir)

emu = Emulator()
d = tmpdir()
p = os.path.join(d, "small.rfs")
x, y, v = small_dataset(p, n=240)
B = 8
opts = dict(device="cuda", pinned_bytes=1 << 20, decode_threads=1, io_depth=4)

ld = ringfeed.Loader(p, B, **opts)
check(ld.device == "cuda:0", "device %s" % ld.device)
stream = emu.stream_create()
it = iter(ld)
batch = next(it)
arrays = [("x", batch["x"]), ("y", batch["y"]), ("v.off", batch["v"][0]),
          ("v", batch["v"][1])]
for name, arr in arrays:
    check(arr.__dlpack_device__() == (kDLCUDA, 0), "dlpack device of %s" % name)
    check(arr.device == "cuda:0", "device of %s" % name)
    try:
        memoryview(arr)
        check(False, "a device array exported a host buffer")
    except (BufferError, TypeError):  # TypeError: no buffer protocol before 3.11
        pass
    cap = arr.__dlpack__(stream=stream)
    _, t = capsule_tensor(cap)
    check(t["device"] == (kDLCUDA, 0), "capsule device %r" % (t["device"],))
    check(t["data"] == arr.data_ptr and t["data"] != 0, "capsule pointer")
    check(t["shape"] == arr.shape, "capsule shape %r vs %r" % (t["shape"], arr.shape))
    check(not t["strides"] and t["byte_offset"] == 0, "strides NULL")
    code, bits = DL_DTYPES[arr.dtype]
    check(t["dtype"] == (code, bits, 1), "dtype %r of %s" % (t["dtype"], name))
check(batch["x"].shape == (B, 4, 3) and batch["y"].shape == (B,), "shapes")
for bad in (0, -2):
    try:
        batch["x"].__dlpack__(stream=bad)
        check(False, "stream %d accepted" % bad)
    except ValueError:
        pass

# A consumer reads the batch on its stream for a while, then drops every
# reference at once (consumed capsule first, as torch would hold it); the
# loader must not refill that buffer before the reads are done.
cap = batch["x"].__dlpack__(stream=stream)
done = consume_capsule(cap)
emu.launch_reader(stream, batch["x"].data_ptr, batch["x"].nbytes, 0.1)
del batch, arrays, arr, cap
done()
n = 1
for b in it:
    c = b["x"].__dlpack__(stream=stream)
    emu.launch_reader(stream, b["x"].data_ptr, b["x"].nbytes, 0.002)
    del b, c
    n += 1
check(n == len(ld), "batches %d of %d" % (n, len(ld)))
emu.stream_sync(stream)
check(emu.counters().hazards_total == 0, "hazards: %r" % emu.hazards())
ld.close()

# Stream 2 is the per-thread default stream of the thread that gives it: a
# batch consumed there and dropped on another thread must not be refilled
# while the consumer's work still reads it.
ld = ringfeed.Loader(p, B, **opts)
it = iter(ld)
batch = next(it)
box = {}


def consumer():
    cap = batch["x"].__dlpack__(stream=2)
    done = consume_capsule(cap)
    emu.launch_reader(2, batch["x"].data_ptr, batch["x"].nbytes, 0.3)
    box["done"] = done


t = threading.Thread(target=consumer)
t.start()
t.join()
del batch
box.pop("done")()  # the last reference goes on this thread
for _, b in zip(range(10), it):  # the loader refills its buffers meanwhile
    pass
del b, it
ld.close()
check(emu.counters().hazards_total == 0, "stream 2 released on another thread: %r"
      % emu.hazards())

# Page-locked memory refused: the message carries the runtime's reason,
# for the ring at open and for a slot pinned per batch.
emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "64K")
for pinning, what in (("ring", "cannot page-lock"), ("transient", "pinning slot")):
    err = None
    try:
        with ringfeed.Loader(p, B, pinning=pinning, **dict(opts, pinned_bytes=1 << 20)) as lo:
            emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "1K")
            for _ in lo:
                pass
    except ringfeed.Error as e:
        err = str(e)
    # A batch copied before the limit fell stays in `_` (and keeps its
    # loader open) until dropped.
    _ = None
    emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "64K")
    check(err is not None and what in err and "cudaHostRegister" in err,
          "page-locking refused (%s): %s" % (pinning, err))
emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "0")

# An exception mid-pass, and a loader collected while a capsule lives.
ld = ringfeed.Loader(p, B, **opts)
try:
    for i, b in enumerate(ld):
        if i == 2:
            raise ValueError
except ValueError:
    pass
del b
keep = next(iter(ld))["y"].__dlpack__(stream=stream)
del ld
gc.collect()
check(emu.counters().live_allocations > 0, "memory of a live capsule was freed")
del keep
gc.collect()
emu.stream_sync(stream)
emu.stream_destroy(stream)
emu.check_clean()
print("ok")
