# SPDX-License-Identifier: MIT
# Description: the Python module's CUDA path on a GPU (the gpu suite):
# torch.from_dlpack of every field of every device batch, on torch's current
# stream, equals the packed arrays (fixed, label and variable fields, offsets
# included); a batch dropped while torch still reads it on a side stream is
# not overwritten; the example training loop on cuda with its loss falling.
# Skips (77) without torch or without torch.cuda.is_available(): torch cannot
# drive the cudart emulator, so this test proves nothing without a GPU.
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
from rftest import check, small_dataset, tmpdir  # noqa: E402

try:
    import numpy as np
    import torch
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: torch.cuda.is_available() is False (no GPU, or torch built without CUDA)")
    sys.exit(77)

import ringfeed  # noqa: E402

print("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda,
                                 torch.cuda.get_device_name(0)))
d = tmpdir()
p = os.path.join(d, "small.rfs")
n = 2000
x, y, v = small_dataset(p, n=n)
B = 64
for pinning in ("ring", "transient"):
    seen = 0
    with ringfeed.Loader(p, B, device="cuda", pinning=pinning, pinned_bytes=1 << 20,
                         drop_last=False) as ld:
        check(ld.device.startswith("cuda"), "device %s" % ld.device)
        for b in ld:
            tx = torch.from_dlpack(b["x"])
            ty = torch.from_dlpack(b["y"])
            off, vals = b["v"]
            toff = torch.from_dlpack(off)
            tv = torch.from_dlpack(vals)
            check(tx.is_cuda and ty.is_cuda and tv.is_cuda, "tensors on the GPU")
            k = tx.shape[0]
            check(np.array_equal(tx.cpu().numpy(), x[seen:seen + k]), "x at %d" % seen)
            check(np.array_equal(ty.cpu().numpy(), y[seen:seen + k]), "y at %d" % seen)
            o = toff.cpu().numpy()
            hv = tv.cpu().numpy()
            for i in range(k):
                want = v[seen + i]
                check(np.array_equal(hv[o[i]:o[i + 1]], want), "v of sample %d" % (seen + i))
            seen += k
    check(seen == n, "%s: %d samples of %d" % (pinning, seen, n))

# A side stream still reading a batch when the batch is dropped: the loader
# must not refill that buffer before the reads are done.
side = torch.cuda.Stream()
bad = 0
with ringfeed.Loader(p, B, device="cuda", pinned_bytes=1 << 20, depth=2,
                     drop_last=False) as ld:
    seen = 0
    sums = []
    for b in ld:
        with torch.cuda.stream(side):
            t = torch.from_dlpack(b["y"])
            torch.cuda._sleep(2_000_000)  # about a millisecond: the read comes late
            sums.append((seen, t.sum()))
        seen += t.shape[0]
        del t, b
    torch.cuda.synchronize()
    for first, s in sums:
        k = min(B, n - first)
        if int(s.item()) != int(y[first:first + k].sum()):
            bad += 1
check(bad == 0, "%d batches overwritten while a side stream read them" % bad)

example = os.environ.get("RF_GPU_EXAMPLE") or os.path.join(here, "..", "..", "examples",
                                                           "pytorch_train.py")
r = subprocess.run([sys.executable, example, "--data", os.path.join(d, "ex"), "--samples",
                    "20000", "--epochs", "3", "--loader", "ringfeed", "--device", "cuda",
                    "--min-accuracy", "0.5"], capture_output=True, text=True, timeout=240)
print(r.stdout, r.stderr)
check(r.returncode == 0, "example: exit status %d" % r.returncode)
losses = [float(m) for m in re.findall(r"mean loss ([0-9.]+)", r.stdout)]
check(len(losses) == 3 and losses[-1] < losses[0], "loss falling: %s" % losses)
check("on cuda" in r.stdout, "the example trained on cuda")
print("ok")
