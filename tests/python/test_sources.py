# SPDX-License-Identifier: MIT
# Description: mixtures from Python: Loader([ringfeed.Source(...), ...]).
# Three sources 0.7/0.2/0.1 of different sizes and chunk sizes: every
# window of 100 batches within 2 samples of each share; two ranks (RANK and
# WORLD_SIZE in the environment) together give the one-rank stream with
# equal batch counts; state_dict() mid-epoch, load_state_dict() in a new
# process continues with exactly the rest (nothing lost or doubled);
# stats()["sources"]; weight 0; every weight 0 and shuffle="full" say
# what is wrong; a negative weight, a field mismatch and a
# truncated source are refused naming the source; examples/mixture.py runs.
import json
import os
import subprocess
import sys

import numpy as np

import ringfeed
from rftest import check, tmpdir

N = [5000, 300, 2000]
W = [0.7, 0.2, 0.1]
NAMES = ["web", "code", "math"]
B = 32


def make(d):
    paths = []
    for s, (n, cb) in enumerate(zip(N, [512, 8192, 2048])):
        p = os.path.join(d, NAMES[s] + ".rfs")
        ids = (np.uint64(s) << np.uint64(32)) + np.arange(n, dtype=np.uint64)
        ringfeed.pack(p, {"id": ids, "x": np.ones((n, 3), np.float32) * s}, chunk_bytes=cb)
        paths.append(p)
    return paths


def sources(paths, w=W):
    return [ringfeed.Source(p, weight=x, name=nm) for p, x, nm in zip(paths, w, NAMES)]


def stream(loader, stop=None, stats=None):
    out = []
    if stop == 0:
        return out
    for k, b in enumerate(loader):
        out.append(np.asarray(b["id"]).copy())
        if stop is not None and k + 1 == stop:
            break
        if stats is not None and k == 99:
            stats.append(loader.stats()["sources"])
    return out


CHILD = r"""
import json, sys, numpy as np, ringfeed
paths, state = json.loads(sys.argv[1]), sys.argv[2]
import pickle
st = pickle.load(open(state, "rb"))
ld = ringfeed.Loader([ringfeed.Source(p, weight=w, name=n) for p, w, n in paths], 32,
                     shuffle="chunks", seed=5, device="cpu")
ld.load_state_dict(st)
ids = [int(i) for b in ld for i in np.asarray(b["id"])]
print(json.dumps(ids))
"""


