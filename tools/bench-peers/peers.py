# SPDX-License-Identifier: MIT
"""The peer comparison: the same samples read by ringfeed and by the loaders
people would use instead, each from its own format written by its own writer,
reported as ratios (ringfeed samples/s over the peer's).

Run through tools/bench-peers/run, which makes the virtual environment.  By
hand:  python peers.py --ringfeed build/tools/ringfeed --out bench-out

Every peer
  - reads the whole dataset in file order (no shuffle) in batches of the same
    size (BATCH[size]),
  - touches every byte of every batch (touch(): a sum over the batch's bytes,
    so nothing is lazily skipped: memory maps are read, views are filled),
  - runs in its own process (imports, worker pools and caches do not leak from
    one peer into the next; its peak RSS is its own),
and is timed from the creation of its epoch iterator (worker start-up
included, as a training job pays it) to the last batch.  Cold: the format's
files are dropped from the page cache first (posix_fadvise DONTNEED) and one
epoch is read.  Warm: the files are read once to fill the cache, then epochs
repeat for at least WARM_SECONDS.
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
    """Evict the files from the page cache; returns the fraction of their
    pages still resident afterwards is not measurable from Python portably,
    so the caller relies on ringfeed bench's mincore report for its own
    files and on DONTNEED for the peers' (clean files are always evicted)."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_cache(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


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
    done = os.path.join(d, ".complete-2")  # a new name when a writer changes
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
# batches of `batch`, touches every batch and returns (samples, checksum).

def peer_numpy_memmap(fmts, batch):
    img = np.load(os.path.join(fmts["npy"], "image.npy"), mmap_mode="r")
    lbl = np.load(os.path.join(fmts["npy"], "label.npy"), mmap_mode="r")

    def epoch():
        s = c = 0
        for i in range(0, len(lbl), batch):
            x, y = img[i:i + batch], lbl[i:i + batch]
            c += touch(x) + touch(y)
            s += len(y)
        return s, c
    return epoch


def _torch_peer(workers):
    def make(fmts, batch):
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
            dl = DataLoader(ds, batch_size=batch, shuffle=False, num_workers=workers)
            for x, y in dl:
                c += touch(x.numpy()) + touch(y.numpy())
                s += len(y)
            return s, c
        return epoch
    return make


def peer_webdataset(fmts, batch):
    import webdataset as wds
    urls = sorted(glob.glob(os.path.join(fmts["wds"], "*.tar")))

    def decode(sample):
        return np.frombuffer(sample[0], dtype=np.uint8), int(sample[1])

    def epoch():
        s = c = 0
        pipe = (wds.WebDataset(urls, shardshuffle=False, empty_check=False)
                .to_tuple("img.bin", "cls.txt").map(decode).batched(batch, partial=True))
        for x, y in pipe:
            c += touch(x) + touch(np.asarray(y))
            s += len(y)
        return s, c
    return epoch


def peer_streaming(fmts, batch):
    from streaming import StreamingDataset
    from torch.utils.data import DataLoader

    def collate(items):
        return (np.stack([np.frombuffer(it["image"], dtype=np.uint8) for it in items]),
                np.array([it["label"] for it in items], dtype=np.int64))

    def epoch():
        s = c = 0
        ds = StreamingDataset(local=fmts["mds"], remote=None, batch_size=batch, shuffle=False)
        for x, y in DataLoader(ds, batch_size=batch, num_workers=0, collate_fn=collate):
            c += touch(x) + touch(y)
            s += len(y)
        return s, c
    return epoch


def peer_grain(fmts, batch):
    import grain

    src = grain.sources.ArrayRecordDataSource(
        [os.path.join(fmts["arrayrecord"], "data.array_record")])

    def parse(rec):
        return {"image": np.frombuffer(rec[:-8], dtype=np.uint8),
                "label": np.frombuffer(rec[-8:], dtype=np.int64)[0]}

    def epoch():
        s = c = 0
        ds = grain.MapDataset.source(src).map(parse).batch(batch)
        for b in ds:
            c += touch(b["image"]) + touch(b["label"])
            s += len(b["label"])
        return s, c
    return epoch


