# SPDX-License-Identifier: MIT
# Description: shared helpers of the Python module's tests: a temporary
# directory, skips (exit 77), small packed datasets, the cudart emulator's
# counters through ctypes, and process resource readings.
import ctypes
import os
import sys
import tempfile

SKIP = 77


def skip(why):
    print("SKIP:", why)
    sys.exit(SKIP)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def tmpdir():
    d = tempfile.mkdtemp(prefix="rfpy-")
    import atexit
    import shutil
    atexit.register(shutil.rmtree, d, True)
    return d


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("PyTorch is not installed (python3-torch)")
    return torch


def small_dataset(path, n=300, chunk_bytes=4096):
    """Pack n samples of a fixed f32 field, an i64 label and a variable u8
    field; return the arrays."""
    import numpy as np
    import ringfeed
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 4, 3)).astype(np.float32)
    y = np.arange(n, dtype=np.int64)
    v = [np.full(i % 5 + 1, i % 251, dtype=np.uint8) for i in range(n)]
    ringfeed.pack(path, {"x": x, "y": y, "v": v}, chunk_bytes=chunk_bytes)
    return x, y, v


# ------------------------------------------------------- cudart emulator

HAZARDS = 10


class EmuCounters(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in (
            "copies", "bytes_copied", "bytes_h2d", "bytes_d2h", "bytes_d2d",
            "pageable_copies", "pageable_h2d", "host_funcs")
    ] + [("hazards", ctypes.c_uint64 * HAZARDS), ("hazards_total", ctypes.c_uint64)] + [
        (name, ctypes.c_uint64) for name in (
            "device_bytes", "peak_device_bytes", "live_allocations", "registered_bytes",
            "peak_registered_bytes", "live_registered_ranges", "host_alloc_bytes",
            "peak_host_alloc_bytes", "live_host_allocs", "peak_pinned_bytes",
            "live_streams", "live_events", "worker_threads", "pending_ops", "api_errors")
    ]


class Emulator:
    """The emulator instance the CUDA backend loads (same path, same
    instance: dlopen returns the loaded one)."""

    def __init__(self):
        path = os.environ.get("RINGFEED_CUDART")
        if not path:
            skip("RINGFEED_CUDART is not set (the cudart emulator was not built)")
        self.lib = ctypes.CDLL(path)
        self.lib.rfemu_get_counters.argtypes = [ctypes.POINTER(EmuCounters), ctypes.c_size_t]
        self.lib.rfemu_hazard_name.restype = ctypes.c_char_p
        self.lib.rfemu_set_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self.lib.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib.cudaStreamDestroy.argtypes = [ctypes.c_void_p]
        self.lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.lib.rfemu_host_func_reads.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_size_t]
        self.HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        self.lib.cudaLaunchHostFunc.argtypes = [ctypes.c_void_p, self.HOSTFN, ctypes.c_void_p]

    def counters(self):
        c = EmuCounters()
        rc = self.lib.rfemu_get_counters(ctypes.byref(c), ctypes.sizeof(c))
        check(rc == 0, "rfemu_get_counters")
        return c

    def hazards(self):
        c = self.counters()
        return {self.lib.rfemu_hazard_name(i).decode(): c.hazards[i]
                for i in range(HAZARDS) if c.hazards[i]}

    def set_option(self, name, value):
        check(self.lib.rfemu_set_option(name.encode(), value.encode()) == 0, name)

    def stream_create(self, nonblocking=True):
        """A consumer stream; non-blocking by default, so that nothing but
        explicit waits orders it against the legacy default stream."""
        s = ctypes.c_void_p()
        f = self.lib.cudaStreamCreateWithFlags
        f.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        check(f(ctypes.byref(s), 1 if nonblocking else 0) == 0, "cudaStreamCreateWithFlags")
        return s.value

    def launch_reader(self, stream, ptr, nbytes, seconds):
        """Model a kernel reading [ptr, ptr + nbytes) on `stream` for a while:
        a host function the emulator checks against writes to the range."""
        import time
        check(self.lib.rfemu_host_func_reads(stream, ptr, nbytes) == 0, "host_func_reads")
        fn = self.HOSTFN(lambda _: time.sleep(seconds))
        self._keep = getattr(self, "_keep", []) + [fn]
        check(self.lib.cudaLaunchHostFunc(stream, fn, None) == 0, "cudaLaunchHostFunc")

    def stream_destroy(self, s):
        check(self.lib.cudaStreamDestroy(s) == 0, "cudaStreamDestroy")

    def stream_sync(self, s):
        check(self.lib.cudaStreamSynchronize(s) == 0, "cudaStreamSynchronize")

    def check_clean(self):
        """Nothing allocated, registered or pending, and no hazard."""
        c = self.counters()
        live = {k: getattr(c, k) for k in ("device_bytes", "live_allocations",
                                            "registered_bytes", "live_host_allocs",
                                            "live_streams", "live_events", "pending_ops")}
        check(all(v == 0 for v in live.values()), "emulator: still live: %r" % live)
        check(c.hazards_total == 0, "emulator hazards: %r" % self.hazards())


