# SPDX-License-Identifier: MIT
"""peers_gpu.py RFS NPY [SECONDS]: what training does, on the GPU, against
the simplest things a PyTorch user writes instead.

The same data twice: RFS (the kit's dataset, one u64 field per sample) and
NPY, a .npy of the same rows (written from RFS when missing).  Each row of
the result is one loader feeding batches of 16 MiB to cuda:0 for SECONDS
(default 3), every batch reduced by a kernel on the GPU (tensor.sum), the
run timed up to a synchronize.  Shuffled runs draw a fresh permutation per
epoch.  Runs:

  numpy-memmap       x = mm[perm[i:i+B]] (a gather from a memory map),
                     torch.from_numpy(x).cuda(): the dozen-line loop
  numpy-memmap-pin   the same, through pin_memory() and a non-blocking copy
  torch-dataloader   torch.utils.data.DataLoader over a map-style Dataset of
                     the memmap rows, shuffle=True, pin_memory=True,
                     num_workers=8, then .cuda(non_blocking=True)
  ringfeed-full      ringfeed.Loader(shuffle="full", device="cuda")
  ringfeed-window    ringfeed.Loader(shuffle="window", device="cuda")
  ringfeed-none / numpy-memmap-seq   sequential passes, for reference

Timing starts once the first batch is on the device (opening a loader or
starting workers is not counted).  Prints one JSON object: {"rows": [{"name", "shuffle", "gb_per_s",
"samples_per_s", "batches", "seconds"}...], "device", "torch"}.  Hot runs:
both files are read once before the runs."""
import json
import os
import sys
import time

import numpy as np
import torch

import ringfeed

rfs, npy = sys.argv[1], sys.argv[2]
if os.environ.get("RF_PEERS_CPU") != "1" and not torch.cuda.is_available():
    print("skipped: torch.cuda.is_available() is False")
    sys.exit(77)
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
# RF_PEERS_CPU=1: the same runs on the host, a check of the script itself.
cpu = os.environ.get("RF_PEERS_CPU") == "1"
dev = torch.device("cpu" if cpu else "cuda:0")
rf_dev = "host" if cpu else "cuda"
sync = (lambda: None) if cpu else torch.cuda.synchronize

if not os.path.exists(npy):
    with ringfeed.Loader(rfs, 256, device="host", drop_last=False) as ld:
        rows = []
        for b in ld:
            rows.append(np.array(b[next(iter(b.keys()))], copy=True))
    a = np.concatenate(rows)
    np.save(npy, a)
    del a, rows
mm = np.load(npy, mmap_mode="r")
n, row_bytes = mm.shape[0], mm[0].nbytes
B = max(1, (16 << 20) // row_bytes)
for p in (rfs, npy):
    with open(p, "rb") as f:
        while f.read(64 << 20):
            pass


def timed(name, shuffle, batches):
    """Runs an iterator of device tensors for `seconds`; each batch is summed
    on the GPU so its bytes are read there."""
    acc = torch.zeros((), dtype=torch.int64, device=dev)
    it = batches()
    t = next(it)  # the first batch: opening, workers starting (not timed)
    acc += t.view(torch.int64).sum()
    sync()
    t0 = time.perf_counter()
    nb = ns = 0
    for t in it:
        acc += t.view(torch.int64).sum()
        nb += 1
        ns += t.shape[0]
        if time.perf_counter() - t0 >= seconds:
            break
    sync()
    dt = time.perf_counter() - t0
    return {"name": name, "shuffle": shuffle, "batches": nb, "samples": ns, "seconds": dt,
            "samples_per_s": ns / dt, "gb_per_s": ns * row_bytes / dt / 1e9}


def numpy_loop(shuffle, pin):
    def gen():
        rng = np.random.default_rng(0)
        while True:
            order = rng.permutation(n) if shuffle else None
            for i in range(0, n - B + 1, B):
                x = mm[order[i:i + B]] if shuffle else np.asarray(mm[i:i + B])
                t = torch.from_numpy(x.view(np.int64))
                if pin and not cpu:
                    yield t.pin_memory().to(dev, non_blocking=True)
                else:
                    yield t.to(dev)
    return gen


def dataloader_loop():
    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return torch.from_numpy(np.asarray(mm[i]).view(np.int64))

    def gen():
        dl = torch.utils.data.DataLoader(Rows(), batch_size=B, shuffle=True, drop_last=True,
                                         num_workers=8, pin_memory=not cpu,
                                         persistent_workers=True, prefetch_factor=4)
        while True:
            for t in dl:
                yield t.to(dev, non_blocking=True)
    return gen


def ringfeed_loop(shuffle):
    def gen():
        # One loader, one pass per epoch: it streams across the boundary.
        with ringfeed.Loader(rfs, B, device=rf_dev, shuffle=shuffle, seed=0,
                             pinned_bytes=1 << 30) as ld:
            while True:
                for b in ld:
                    yield torch.from_dlpack(b[next(iter(b.keys()))])
    return gen


rows = []
for name, shuffle, gen in (
        ("ringfeed-full", "full", ringfeed_loop("full")),
        ("numpy-memmap", "full", numpy_loop(True, False)),
        ("numpy-memmap-pin", "full", numpy_loop(True, True)),
        ("ringfeed-window", "window", ringfeed_loop("window")),
        ("torch-dataloader", "full", dataloader_loop()),
        ("ringfeed-none", "none", ringfeed_loop("none")),
        ("numpy-memmap-seq", "none", numpy_loop(False, False))):
    try:
        rows.append(timed(name, shuffle, gen))
    except Exception as e:  # a peer that fails is reported, not fatal
        rows.append({"name": name, "shuffle": shuffle, "error": repr(e)[:300]})
    print(json.dumps(rows[-1]), file=sys.stderr)
print(json.dumps({"device": "cpu" if cpu else torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "batch": B, "row_bytes": int(row_bytes), "samples": int(n), "rows": rows}))
