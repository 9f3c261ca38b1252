# SPDX-License-Identifier: MIT
"""Images/s of ringfeed's in-pipeline decoding against torchvision's
ImageFolder + DataLoader, on the same JPEG files, the same output
(uint8 224 x 224 x 3, RandomResizedCrop + horizontal flip, or Resize +
CenterCrop for --transform eval) and the same number of threads, in one
run.  docs/bench.md ("Images") gives the figures and how to read them.

  /usr/bin/python3 tools/bench-images.py [--n 1200] [--threads 2] [--pairs 3]
      [--ringfeed build/tools/ringfeed] [--dir /tmp/rf-bench-images]
      [--dali VENV/bin/python]

PYTHONPATH must reach the module (build/src/python).  The folder is made
once (ImageNet-like sizes, quality 90, from Debian's Fashion-MNIST) and
packed once.  Each pair runs ringfeed (decode_threads = T) and torchvision
with 0 and T workers, in alternating order; the ratios are per pair, their
median is the figure.

--dali adds NVIDIA DALI's CPU pipeline (device_id=None, T threads) as a
column, run by the given interpreter (DALI's wheel, nvidia-dali-cuda120 from
PyPI, wants its own numpy: a venv apart): fn.readers.file,
fn.decoders.image_random_crop (its fused region decode) + fn.resize +
fn.flip for train, fn.decoders.image + resize_shorter + fn.crop for eval.
Its first batch (pipeline build) is not timed.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "decode"))


def make_folder(folder, n):
    from imgdata import mnist, photo
    imgs, labels = mnist(n)
    sizes = [(500, 375), (375, 500), (500, 333), (640, 480), (500, 500), (800, 600)]
    for i in range(n):
        d = os.path.join(folder, "c%d" % labels[i % len(labels)])
        os.makedirs(d, exist_ok=True)
        w, h = sizes[i % len(sizes)]
        photo(imgs, i, w, h).save(os.path.join(d, "%05d.jpg" % i), quality=90, subsampling=2)


def cpu_now():
    """CPU seconds of this process (all its threads) and of its children
    that have been waited for (DataLoader workers, once the pass ends)."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run_ringfeed(ds, size, threads, batch, transform, rank=0, world=1):
    import numpy as np
    import ringfeed
    spec = {"size": size, "transform": transform}
    ld = ringfeed.Loader(ds, batch, images={"image": spec}, fields=["image", "label"],
                         shuffle="chunks", seed=1, device="cpu", decode_threads=threads,
                         drop_last=False, rank=rank, world=world)
    n = 0
    c0, t0 = cpu_now(), time.perf_counter()
    for b in ld:
        x = np.asarray(b["image"])
        n += x.shape[0]
    dt = time.perf_counter() - t0
    c = cpu_now() - c0
    # The loader streams on into the next epoch: the images it decoded
    # ahead are counted in c (a one-epoch run pays for them).
    DECODED.append((ld.stats().get("images_decoded", n), n, c))
    ld.close()
    return n / dt, c / n


DECODED = []