# ------------------------------------------------------------ resources

def slow_full_loader(delay_ms, n=640):
    """A shuffle="full" loader from memory on the CPU over a dataset of n
    samples, batches of 16, whose loader thread takes delay_ms a batch
    (RINGFEED_FULL_FILL_DELAY_MS, no filler threads): the consumer's own
    thread fills batches and waits for their turn behind it."""
    import ringfeed

    p = os.path.join(tmpdir(), "small.rfs")
    small_dataset(p, n=n)
    os.environ["RINGFEED_FULL_FILLERS"] = "0"
    os.environ["RINGFEED_FULL_FILL_DELAY_MS"] = str(delay_ms)
    ld = ringfeed.Loader(p, 16, fields=["x", "y"], shuffle="full", map=True, device="cpu",
                         decode_threads=1)
    check(ld.stats()["io_engine"] == "mmap", "read through the maps: %r" % ld.stats()["io_engine"])
    return p, ld


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def threads():
    return len(os.listdir("/proc/self/task"))


def fds():
    return len(os.listdir("/proc/self/fd"))


# ---------------------------------------------------------------- DLPack
# The DLPack v0.8 ABI, read back through ctypes: an independent reading of
# what the extension writes.

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4


def capsule_tensor(cap):
    """(DLManagedTensor pointer, a dict of the DLTensor's fields)."""
    check(_capsule_valid(cap, b"dltensor") == 1, "capsule named dltensor")
    p = _capsule_get(cap, b"dltensor")
    m = ctypes.cast(p, ctypes.POINTER(DLManagedTensor))
    t = m.contents.dl_tensor
    return m, {
        "data": t.data or 0,
        "device": (t.device.device_type, t.device.device_id),
        "ndim": t.ndim,
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": tuple(t.shape[i] for i in range(t.ndim)),
        "strides": bool(t.strides),
        "byte_offset": t.byte_offset,
    }


def consume_capsule(cap):
    """Act as a consumer: rename the capsule and return the deleter to call
    when done (the capsule's destructor must then leave it alone)."""
    m, _ = capsule_tensor(cap)
    check(_capsule_set_name(cap, b"used_dltensor") == 0, "rename")
    return lambda: m.contents.deleter(m)


DL_DTYPES = {"u8": (kDLUInt, 8), "i8": (kDLInt, 8), "u16": (kDLUInt, 16), "i16": (kDLInt, 16),
             "u32": (kDLUInt, 32), "i32": (kDLInt, 32), "u64": (kDLUInt, 64),
             "i64": (kDLInt, 64), "f16": (kDLFloat, 16), "bf16": (kDLBfloat, 16),
             "f32": (kDLFloat, 32), "f64": (kDLFloat, 64), "bytes": (kDLUInt, 8)}
