#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Train a small CNN on an image folder (DIR/CLASS/FILE, JPEG or PNG) with
the images decoded and augmented inside ringfeed's pipeline: two commands
from the folder to batches on the GPU.

    ringfeed pack -o train.rfs --images DIR --shuffle 0 --chunk-bytes 2M
    PYTHONPATH=build/src/python python3 examples/image_train.py train.rfs

The loader delivers uint8 [B, H, W, 3] random resized crops (flipped at
random: torchvision's RandomResizedCrop + RandomHorizontalFlip, with PIL's
resampling) for training, and centre crops for the evaluation pass; the
crops are a function of the seed, the epoch and the sample, so a run
resumed from loader.state_dict() sees the same pixels.  With a GPU the
batches arrive in GPU memory; the float conversion runs there.

Without a dataset argument, --demo DIR makes a small folder from Debian's
Fashion-MNIST (dataset-fashion-mnist) and packs it with the `ringfeed`
command (--ringfeed PATH, default on PATH).
"""
import argparse
import gzip
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

import ringfeed


def demo_folder(out, n, ringfeed_cmd):
    """n Fashion-MNIST pictures as JPEGs of a few sizes, packed to out.rfs."""
    from PIL import Image
    src = "/usr/share/datasets/fashion-mnist/train-%s-idx%d-ubyte.gz"
    if not os.path.exists(src % ("images", 3)):
        print("%s is missing: install dataset-fashion-mnist, or give a dataset" %
              (src % ("images", 3)))
        sys.exit(77)  # the exit status of a skipped test
    with gzip.open(src % ("images", 3)) as f:
        _, count, rows, cols = struct.unpack(">IIII", f.read(16))
        imgs = np.frombuffer(f.read(n * rows * cols), np.uint8).reshape(n, rows, cols)
    with gzip.open(src % ("labels", 1)) as f:
        f.read(8)
        labels = np.frombuffer(f.read(n), np.uint8)
    folder = os.path.join(out, "folder")
    for i in range(n):
        d = os.path.join(folder, "class%d" % labels[i])
        os.makedirs(d, exist_ok=True)
        size = (96, 96) if i % 2 else (120, 90)
        Image.fromarray(imgs[i]).convert("RGB").resize(size, Image.BICUBIC).save(
            os.path.join(d, "%05d.jpg" % i), quality=90)
    path = os.path.join(out, "train.rfs")
    subprocess.run([ringfeed_cmd, "pack", "-o", path, "--images", folder, "--shuffle", "0",
                    "--chunk-bytes", "256K", "-q"], check=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", help="a dataset packed with ringfeed pack --images")
    ap.add_argument("--demo", metavar="DIR", help="make a demo dataset in DIR first")
    ap.add_argument("--demo-images", type=int, default=2000)
    ap.add_argument("--ringfeed", default="ringfeed", help="the ringfeed command")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="decode threads (0: auto)")
    a = ap.parse_args()
    path = a.data
    if not path:
        path = demo_folder(a.demo or tempfile.mkdtemp(prefix="ringfeed-images-"),
                           a.demo_images, a.ringfeed)
    # pack --images writes the class names beside the dataset
    # (docs/format.md): a line "classes M", then the M names.
    nclasses = 0
    with open(os.path.splitext(path)[0] + ".classes") as f:
        for line in f:
            if line.startswith("classes "):
                nclasses = int(line.split()[1])

    train = ringfeed.Loader(path, a.batch, shuffle="chunks", seed=0, fields=["image", "label"],
                            decode_threads=a.threads, tensors="torch",
                            images={"image": {"size": a.size, "transform": "train"}})
    evaluate = ringfeed.Loader(path, a.batch, fields=["image", "label"], drop_last=False,
                               decode_threads=a.threads, tensors="torch",
                               images={"image": {"size": a.size}})
    dev = torch.device("cuda" if train.device.startswith("cuda") else "cpu")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, nclasses)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(a.epochs):
        train.set_epoch(epoch)
        total, n = 0.0, 0
        for batch in train:
            x = batch["image"].permute(0, 3, 1, 2).float().div_(255)  # NCHW, on the device
            y = batch["label"]
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(y)
            n += len(y)
        right = seen = 0
        with torch.no_grad():
            for batch in evaluate:
                x = batch["image"].permute(0, 3, 1, 2).float().div_(255)
                right += int((model(x).argmax(1) == batch["label"]).sum())
                seen += len(batch["label"])
        print("epoch %d: loss %.3f, accuracy %.3f on %d centre crops (%s)" % (
            epoch, total / max(n, 1), right / max(seen, 1), seen, train.device))
    train.close()
    evaluate.close()


if __name__ == "__main__":
    main()
