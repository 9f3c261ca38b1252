# SPDX-License-Identifier: MIT
"""The peer comparison: the same samples read by ringfeed and by the loaders
people would use instead, each from its own format written by its own writer,
reported as ratios (ringfeed samples/s over the peer's).

Run through tools/bench-peers/run, which makes the virtual environment.  By
hand:  python peers.py --ringfeed build/tools/ringfeed --out bench-out

Every peer, in each of two orders,
  - sequential: reads the whole dataset in file order,
  - shuffled: with its own shuffle on (a full permutation for the loaders
    that index samples: numpy, DataLoader, grain; its shuffle buffer or
    block shuffle for the streaming ones),
in batches of the same size (BATCH[size]),
  - touches every byte of every batch (touch(): a sum over the batch's bytes,
    so nothing is lazily skipped: memory maps are read, views are filled),
  - runs in its own process (imports, worker pools and caches do not leak from
    one peer into the next; its peak RSS is its own),
and is timed from the creation of its epoch iterator (worker start-up
included, as a training job pays it) to the last batch.  Cold: the format's
files are dropped from the page cache first (posix_fadvise DONTNEED, checked
with mincore) and one epoch is read.  Hot: the files are read once to fill
the cache, then epochs repeat for at least WARM_SECONDS.

ringfeed runs as a user runs it: `ringfeed bench PATH --json ...` with
--shuffle none, window (its default W) and full.

Two references, cold only, in a process of their own like the peers, give
the cold cells a yardstick measured in the same run:
  - raw read: ringfeed's shard file (data.rfs) read start to end by one
    thread in 4 MiB preads into one buffer, buffered (no O_DIRECT), the
    file dropped from the cache before each pass, passes repeated for
    RAW_SECONDS (drops untimed); GB/s, and samples/s = samples in the file
    over the time of a pass.  The bytes are not touched.
  - raw random reads: every sample's image bytes (offset = the .npy
    header + i * sample bytes: the same bytes per sample as the loaders
    read) by one pread each, in a shuffled order, after a drop, by 1, 8
    and 32 threads (ringfeed's `full` keeps 32 reads in flight; os.preadv
    releases the GIL while it waits), the fastest kept; the same reads
    with O_DIRECT (each widened to the 4 KiB blocks that hold the sample)
    at that thread count are reported beside it.
ringfeed's cold cells are divided by them: `none` and `window` (which
read whole chunks in order) over the raw read, `full` over raw random
reads.  Each reference is measured just before and just after the cell
set against it, the mean kept; the raw read in COLD_ROUNDS rounds of
(reference, ringfeed's commands, reference), the round with the median
ratio kept (every round's ratio in its note).

CPU: each peer's process records its user + system CPU (getrusage, self
and children waited for) over the timed run, per GB delivered (samples x
(image + 8-byte label)) and per batch; ringfeed's come from bench's JSON
(`process_cpu_s_per_gb`, `process_cpu_us_per_batch`: the whole process,
its consumer's touch included, and `loader_cpu_share`).  The CPU table
sets ringfeed beside numpy-memmap, a single-threaded loop.
"""
import argparse
import glob
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

# Dataset shapes.  small: MNIST-like, a 784-byte image and an int64 label;
# large: a 150 KB sample (e.g. a 224x224x3 JPEG's size) and a label.  Sizes
# keep the whole run (all formats written, every peer, cold and warm) within
# a few minutes on 2 cores.
SIZES = {
    "small": {"samples": 60000, "shape": (28, 28), "batch": 256},
    "large": {"samples": 2000, "shape": (150 * 1024,), "batch": 32},
}
WARM_SECONDS = 1.0
# A loader still inside its epoch after CUT_SECONDS stops there and is
# rated over the samples it delivered until then: the slowest peers would
# otherwise take minutes per cell.
CUT_SECONDS = 2.0
_deadline = [float("inf")]


def over():
    """True once the measurement has run for CUT_SECONDS."""
    return time.monotonic() >= _deadline[0]
# The streaming loaders' shuffle buffers hold what ringfeed's default window
# holds: 128 MiB of samples (the whole small set; 873 large samples).
SHUFFLE_BUFFER_BYTES = 128 << 20
ORDERS = ("seq", "shuf")
CACHES = ("cold", "hot")
RINGFEED_MODES = {"seq": ("none",), "shuf": ("full", "window")}
PEERS = [
    "numpy-memmap",
    "torch-dataloader-w0",
    "torch-dataloader-w2",
    "webdataset",
    "mosaicml-streaming",
    "grain",
    "litdata",
    "dali-cpu",
]


# ------------------------------------------------------------------ helpers

def touch(a):
    """Read every byte of an array (or bytes) and return a number from it."""
    if isinstance(a, (bytes, bytearray, memoryview)):
        a = np.frombuffer(a, dtype=np.uint8)
    a = np.ascontiguousarray(np.asarray(a))
    b = a.reshape(-1).view(np.uint8)
    if b.size % 8 == 0:
        return int(b.view(np.uint64).sum(dtype=np.uint64))
    return int(b.sum(dtype=np.uint64))