def main():
    d = tmpdir()
    paths = make(d)
    ld = ringfeed.Loader(sources(paths), B, shuffle="chunks", seed=5, device="cpu")
    total = sum(N)
    check(len(ld) == total // B, f"len {len(ld)}")
    st = []
    batches = stream(ld, stats=st)
    check(len(batches) == total // B, "batches")
    flat = np.concatenate(batches)
    src = (flat >> np.uint64(32)).astype(int)
    for k in range(len(batches) - 100 + 1):
        c = np.bincount(src[k * B:(k + 100) * B], minlength=3)
        for s in range(3):
            want = 100 * B * W[s] / sum(W)
            check(abs(c[s] - want) < 2, f"window {k}: source {s} has {c[s]}, want {want}")
    st = st[0]  # after 100 batches
    check([s["name"] for s in st] == NAMES, st)
    for s in range(3):
        check(st[s]["samples"] == np.count_nonzero(src[:100 * B] == s), st)
    check(st[1]["epochs"] == 2 and st[1]["in_epoch"] == st[1]["samples"] - 600, st)
    # Same again, and two ranks by the environment.
    again = np.concatenate(stream(ringfeed.Loader(sources(paths), B, shuffle="chunks", seed=5,
                                                  device="cpu")))
    check(np.array_equal(flat, again), "second run differs")
    ranks = []
    for r in range(2):
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(r), "2"
        ranks.append(stream(ringfeed.Loader(sources(paths), B // 2, shuffle="chunks", seed=5,
                                            device="cpu")))
    del os.environ["RANK"], os.environ["WORLD_SIZE"]
    check(len(ranks[0]) == len(ranks[1]) == len(batches), "rank batch counts")
    for k in range(len(batches)):
        check(np.array_equal(np.concatenate([ranks[0][k], ranks[1][k]]), batches[k]),
              f"ranks' batch {k}")
    # Resume mid-epoch in a new process.
    import pickle
    for stop in (1, 77, len(batches) - 1):
        ld = ringfeed.Loader(sources(paths), B, shuffle="chunks", seed=5, device="cpu")
        head = stream(ld, stop)
        sp = os.path.join(d, "state.pkl")
        with open(sp, "wb") as f:
            pickle.dump(ld.state_dict(), f)
        ld.close()
        arg = json.dumps([[p, w, n] for p, w, n in zip(paths, W, NAMES)])
        out = subprocess.run([sys.executable, "-c", CHILD, arg, sp], check=True,
                             capture_output=True, text=True).stdout
        rest = np.array(json.loads(out), dtype=np.uint64)
        got = np.concatenate(head + [rest])
        check(np.array_equal(got, flat), f"resume after {stop} batches differs: {len(got)} {len(flat)} {got[B:B+4]} {flat[B:B+4]}")
    # Weight 0, refused weights, a field mismatch.
    z = np.concatenate(stream(ringfeed.Loader(sources(paths, [1, 0, 1]), B, device="cpu")))
    check(not np.any((z >> np.uint64(32)) == 1), "weight 0 source drawn")
    try:
        ringfeed.Loader(sources(paths, [1, -1, 1]), B, device="cpu")
        check(False, "negative weight accepted")
    except ringfeed.Error as e:
        check("code" in str(e) and "negative" in str(e), str(e))
    # A weight that is not a number names `weight`; a string is refused.
    for bad in ["abc", "0.1", None]:
        try:
            ringfeed.Source(paths[0], bad)
            check(False, f"weight {bad!r} accepted")
        except TypeError as e:
            check("weight" in str(e), str(e))
    check(ringfeed.Source(paths[0], np.float32(0.5)).weight == 0.5, "numpy weight refused")
    # Every weight 0: the library's error, not "no batch to deliver".
    try:
        ringfeed.Loader(sources(paths, [0, 0, 0]), B, device="cpu")
        check(False, "all weights 0 accepted")
    except ringfeed.Error as e:
        check("every weight is 0" in str(e), str(e))
    # shuffle="full": the mixture is the limit, not the build.
    try:
        ringfeed.Loader(sources(paths), B, shuffle="full", device="cpu")
        check(False, "shuffle full accepted")
    except (ringfeed.Error, ValueError) as e:
        check("mixture" in str(e) and "this build" not in str(e), str(e))
    other = os.path.join(d, "other.rfs")
    ringfeed.pack(other, {"id": np.arange(50, dtype=np.int32), "x": np.ones((50, 3), np.float32)})
    try:
        ringfeed.Loader([ringfeed.Source(paths[0], 1, "web"), ringfeed.Source(other, 1, "other")],
                        B, device="cpu")
        check(False, "field mismatch accepted")
    except ringfeed.Error as e:
        check("other" in str(e) and "'id'" in str(e), str(e))
    # A corrupt (truncated) source: the error names it.
    bad = os.path.join(d, "bad.rfs")
    with open(paths[2], "rb") as f, open(bad, "wb") as g:
        g.write(f.read()[:-100])
    try:
        ringfeed.Loader([ringfeed.Source(paths[0], 1, "web"), ringfeed.Source(bad, 1, "cut")],
                        B, device="cpu")
        check(False, "truncated source accepted")
    except ringfeed.Error as e:
        check("'cut'" in str(e), str(e))
    # The example runs and finds the resumed stream identical.
    ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                      "mixture.py")
    r = subprocess.run([sys.executable, ex, os.path.join(d, "example")], capture_output=True,
                       text=True)
    check(r.returncode == 0 and "identical" in r.stdout, r.stdout + r.stderr)
    print("ok")


main()