def peer_litdata(fmts, batch):
    import litdata as ld
    import torch

    def epoch():
        s = c = 0
        ds = ld.StreamingDataset(input_dir=fmts["litdata"])
        # torch's DataLoader over the StreamingDataset: StreamingDataLoader
        # passes prefetch_factor, which torch before 2.0 refuses with
        # num_workers=0.
        for b in torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=0):
            x, y = b["image"], b["label"]
            c += touch(x.numpy()) + touch(y.numpy())
            s += len(y)
        return s, c
    return epoch


def peer_dali(fmts, batch):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, prefetch_queue_depth=2)
    def pipe():
        img = fn.readers.numpy(device="cpu", file_root=fmts["dali"], file_filter="img_*.npy",
                               name="r", pad_last_batch=False, random_shuffle=False)
        lbl = fn.readers.numpy(device="cpu", file_root=fmts["dali"], file_filter="lbl_*.npy",
                               pad_last_batch=False, random_shuffle=False)
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
        p.reset()
        return s, c
    return epoch


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


def run_one_peer(name, size, cache, root):
    """In a child process: time one peer; print one JSON line."""
    fmts = {k: os.path.join(root, size, k) for k in ("npy", "rfs", "wds", "mds", "arrayrecord",
                                                       "litdata", "dali")}
    make, fmt = PEER_FNS[name]
    failed = os.path.join(fmts[fmt], ".failed")
    if os.path.exists(failed):
        with open(failed) as f:
            return {"ok": False, "note": "writer failed: " + f.read()}
    files = files_under(fmts[fmt])
    epoch = make(fmts, SIZES[size]["batch"])
    if cache == "cold":
        drop_cache(files)
    else:
        warm_cache(files)
    samples = epochs = 0
    t0 = time.monotonic()
    while True:
        s, _ = epoch()
        samples += s
        epochs += 1
        el = time.monotonic() - t0
        if cache == "cold" or el >= WARM_SECONDS:
            break
    n = SIZES[size]["samples"]
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ruc = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    ok = samples == n * epochs
    return {"ok": ok, "samples": samples, "epochs": epochs, "seconds": el,
            "samples_per_s": samples / el if el > 0 else 0,
            "peak_rss": max(ru, ruc) * 1024,
            "note": "" if ok else "delivered %d samples for %d epochs of %d" % (samples, epochs, n)}


def run_ringfeed(ringfeed, fmts, size, cache):
    """ringfeed bench on the same samples: the consumer touches every byte
    (--touch), batches of the same size, host delivery.  Cold: O_DIRECT
    after a page cache drop.  Warm: the best of O_DIRECT, buffered reads
    and memory maps (--map) served from the cache (a user with a hot dataset
    picks buffered reads or maps)."""
    path = os.path.join(fmts["rfs"], "data.rfs")
    base = [ringfeed, "bench", "--json", "-q", "--touch", "--device", "host",
            "--batch", str(SIZES[size]["batch"]), "--seconds", "2"]
    runs = [base + ["--cold", path]] if cache == "cold" else [base + [path],
                                                              base + ["--buffered", path],
                                                              base + ["--map", path]]
    best = None
    for argv in runs:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            return {"ok": False, "note": "ringfeed bench failed: " + p.stderr.strip()[-300:]}
        doc = json.loads(p.stdout)
        ld = doc["loader"]
        r = {"ok": True, "samples": ld["samples"], "epochs": ld["epochs"],
             "seconds": ld["seconds"], "samples_per_s": ld["samples_per_s"],
             "peak_rss": ld["peak_rss"], "efficiency": doc["efficiency"],
             "binding_limit": doc["binding_limit"],
             "note": "%s, %s" % (ld["io_engine"], "O_DIRECT" if ld["io_direct"] else "buffered")}
        if best is None or r["samples_per_s"] > best["samples_per_s"]:
            best = r
    return best


