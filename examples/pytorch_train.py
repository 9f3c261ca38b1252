#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Train a small classifier on a packed dataset with ringfeed, and the same
model with PyTorch's DataLoader beside it for comparison.

    pip install . && python3 examples/pytorch_train.py [--loader both]
    PYTHONPATH=build/src/python python3 examples/pytorch_train.py   # a build tree

Each epoch is drawn in a new order: ringfeed's window shuffle (the mode for
training: every batch draws from a window of decoded chunks), the
DataLoader's shuffle=True.

The data is MNIST-shaped (28x28 u8 images, int64 labels), generated once into
DIR/train.rfs (ringfeed; DIR is --data, by default ringfeed-pytorch-train in
the temporary directory, never the source tree) and DIR/x.npy, DIR/y.npy (the DataLoader reads them
as memory maps).  With a GPU the ringfeed batches arrive in GPU memory (the
copy of the next batch overlaps the step on this one); without one, in host
memory.  Either way torch.from_dlpack makes a tensor of the batch with no copy.
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch

import ringfeed


def make_data(dirname, n):
    """Ten noisy prototypes: learnable in one or two epochs."""
    path = os.path.join(dirname, "train.rfs")
    if os.path.exists(path):
        with ringfeed.open(path) as ds:
            if len(ds) == n:
                return path
    os.makedirs(dirname, exist_ok=True)
    rng = np.random.default_rng(0)
    protos = rng.integers(0, 256, size=(10, 28, 28)).astype(np.int16)
    labels = rng.integers(0, 10, size=n).astype(np.int64)
    noise = rng.integers(-60, 61, size=(n, 28, 28), dtype=np.int16) * 2
    images = np.clip(protos[labels] + noise, 0, 255).astype(np.uint8)
    ringfeed.pack(path, {"image": images, "label": labels})
    np.save(os.path.join(dirname, "x.npy"), images)
    np.save(os.path.join(dirname, "y.npy"), labels)
    return path


def make_model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    ).to(device)


def step(model, opt, images, labels):
    x = images.float().div_(255.0)
    loss = torch.nn.functional.cross_entropy(model(x), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def train_ringfeed(path, args):
    loader = ringfeed.Loader(path, args.batch, shuffle=args.shuffle, seed=0,
                             device=args.device, drop_last=True)
    device = torch.device(loader.device)
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    t0 = time.perf_counter()
    samples = 0
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)  # this epoch's order
        total = torch.zeros((), device=device)
        for batch in loader:
            # Tensors over the loader's buffer: no copy.  On CUDA the
            # current stream waits for the batch's copy (no host sync), and
            # the buffer is refilled once the work queued on it is done.
            images = torch.from_dlpack(batch["image"])
            labels = torch.from_dlpack(batch["label"])
            total += step(model, opt, images, labels).detach()
            samples += images.shape[0]
        print("ringfeed   epoch %d: mean loss %.4f" % (epoch, total.item() / len(loader)))
    if device.type == "cuda":
        torch.cuda.synchronize()
    rate = samples / (time.perf_counter() - t0)
    stats = loader.stats()
    loader.close()
    print("ringfeed   %.0f samples/s on %s, shuffle %s (the step waited for data %.0f%% of "
          "the time)" % (rate, device, args.shuffle, 100 * stats["stall_share"]))
    return model, device


class MemmapDataset(torch.utils.data.Dataset):
    def __init__(self, dirname):
        self.x = np.load(os.path.join(dirname, "x.npy"), mmap_mode="r")
        self.y = np.load(os.path.join(dirname, "y.npy"), mmap_mode="r")

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self.x[i])), int(self.y[i])


def train_dataloader(dirname, args):
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    loader = torch.utils.data.DataLoader(MemmapDataset(dirname), batch_size=args.batch,
                                         shuffle=args.shuffle != "none",
                                         num_workers=args.workers, drop_last=True,
                                         pin_memory=device.type == "cuda")
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    t0 = time.perf_counter()
    samples = 0
    for epoch in range(args.epochs):
        total = torch.zeros((), device=device)
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            total += step(model, opt, images, labels).detach()
            samples += images.shape[0]
        print("DataLoader epoch %d: mean loss %.4f" % (epoch, total.item() / len(loader)))
    if device.type == "cuda":
        torch.cuda.synchronize()
    print("DataLoader %.0f samples/s on %s (num_workers=%d)" % (
        samples / (time.perf_counter() - t0), device, args.workers))
    return model, device


def accuracy(model, device, path):
    with ringfeed.open(path) as ds:
        n = min(len(ds), 2000)
        x = torch.from_numpy(np.stack([ds[i]["image"] for i in range(n)])).to(device)
        y = torch.from_numpy(np.stack([ds[i]["label"] for i in range(n)])).to(device)
    with torch.no_grad():
        pred = model(x.float() / 255.0).argmax(dim=1)
    return (pred == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "ringfeed-pytorch-train"),
                    help="dataset directory (default: %(default)s)")
    ap.add_argument("--samples", type=int, default=60000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--shuffle", choices=["window", "chunks", "none"], default="window",
                    help="ringfeed's order of each epoch (window: the mode for training)")
    ap.add_argument("--loader", choices=["ringfeed", "dataloader", "both"], default="both")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    ap.add_argument("--min-accuracy", type=float, default=0.0,
                    help="exit 1 when the ringfeed-trained model scores below this")
    args = ap.parse_args()

    path = make_data(args.data, args.samples)
    if args.loader in ("ringfeed", "both"):
        model, device = train_ringfeed(path, args)
        acc = accuracy(model, device, path)
        print("ringfeed   accuracy %.3f" % acc)
        if acc < args.min_accuracy:
            return 1
    if args.loader in ("dataloader", "both"):
        model, device = train_dataloader(args.data, args)
        print("DataLoader accuracy %.3f" % accuracy(model, device, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
