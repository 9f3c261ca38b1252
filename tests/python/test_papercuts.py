# SPDX-License-Identifier: MIT
# Description: the Python Loader's small edges.  shuffle=True is "window"
# (the same order) and False "none"; every TypeError and OverflowError of an
# argument names it; the library's messages are not prefixed twice; an
# unknown field lists the dataset's fields; a pinned_bytes beyond physical
# memory is refused; and the notebook pattern (a finished pass, its last
# batch still in the loop variable, then another pass) runs every pass to
# its end in every mode.
import os

import numpy as np

import ringfeed
import rftest
from rftest import check

N = 600


def order(path, **kw):
    ld = ringfeed.Loader(path, batch_size=16, device="cpu", fields=["y"], **kw)
    got = [np.asarray(b["y"]).tolist() for b in ld]
    ld.close()
    return got


def test_shuffle_bool(path):
    check(order(path, shuffle=True, seed=3) == order(path, shuffle="window", seed=3),
          "shuffle=True is shuffle=\"window\"")
    check(order(path, shuffle=False) == order(path, shuffle="none"),
          "shuffle=False is shuffle=\"none\"")
    check(order(path, shuffle=True, seed=3) != order(path, shuffle=False), "True shuffles")
    for bad, exc in ((1, TypeError), (None, TypeError), ("random", ValueError)):
        try:
            ringfeed.Loader(path, batch_size=16, device="cpu", shuffle=bad)
        except exc as e:
            check("shuffle" in str(e), "shuffle=%r: %s" % (bad, e))
        else:
            raise AssertionError("shuffle=%r accepted" % (bad,))


def test_errors_name_their_argument(path):
    cases = [("batch_size", "a", TypeError), ("batch_size", 2**70, OverflowError)]
    for name in ("seed", "epoch", "pinned_bytes", "var_bytes"):
        cases += [(name, -1, OverflowError), (name, 2**64, OverflowError), (name, "a", TypeError),
                  (name, 1.5, TypeError)]
    for name in ("rank", "world", "depth", "window", "io_depth", "decode_threads"):
        cases += [(name, 2**70, OverflowError), (name, "a", TypeError), (name, 2.0, TypeError)]
    cases += [("pinning", 3, TypeError), ("tokens", 3, TypeError)]
    for name, value, exc in cases:
        kw = {"batch_size": 16, "device": "cpu", name: value}
        try:
            ringfeed.Loader(path, **kw)
        except exc as e:
            check(name in str(e), "%s=%r: %s does not name the argument: %s"
                  % (name, value, exc.__name__, e))
        except Exception as e:
            raise AssertionError("%s=%r: %s, not %s: %s"
                                 % (name, value, type(e).__name__, exc.__name__, e))
        else:
            raise AssertionError("%s=%r accepted" % (name, value))
    ld = ringfeed.Loader(path, batch_size=16, device="cpu")
    for value, exc in ((-1, OverflowError), (2**64, OverflowError), ("a", TypeError)):
        try:
            ld.set_epoch(value)
        except exc as e:
            check("epoch" in str(e), "set_epoch(%r): %s" % (value, e))
        else:
            raise AssertionError("set_epoch(%r) accepted" % (value,))
    ld.close()
    out = os.path.join(os.path.dirname(path), "named.rfs")
    cols = {"x": np.zeros(4, np.float32)}
    for name, value, exc in (("zstd", "a", TypeError), ("zstd", 2**70, OverflowError),
                             ("chunk_bytes", -1, OverflowError), ("chunk_bytes", "a", TypeError),
                             ("shard_bytes", 2**64, OverflowError)):
        try:
            ringfeed.pack(out, cols, **{name: value})
        except exc as e:
            check(name in str(e), "pack(%s=%r): %s" % (name, value, e))
        else:
            raise AssertionError("pack(%s=%r) accepted" % (name, value))
    for args, name in (((3, cols), "path"), ((out, [cols["x"]]), "columns")):
        try:
            ringfeed.pack(*args)
        except TypeError as e:
            check(name in str(e), "pack: %s" % e)
        else:
            raise AssertionError("pack%r accepted" % (args,))
    ds = ringfeed.open(path)
    for value, exc in ((-1, OverflowError), ("a", TypeError)):
        try:
            ds.chunk_info(value)
        except exc as e:
            check("chunk" in str(e), "chunk_info(%r): %s" % (value, e))
        else:
            raise AssertionError("chunk_info(%r) accepted" % (value,))


def test_messages(path):
    try:
        ringfeed.Loader(path, batch_size=16, device="cpu", fields=["y", "lable"])
    except ringfeed.Error as e:
        msg = str(e)
        check(msg.lower().count("loader:") <= 1, "prefix twice: " + msg)
        check("'lable'" in msg and "x, y, v" in msg, "the dataset's fields listed: " + msg)
    else:
        raise AssertionError("an unknown field accepted")
    try:
        ringfeed.Loader(os.path.join(os.path.dirname(path), "missing.rfs"), batch_size=16)
    except ringfeed.Error as e:
        check(str(e).lower().count("loader:") <= 1, "prefix twice: %s" % e)
    else:
        raise AssertionError("a missing path accepted")


def test_pinned_beyond_memory(path):
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        ringfeed.Loader(path, batch_size=16, device="cpu", pinned_bytes=phys + (1 << 30))
    except ValueError as e:
        check("pinned_bytes" in str(e) and "physical memory" in str(e), str(e))
    else:
        raise AssertionError("pinned_bytes beyond physical memory accepted in silence")
    ld = ringfeed.Loader(path, batch_size=16, device="cpu", pinned_bytes=64 << 20)
    check(ld.stats()["pinned_peak"] <= 64 << 20, "the budget holds")
    ld.close()


def test_notebook_pattern(path):
    """for b in loader: pass, then a new pass while b still holds the last
    batch of the first one (and a tensor of it, when PyTorch is there)."""
    try:
        import torch
    except ImportError:
        torch = None
    for shuffle in ("none", "chunks", "window", "full"):
        for depth in (2, 3):
            fields = ["x", "y"] if shuffle == "full" else None
            ld = ringfeed.Loader(path, batch_size=32, device="cpu", shuffle=shuffle,
                                 depth=depth, fields=fields)
            for b in ld:
                pass
            t = torch.from_dlpack(b["x"]) if torch else None
            for p in range(3):
                n = 0
                seen = []
                for b in ld:
                    if torch:
                        t = torch.from_dlpack(b["x"])
                    seen += np.asarray(b["y"]).tolist()
                    n += 1
                check(n == len(ld), "%s depth %d pass %d: %d batches of %d"
                      % (shuffle, depth, p, n, len(ld)))
                check(len(set(seen)) == len(seen), "%s: a sample twice" % shuffle)
            del b, t
            ld.close()


def main():
    d = rftest.tmpdir()
    path = os.path.join(d, "p.rfs")
    rftest.small_dataset(path, n=N, chunk_bytes=2048)
    test_shuffle_bool(path)
    test_errors_name_their_argument(path)
    test_messages(path)
    test_pinned_beyond_memory(path)
    test_notebook_pattern(path)
    print("ok")


if __name__ == "__main__":
    main()
