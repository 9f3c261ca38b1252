# SPDX-License-Identifier: MIT
# Description: the local cache of a remote dataset's chunks (--cache-dir):
# a second run reads its chunks from the cache (nginx's access log shows
# only the requests an open makes), a corrupted cache file is deleted and
# fetched again (never delivered), two processes sharing a small cache
# never hold more than its cap between them, single samples of the full
# shuffle are not kept, and a cache directory that cannot be made is a
# clear error.
import os
import subprocess
import threading
import time

from remotetest import EXE, FAST, TempDir, check, finish, make_dataset, rf
from servers import Nginx

ENTRY_HEADER = 64


def cat(path, *args, env=None):
    rc, out, err = rf("cat", path, "--field", "image", "--device", "host", "--batch", "64",
                      "--text", *args, env=env, timeout=120)
    check(rc == 0, "cat %s %s: exit %d: %s" % (path, " ".join(args), rc, err))
    return out, err


def entries(d):
    try:
        return [f for f in os.listdir(d) if f.endswith(".rfc")]
    except OSError:
        return []


def cache_bytes(d):
    total = 0
    for f in entries(d):
        try:
            total += os.path.getsize(os.path.join(d, f))
        except OSError:
            pass
    return total


with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shards = make_dataset(www, "plain", n=20000)
    with open(os.path.join(www, "plain", "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    local = os.path.join(www, "plain")
    with Nginx(www, tmp) as web:
        url = web.url + "plain/list.txt"
        # What an open alone requests (footers, headers, indexes).
        n0 = len(web.log())
        rc, out, err = rf("info", url)
        check(rc == 0, "info: %s" % err)
        n_open = len(web.log()) - n0

        cache = os.path.join(tmp, "cache", "sub")
        a = ["--shuffle", "chunks", "--seed", "3"]
        want, _ = cat(local, *a)
        # Off by default: nothing written anywhere.
        got, _ = cat(url, *a)
        check(got == want, "remote cat without cache differs")
        check(not os.path.exists(os.path.join(tmp, "cache")), "a cache without --cache-dir")

        # First run: every chunk from the server, stored.
        n1 = len(web.log())
        got, _ = cat(url, *a, "--cache-dir", cache)
        n2 = len(web.log())
        check(got == want, "first cached run differs")
        stored = entries(cache)
        check(len(stored) > 10, "first run stored %d entries" % len(stored))
        print("first run: %d requests, %d entries (open alone: %d requests)"
              % (n2 - n1, len(stored), n_open))
        # Second run (another order): chunks from the cache, only the
        # open's requests reach the server.
        a2 = ["--shuffle", "chunks", "--seed", "4", "--rank", "1", "--world", "2"]
        want2, _ = cat(local, *a2)
        got, _ = cat(url, *a2, "--cache-dir", cache)
        n3 = len(web.log())
        check(got == want2, "second cached run differs")
        check(n3 - n2 <= n_open, "second run made %d requests (an open makes %d)"
              % (n3 - n2, n_open))
        print("second run: %d requests" % (n3 - n2))

        # A corrupted entry: deleted, fetched again, the output unchanged.
        victim = os.path.join(cache, sorted(stored)[len(stored) // 2])
        with open(victim, "r+b") as f:
            f.seek(ENTRY_HEADER + 100)
            b = f.read(1)
            f.seek(ENTRY_HEADER + 100)
            f.write(bytes([b[0] ^ 0x40]))
        got, err = cat(url, *a, "--cache-dir", cache, "-v")
        n4 = len(web.log())
        check(got == want, "run over a corrupted cache entry differs")
        check("fail their checksum" in err or "fails its checksum" in err
              or "bytes fail" in err, "no warning about the corrupted entry: %r" % err)
        check(n4 - n3 == n_open + 1, "corrupted entry: %d requests, want %d"
              % (n4 - n3, n_open + 1))
        # A truncated entry too.
        victim = os.path.join(cache, sorted(entries(cache))[3])
        os.truncate(victim, ENTRY_HEADER + 10)
        got, _ = cat(url, *a, "--cache-dir", cache)
        check(got == want, "run over a truncated cache entry differs")

        # Two processes sharing a cache of 5 entries: both right, and the
        # cache never above its cap (sampled while they run).
        small = os.path.join(tmp, "small")
        entry = os.path.getsize(os.path.join(cache, entries(cache)[0]))
        cap = 5 * entry + 100
        procs = []
        env = dict(os.environ)
        env.update(FAST)
        for rank in (0, 1):
            args = [EXE, "cat", url, "--field", "image", "--device", "host", "--batch", "64",
                    "--text", "--shuffle", "chunks", "--seed", "9", "--rank", str(rank),
                    "--world", "2", "--cache-dir", small, "--cache-bytes", str(cap)]
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env=env))
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], cache_bytes(small))
                time.sleep(0.002)
        t = threading.Thread(target=sample)
        t.start()
        outs = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                o, e = p.communicate()
                check(False, "shared-cache cat hung")
            check(p.returncode == 0, "shared-cache cat: exit %d: %s" % (p.returncode, e))
            outs.append(o)
        done.set()
        t.join()
        for rank in (0, 1):
            w, _ = cat(local, "--shuffle", "chunks", "--seed", "9", "--rank", str(rank),
                       "--world", "2")
            check(outs[rank] == w, "shared-cache rank %d differs" % rank)
        final = cache_bytes(small)
        print("shared cache: cap %d, peak seen %d, final %d, %d entries"
              % (cap, peak[0], final, len(entries(small))))
        check(0 < final <= cap and peak[0] <= cap, "cache above its cap: peak %d final %d cap %d"
              % (peak[0], final, cap))
        check(not [f for f in os.listdir(small) if f.startswith(".tmp-")],
              "temporary files left in the cache")

        # Full shuffling reads single samples: none of them is kept (a file
        # per sample would cost more than it saves).
        full = os.path.join(tmp, "full")
        a3 = ["--shuffle", "full", "--seed", "5"]
        want3, _ = cat(local, *a3)
        got, _ = cat(url, *a3, "--cache-dir", full)
        check(got == want3, "full shuffle over a cache differs")
        small_entries = [f for f in entries(full)
                         if os.path.getsize(os.path.join(full, f)) < ENTRY_HEADER + 4096]
        check(not small_entries, "full shuffle cached %d single samples" % len(small_entries))

        # A cache directory that cannot be made.
        blocker = os.path.join(tmp, "file")
        open(blocker, "w").close()
        rc, out, err = rf("cat", url, "--field", "image", "--device", "host", "--cache-dir",
                          os.path.join(blocker, "c"))
        check(rc == 1 and "cache_dir" in err and blocker in err,
              "unwritable cache dir: %d %r" % (rc, err))
finish()
