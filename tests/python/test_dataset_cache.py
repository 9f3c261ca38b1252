# SPDX-License-Identifier: MIT
# Description: ringfeed.open's decoded-chunk cache and batched reads.
# ds[i] gives every sample's values (fixed, scalar and variable fields,
# stored and zstd chunks) in any order, with a cache of one chunk (every
# step evicts) and of all; the arrays are read-only views (writing raises,
# and the next ds[i] is unchanged); ds[a:b:c] and ds.take(indices) give the
# samples stacked (new writable arrays; variable fields as lists); indices
# out of range raise IndexError; a closed dataset raises ValueError; threads
# reading one dataset with a small cache (evicting under each other while
# one reads without the GIL) all get the right values.
import os

import numpy as np

import ringfeed
from rftest import check, tmpdir

d = tmpdir()
N = 3000
rng = np.random.default_rng(7)
x = rng.integers(0, 255, (N, 5, 3), dtype=np.uint8)
y = np.arange(N, dtype=np.int64) * 3 - 7
v = [np.full(i % 7, i % 251, dtype=np.uint8) for i in range(N)]
paths = {}
for name, z in (("stored", 0), ("zstd", 3)):
    paths[name] = os.path.join(d, name + ".rfs")
    ringfeed.pack(paths[name], {"x": x, "y": y, "v": v}, zstd=z, chunk_bytes=4096)

for name, p in paths.items():
    for cache in (1, 1 << 30):
        ds = ringfeed.open(p, cache_bytes=cache)
        check(ds.chunks > 10, "the dataset has many chunks")
        order = list(rng.permutation(N)) + list(range(N)) + [-1, -N]
        for i in order:
            s = ds[int(i)]
            check(np.array_equal(s["x"], x[i]) and s["x"].shape == (5, 3),
                  "%s cache=%d: x of %d" % (name, cache, i))
            check(s["y"].shape == () and int(s["y"]) == y[i], "y of %d" % i)
            check(np.array_equal(s["v"], v[i]), "v of %d" % i)
        s = ds[5]
        for f in ("x", "y", "v"):
            try:
                s[f][...] = 0
                check(False, "%s of ds[i] is writable" % f)
            except ValueError:
                pass
        check(np.array_equal(ds[5]["x"], x[5]), "ds[5] unchanged")
        # Slices and take: stacked, new arrays.
        for sl in (slice(0, N), slice(10, 2000, 7), slice(None, None, -3), slice(5, 5),
                   slice(-100, None)):
            b = ds[sl]
            idx = np.arange(N)[sl]
            check(np.array_equal(b["x"], x[idx]) and b["x"].shape == (len(idx), 5, 3),
                  "ds[%s] x" % sl)
            check(np.array_equal(b["y"], y[idx]), "ds[%s] y" % sl)
            check(len(b["v"]) == len(idx) and all(np.array_equal(a, v[i])
                                                  for a, i in zip(b["v"], idx)), "ds[%s] v" % sl)
        ii = rng.integers(-N, N, 500)
        b = ds.take(ii)
        check(np.array_equal(b["x"], x[ii]) and np.array_equal(b["y"], y[ii]), "take x, y")
        check(all(np.array_equal(a, v[i]) for a, i in zip(b["v"], ii)), "take v")
        b["x"][...] = 0
        check(np.array_equal(ds[int(ii[0])]["x"], x[ii[0]]), "take's arrays are the caller's")
        b = ds.take([3, 3, 1])
        check(b["y"].tolist() == [y[3], y[3], y[1]], "take of a list, repeated")
        check(ds.take([])["x"].shape == (0, 5, 3), "take of nothing")
        for bad in ([N], [0, -N - 1]):
            try:
                ds.take(bad)
                check(False, "take(%s) raises" % bad)
            except IndexError:
                pass
        try:
            ds[N]
            check(False, "ds[N] raises")
        except IndexError:
            pass
        ds.close()
        for op in (lambda: ds[0], lambda: ds[0:2], lambda: ds.take([0])):
            try:
                op()
                check(False, "a closed dataset raises")
            except ValueError:
                pass
import threading

ds = ringfeed.open(paths["zstd"], cache_bytes=2 * 4096)
errors = []


def reader(seed):
    r = np.random.default_rng(seed)
    try:
        for _ in range(1500):
            i = int(r.integers(0, N))
            if r.random() < 0.2:
                ii = r.integers(0, N, 8)
                b = ds.take(ii)
                if not np.array_equal(b["x"], x[ii]):
                    errors.append("take %s" % ii)
            elif not np.array_equal(ds[i]["x"], x[i]) or int(ds[i]["y"]) != y[i]:
                errors.append("ds[%d]" % i)
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append(repr(e))


threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join()
check(not errors, "threads read right values: %s" % errors[:3])
ds.close()

try:
    ringfeed.open(paths["stored"], cache_bytes=-1)
    check(False, "cache_bytes=-1 raises")
except OverflowError:
    pass
print("ok")
