# SPDX-License-Identifier: MIT
# Description: the Python module reading a remote dataset served by nginx:
# ringfeed.Loader over a shard list URL yields the batches it yields for the
# local copy (two shuffle modes, two ranks), and ringfeed.open of the URL
# returns the local samples by index; a missing shard raises with the URL.
import os

import numpy as np

from remotetest import TempDir, check, finish, make_dataset
from servers import Nginx

try:
    import ringfeed
except ImportError as e:
    print("SKIP: the ringfeed module is not importable: %s" % e)
    raise SystemExit(77)


def batches(path, **kw):
    return [{k: np.array(v) for k, v in b.items()}
            for b in ringfeed.Loader(path, batch_size=100, device="host", **kw)]


with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shards = make_dataset(www, "ds", n=2500)
    with open(os.path.join(www, "ds", "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    local = os.path.join(www, "ds")
    os.environ.update({"RINGFEED_HTTP_BACKOFF_MS": "5"})
    with Nginx(www, tmp) as web:
        url = web.url + "ds/list.txt"
        for kw in (dict(shuffle="none"), dict(shuffle="chunks", seed=4, rank=1, world=2),
                   dict(shuffle="full", seed=9, rank=0, world=2)):
            want, got = batches(local, **kw), batches(url, **kw)
            check(len(want) == len(got) > 0 and all(
                a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
                for a, b in zip(want, got)), "Loader %s: remote batches differ" % kw)
        # cache_dir=: a second pass reads its chunks from the cache (only
        # an open's requests reach nginx); a path-like works.
        import pathlib
        cache = pathlib.Path(tmp) / "cache"
        kw = dict(shuffle="chunks", seed=4)
        want = batches(local, **kw)
        n0 = len(web.log())
        got = batches(url, cache_dir=cache, cache_bytes=1 << 30, **kw)
        n1 = len(web.log())
        again = batches(url, cache_dir=str(cache), **kw)
        n2 = len(web.log())
        for g in (got, again):
            check(len(want) == len(g) and all(np.array_equal(a[k], b[k]) for a, b in
                                              zip(want, g) for k in a), "cached batches differ")
        check(any(f.suffix == ".rfc" for f in cache.iterdir()), "nothing in the cache")
        # (Loader opens the dataset twice: for len() and to stream; each
        # open reads the list and every shard's head and tail.)
        check(n2 - n1 <= 4 * len(shards) + 2 < n1 - n0, "cached pass: %d requests for %d "
              "shards, first pass %d" % (n2 - n1, len(shards), n1 - n0))
        # map=True needs local files: a clear message naming the URL.
        try:
            ringfeed.Loader(url, batch_size=100, device="host", map=True)
            check(False, "map=True over a URL did not raise")
        except Exception as e:  # noqa: BLE001 - the module's error class
            check("map needs local files" in str(e) and web.url in str(e), "map: %s" % e)
        # close() while a batch's arrays are alive: every thread of the
        # loader stops at once (none is left in a library at exit), the
        # arrays keep their bytes until they go.
        def tasks():
            return len(os.listdir("/proc/self/task"))
        kw = dict(shuffle="chunks", seed=4)
        want = batches(local, **kw)
        base = tasks()
        L = ringfeed.Loader(url, batch_size=100, device="host", **kw)
        it = iter(L)
        b = next(it)
        running = tasks()
        L.close()
        check(tasks() == base, "close() with a batch alive: %d threads (%d before the open, "
              "%d while running)" % (tasks(), base, running))
        check(all(np.array_equal(b[k], want[0][k]) for k in want[0]),
              "a batch alive across close() changed")
        del b, it, L
        check(tasks() == base, "after the batch went: %d threads" % tasks())
        dl, dr = ringfeed.open(local), ringfeed.open(url)
        check(len(dl) == len(dr), "open: %d vs %d samples" % (len(dl), len(dr)))
        for i in (0, 1, 777, 1024, len(dl) - 1):
            a, b = dl[i], dr[i]
            check(all(np.array_equal(a[k], b[k]) for k in a), "open()[%d] differs" % i)
        try:
            ringfeed.open(web.url + "ds/gone.rfs")
            check(False, "opening a missing shard did not raise")
        except Exception as e:  # noqa: BLE001 - the module's error class
            check("gone.rfs" in str(e) and "404" in str(e), "missing shard: %s" % e)
finish()