def run_torchvision(folder, size, workers, batch, transform):
    import torch
    from torchvision import datasets, transforms
    if transform == "train":
        tf = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    else:
        tf = [transforms.Resize(size * 8 // 7), transforms.CenterCrop(size)]
    ds = datasets.ImageFolder(folder, transform=transforms.Compose(tf +
                                                                   [transforms.PILToTensor()]))
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
    n = 0
    c0, t0 = cpu_now(), time.perf_counter()
    for x, _ in dl:
        n += x.shape[0]
    dt = time.perf_counter() - t0
    del dl  # its workers are joined: their CPU time is counted
    return n / dt, (cpu_now() - c0) / n


DALI_CHILD = r"""
import json, resource, sys, time
from nvidia.dali import pipeline_def, fn, types
folder, n, size, threads, batch, transform = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1)
def pipe():
    jpegs, labels = fn.readers.file(file_root=folder, random_shuffle=True, name="r")
    if transform == "train":
        img = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_x=size, resize_y=size)
        img = fn.flip(img, horizontal=fn.random.coin_flip())
    else:
        img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_shorter=size * 8 // 7)
        img = fn.crop(img, crop=(size, size))
    return img, labels

def cpu():
    a = resource.getrusage(resource.RUSAGE_SELF)
    return a.ru_utime + a.ru_stime

p = pipe()
p.build()
p.run()
steps = (n + batch - 1) // batch
c0, t0 = cpu(), time.perf_counter()
got = 0
for _ in range(steps):
    out = p.run()
    got += len(out[0])
dt = time.perf_counter() - t0
print(json.dumps({"rate": got / dt, "cpu": (cpu() - c0) / got}))
"""


def run_dali(python, folder, n, size, threads, batch, transform):
    import json
    r = subprocess.run([python, "-c", DALI_CHILD, folder, str(n), str(size), str(threads),
                        str(batch), transform], check=True, capture_output=True, text=True)
    v = json.loads(r.stdout.strip().splitlines()[-1])
    return v["rate"], v["cpu"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--transform", default="train", choices=["train", "eval"])
    ap.add_argument("--ringfeed", default=os.path.join(HERE, "..", "build", "tools", "ringfeed"))
    ap.add_argument("--dir", default="/tmp/rf-bench-images")
    ap.add_argument("--chunk-bytes", default="1M", help="pack --chunk-bytes (default 1M)")
    ap.add_argument("--dali", help="a Python with nvidia.dali: adds DALI's CPU pipeline")
    ap.add_argument("--world", type=int, default=1,
                    help="also run ringfeed as rank 0 of WORLD (alone), for its CPU per image")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    folder = os.path.join(a.dir, "folder-%d" % a.n)
    ds = os.path.join(a.dir, "images-%d-%s.rfs" % (a.n, a.chunk_bytes))
    if not os.path.isdir(folder):
        make_folder(folder, a.n)
    if not os.path.exists(ds):
        subprocess.run([a.ringfeed, "pack", "--images", folder, "-o", ds, "--chunk-bytes",
                        a.chunk_bytes, "--shuffle", "0", "-q"], check=True)
    mb = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(folder) for f in fs)
    print("%d JPEGs (%.1f MB) in %s; %s %dx%d uint8, batch %d, %d threads; load %s" % (
        a.n, mb / 1e6, folder, a.transform, a.size, a.size, a.batch, a.threads,
        " ".join("%.2f" % v for v in os.getloadavg())))
    rows = {"ringfeed": [], "tv0": [], "tvT": [], "dali": [], "rank": []}
    cpu = {"ringfeed": [], "tv0": [], "tvT": [], "dali": [], "rank": []}
    for p in range(a.pairs):
        order = ["ringfeed", "tv0", "tvT"] + (["dali"] if a.dali else []) + \
            (["rank"] if a.world > 1 else [])
        if p % 2:
            order.reverse()
        for k in order:
            if k == "ringfeed":
                r, c = run_ringfeed(ds, a.size, a.threads, a.batch, a.transform)
            elif k == "rank":
                r, c = run_ringfeed(ds, a.size, a.threads, a.batch, a.transform, 0, a.world)
            elif k == "dali":
                r, c = run_dali(a.dali, folder, a.n, a.size, a.threads, a.batch, a.transform)
            else:
                w = 0 if k == "tv0" else a.threads
                r, c = run_torchvision(folder, a.size, w, a.batch, a.transform)
            rows[k].append(r)
            cpu[k].append(c)
        print("pair %d: images/s (CPU ms per image): ringfeed %.0f (%.2f), torchvision 0 "
              "workers %.0f (%.2f), %d workers %.0f (%.2f)" % (
                  p, rows["ringfeed"][-1], 1e3 * cpu["ringfeed"][-1], rows["tv0"][-1],
                  1e3 * cpu["tv0"][-1], a.threads, rows["tvT"][-1], 1e3 * cpu["tvT"][-1]) +
              (", DALI %.0f (%.2f)" % (rows["dali"][-1], 1e3 * cpu["dali"][-1]) if a.dali else "") +
              (", ringfeed rank 0 of %d %.0f (%.2f)" % (a.world, rows["rank"][-1],
                                                        1e3 * cpu["rank"][-1])
               if a.world > 1 else ""))
    best = [max(x, y) for x, y in zip(rows["tv0"], rows["tvT"])]
    ratios = [r / b for r, b in zip(rows["ringfeed"], best)]
    print("median images/s: ringfeed %.0f, torchvision 0 workers %.0f, %d workers %.0f" % (
        statistics.median(rows["ringfeed"]), statistics.median(rows["tv0"]), a.threads,
        statistics.median(rows["tvT"])))
    print("ringfeed / best torchvision, per pair: %s; median %.2f" % (
        " ".join("%.2f" % r for r in ratios), statistics.median(ratios)))
    cr = [min(x, y) / r for x, y, r in zip(cpu["tv0"], cpu["tvT"], cpu["ringfeed"])]
    print("CPU per image, median ms: ringfeed %.2f, torchvision 0 workers %.2f, %d workers "
          "%.2f; torchvision's lower / ringfeed's, per pair: %s; median %.2f" % (
              1e3 * statistics.median(cpu["ringfeed"]), 1e3 * statistics.median(cpu["tv0"]),
              a.threads, 1e3 * statistics.median(cpu["tvT"]), " ".join("%.2f" % r for r in cr),
              statistics.median(cr)))
    if a.dali:
        dr = [r / d for r, d in zip(rows["ringfeed"], rows["dali"])]
        dc = [d / r for d, r in zip(cpu["dali"], cpu["ringfeed"])]
        print("DALI CPU pipeline, median images/s %.0f, CPU ms per image %.2f; ringfeed / DALI "
              "images/s, per pair: %s; median %.2f; DALI's CPU / ringfeed's: median %.2f" % (
                  statistics.median(rows["dali"]), 1e3 * statistics.median(cpu["dali"]),
                  " ".join("%.2f" % r for r in dr), statistics.median(dr),
                  statistics.median(dc)))
    if a.world > 1:
        print("ringfeed rank 0 of %d alone: median images/s %.0f, CPU ms per image it "
              "delivers %.2f (one rank: %.2f)" % (
                  a.world, statistics.median(rows["rank"]), 1e3 * statistics.median(cpu["rank"]),
                  1e3 * statistics.median(cpu["ringfeed"])))
    if DECODED:
        print("ringfeed images decoded per epoch (the next epoch's first chunks read ahead "
              "included): %s; CPU ms per decoded image, median %.2f" % (
                  " ".join("%d/%d" % (d, n) for d, n, _ in DECODED),
                  1e3 * statistics.median(c / d for d, _, c in DECODED)))
    print("load after: %s" % " ".join("%.2f" % v for v in os.getloadavg()))


if __name__ == "__main__":
    main()
