#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stream three datasets as one mixture, 70% / 20% / 10%.

    python3 examples/mixture.py [DIR]

Packs three small datasets into DIR (default: a new temporary directory,
outside the source tree): "big" (20,000 samples), "small" (500, upsampled:
it repeats in a fresh order each of its own epochs) and "rare" (5,000),
each sample a 64-value f32 vector and an int64 id (source x 1e6 + index).
Then it streams them mixed 70/20/10 with chunk shuffling, prints the
proportions of the first 100 batches and the per-source counters, saves
the position in the middle of the epoch and shows that a new loader
resumed from it continues with exactly the batches that followed.
"""
import os
import sys
import tempfile

import numpy as np

import ringfeed

SIZES = {"big": 20000, "small": 500, "rare": 5000}
WEIGHTS = {"big": 0.7, "small": 0.2, "rare": 0.1}
BATCH = 64


def pack_all(d):
    paths = {}
    for s, (name, n) in enumerate(SIZES.items()):
        p = os.path.join(d, name + ".rfs")
        rng = np.random.default_rng(s)
        ringfeed.pack(p, {"x": rng.standard_normal((n, 64), dtype=np.float32),
                          "id": s * 1_000_000 + np.arange(n, dtype=np.int64)},
                      chunk_bytes=64 << 10)
        paths[name] = p
    return paths


def make_loader(paths):
    return ringfeed.Loader(
        [ringfeed.Source(paths[n], weight=WEIGHTS[n], name=n) for n in SIZES],
        batch_size=BATCH, shuffle="chunks", seed=42, device="cpu")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="ringfeed-mixture-")
    os.makedirs(d, exist_ok=True)
    paths = pack_all(d)
    loader = make_loader(paths)
    print(f"{len(loader)} batches of {BATCH} per epoch (rank {loader.rank} of {loader.world})")

    counts = np.zeros(3, np.int64)
    state, after = None, []
    for k, batch in enumerate(loader):
        src = np.asarray(batch["id"]) // 1_000_000
        if k < 100:
            counts += np.bincount(src, minlength=3)
        if k == 100:
            for s in loader.stats()["sources"]:
                print(f"  {s['name']:6s} weight {s['weight']:.1f}: {s['samples']:6d} samples "
                      f"drawn, {s['epochs']} of its epochs done")
        if k == len(loader) // 2:
            state = loader.state_dict()          # mid-epoch: save the position
        elif state is not None:
            after.append(np.asarray(batch["id"]).copy())
    total = counts.sum()
    for name, c in zip(SIZES, counts):
        print(f"first 100 batches: {name:6s} {c:5d} samples = {c / total:.3f}"
              f" (weight {WEIGHTS[name]:.1f})")

    resumed = make_loader(paths)
    resumed.load_state_dict(state)              # e.g. in a new process
    again = [np.asarray(b["id"]).copy() for b in resumed]
    same = len(again) == len(after) and all(np.array_equal(a, b) for a, b in zip(after, again))
    print(f"resumed after batch {len(loader) // 2}: {len(again)} batches, "
          f"{'identical to' if same else 'DIFFERENT from'} the uninterrupted run")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
