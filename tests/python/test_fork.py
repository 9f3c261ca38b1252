# SPDX-License-Identifier: MIT
# Description: loaders and fork().  A Loader opened before os.fork() fails in
# the child at once with ringfeed.Error EFORK (a RuntimeError naming the fix),
# for every use, and the child exits (collecting the Loader and a batch it
# inherited) without hanging; the parent's Loader goes on, every sample once.
# A DataLoader(num_workers=2) over a Dataset holding an open Loader raises
# that error instead of hanging; the documented pattern, an IterableDataset
# that opens its Loader in __iter__ with rank' = rank x workers + worker,
# delivers every sample exactly once over 2 ranks x 2 workers.  A dataset of
# ringfeed.open works in forked children, and one forked while another
# thread reads it fails there instead of hanging.  Every child runs under an
# alarm and every wait has a deadline: a hang fails the test.
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import ringfeed
import rftest
from rftest import check

# ThreadSanitizer kills a child of a multi-threaded process that starts a
# thread: under it, children open no loader of their own.
TSAN = "libtsan" in os.environ.get("LD_PRELOAD", "")
# AddressSanitizer's allocator (GCC 12's libasan) takes no lock across fork():
# a child that allocates while a parent thread held it waits forever (seen in
# a DataLoader worker: torch's thread pool, then calloc).  Python children
# allocate all the time, so under it this test cannot tell a hang of ours
# from one of the sanitizer's; the normal build runs it, and the C test
# (loader-fork) checks the refusals under ASan.
ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
N = 1920  # 30 global batches of 16 x 4 (2 ranks x 2 workers): none left over
B = 16


def wait_child(pid, deadline=30.0):
    """The child's exit status; a child still running at the deadline is
    killed and fails the test."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            if os.WIFSIGNALED(status):
                raise AssertionError("child ended by signal %d (a hang ends with SIGALRM)"
                                     % os.WTERMSIG(status))
            return os.WEXITSTATUS(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("child still running after %.0f s: killed" % deadline)


def in_child(body):
    """Run body() in a forked child under an alarm; returns its exit status
    (0: body returned; 1: it raised)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        code = 0
        try:
            body()
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return wait_child(pid)


def expect_fork_error(fn, what):
    try:
        fn()
    except ringfeed.Error as e:
        check(isinstance(e, RuntimeError), what + ": not a RuntimeError")
        check(e.code == ringfeed.EFORK, "%s: code %d, not EFORK" % (what, e.code))
        msg = str(e)
        check("fork()" in msg and "open the Loader in each process" in msg
              and "__iter__" in msg, what + ": message " + msg)
        return
    raise AssertionError(what + ": no error in the child")


def test_child_fails_parent_goes_on(path):
    ld = ringfeed.Loader(path, batch_size=B, device="cpu", drop_last=False, depth=3)
    it = iter(ld)
    first = next(it)
    seen = np.asarray(first["y"]).tolist()

    def child_uses():
        expect_fork_error(lambda: next(it), "next")
        expect_fork_error(lambda: next(iter(ld)), "a new pass")
        expect_fork_error(ld.stats, "stats")
        expect_fork_error(ld.state_dict, "state_dict")
        expect_fork_error(lambda: ld.set_epoch(3), "set_epoch")
        # The batch inherited from the parent is the child's copy: readable.
        check(np.asarray(first["y"]).tolist() == seen, "the inherited batch's bytes")
        ld.close()
        # A loader of its own works.
        if TSAN:
            return
        own = ringfeed.Loader(path, batch_size=B, device="cpu", drop_last=False)
        got = np.concatenate([np.asarray(b["y"]).copy() for b in own])
        check(sorted(got.tolist()) == list(range(N)), "the child's own loader")

    check(in_child(child_uses) == 0, "the child's checks failed")

    # A child drops the Loader, its iterator and a batch, as a DataLoader
    # worker does when it ends: no hang, and no "Exception ignored" warning
    # from a release that cannot reach the parent's loader.
    err = os.path.join(os.path.dirname(path), "child-stderr")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        del first, it
        ld = None
        import gc
        gc.collect()
        sys.stderr.flush()
        os._exit(0)
    check(wait_child(pid) == 0, "a child dropping the loader")
    with open(err) as f:
        text = f.read()
    check(text == "", "the child dropping the loader wrote: " + text)

    # The parent's loader is untouched: the rest of the pass, then another.
    for b in it:
        seen += np.asarray(b["y"]).tolist()
    check(sorted(seen) == list(range(N)), "the parent's pass after the forks")
    del first, b
    again = np.concatenate([np.asarray(b["y"]).copy() for b in ld])
    check(sorted(again.tolist()) == list(range(N)), "the parent's next pass")
    ld.close()