# -------------------------------------------------------------------- main

def fmt_rate(v):
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringfeed", required=False)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--run-peer", help=argparse.SUPPRESS)
    ap.add_argument("--size", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated subset of: " + ", ".join(PEERS))
    args = ap.parse_args()
    root = os.path.join(os.path.abspath(args.out), "peers-data")

    if args.run_peer:
        try:
            r = run_one_peer(args.run_peer, args.size, args.cache, root)
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
    t_start = time.time()
    results = []
    for size in SIZES:
        log("writing the %s dataset in every format ..." % size)
        fmts = write_formats(ringfeed, root, size, log)
        for cache in ("cold", "warm"):
            rf = run_ringfeed(ringfeed, fmts, size, cache)
            rf.update(peer="ringfeed", size=size, cache=cache, loadavg=os.getloadavg()[0])
            results.append(rf)
            log("  %s %s ringfeed: %s" % (size, cache, fmt_rate(rf.get("samples_per_s", 0))))
            for name in peers:
                argv = [sys.executable, os.path.abspath(__file__), "--out", args.out,
                        "--run-peer", name, "--size", size, "--cache", cache]
                try:
                    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, timeout=300)
                    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
                    r = json.loads(line[-1][7:]) if line else {
                        "ok": False, "note": "exited %d: %s" % (p.returncode,
                                                                p.stderr.strip()[-300:])}
                except subprocess.TimeoutExpired:
                    r = {"ok": False, "note": "timed out after 300 s"}
                r.update(peer=name, size=size, cache=cache, loadavg=os.getloadavg()[0])
                if r.get("ok") and rf.get("ok") and r["samples_per_s"] > 0:
                    r["ringfeed_ratio"] = rf["samples_per_s"] / r["samples_per_s"]
                results.append(r)
                log("  %s %s %s: %s" % (size, cache, name,
                                        fmt_rate(r["samples_per_s"]) if r.get("ok")
                                        else "cannot run: " + r.get("note", "")))

    cols = [(s, c) for s in SIZES for c in ("cold", "warm")]
    by = {(r["peer"], r["size"], r["cache"]): r for r in results}
    head = "%-22s" % "samples/s (ringfeed x)" + "".join(
        "%18s" % ("%s %s" % (s, c)) for s, c in cols)
    lines = [head, "-" * len(head)]
    for name in ["ringfeed"] + peers:
        row = "%-22s" % name
        for s, c in cols:
            r = by.get((name, s, c), {})
            if not r.get("ok"):
                cell = "n/a"
            elif name == "ringfeed":
                cell = fmt_rate(r["samples_per_s"])
            else:
                cell = "%s (%.1fx)" % (fmt_rate(r["samples_per_s"]), r.get("ringfeed_ratio", 0))
            row += "%18s" % cell
        lines.append(row)
    notes = sorted({"%s: %s" % (r["peer"], r["note"]) for r in results
                    if not r.get("ok") and r.get("note")})
    table = "\n".join(lines)
    print(table)
    if notes:
        print("\nnot run:")
        for n in notes:
            print("  " + n)
    loads = [r["loadavg"] for r in results]
    print("\nringfeed %s; %d cores, load average %.1f-%.1f during the run; small = %d x (784 B + 8 B label), batch %d; large = %d x "
          "(150 KiB + 8 B), batch %d; total %.0f s" % (
              version, os.cpu_count(), min(loads), max(loads), SIZES["small"]["samples"], SIZES["small"]["batch"],
              SIZES["large"]["samples"], SIZES["large"]["batch"], time.time() - t_start))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"ringfeed_version": version, "machine": {
            "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()},
            "sizes": SIZES, "warm_seconds": WARM_SECONDS, "results": results,
            "table": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
