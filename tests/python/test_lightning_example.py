# SPDX-License-Identifier: MIT
# Description: examples/lightning_datamodule.py.  Its map-style Dataset
# (ds.take over a BatchSampler) gives torch's DataLoader every sample once
# per epoch, in batches of the right shape, shuffled and not; with PyTorch
# Lightning installed, the LightningDataModule trains a classifier in both
# modes (stream: a ringfeed.Loader; map); without it, that part skips.
import importlib.util
import os
import subprocess
import sys

from rftest import SKIP, check, need_torch, tmpdir

torch = need_torch()
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                    "lightning_datamodule.py")
spec = importlib.util.spec_from_file_location("lightning_datamodule", path)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)

d = tmpdir()
p = os.path.join(d, "points.rfs")
n = ex.make_dataset(p, n=1000)
for shuffle in (False, True):
    seen = []
    for b in ex.map_loader(p, 64, shuffle=shuffle):
        check(b["x"].shape == (64, 16) and b["x"].dtype == torch.float32, "x batch")
        check(b["y"].shape == (64,) and b["y"].dtype == torch.int64, "y batch")
        seen.append(b["x"])
    x = torch.cat(seen)
    check(len(x) == n // 64 * 64, "every full batch")
    check(len(torch.unique(x, dim=0)) == len(x), "no sample twice")
    if not shuffle:
        with ex.ringfeed.open(p) as ds:
            check(torch.equal(x, torch.from_numpy(ds[0:len(x)]["x"])), "in order")

if ex.L is None:
    print("SKIP: PyTorch Lightning is not installed (pip install lightning)")
    sys.exit(SKIP)
for mode in ("stream", "map"):
    r = subprocess.run([sys.executable, path, "--mode", mode, "--out", d, "--epochs", "2"],
                       capture_output=True, text=True, timeout=300)
    print(r.stdout[-2000:], r.stderr[-2000:])
    check(r.returncode == 0, "%s: exit status %d" % (mode, r.returncode))
print("ok")
