# SPDX-License-Identifier: MIT
# Description: on_error="skip" delivers a corrupt chunk's samples as zeros in
# their places: two ranks keep the batch counts and sizes of an intact copy,
# every other sample is the intact copy's, and stats() counts the skip and
# the substitutes delivered;
# on_error="raise" (the default) stops at the chunk; a bad value is a
# ValueError; shuffle="full" with skip is refused.
import os
import shutil

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
good = os.path.join(d, "good.rfs")
bad = os.path.join(d, "bad.rfs")
N = 4000
img = (np.arange(N * 64, dtype=np.uint32) % 251 + 1).astype(np.uint8).reshape(N, 64)
idx = np.arange(1, N + 1, dtype=np.int64)
ringfeed.pack(good, {"image": img, "index": idx}, chunk_bytes=32 << 10)
shutil.copyfile(good, bad)
with ringfeed.open(good) as ds:
    ci = ds.chunk_info(3)
with open(bad, "r+b") as f:
    f.seek(ci["offset"] + 100)
    b = f.read(1)
    f.seek(ci["offset"] + 100)
    f.write(bytes([b[0] ^ 0x40]))
lo, hi = ci["first_sample"] + 1, ci["first_sample"] + ci["samples"]


def stream(path, rank, **kw):
    """One pass; its stats(); the index field of the next pass's first batch
    (the pass ended on taking it from the library)."""
    out = []
    with ringfeed.Loader(path, 50, device="cpu", shuffle="window", seed=3, rank=rank, world=2,
                         drop_last=False, **kw) as ld:
        for b in ld:
            out.append((np.asarray(b["index"]).copy(), np.asarray(b["image"]).copy()))
        st = ld.stats()
        after = np.asarray(next(iter(ld))["index"]).copy()
    return out, st, after


zeros = 0
for rank in range(2):
    ref, _, _ = stream(good, rank)
    got, st, after = stream(bad, rank, on_error="skip")
    check(len(got) == len(ref), f"rank {rank}: {len(got)} batches, intact {len(ref)}")
    for (ri, rim), (gi, gim) in zip(ref, got):
        check(len(ri) == len(gi), "batch sizes differ")
        for k in range(len(ri)):
            if lo <= ri[k] <= hi:
                check(gi[k] == 0 and not gim[k].any(), f"sample {ri[k]} not a zero substitute")
                zeros += 1
            else:
                check(gi[k] == ri[k] and (gim[k] == rim[k]).all(), f"sample {ri[k]} changed")
    # Counted as the library hands batches out: this pass's, and the next
    # pass's first batch, which ended this one (its substitutes are zero).
    want = sum(int(((lo <= r[0]) & (r[0] <= hi)).sum()) for r in ref)
    nxt = int((after == 0).sum())
    check(st["samples_substituted"] == want + nxt and
          st["chunks_skipped"] == (1 if want else 0) + (1 if nxt else 0),
          f"rank {rank}: {st['chunks_skipped']} skips, {st['samples_substituted']} "
          f"substitutes, {want} + {nxt} expected")
check(zeros == ci["samples"], f"{zeros} substitutes for a chunk of {ci['samples']}")

try:
    stream(bad, 0)
    check(False, "raise delivered a corrupt chunk")
except ringfeed.Error as e:
    check(e.code == ringfeed.ECHECKSUM, f"raise: {e!r}")
try:
    stream(bad, 0, on_error="ignore")
    check(False, "on_error='ignore' accepted")
except ValueError:
    pass
try:
    ringfeed.Loader(bad, 50, device="cpu", shuffle="full", on_error="skip")
    check(False, "full + skip accepted")
except ringfeed.Error as e:
    check(e.code == ringfeed.EUSAGE, f"full + skip: {e!r}")
print("ok")
