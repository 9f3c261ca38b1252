# SPDX-License-Identifier: MIT
# Description: the GPU a Python Loader delivers to, under the cudart
# emulator with 2 devices.  device="cuda" or "auto" with LOCAL_RANK=1 gives
# cuda:1: loader.device, each array's device and __dlpack_device__(), the
# capsule's DLTensor device, and the device that holds the batch's memory
# agree; the device stays the loader's for later epochs even when the
# environment changes.  "cuda:0" wins over LOCAL_RANK.  With no launcher
# variable, the thread's current device (cudaSetDevice(1), as
# torch.cuda.set_device does) is used.  A malformed LOCAL_RANK is an error
# naming it.
import ctypes
import os

import ringfeed
from rftest import Emulator, capsule_tensor, check, kDLCUDA, small_dataset, tmpdir

LAUNCHER = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID")
for var in LAUNCHER:  # a test run under a launcher must not see its own
    os.environ.pop(var, None)

emu = Emulator()
emu.set_option("RINGFEED_EMU_DEVICES", "2")
emu.lib.rfemu_pointer_device.argtypes = [ctypes.c_void_p]
emu.lib.rfemu_pointer_device.restype = ctypes.c_int
d = tmpdir()
p = os.path.join(d, "small.rfs")
small_dataset(p, n=120)
B = 8
opts = dict(pinned_bytes=1 << 20, decode_threads=1, io_depth=4)


def expect(ld, want, what):
    check(ld.device == "cuda:%d" % want, "%s: loader.device %s" % (what, ld.device))
    n = 0
    for batch in ld:
        for name in ("x", "y"):
            arr = batch[name]
            check(arr.__dlpack_device__() == (kDLCUDA, want),
                  "%s: dlpack device %r" % (what, arr.__dlpack_device__()))
            check(arr.device == "cuda:%d" % want, "%s: array device %s" % (what, arr.device))
            check(emu.lib.rfemu_pointer_device(arr.data_ptr) == want,
                  "%s: memory of %s on device %d" % (what, name,
                                                      emu.lib.rfemu_pointer_device(arr.data_ptr)))
            if n == 0:
                cap = arr.__dlpack__(stream=None)
                _, t = capsule_tensor(cap)
                check(t["device"] == (kDLCUDA, want), "%s: capsule %r" % (what, t["device"]))
                del cap
        n += 1
    check(n == len(ld), "%s: %d batches of %d" % (what, n, len(ld)))


for var in LAUNCHER:
    os.environ[var] = "1"
    for device in ("cuda", "auto"):
        with ringfeed.Loader(p, B, device=device, **opts) as ld:
            expect(ld, 1, "%s=1, device=%s" % (var, device))
    del os.environ[var]

# The device chosen at the first open stays for the loader's later epochs,
# also when a pass abandoned midway makes it open the C loader again.
os.environ["LOCAL_RANK"] = "1"
with ringfeed.Loader(p, B, device="cuda", **opts) as ld:
    expect(ld, 1, "epoch 0")
    os.environ["LOCAL_RANK"] = "0"
    for b in ld:
        break
    del b
    expect(ld, 1, "a new pass, LOCAL_RANK changed")
os.environ["LOCAL_RANK"] = "1"

# An explicit index wins.
with ringfeed.Loader(p, B, device="cuda:0", **opts) as ld:
    expect(ld, 0, "cuda:0 with LOCAL_RANK=1")
del os.environ["LOCAL_RANK"]

# No launcher variable: the calling thread's current device.
check(emu.lib.cudaSetDevice(1) == 0, "cudaSetDevice(1)")
with ringfeed.Loader(p, B, device="cuda", **opts) as ld:
    expect(ld, 1, "cudaSetDevice(1)")
check(emu.lib.cudaSetDevice(0) == 0, "cudaSetDevice(0)")
with ringfeed.Loader(p, B, device="cuda", **opts) as ld:
    expect(ld, 0, "cudaSetDevice(0)")

# A malformed local rank is an error, with auto too.
os.environ["LOCAL_RANK"] = "one"
for device in ("cuda", "auto"):
    err = None
    try:
        ringfeed.Loader(p, B, device=device, **opts)
    except (ValueError, ringfeed.Error) as e:
        err = str(e)
    check(err is not None and "LOCAL_RANK" in err, "malformed LOCAL_RANK (%s): %s" % (device, err))
del os.environ["LOCAL_RANK"]

emu.lib.rfemu_reset_counters()  # the failed opens were on purpose
emu.check_clean()
print("ok")