DATALOADER_SCRIPT = r'''
import sys, torch, ringfeed
path = sys.argv[1]

class Held(torch.utils.data.IterableDataset):
    def __init__(self):
        self.ld = ringfeed.Loader(path, batch_size=16, device="cpu")  # before fork: wrong
    def __iter__(self):
        for b in self.ld:
            yield torch.from_dlpack(b["y"]).clone()

dl = torch.utils.data.DataLoader(Held(), batch_size=None, num_workers=2)
try:
    for x in dl:
        pass
except RuntimeError as e:
    print("RAISED", e)
    sys.exit(0)
print("NO ERROR")
sys.exit(1)
'''


def test_dataloader_held_loader_raises(path):
    """The failing pattern: a Loader opened in the Dataset's constructor."""
    r = subprocess.run([sys.executable, "-c", DATALOADER_SCRIPT, path], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    check(r.returncode == 0 and "RAISED" in r.stdout, "DataLoader over a held loader:\n" + out)
    check("open the Loader in each process" in out, "the message names the fix:\n" + out)


class Shards:
    """The documented pattern (docs/python.md): open in __iter__, each worker
    of each rank a disjoint share."""

    def __init__(self, path, rank, world, **kw):
        self.path, self.rank, self.world, self.kw = path, rank, world, kw

    def __iter__(self):
        import torch
        info = torch.utils.data.get_worker_info()
        nw, wid = (info.num_workers, info.id) if info else (1, 0)
        loader = ringfeed.Loader(self.path, batch_size=B, device="cpu",
                                 rank=self.rank * nw + wid, world=self.world * nw, **self.kw)
        with loader:
            for b in loader:
                yield {k: torch.from_dlpack(v).clone() for k, v in b.items() if k != "v"}


def test_dataloader_pattern(path):
    torch = rftest.need_torch()

    class Iterable(Shards, torch.utils.data.IterableDataset):
        pass

    for kw in ({}, {"shuffle": "chunks", "seed": 7}, {"shuffle": True, "seed": 7}):
        got = []
        for rank in range(2):
            dl = torch.utils.data.DataLoader(Iterable(path, rank, 2, **kw), batch_size=None,
                                             num_workers=2, timeout=30)
            for b in dl:
                check(b["y"].shape == (B,), "batch shape")
                got += b["y"].tolist()
        check(len(got) == N and sorted(got) == list(range(N)),
              "%s: %d samples, %d distinct, want each of %d once"
              % (kw, len(got), len(set(got)), N))


def test_dataset_in_children(path):
    ds = ringfeed.open(path)
    want = np.asarray(ds[5]["y"]).tolist()

    def child_reads():
        check(np.asarray(ds[5]["y"]).tolist() == want, "ds[5] in a child")
        check(len(ds) == N, "len in a child")

    check(in_child(child_reads) == 0, "a dataset in a forked child")

    # Forked while another thread reads: the child must not wait for a lock
    # that thread held (it is not in the child).  It reads, or fails with a
    # RuntimeError saying to open the dataset again.
    big = os.path.join(os.path.dirname(path), "big.rfs")
    rng = np.random.default_rng(3)
    ringfeed.pack(big, {"x": rng.integers(0, 4, (64, 1 << 16), dtype=np.uint8)},
                  zstd=1, chunk_bytes=1 << 16)
    bds = ringfeed.open(big)
    stop = threading.Event()

    def reader():
        i = 0
        while not stop.is_set():
            bds[i % 64]  # a chunk per sample: decompressed without the GIL
            i += 1

    t = threading.Thread(target=reader)
    t.start()
    outcomes = {"read": 0, "torn": 0}
    try:
        for _ in range(20):
            r, w = os.pipe()

            def child():
                try:
                    bds[1]
                    os.write(w, b"r")
                except RuntimeError as e:
                    check("open the dataset again" in str(e), "torn message: %s" % e)
                    os.write(w, b"t")
                bds.close()

            check(in_child(child) == 0, "a child forked during a read")
            os.close(w)
            outcomes["read" if os.read(r, 1) == b"r" else "torn"] += 1
            os.close(r)
    finally:
        stop.set()
        t.join()
    print("forked during reads:", outcomes)
    check(np.asarray(bds[1]["x"]).shape == (1 << 16,), "the parent's dataset after the forks")


def main():
    if ASAN:
        print("AddressSanitizer: its allocator is not fork-safe; skipped")
        sys.exit(rftest.SKIP)
    d = rftest.tmpdir()
    path = os.path.join(d, "fork.rfs")
    rftest.small_dataset(path, n=N, chunk_bytes=2048)
    test_child_fails_parent_goes_on(path)
    test_dataset_in_children(path)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: DataLoader tests skipped")
        return
    if TSAN:
        print("ThreadSanitizer: DataLoader tests skipped (its workers start threads)")
        return
    test_dataloader_held_loader_raises(path)
    test_dataloader_pattern(path)
    print("ok")


if __name__ == "__main__":
    main()