def drop_cache(paths):
    """Evict the files from the page cache (posix_fadvise DONTNEED: only these
    files, so other work on the machine keeps its cache; clean pages are
    always evicted: write_formats syncs what it wrote)."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_fraction(paths):
    """Fraction of the files' pages in the page cache (mincore over a map of
    each file), or None where it cannot be asked."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = mmap.PAGESIZE
    total = resident = 0
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            pages = (size + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            rc = libc.mincore(ctypes.c_void_p(addr), size, vec)
            libc.munmap(ctypes.c_void_p(addr), size)
            if rc != 0:
                return None
            total += pages
            resident += sum(v & 1 for v in vec)
        finally:
            os.close(fd)
    return resident / total if total else None


def warm_cache(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def process_cpu():
    """User + system CPU seconds of this process and of its children waited
    for (getrusage)."""
    t = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        t += ru.ru_utime + ru.ru_stime
    return t


def sample_bytes(size):
    """Bytes one delivered sample holds: the image and its int64 label."""
    return int(np.prod(SIZES[size]["shape"])) + 8


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        out.extend(os.path.join(root, n) for n in names)
    return sorted(out)


# ------------------------------------------------------------ data + writers

def make_arrays(size):
    spec = SIZES[size]
    rng = np.random.default_rng(1234)
    n = spec["samples"]
    img = rng.integers(0, 256, (n,) + spec["shape"], dtype=np.uint8)
    lbl = rng.integers(0, 10, n).astype(np.int64)
    return img, lbl


def write_formats(ringfeed, root, size, log):
    """Write the dataset once per format with that format's own writer.
    Returns {format: directory}."""
    d = os.path.join(root, size)
    done = os.path.join(d, ".complete-3")  # a new name when a writer changes
    fmts = {k: os.path.join(d, k) for k in ("npy", "rfs", "wds", "mds", "arrayrecord",
                                             "litdata", "dali")}
    if os.path.exists(done):
        return fmts
    shutil.rmtree(d, ignore_errors=True)
    for p in fmts.values():
        os.makedirs(p)
    img, lbl = make_arrays(size)
    n = len(lbl)
    t = time.time()

    np.save(os.path.join(fmts["npy"], "image.npy"), img)
    np.save(os.path.join(fmts["npy"], "label.npy"), lbl)
    subprocess.run([ringfeed, "pack", "-q", "-o", os.path.join(fmts["rfs"], "data.rfs"),
                    "image=" + os.path.join(fmts["npy"], "image.npy"),
                    "label=" + os.path.join(fmts["npy"], "label.npy")], check=True)
    log("  %s: npy, rfs written (%.1f s)" % (size, time.time() - t))

    def attempt(name, fn):
        t0 = time.time()
        try:
            fn()
            log("  %s: %s written (%.1f s)" % (size, name, time.time() - t0))
        except Exception as e:  # a peer that cannot write is reported, not fatal
            with open(os.path.join(fmts[name], ".failed"), "w") as f:
                f.write("%s: %s" % (type(e).__name__, e))
            log("  %s: %s could not be written: %s: %s" % (size, name, type(e).__name__, e))

    def wds():
        import webdataset as wdsm
        pattern = os.path.join(fmts["wds"], "shard-%06d.tar")
        with wdsm.ShardWriter(pattern, maxsize=256 << 20, verbose=0) as w:
            for i in range(n):
                w.write({"__key__": "%08d" % i, "img.bin": img[i].tobytes(),
                         "cls.txt": str(int(lbl[i])).encode()})

    def mds():
        from streaming import MDSWriter
        with MDSWriter(out=fmts["mds"], columns={"image": "bytes", "label": "int"},
                       compression=None, size_limit=1 << 26, progress_bar=False) as w:
            for i in range(n):
                w.write({"image": img[i].tobytes(), "label": int(lbl[i])})

    def arrayrecord():
        from array_record.python.array_record_module import ArrayRecordWriter
        w = ArrayRecordWriter(os.path.join(fmts["arrayrecord"], "data.array_record"),
                              "group_size:1")
        for i in range(n):
            w.write(img[i].tobytes() + lbl[i].tobytes())
        w.close()

    def litdata():
        import litdata as ld
        # Its writer is optimize(): one item per sample, stored as numpy.
        ld.optimize(fn=_litdata_item, inputs=[(size, i) for i in range(n)],
                    output_dir=fmts["litdata"], chunk_bytes="64MB", num_workers=1,
                    mode="overwrite")

    def dali():
        # readers.numpy reads one sample per .npy file.
        for i in range(n):
            np.save(os.path.join(fmts["dali"], "img_%08d.npy" % i), img[i])
            np.save(os.path.join(fmts["dali"], "lbl_%08d.npy" % i), lbl[i:i + 1])

    attempt("wds", wds)
    attempt("mds", mds)
    attempt("arrayrecord", arrayrecord)
    attempt("litdata", litdata)
    attempt("dali", dali)
    os.sync()  # dirty pages cannot be dropped: the cold runs need them written
    open(done, "w").close()
    return fmts


_LITDATA_ARRAYS = {}


def _litdata_item(arg):
    size, i = arg
    if size not in _LITDATA_ARRAYS:
        _LITDATA_ARRAYS[size] = make_arrays(size)
    img, lbl = _LITDATA_ARRAYS[size]
    return {"image": img[i], "label": int(lbl[i])}


# ---------------------------------------------------------------- the peers
#
# Each returns an "epoch" function: epoch() iterates the whole dataset once in
# batches of `batch` (in a new shuffled order each time when `shuffle`),
# touches every batch and returns (samples, checksum).  SHUFFLE describes
# each peer's shuffle for the table.

def shuffle_buffer(size):
    spec = SIZES[size]
    per = int(np.prod(spec["shape"])) + 8
    return max(1, min(spec["samples"], SHUFFLE_BUFFER_BYTES // per))


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def dali_buffer(size):
    """DALI's readers keep every buffered sample's file open (two readers):
    its buffer is the others' or what the open-file limit allows."""
    return max(1, min(shuffle_buffer(size), (raise_nofile() - 1024) // 2))


def shuffle_desc(name):
    if name == "webdataset":
        return "shard order + buffer of %s samples" % " / ".join(
            str(shuffle_buffer(s)) for s in SIZES)
    if name == "dali-cpu":
        return "buffer of %s samples" % " / ".join(str(dali_buffer(s)) for s in SIZES)
    return SHUFFLE[name]


def peer_numpy_memmap(fmts, batch, shuffle, size):
    img = np.load(os.path.join(fmts["npy"], "image.npy"), mmap_mode="r")
    lbl = np.load(os.path.join(fmts["npy"], "label.npy"), mmap_mode="r")
    rng = np.random.default_rng(0)

    def epoch():
        s = c = 0
        n = len(lbl)
        if shuffle:
            # the gather a dozen lines of numpy would write: a new
            # permutation per epoch, each batch a fancy index of the map
            perm = rng.permutation(n)
            for i in range(0, n, batch):
                idx = perm[i:i + batch]
                x, y = img[idx], lbl[idx]
                c += touch(x) + touch(y)
                s += len(y)
                if over():
                    break
            return s, c
        for i in range(0, n, batch):
            x, y = img[i:i + batch], lbl[i:i + batch]
            c += touch(x) + touch(y)
            s += len(y)
            if over():
                break
        return s, c
    return epoch


def _torch_peer(workers):
    def make(fmts, batch, shuffle, size):
        import torch
        from torch.utils.data import DataLoader, Dataset

        class MemmapDataset(Dataset):
            def __init__(self, d):
                self.d = d
                self.img = self.lbl = None
                self.n = len(np.load(os.path.join(d, "label.npy"), mmap_mode="r"))

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                if self.img is None:  # opened in each worker
                    self.img = np.load(os.path.join(self.d, "image.npy"), mmap_mode="r")
                    self.lbl = np.load(os.path.join(self.d, "label.npy"), mmap_mode="r")
                return torch.from_numpy(np.array(self.img[i])), int(self.lbl[i])

        ds = MemmapDataset(fmts["npy"])

        def epoch():
            s = c = 0
            dl = DataLoader(ds, batch_size=batch, shuffle=shuffle, num_workers=workers)
            for x, y in dl:
                c += touch(x.numpy()) + touch(y.numpy())
                s += len(y)
                if over():
                    break
            return s, c
        return epoch
    return make


def peer_webdataset(fmts, batch, shuffle, size):
    import webdataset as wds
    urls = sorted(glob.glob(os.path.join(fmts["wds"], "*.tar")))

    def decode(sample):
        return np.frombuffer(sample[0], dtype=np.uint8), int(sample[1])

    def epoch():
        s = c = 0
        if shuffle:
            # shards in a random order, samples through its shuffle buffer
            pipe = (wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False)
                    .shuffle(shuffle_buffer(size)))
        else:
            pipe = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        pipe = pipe.to_tuple("img.bin", "cls.txt").map(decode).batched(batch, partial=True)
        for x, y in pipe:
            c += touch(x) + touch(np.asarray(y))
            s += len(y)
            if over():
                break
        return s, c
    return epoch


def peer_streaming(fmts, batch, shuffle, size):
    from streaming import StreamingDataset
    from torch.utils.data import DataLoader

    def collate(items):
        return (np.stack([np.frombuffer(it["image"], dtype=np.uint8) for it in items]),
                np.array([it["label"] for it in items], dtype=np.int64))

    def epoch():
        s = c = 0
        # shuffle: its default algorithm (py1e, blocks of shards' samples)
        ds = StreamingDataset(local=fmts["mds"], remote=None, batch_size=batch,
                              shuffle=shuffle)
        for x, y in DataLoader(ds, batch_size=batch, num_workers=0, collate_fn=collate):
            c += touch(x) + touch(y)
            s += len(y)
            if over():
                break
        return s, c
    return epoch


def peer_grain(fmts, batch, shuffle, size):
    import grain

    src = grain.sources.ArrayRecordDataSource(
        [os.path.join(fmts["arrayrecord"], "data.array_record")])

    def parse(rec):
        return {"image": np.frombuffer(rec[:-8], dtype=np.uint8),
                "label": np.frombuffer(rec[-8:], dtype=np.int64)[0]}

    def epoch():
        s = c = 0
        ds = grain.MapDataset.source(src)
        if shuffle:  # a full permutation of the indices
            ds = ds.shuffle(seed=0)
        ds = ds.map(parse).batch(batch)
        for b in ds:
            c += touch(b["image"]) + touch(b["label"])
            s += len(b["label"])
            if over():
                break
        return s, c
    return epoch


def peer_litdata(fmts, batch, shuffle, size):
    import litdata as ld
    import torch

    def epoch():
        s = c = 0
        # shuffle: chunks in a random order, samples shuffled within them
        ds = ld.StreamingDataset(input_dir=fmts["litdata"], shuffle=shuffle)
        # torch's DataLoader over the StreamingDataset: StreamingDataLoader
        # passes prefetch_factor, which torch before 2.0 refuses with
        # num_workers=0.
        for b in torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=0):
            x, y = b["image"], b["label"]
            c += touch(x.numpy()) + touch(y.numpy())
            s += len(y)
            if over():
                break
        return s, c
    return epoch


def peer_dali(fmts, batch, shuffle, size):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, prefetch_queue_depth=2)
    def pipe():
        # shuffle: its buffer of initial_fill samples; the same seed keeps
        # both readers in the same order
        raise_nofile()
        kw = dict(device="cpu", file_root=fmts["dali"], pad_last_batch=False,
                  random_shuffle=shuffle, initial_fill=dali_buffer(size), seed=1234)
        img = fn.readers.numpy(file_filter="img_*.npy", name="r", **kw)
        lbl = fn.readers.numpy(file_filter="lbl_*.npy", **kw)
        return img, lbl

    p = pipe()
    p.build()
    n = p.epoch_size("r")

    def epoch():
        s = c = 0
        while s < n:
            x, y = p.run()
            x, y = x.as_array(), y.as_array()
            take = min(len(y), n - s)  # the last batch wraps: count it once
            c += touch(x[:take]) + touch(y[:take])
            s += take
            if over():
                return s, c
        p.reset()
        return s, c
    return epoch


# ------------------------------------------------------------ the references
#
# What the storage gives a reader that does nothing but read, measured cold
# in the same run as the cells they are set against.

RAW_BLOCK = 4 << 20        # the raw read's pread size
RAW_SECONDS = 1.0          # cold passes repeat until this much read time
RAW_MAX_PASSES = 20
RAW_THREADS = (32, 8, 1)   # raw random reads: each tried, the fastest kept
RAW_CUT_SECONDS = 10.0     # a random pass still running then is cut there


def raw_read(path, n):
    """Sequential passes over the shard file, each cold (dropped first, the
    drop untimed), one thread reading 4 MiB preads into one buffer, buffered
    (no O_DIRECT), nothing done with the bytes."""
    buf = memoryview(bytearray(RAW_BLOCK))
    size = os.path.getsize(path)
    secs = 0.0
    nbytes = passes = 0
    resident = []
    while passes < 1 or (secs < RAW_SECONDS and passes < RAW_MAX_PASSES):
        drop_cache([path])
        resident.append(resident_fraction([path]))
        fd = os.open(path, os.O_RDONLY)
        try:
            off = 0
            t0 = time.monotonic()
            while True:
                k = os.preadv(fd, [buf], off)
                if k <= 0:
                    break
                off += k
            secs += time.monotonic() - t0
        finally:
            os.close(fd)
        if off != size:
            return {"ok": False, "note": "read %d of %d bytes of %s" % (off, size, path)}
        nbytes += off
        passes += 1
    return {"ok": True, "samples": n * passes, "epochs": passes, "seconds": secs,
            "samples_per_s": n * passes / secs, "gb_per_s": nbytes / secs / 1e9,
            "bytes": nbytes, "resident_at_start": max(r or 0 for r in resident),
            "note": "%d cold passes, %d MiB preads, one thread" % (passes, RAW_BLOCK >> 20)}


def raw_random_pass(path, offset, sample_bytes, n, threads, direct=False):
    """One cold pass: every sample's bytes (offset + i * sample_bytes) read
    by one pread each, in a shuffled order, by `threads` threads (each a
    slice of the permutation; os.preadv releases the GIL while it waits).
    direct: O_DIRECT, each read widened to the 4 KiB blocks that hold the
    sample (what an O_DIRECT reader must read; no page is shared by two
    samples' reads through the cache)."""
    import mmap
    import threading
    perm = np.random.default_rng(0).permutation(n)
    drop_cache([path])
    resident = resident_fraction([path])
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    done = [0] * threads
    errors = []
    deadline = [0.0]
    blk = 4096

    def work(k):
        # page-aligned (O_DIRECT wants it), room for the widened read
        buf = mmap.mmap(-1, (sample_bytes + 2 * blk) if direct else sample_bytes)
        cnt = 0
        try:
            for j, i in enumerate(perm[k::threads].tolist()):
                off = offset + i * sample_bytes
                if direct:
                    lo = off - off % blk
                    hi = -(-(off + sample_bytes) // blk) * blk
                    view = memoryview(buf)[:hi - lo]
                    got = os.preadv(fd, [view], lo)
                    view.release()
                    ok = got >= off + sample_bytes - lo
                else:
                    ok = os.preadv(fd, [buf], off) == sample_bytes
                if not ok:
                    raise OSError("short read of sample %d" % i)
                cnt += 1
                if j % 64 == 63 and time.monotonic() >= deadline[0]:
                    break
        except OSError as e:
            errors.append(str(e))
        finally:
            buf.close()
        done[k] = cnt

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    try:
        t0 = time.monotonic()
        deadline[0] = t0 + RAW_CUT_SECONDS
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        secs = time.monotonic() - t0
    finally:
        os.close(fd)
    if errors:
        return {"ok": False, "note": "%s: %s" % (path, errors[0])}
    got = sum(done)
    return {"ok": True, "threads": threads, "samples": got, "epochs": 1, "seconds": secs,
            "cut": got < n, "samples_per_s": got / secs, "gb_per_s": got * sample_bytes / secs / 1e9,
            "resident_at_start": resident}


def raw_random(path, n):
    """Raw random reads: raw_random_pass with each of RAW_THREADS threads,
    the fastest kept (all in "tried")."""
    img = np.load(path, mmap_mode="r")
    offset, sample_bytes = img.offset, int(np.prod(img.shape[1:])) * img.itemsize
    del img
    best = None
    tried = []
    for threads in RAW_THREADS:
        r = raw_random_pass(path, offset, sample_bytes, n, threads)
        if not r["ok"]:
            return r
        tried.append({"threads": threads, "samples_per_s": r["samples_per_s"], "cut": r["cut"]})
        if best is None or r["samples_per_s"] > best["samples_per_s"]:
            best = r
    best["tried"] = tried
    best["note"] = "%d threads, one pread of %d B per sample" % (best["threads"], sample_bytes)
    # The same reads with O_DIRECT, at the thread count kept: shown beside
    # the reference (ringfeed's cold `full` with --cold reads O_DIRECT), not
    # instead.
    d = raw_random_pass(path, offset, sample_bytes, n, best["threads"], direct=True)
    best["direct_samples_per_s"] = d["samples_per_s"] if d["ok"] else None
    best["direct_note"] = d.get("note", "")
    return best


RAW = {"raw-read": "raw read", "raw-random": "raw random reads"}
# The reference each of ringfeed's cold cells is set against: the shuffled
# group's raw read is `window`'s.
COLD_REF = {"none": "raw-read", "window": "raw-read", "full": "raw-random"}
# Rounds of a cold cell set against the raw read (the reference just
# before, ringfeed's commands, the reference just after), the round with
# the median ratio kept: the raw read takes about a second, and one round
# of it swung the ratio by up to 1.4x on a virtual disk; in six runs of
# three rounds, a cell's rounds still spanned 0.88-1.19x, and its median
# fell on either side of 0.95x from run to run.  Raw random reads take up
# to a minute: one round.
COLD_ROUNDS = 5


def median_round(rounds):
    """rounds: (ringfeed's result, the bracketing reference) pairs.  The
    pair whose ratio is the median, each carrying every round's ratio."""
    ok = [(r, f) for r, f in rounds if r.get("ok") and f.get("ok") and f["samples_per_s"]]
    if not ok:
        return rounds[-1]
    ok.sort(key=lambda p: p[0]["samples_per_s"] / p[1]["samples_per_s"])
    r, f = ok[(len(ok) - 1) // 2]
    if len(rounds) > 1:
        ratios = ", ".join("%.2f" % (a["samples_per_s"] / b["samples_per_s"]) for a, b in ok)
        r = dict(r, rounds=[[a["samples_per_s"], b["samples_per_s"]] for a, b in rounds
                            if a.get("ok") and b.get("ok")])
        f = dict(f, note="%s; the median of %d rounds (ratios %s)" % (
            f.get("note", ""), len(rounds), ratios))
    return r, f


def bracket(a, b):
    """One reference from its measurements before (a) and after (b) the
    cells it is set against: their mean rate, both kept."""
    if not (a.get("ok") and b.get("ok")):
        return a if a.get("ok") else b
    r = dict(a)
    for k in ("samples_per_s", "gb_per_s", "direct_samples_per_s"):
        if a.get(k) and b.get(k):
            r[k] = (a[k] + b[k]) / 2
    r["before"], r["after"] = a["samples_per_s"], b["samples_per_s"]
    r["note"] = "%s; mean of %s before and %s after ringfeed's cells" % (
        a.get("note", ""), fmt_rate(a["samples_per_s"]), fmt_rate(b["samples_per_s"]))
    return r


SHUFFLE = {
    "numpy-memmap": "full permutation",
    "torch-dataloader-w0": "full permutation",
    "torch-dataloader-w2": "full permutation",
    "webdataset": "shard order + buffer",  # shuffle_desc() adds the sizes
    "mosaicml-streaming": "py1e blocks",
    "grain": "full permutation",
    "litdata": "chunk order + within chunk",
    "dali-cpu": "buffer",
}

PEER_FNS = {
    "numpy-memmap": (peer_numpy_memmap, "npy"),
    "torch-dataloader-w0": (_torch_peer(0), "npy"),
    "torch-dataloader-w2": (_torch_peer(2), "npy"),
    "webdataset": (peer_webdataset, "wds"),
    "mosaicml-streaming": (peer_streaming, "mds"),
    "grain": (peer_grain, "arrayrecord"),
    "litdata": (peer_litdata, "litdata"),
    "dali-cpu": (peer_dali, "dali"),
}


def run_one_peer(name, size, order, cache, root):
    """In a child process: time one peer; print one JSON line."""
    fmts = {k: os.path.join(root, size, k) for k in ("npy", "rfs", "wds", "mds", "arrayrecord",
                                                       "litdata", "dali")}
    n = SIZES[size]["samples"]
    if name == "raw-read":
        return raw_read(os.path.join(fmts["rfs"], "data.rfs"), n)
    if name == "raw-random":
        return raw_random(os.path.join(fmts["npy"], "image.npy"), n)
    make, fmt = PEER_FNS[name]
    failed = os.path.join(fmts[fmt], ".failed")
    if os.path.exists(failed):
        with open(failed) as f:
            return {"ok": False, "note": "writer failed: " + f.read()}
    files = files_under(fmts[fmt])
    epoch = make(fmts, SIZES[size]["batch"], order == "shuf", size)
    if cache == "cold":
        drop_cache(files)
    else:
        warm_cache(files)
    resident = resident_fraction(files)
    samples = epochs = batches = 0
    cut = False
    cpu0 = process_cpu()
    t0 = time.monotonic()
    _deadline[0] = t0 + CUT_SECONDS
    while True:
        s, _ = epoch()
        samples += s
        batches += -(-s // SIZES[size]["batch"])
        epochs += 1
        el = time.monotonic() - t0
        if s < n and over():
            cut = True
            break
        if cache == "cold" or el >= WARM_SECONDS:
            break
    cpu = process_cpu() - cpu0
    gb = samples * sample_bytes(size) / 1e9
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ruc = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    ok = samples == n * epochs or (cut and samples > n * (epochs - 1))
    return {"ok": ok, "samples": samples, "epochs": epochs, "seconds": el, "cut": cut,
            "samples_per_s": samples / el if el > 0 else 0,
            "peak_rss": max(ru, ruc) * 1024, "resident_at_start": resident,
            "process_cpu_s": cpu, "process_cpu_s_per_gb": cpu / gb if gb else None,
            "process_cpu_us_per_batch": cpu * 1e6 / batches if batches else None,
            "note": "" if ok else "delivered %d samples for %d epochs of %d" % (samples, epochs, n)}


def ringfeed_argvs(ringfeed, path, size, mode, cache):
    """The commands a user types: `ringfeed bench PATH --json ...`.  Cold,
    after a page cache drop: --cold (O_DIRECT, every epoch from the disk),
    and --cold --buffered for exactly one epoch (what the library chooses
    for a dataset that fits in a quarter of the memory available: reads
    through the page cache; its later epochs would be hot).  Hot: each of
    --buffered and --map (with --in-place: the consumer only reads) over a
    dataset already in the page cache.  The table takes the best of each
    pair (a user picks the reads that suit the dataset)."""
    base = [ringfeed, "bench", path, "--json", "-q", "--touch", "--device", "host",
            "--batch", str(SIZES[size]["batch"]), "--shuffle", mode]
    if cache == "cold":
        return [base + ["--seconds", "2", "--cold"],
                base + ["--epochs", "1", "--cold", "--buffered"]]
    base += ["--seconds", "2"]
    return [base + ["--buffered"], base + ["--map", "--in-place"]]


def run_ringfeed(ringfeed, fmts, size, mode, cache):
    path = os.path.join(fmts["rfs"], "data.rfs")
    if cache == "hot":
        warm_cache([path])
    best = None
    tried = []
    for argv in ringfeed_argvs(ringfeed, path, size, mode, cache):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cmd = "ringfeed " + " ".join(a for a in argv[1:] if a != path).replace(
            "bench ", "bench DATA ", 1)
        if p.returncode != 0:
            tried.append({"command": cmd, "ok": False, "note": p.stderr.strip()[-300:]})
            continue
        doc = json.loads(p.stdout)
        ld = doc["loader"]
        r = {"ok": True, "command": cmd, "samples": ld["samples"], "epochs": ld["epochs"],
             "seconds": ld["seconds"], "samples_per_s": ld["samples_per_s"],
             "peak_rss": ld["peak_rss"], "efficiency": doc["efficiency"],
             "binding_limit": doc["binding_limit"],
             "cpu_s_per_gb": ld.get("cpu_s_per_gb"),
             "cpu_us_per_batch": ld.get("cpu_us_per_batch"),
             "process_cpu_s": ld.get("process_cpu_s"),
             "process_cpu_s_per_gb": ld.get("process_cpu_s_per_gb"),
             "process_cpu_us_per_batch": ld.get("process_cpu_us_per_batch"),
             "loader_cpu_share": ld.get("loader_cpu_share"),
             "resident_at_start": doc.get("cache", {}).get("resident_fraction"),
             "note": "%s, %s" % (ld["io_engine"], "O_DIRECT" if ld["io_direct"] else "buffered")}
        tried.append({k: r[k] for k in ("command", "ok", "samples_per_s")})
        if best is None or r["samples_per_s"] > best["samples_per_s"]:
            best = r
    if best is None:
        return {"ok": False, "tried": tried,
                "note": "ringfeed bench failed: " + (tried[-1]["note"] if tried else "")}
    best["tried"] = tried
    return best


# -------------------------------------------------------------------- main

def fmt_rate(v):
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v


def fmt_ratio(x):
    return ("%.2fx" % x) if x < 10 else ("%.0fx" % x)


def machine():
    model = ""
    mem = 0
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    model = ln.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal:"):
                    mem = int(ln.split()[1]) * 1024
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cpus": os.cpu_count(), "usable_cpus": usable, "model": model,
            "mem_bytes": mem, "kernel": platform.release(),
            "python": platform.python_version()}


def git_describe():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return p.stdout.strip()
    except OSError:
        return ""


def cpu_table(by, cols, peers):
    """The CPU each loader's process spent per GB delivered and per batch
    (ringfeed: the whole process, consumer and loader threads, and the
    loader threads' share); numpy-memmap beside it where it ran."""
    rows = [("ringfeed none", "seq"), ("ringfeed full", "shuf"), ("ringfeed window", "shuf")]
    if "numpy-memmap" in peers:
        rows += [("numpy-memmap", "seq"), ("numpy-memmap", "shuf")]
    out = ["", "**CPU** (user + system CPU of the loader's whole process during the timed "
           "run, consumer's touch included: seconds per GB delivered, microseconds per batch; "
           "ringfeed: `process_cpu_s_per_gb`, `process_cpu_us_per_batch` and, in brackets, "
           "the loader threads' share `loader_cpu_share` of its `ringfeed bench --json`):", ""]
    out.append("| loader | order |" + "".join(" %s %s |" % (s, c) for s, c in cols))
    out.append("|---|---|" + "---|" * len(cols))
    for name, order in rows:
        row = "| %s | %s |" % (name, "sequential" if order == "seq" else "shuffled")
        for s, c in cols:
            r = by.get((name, s, order, c), {})
            gb, us = r.get("process_cpu_s_per_gb"), r.get("process_cpu_us_per_batch")
            if not r.get("ok") or gb is None or us is None:
                row += " n/a |"
                continue
            v = "%.2f s/GB, %s us/batch" % (gb, ("%.0f" % us) if us >= 10 else "%.1f" % us)
            if r.get("loader_cpu_share") is not None:
                v += " (loader %.0f%%)" % (100 * r["loader_cpu_share"])
            row += " %s |" % v
        out.append(row)
    return out


def markdown(results, peers, meta):
    """The tables as markdown, pasted as is into the README and docs/bench.md."""
    by = {(r["peer"], r["size"], r["order"], r["cache"]): r for r in results}
    cols = [(s, c) for s in SIZES for c in CACHES]
    head = "| %s |" + "".join(" %s %s |" % (s, c) for s, c in cols)
    rule = "|---|" + "---|" * len(cols)
    out = []
    m = meta["machine"]
    out.append("Run %s UTC, ringfeed %s (%s), `%s`; %d CPUs (%d usable), %s, %.1f GiB RAM, "
               "Linux %s; load average (1, 5, 15 min) %s at the start, %s at the end; "
               "%.0f s in all." % (
                   meta["date"], meta["version"], meta["git"] or "no git", meta["command"],
                   m["cpus"], m["usable_cpus"], m["model"] or "unknown CPU",
                   m["mem_bytes"] / 2**30, m["kernel"],
                   " ".join("%.2f" % x for x in meta["load_start"]),
                   " ".join("%.2f" % x for x in meta["load_end"]), meta["seconds"]))
    out.append("")
    out.append("Samples/s; in brackets ringfeed's samples/s over the peer's. small = %d x "
               "(784 B + 8 B label), batch %d; large = %d x (150 KiB + 8 B), batch %d. "
               "Cold: one epoch after the files' pages were dropped (ringfeed: the better of "
               "2 s of O_DIRECT epochs, `--cold`, and one epoch through the page cache, "
               "`--cold --buffered --epochs 1`); hot: page cache filled first, epochs for at "
               "least %.0f s (ringfeed: 2 s, the better of `--buffered` and "
               "`--map --in-place`). A peer's "
               "epoch still running after %.0f s is cut there and rated over the samples "
               "delivered (marked *)." % (
                   SIZES["small"]["samples"], SIZES["small"]["batch"],
                   SIZES["large"]["samples"], SIZES["large"]["batch"], WARM_SECONDS,
                   CUT_SECONDS))
    out.append("")

    def cell(name, key, against, refs=()):
        """against: ringfeed's cells this one is divided into; refs: the
        references this (ringfeed) cell is divided by."""
        r = by.get(key, {})
        if key[0] in RAW.values() and key[3] != "cold":
            return "-"
        if not r.get("ok"):
            return "n/a"
        v = fmt_rate(r["samples_per_s"]) + ("*" if r.get("cut") else "")
        rat = []
        for label, rk in against:
            rf = by.get(rk, {})
            if rf.get("ok") and r["samples_per_s"] > 0:
                rat.append(label + fmt_ratio(rf["samples_per_s"] / r["samples_per_s"]))
        for label, rk in refs:
            rf = by.get(rk, {})
            if rf.get("ok") and rf["samples_per_s"] > 0:
                rat.append(fmt_ratio(r["samples_per_s"] / rf["samples_per_s"]) + " " + label)
        if key[0] == RAW["raw-read"]:
            rat.append("%.2f GB/s" % r["gb_per_s"])
        if key[0] == RAW["raw-random"]:
            rat.append("%d threads" % r["threads"])
            if r.get("direct_samples_per_s"):
                rat.append("O_DIRECT " + fmt_rate(r["direct_samples_per_s"]))
        return v + (" (%s)" % ", ".join(rat) if rat else "")

    def refs(name, size, cache):
        """A cold ringfeed cell over its reference: sequential reads (none,
        window) over the raw read, full over raw random reads."""
        if cache != "cold" or not name.startswith("ringfeed"):
            return ()
        if name == "ringfeed full":
            return (("raw random", (RAW["raw-random"], size, "shuf", cache)),)
        order = "shuf" if name == "ringfeed window" else "seq"
        return (("raw read", (RAW["raw-read"], size, order, cache)),)

    out.append("**Sequential** (file order; ringfeed `--shuffle none`):")
    out.append("")
    out.append(head % "loader")
    out.append(rule)
    for name in ["ringfeed", RAW["raw-read"]] + peers:
        row = "| %s |" % (name if name not in RAW.values() else "*%s*" % name)
        for s, c in cols:
            key = (name if name != "ringfeed" else "ringfeed none", s, "seq", c)
            against = [] if name in ("ringfeed", RAW["raw-read"]) else [
                ("", ("ringfeed none", s, "seq", c))]
            row += " %s |" % cell(name, key, against, refs(key[0], s, c))
        out.append(row)
    out.append("")
    out.append("**Shuffled** (each loader's own shuffle; ringfeed `--shuffle full` and "
               "`--shuffle window` at its default window; in brackets f: `full`'s "
               "samples/s over the peer's, w: `window`'s):")
    out.append("")
    out.append((head % "loader").replace("| loader |", "| loader | shuffle |"))
    out.append(rule.replace("|---|", "|---|---|", 1))
    rf_rows = [("ringfeed full", "full permutation"),
               ("ringfeed window", "window of chunks")]
    raw_rows = [(RAW["raw-random"], "full permutation, a pread per sample")]
    for name, how in rf_rows + raw_rows + [(p, shuffle_desc(p)) for p in peers]:
        row = "| %s | %s |" % (name if name not in RAW.values() else "*%s*" % name, how)
        for s, c in cols:
            against = [] if name.startswith("ringfeed") or name in RAW.values() else [
                ("f ", ("ringfeed full", s, "shuf", c)),
                ("w ", ("ringfeed window", s, "shuf", c))]
            row += " %s |" % cell(name, (name, s, "shuf", c), against, refs(name, s, c))
        out.append(row)
    out.append("")
    out.append("*raw read* and *raw random reads* are references, cold only, measured in the "
               "same run, just before and just after the ringfeed cell set against them, the "
               "mean of the two kept, in %d rounds for the raw read, the round with the median "
               "ratio shown (`window`'s raw read is the shuffled group's): the "
               "ringfeed shard file read start to end by one thread in %d MiB "
               "preads (buffered, the cache dropped before each pass, passes repeated for "
               "%.0f s; in brackets its GB/s); and every sample's %s image bytes read from the "
               ".npy file by one pread each in a shuffled order, by 1, 8 and 32 threads, the "
               "fastest kept (in brackets: how many threads, and the same reads with O_DIRECT, "
               "each widened to the 4 KiB blocks that hold the sample). In ringfeed's cold "
               "cells, `none` and `window` over the raw read, `full` over raw random reads." % (
                   COLD_ROUNDS, RAW_BLOCK >> 20, RAW_SECONDS,
                   " / ".join("%d B" % (sample_bytes(z) - 8) for z in SIZES)))
    out.extend(cpu_table(by, cols, peers))
    notes = sorted({"%s (%s %s %s): %s" % (r["peer"], r["size"], r["order"], r["cache"],
                                          r["note"])
                    for r in results if not r.get("ok") and r.get("note")})
    if notes:
        out.append("")
        out.append("Not run: " + "; ".join(n.replace("|", "/") for n in notes) + ".")
    cmds = sorted({(r["size"], r["order"], r["cache"], r["peer"], r["command"])
                   for r in results if r["peer"].startswith("ringfeed") and r.get("ok")})
    if cmds:
        out.append("")
        out.append("ringfeed's cells came from (DATA = the set's `.rfs`):")
        out.append("")
        for s, o, c, pname, cmd in cmds:
            out.append("- %s %s %s: `%s`" % (s, c, pname.split()[1], cmd))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringfeed", required=False)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--run-peer", help=argparse.SUPPRESS)
    ap.add_argument("--size", help=argparse.SUPPRESS)
    ap.add_argument("--order", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated subset of: " + ", ".join(PEERS))
    ap.add_argument("--command", default="tools/bench-peers/run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = os.path.join(os.path.abspath(args.out), "peers-data")

    if args.run_peer:
        try:
            r = run_one_peer(args.run_peer, args.size, args.order, args.cache, root)
        except Exception as e:
            r = {"ok": False, "note": "%s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                                   if str(e) else "")}
        print("RESULT " + json.dumps(r))
        return 0

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    ringfeed = os.path.abspath(args.ringfeed)
    version = subprocess.run([ringfeed, "--version"], stdout=subprocess.PIPE,
                             text=True).stdout.strip()
    peers = [p for p in args.peers.split(",") if p]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "version": version,
            "git": git_describe(), "command": args.command, "machine": machine(),
            "load_start": list(os.getloadavg())}
    log("%s UTC, %d CPUs, %s, load average %s" % (
        meta["date"], meta["machine"]["cpus"], meta["machine"]["model"],
        " ".join("%.2f" % x for x in meta["load_start"])))
    t_start = time.time()
    results = []

    def child(name, size, order, cache):
        """One peer (or reference) in a process of its own."""
        argv = [sys.executable, os.path.abspath(__file__), "--out", args.out,
                "--run-peer", name, "--size", size, "--order", order, "--cache", cache]
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            return json.loads(line[-1][7:]) if line else {
                "ok": False, "note": "exited %d: %s" % (p.returncode, p.stderr.strip()[-300:])}
        except subprocess.TimeoutExpired:
            return {"ok": False, "note": "timed out after 60 s"}

    def add(r, peer, size, order, cache):
        r.update(peer=peer, size=size, order=order, cache=cache, loadavg=os.getloadavg()[0])
        results.append(r)
        log("  %s %s %s %s: %s" % (size, order, cache, peer,
                                  fmt_rate(r["samples_per_s"]) if r.get("ok")
                                  else "cannot run: " + r.get("note", "")))

    for size in SIZES:
        log("writing the %s dataset in every format (once) ..." % size)
        fmts = write_formats(ringfeed, root, size, log)
        for order in ORDERS:
            for cache in CACHES:
                for mode in RINGFEED_MODES[order]:
                    if cache != "cold":
                        add(run_ringfeed(ringfeed, fmts, size, mode, cache),
                            "ringfeed " + mode, size, order, cache)
                        continue
                    # The reference a cold cell is set against (none and
                    # window: the raw read; full: raw random reads),
                    # measured just before ringfeed's commands and just
                    # after: a virtual disk's rate drifts and bursts within
                    # a minute, so the reference is the mean of the two
                    # that bracket them; in rounds for the raw read.
                    ref = COLD_REF[mode]
                    rounds = []
                    for _ in range(COLD_ROUNDS if ref == "raw-read" else 1):
                        before = child(ref, size, order, cache)
                        r = run_ringfeed(ringfeed, fmts, size, mode, cache)
                        rounds.append((r, bracket(before, child(ref, size, order, cache))))
                    r, f = median_round(rounds)
                    add(r, "ringfeed " + mode, size, order, cache)
                    add(f, RAW[ref], size, order, cache)
                for name in peers:
                    add(child(name, size, order, cache), name, size, order, cache)

    meta["load_end"] = list(os.getloadavg())
    meta["seconds"] = time.time() - t_start
    md = markdown(results, peers, meta)
    print(md)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"ringfeed_version": version, "meta": meta, "sizes": SIZES,
                   "warm_seconds": WARM_SECONDS, "shuffle_buffer_bytes": SHUFFLE_BUFFER_BYTES,
                   "results": results, "table": md}, f, indent=1)
    log("wrote %s and %s" % (os.path.join(args.out, "peers.md"),
                             os.path.join(args.out, "peers.json")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
