#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark of the Python module: ringfeed.Loader iterated from Python, each
field converted with torch.from_dlpack, against

  - the C loader on the same dataset and settings (`ringfeed bench --json`),
  - PyTorch's DataLoader over a NumPy memmap of the same samples, with
    num_workers 0 and 2 (per-sample __getitem__, default collate: the usual
    way a dataset of arrays is fed).

Samples are 784 bytes (u8, MNIST-shaped) plus an int64 label, in batches of
256.  Prints samples/s of each and the ratios (targets: ringfeed from Python
>= 0.9x the C loader, >= 5x DataLoader).  Not a test: run it by hand.

    PYTHONPATH=build/src/python /usr/bin/python3 tools/bench-python.py \\
        --ringfeed build/tools/ringfeed [--samples 200000] [--seconds 5] [--direct|--map]
        [--json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def c_loader(args, path):
    cmd = [args.ringfeed, "bench", "--json", "-q", "--device", args.device, "--batch",
           str(args.batch), "--seconds", str(args.seconds), "--pinned", str(args.pinned),
           "--depth", str(args.depth)]
    if args.buffered:
        cmd.append("--buffered")
    if args.map:
        cmd.append("--map")
    cmd.append(path)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["loader"]["samples_per_s"]


def python_loader(args, path, torch, ringfeed):
    ld = ringfeed.Loader(path, args.batch, device=args.device, pinned_bytes=args.pinned, depth=args.depth,
                         drop_last=False, direct=not args.buffered, map=args.map)
    samples = 0
    t0 = time.perf_counter()
    while True:
        for batch in ld:
            x = torch.from_dlpack(batch["x"])
            y = torch.from_dlpack(batch["y"])
            samples += x.shape[0]
            del x, y
        if time.perf_counter() - t0 >= args.seconds:
            break
    dt = time.perf_counter() - t0
    stall = ld.stats()["stall_share"]
    ld.close()
    return samples / dt, stall


def dataloader(args, x_path, y_path, workers, torch):
    class MemmapDataset(torch.utils.data.Dataset):
        def __init__(self):
            self.x = np.load(x_path, mmap_mode="r")
            self.y = np.load(y_path, mmap_mode="r")

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return torch.from_numpy(np.array(self.x[i])), int(self.y[i])

    dl = torch.utils.data.DataLoader(MemmapDataset(), batch_size=args.batch,
                                     num_workers=workers, shuffle=False)
    samples = 0
    t0 = time.perf_counter()
    done = False
    while not done:
        for x, y in dl:
            samples += x.shape[0]
            if time.perf_counter() - t0 >= args.seconds:
                done = True
                break
    return samples / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringfeed", default=shutil.which("ringfeed") or "build/tools/ringfeed",
                    help="the ringfeed command (for the C loader's rate)")
    ap.add_argument("--samples", type=int, default=200000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--depth", type=int, default=2,
                    help="depth of both loaders: batches the consumer may hold (the Python "
                         "loader keeps one device buffer more, for a for loop's previous batch)")
    ap.add_argument("--seconds", type=float, default=5.0, help="minimum time per measurement")
    ap.add_argument("--pinned", type=int, default=64 << 20)
    ap.add_argument("--device", default="host", help="host (default) or cuda")
    ap.add_argument("--direct", action="store_true",
                    help="ringfeed reads with O_DIRECT (default: buffered, through the page "
                         "cache, as the memmap does and as the library chooses by itself "
                         "for a dataset that fits in a quarter of the memory)")
    ap.add_argument("--buffered", action="store_true", help=argparse.SUPPRESS)  # the default
    ap.add_argument("--map", action="store_true",
                    help="both loaders read through memory maps (rf_config.map)")
    ap.add_argument("--dir", help="where to write the data (default: a temporary directory)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="alternate the loaders this many times and keep each one's best "
                         "(other load on the machine only ever slows a run down)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.direct and args.map:
        ap.error("--map reads through the page cache: it excludes --direct")
    args.buffered = not args.direct

    import torch
    import ringfeed

    tmp = args.dir or tempfile.mkdtemp(prefix="rf-bench-py-")
    try:
        rng = np.random.default_rng(0)
        x = rng.integers(0, 256, size=(args.samples, 784), dtype=np.uint8)
        y = rng.integers(0, 10, size=args.samples, dtype=np.int64)
        path = os.path.join(tmp, "bench.rfs")
        x_path, y_path = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        ringfeed.pack(path, {"x": x, "y": y})
        np.save(x_path, x)
        np.save(y_path, y)
        del x, y

        res = {"samples": args.samples, "batch": args.batch, "device": args.device,
               "direct": not args.buffered, "map": args.map, "depth": args.depth,
               "loadavg_before": os.getloadavg()[0],
               "ringfeed_version": ringfeed.__version__, "torch_version": torch.__version__}
        c_device = args.device
        py_device = "cuda" if args.device == "cuda" else "cpu"
        best = {"c_loader": 0, "python_loader": 0, "dataloader_w0": 0, "dataloader_w2": 0}
        for k in range(args.repeat):
            # Alternate which loader reads first: on a disk with burst
            # credits (a cloud volume) the first one after the DataLoader's
            # page-cache runs would otherwise be favoured every time.
            for which in (("c", "py") if k % 2 == 0 else ("py", "c")):
                if which == "c":
                    args.device = c_device
                    best["c_loader"] = max(best["c_loader"], c_loader(args, path))
                    continue
                args.device = py_device
                rate, stall = python_loader(args, path, torch, ringfeed)
                if rate > best["python_loader"]:
                    best["python_loader"], res["python_stall_share"] = rate, stall
            for w in (0, 2):
                key = "dataloader_w%d" % w
                best[key] = max(best[key], dataloader(args, x_path, y_path, w, torch))
        res.update(best)
        res["loadavg_after"] = os.getloadavg()[0]
        res["ratio_vs_c"] = res["python_loader"] / res["c_loader"]
        res["ratio_vs_dataloader_w0"] = res["python_loader"] / res["dataloader_w0"]
        res["ratio_vs_dataloader_w2"] = res["python_loader"] / res["dataloader_w2"]
    finally:
        if not args.dir:
            shutil.rmtree(tmp, True)

    if args.json:
        print(json.dumps(res))
        return
    print("ringfeed %s, torch %s, %d samples of 784 B, batch %d, depth %d, device %s, %s reads" % (
        res["ringfeed_version"], res["torch_version"], args.samples, args.batch, args.depth,
        args.device, "O_DIRECT" if res["direct"] else "mapped" if args.map else "buffered"))
    print("load average (1 min) %.2f before, %.2f after" % (res["loadavg_before"],
                                                          res["loadavg_after"]))
    print("%-40s %12.0f samples/s" % ("C loader (ringfeed bench)", res["c_loader"]))
    print("%-40s %12.0f samples/s  (stall share %.2f)" % (
        "ringfeed.Loader + torch.from_dlpack", res["python_loader"],
        res["python_stall_share"]))
    print("%-40s %12.0f samples/s" % ("DataLoader, memmap, num_workers=0", res["dataloader_w0"]))
    print("%-40s %12.0f samples/s" % ("DataLoader, memmap, num_workers=2", res["dataloader_w2"]))
    print("Python / C:            %.2fx (target >= 0.9x)" % res["ratio_vs_c"])
    print("Python / DataLoader:   %.1fx (w0), %.1fx (w2) (target >= 5x)" % (
        res["ratio_vs_dataloader_w0"], res["ratio_vs_dataloader_w2"]))


if __name__ == "__main__":
    sys.exit(main())
