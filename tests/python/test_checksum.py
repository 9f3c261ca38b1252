# SPDX-License-Identifier: MIT
# Description: shuffle="full" checks every sample it reads against the
# per-sample checksums ringfeed.pack writes (format 2): a byte flipped in one
# sample's image raises ringfeed.Error ECHECKSUM whose message names the
# shard, the chunk, the sample and the field, and no batch holding that
# sample is delivered; verify=False delivers the bytes as they are on disk.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "mnist.rfs")
N, G = 2000, 1234
img = np.arange(N * 784, dtype=np.uint32).astype(np.uint8).reshape(N, 28, 28)
img[:, 0, 0:8] = np.arange(N, dtype="<u8").view(np.uint8).reshape(N, 8)  # the sample, in front
lab = np.arange(N, dtype=np.int64)
ringfeed.pack(p, {"image": img, "label": lab}, chunk_bytes=64 << 10)

# Sample G's image: fields are 64-aligned sections of the chunk, image first.
with ringfeed.open(p) as ds:
    for k in range(ds.chunks):
        ci = ds.chunk_info(k)
        if ci["first_sample"] <= G < ci["first_sample"] + ci["samples"]:
            chunk = k
            break
in_chunk = G - ci["first_sample"]
at = ci["offset"] + in_chunk * 784 + 500
with open(p, "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x08]))

opts = dict(device="cpu", pinned_bytes=4 << 20, shuffle="full", seed=7, drop_last=False)
ld = ringfeed.Loader(p, 32, **opts)
seen = set()
err = None
try:
    for batch in ld:
        seen.update(int(y) for y in np.asarray(batch["label"]))
        del batch
except ringfeed.Error as e:
    err = e
check(err is not None, "a flipped byte went unnoticed in shuffle full")
check(err.code == ringfeed.ECHECKSUM, "code %d (%s)" % (err.code, err.name))
msg = str(err)
for part in ("mnist.rfs", "chunk %d " % chunk, "sample %d of the chunk" % in_chunk,
             "sample %d of the dataset" % G, "field image"):
    check(part in msg, "message lacks %r: %s" % (part, msg))
check(G not in seen and len(seen) < N, "the bad sample was delivered")
ld.close()

# verify=False: every sample, the bad one as it is on disk.
ld = ringfeed.Loader(p, 32, verify=False, **opts)
got = {}
for batch in ld:
    ims, ys = np.asarray(batch["image"]), np.asarray(batch["label"])
    for i, y in enumerate(ys):
        got[int(y)] = bool(np.array_equal(ims[i], img[int(y)]))
    del batch, ims, ys
ld.close()
check(len(got) == N, "unverified pass: %d samples" % len(got))
check([y for y, ok in got.items() if not ok] == [G], "only the flipped sample differs")
print("ok")
