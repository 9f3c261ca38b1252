# SPDX-License-Identifier: MIT
# Description: the cache never keeps serving bytes that are not the
# server's current ones: a chunk corrupted in transit (one byte flipped
# by the proxy, once) fails its checksum, its cache entry is deleted and it
# is read again from the server, so that run and the next ones deliver the
# right bytes; and a dataset
# repacked in place with shards of the same sizes (another --shuffle) is
# read right over a cache warmed by the old pack.
import os
import shutil

from remotetest import TempDir, check, finish, rf
from servers import FaultProxy, Nginx

import numpy as np


def pack(tmp, out_dir, shuffle=None):
    """Samples of one size, so that a reshuffled pack has shards of the
    very same sizes; returns the sorted shard names."""
    rng = np.random.default_rng(11)
    n = 12000
    ip, lp = os.path.join(tmp, "img.npy"), os.path.join(tmp, "lab.npy")
    np.save(ip, rng.integers(0, 60000, size=(n, 3, 4), dtype="<u2"))
    np.save(lp, np.arange(n, dtype="<i8"))
    os.makedirs(out_dir, exist_ok=True)
    args = ["pack", "-q", "--chunk-bytes", "16K", "--shard-bytes", "64K",
            "-o", os.path.join(out_dir, "d.rfs"), "image=" + ip, "label=" + lp]
    if shuffle is not None:
        args += ["--shuffle", str(shuffle)]
    rc, out, err = rf(*args)
    check(rc == 0, "pack: %s" % err)
    return sorted(f for f in os.listdir(out_dir) if f.endswith(".rfs"))


def cat(path, *args):
    return rf("cat", path, "--field", "image", "--field", "label", "--device", "host",
              "--batch", "64", "--text", *args, timeout=120)


with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    ds = os.path.join(www, "ds")
    shards = pack(tmp, ds)
    with open(os.path.join(ds, "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    rc, want, err = cat(ds)
    check(rc == 0, "local cat: %s" % err)
    with Nginx(www, tmp) as web, FaultProxy(web.port) as proxy:
        url = proxy.url + "ds/list.txt"

        # 1. A chunk corrupted in transit, once.  Find a chunk read (the
        # last ranged request of a healthy run), then flip a byte of its
        # next response.
        rc, got, err = cat(url)
        check(rc == 0 and got == want, "healthy run through the proxy: %d %s" % (rc, err))
        ranges = [h.get("Range") for _, h in proxy.seen if h.get("Range")]
        chunk_range = [r for r in ranges if not r.startswith("bytes=-")][-1]
        cache = os.path.join(tmp, "cache1")
        proxy.flip_range = chunk_range
        rc, got, err = cat(url, "--cache-dir", cache)
        check(proxy.flip_range is None, "the proxy flipped no byte (range %s)" % chunk_range)
        # The chunk fails its checksum, is read again from the server once,
        # and the run goes on with the right bytes.
        check(rc == 0 and got == want, "a chunk corrupted in transit once: exit %d: %s"
              % (rc, err[-300:]))
        check("checksum" in err and "read again from the server" in err,
              "no warning about the chunk read again: %r" % err[-300:])
        # The server is healthy from now on: the next runs are right.
        for run in (2, 3):
            rc, got, err = cat(url, "--cache-dir", cache)
            check(rc == 0, "run %d after a corrupted transfer: exit %d: %s"
                  % (run, rc, err[-400:]))
            check(rc != 0 or got == want, "run %d after a corrupted transfer: wrong bytes" % run)

        # 2. A repack in place (same sizes, another order) over a warm
        # cache.
        cache = os.path.join(tmp, "cache2")
        rc, got, err = cat(url, "--cache-dir", cache)
        check(rc == 0 and got == want, "first cached run: %d %s" % (rc, err))
        new = os.path.join(tmp, "new")
        shards2 = pack(tmp, new, shuffle=1)
        check(shards2 == shards, "the repack has other shards: %s" % shards2)
        for s in shards2:
            check(os.path.getsize(os.path.join(new, s)) == os.path.getsize(os.path.join(ds, s)),
                  "the repack's %s has another size" % s)
        rc, want2, err = cat(new)
        check(rc == 0 and want2 != want, "the repack reads the same: %d %s" % (rc, err))
        for s in shards2:
            shutil.copyfile(os.path.join(new, s), os.path.join(ds, s + ".tmp"))
            os.rename(os.path.join(ds, s + ".tmp"), os.path.join(ds, s))
        for f in os.listdir(new):
            if not f.endswith(".rfs"):
                shutil.copyfile(os.path.join(new, f), os.path.join(ds, f))
        rc, got, err = cat(url, "--cache-dir", cache)
        check(rc == 0, "cat of the repack over the old cache: exit %d: %s" % (rc, err[-400:]))
        check(rc != 0 or got == want2, "cat of the repack over the old cache: the old bytes")

finish()
