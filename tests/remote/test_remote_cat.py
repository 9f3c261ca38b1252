# SPDX-License-Identifier: MIT
# Description: the loader streaming a remote dataset: `ringfeed cat` of a
# shard list served by nginx, and through a fault proxy injecting resets,
# 503s and cut bodies, writes exactly the bytes `cat` of the local copy
# writes, in every shuffle mode, for each of two ranks, and when stopped
# after a few batches and resumed from the saved state.
import json
import os

from remotetest import TempDir, check, finish, make_dataset, rf
from servers import FaultProxy, Nginx


def cat(path, *args, env=None):
    rc, out, err = rf("cat", path, "--field", "image", "--device", "host", "--batch", "64",
                      "--text", *args, env=env, timeout=120)
    check(rc == 0, "cat %s %s: exit %d: %s" % (path, " ".join(args), rc, err))
    return out


with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    for name, z in (("plain", 0), ("zstd", 3)):
        shards = make_dataset(www, name, n=4000, zstd=z)
        with open(os.path.join(www, name, "list.txt"), "w") as f:
            f.write("\n".join(shards) + "\n")
    many = {"RINGFEED_HTTP_RETRIES": "12"}
    with Nginx(www, tmp) as web, FaultProxy(web.port, seed=5) as proxy:
        proxy.set(reset=0.05, e503=0.05, truncate=0.05)
        for name in ("plain", "zstd"):
            local = os.path.join(www, name)
            for base in (web.url, proxy.url):
                url = base + name + "/list.txt"
                # (full reads samples one by one: uncompressed shards only)
                for mode in ("none", "chunks", "window") + (("full",) if name == "plain" else ()):
                    for rank in (0, 1):
                        a = ["--shuffle", mode, "--seed", "11", "--rank", str(rank), "--world", "2"]
                        want = cat(local, *a)
                        got = cat(url, *a, env=many)
                        check(len(want) > 0 and got == want,
                              "%s %s rank %d: remote cat differs" % (url, mode, rank))
                # Resume: 3 batches, then the rest from the saved state.
                st = os.path.join(tmp, "state")
                a = ["--shuffle", "chunks", "--seed", "2"]
                want = cat(local, *a)
                first = cat(url, *a, "--batches", "3", "--state-out", st, env=many)
                rest = cat(url, *a, "--state-in", st, env=many)
                check(first + rest == want, "%s: resumed remote cat differs" % url)
        # bench names the engine that read: http, or both when mixed.
        url = web.url + "plain/list.txt"
        rc, out, err = rf("bench", "--device", "host", "--epochs", "1", url)
        check(rc == 0 and "I/O engine                 http " in out, "bench engine: %s %s"
              % (out, err))
        # ... measures the remote limit (raw ranged GETs) in the same run,
        # and the loader against it.
        rc, out, err = rf("bench", "--device", "host", "--epochs", "1", "--json", url)
        j = json.loads(out) if rc == 0 else {}
        lim = j.get("limits", {}).get("storage_sequential", {})
        check(lim.get("measured") and lim.get("gb_per_s", 0) > 0 and
              "ranged GETs" in lim.get("note", "") and
              j.get("remote_efficiency", 0) > 0, "bench remote limit: %s %s" % (out, err))
        rc, out, err = rf("bench", "--device", "host", "--epochs", "1", url)
        check("remote, ranged GETs" in out and "remote efficiency: " in out,
              "bench remote limit, table: %s" % out)
        # --map needs local files: said so, naming the URL.
        rc, out, err = rf("bench", "--device", "host", "--epochs", "1", "--map", url)
        check(rc == 1 and "map needs local files" in err and web.url in err,
              "bench --map of a URL: %d %s" % (rc, err))
        first = web.url + "plain/" + sorted(os.listdir(os.path.join(www, "plain")))[0]
        rc, out, err = rf("bench", "--device", "host", "--epochs", "1", first,
                          os.path.join(www, "zstd"))
        check("+http " in out, "bench engine, mixed: %s %s" % (out, err))
        print("faults injected: %d of %d requests" % (proxy.injected, proxy.requests))
        check(proxy.injected > 0, "the proxy injected nothing")
finish()
