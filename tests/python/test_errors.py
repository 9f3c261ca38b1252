# SPDX-License-Identifier: MIT
# Description: failures in ringfeed.Loader become exceptions: bad arguments
# raise ValueError/TypeError; a missing dataset and an unknown field raise
# ringfeed.Error with the library's code, and so does device="cuda" without
# a CUDA runtime (ENODEVICE; "auto" falls back to the host); a corrupt chunk
# mid-dataset delivers the batches before it, then raises ringfeed.Error
# ECHECKSUM whose message names the shard and the chunk, on every later call
# of that pass.
import errno
import os
import subprocess
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
p = os.path.join(d, "data.rfs")
N = 4096
ringfeed.pack(p, {"y": np.arange(N, dtype=np.int64)}, chunk_bytes=4096)
opts = dict(device="cpu", pinned_bytes=1 << 20)

for kw, exc in ((dict(batch_size=0), ValueError), (dict(depth=0), ValueError),
                (dict(batch_size=-1), ValueError), (dict(io_depth=-5), ValueError),
                (dict(device="tpu"), ValueError), (dict(device="cuda:x"), ValueError),
                (dict(shuffle="bogus"), ValueError), (dict(pinning="sometimes"), ValueError),
                (dict(rank=2, world=2), ValueError), (dict(fields="y"), TypeError)):
    args = dict(batch_size=16, **opts)
    args.update(kw)
    try:
        ringfeed.Loader(p, **args)
        check(False, "accepted %r" % kw)
    except exc:
        pass

try:
    ringfeed.Loader(os.path.join(d, "none.rfs"), 16, **opts)
    check(False, "a missing dataset")
except ringfeed.Error as e:
    check(e.code == -errno.ENOENT and "none.rfs" in str(e), "missing: %d %s" % (e.code, e))
try:
    ringfeed.Loader(p, 16, fields=["nope"], **opts)
    check(False, "an unknown field")
except ringfeed.Error as e:
    check("nope" in str(e), "unknown field message: %s" % e)

# A RINGFEED_CUDART that does not load: ENODEVICE with "cuda" and with "auto"
# too, as it was asked for (in a child process: the runtime is chosen by the
# environment).
code = """
import ringfeed, sys
try:
    ringfeed.Loader(sys.argv[1], 16, device="cuda")
    sys.exit(3)
except ringfeed.Error as e:
    assert e.code == ringfeed.ENODEVICE and "RINGFEED_CUDART" in str(e), str(e)
try:
    ringfeed.Loader(sys.argv[1], 16, device="auto")
    sys.exit(4)
except ringfeed.Error as e:
    assert e.code == ringfeed.ENODEVICE and "RINGFEED_CUDART" in str(e), str(e)
"""
env = dict(os.environ, RINGFEED_CUDART=os.path.join(d, "no-cudart.so"))
r = subprocess.run([sys.executable, "-c", code, p], env=env, capture_output=True, text=True)
check(r.returncode == 0, "no CUDA runtime: %s" % r.stderr)

# Corrupt the third chunk's stored bytes.
with ringfeed.open(p) as ds:
    ci = ds.chunk_info(2)
check(ci["first_sample"] > 0 and ci["samples"] > 0, "chunk info %r" % ci)
with open(p, "r+b") as f:
    f.seek(ci["offset"] + 100)
    b = f.read(1)
    f.seek(ci["offset"] + 100)
    f.write(bytes([b[0] ^ 0x55]))

B = 64
ld = ringfeed.Loader(p, B, **opts)
seen = 0
err = None
it = iter(ld)
try:
    for batch in it:
        ys = np.asarray(batch["y"])
        check(np.array_equal(ys, np.arange(seen, seen + B)), "batch before the bad chunk")
        seen += B
        del batch, ys
except ringfeed.Error as e:
    err = e
check(err is not None, "the corrupt chunk went unnoticed")
check(err.code == ringfeed.ECHECKSUM, "code %d (%s)" % (err.code, err.name))
check(isinstance(err, RuntimeError) and err.name == "ECHECKSUM", "name: %r" % err.name)
check(err.description == ringfeed.strerror(err.code), "description: %r" % err.description)
check("data.rfs" in str(err) and "2" in str(err), "message names shard and chunk: %s" % err)
check(seen == ci["first_sample"] // B * B, "batches before the chunk delivered: %d" % seen)
try:
    next(it)
    check(False, "the stream went on after the error")
except ringfeed.Error as e:
    check(e.code == ringfeed.ECHECKSUM, "later code %d" % e.code)
# A new pass starts the epoch over (and meets the chunk again).
check(int(np.asarray(next(iter(ld))["y"])[0]) == 0, "a new pass restarts")
ld.close()

# With verification off, the same bytes are delivered.
ld = ringfeed.Loader(p, B, verify=False, **opts)
check(sum(1 for _ in ld) == len(ld), "unverified pass")
ld.close()
print("ok")
