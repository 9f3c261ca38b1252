# SPDX-License-Identifier: MIT
"""ringfeed in a PyTorch Lightning LightningDataModule, two ways.

- stream (the fast path): train_dataloader() returns a ringfeed.Loader with
  tensors="torch"; Lightning iterates it like any DataLoader.  Shuffling,
  batching and the copy to the GPU happen in ringfeed's threads.
- map: a map-style torch Dataset over ringfeed.open, read a batch at a time
  with ds.take(indices) (a BatchSampler hands each __getitem__ the indices
  of one batch), for code that wants torch's samplers or DataLoader workers.

    pip install . lightning
    python3 examples/lightning_datamodule.py [--mode stream|map] [--out DIR]

The dataset is written to --out (default: a temporary directory), never
into the source tree.  Without Lightning installed, the classes below still
import (RingfeedMapDataset works with plain torch); main() says what is
missing.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch

import ringfeed

try:
    import lightning as L
except ImportError:  # the older package name
    try:
        import pytorch_lightning as L
    except ImportError:
        L = None


def make_dataset(path, n=4096, seed=0):
    """Two well-separated classes of 16-dim points: a model learns them in an epoch."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.int64)
    x = (rng.standard_normal((n, 16)) + (y[:, None] * 2 - 1) * 1.5).astype(np.float32)
    ringfeed.pack(path, {"x": x, "y": y}, chunk_bytes=16384)
    return n


class RingfeedMapDataset(torch.utils.data.Dataset):
    """Map-style: __getitem__ takes one batch's indices (from a BatchSampler).

    The dataset is opened in the process that reads it (each DataLoader
    worker opens its own, with its own chunk cache)."""

    def __init__(self, path, cache_bytes=64 << 20):
        self.path = path
        self.cache_bytes = cache_bytes
        self.ds = None
        with ringfeed.open(path) as ds:
            self.n = len(ds)

    def __len__(self):
        return self.n

    def __getitem__(self, indices):
        if self.ds is None:
            self.ds = ringfeed.open(self.path, cache_bytes=self.cache_bytes)
        b = self.ds.take(indices)
        return {k: torch.from_numpy(v) for k, v in b.items()}


def map_loader(path, batch_size, shuffle=True, num_workers=0):
    ds = RingfeedMapDataset(path)
    sampler = (torch.utils.data.RandomSampler(ds) if shuffle
               else torch.utils.data.SequentialSampler(ds))
    batches = torch.utils.data.BatchSampler(sampler, batch_size, drop_last=True)
    # batch_size=None: the sampler yields whole batches, __getitem__ reads each.
    return torch.utils.data.DataLoader(ds, batch_size=None, sampler=batches,
                                       num_workers=num_workers)


if L is not None:
    class RingfeedDataModule(L.LightningDataModule):
        def __init__(self, path, batch_size=128, mode="stream"):
            super().__init__()
            self.path, self.batch_size, self.mode = path, batch_size, mode

        def prepare_data(self):
            if not os.path.exists(self.path):
                make_dataset(self.path)

        def train_dataloader(self):
            if self.mode == "map":
                return map_loader(self.path, self.batch_size)
            # device="cpu": Lightning moves the batch to the model's device;
            # leave device at "auto" to have ringfeed copy it to the GPU.
            return ringfeed.Loader(self.path, self.batch_size, shuffle=True,
                                   tensors="torch", device="cpu")

    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                           torch.nn.Linear(32, 2))
            self.correct = 0
            self.seen = 0

        def training_step(self, batch, i):
            logits = self.net(batch["x"])
            loss = torch.nn.functional.cross_entropy(logits, batch["y"])
            self.correct += int((logits.argmax(1) == batch["y"]).sum())
            self.seen += len(batch["y"])
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["stream", "map"], default="stream")
    ap.add_argument("--out", help="directory for the dataset (default: a temporary one)")
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args(argv)
    if L is None:
        print("this example needs PyTorch Lightning: pip install lightning", file=sys.stderr)
        return 2
    out = args.out or tempfile.mkdtemp(prefix="ringfeed-lightning-")
    dm = RingfeedDataModule(os.path.join(out, "points.rfs"), mode=args.mode)
    model = Classifier()
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(model, datamodule=dm)
    acc = model.correct / max(model.seen, 1)
    print("trained %d epochs (%s): accuracy %.3f" % (args.epochs, args.mode, acc))
    return 0 if acc > 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
