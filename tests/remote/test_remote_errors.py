# SPDX-License-Identifier: MIT
# Description: what a user reads when remote reads fail: a chunk whose
# reads the server keeps refusing mid-stream names the URL, the byte range,
# the HTTP status and server code and the attempts (not only "Input/output
# error"); an open that gives up says after how many attempts; and
# --cache-bytes 0 means the default cap, as in C and Python; a sharded
# pack's .rfs name and a directory URL without its slash get a hint.
import os

from remotetest import TempDir, check, finish, make_dataset, rf
from servers import FaultProxy, Nginx


def cat(path, *args, env=None):
    return rf("cat", path, "--field", "image", "--device", "host", "--batch", "64", "--text",
              *args, env=env, timeout=120)


with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shards = make_dataset(www, "ds", n=12000)
    with open(os.path.join(www, "ds", "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    with Nginx(www, tmp) as web, FaultProxy(web.port) as proxy:
        url = proxy.url + "ds/list.txt"
        rc, want, err = cat(url)
        check(rc == 0, "healthy cat: %s" % err)
        seen = [(p, h.get("Range")) for p, h in proxy.seen if h.get("Range")]
        path, rng = [(p, r) for p, r in seen if not r.startswith("bytes=-")][-1]

        # Mid-stream: one chunk's range answered 503 every time.
        proxy.fail_range = (path, rng)
        rc, out, err = cat(url, env={"RINGFEED_HTTP_RETRIES": "2"})
        proxy.fail_range = None
        first, last = rng[len("bytes="):].split("-")
        check(rc != 0, "a chunk refused for good went unnoticed")
        for want_s in (proxy.url.rstrip("/") + path, "bytes %s-%s" % (first, last), "HTTP 503",
                       "SlowDown", "gave up after 3 attempts", "read failed"):
            check(want_s in err, "mid-stream failure: %r missing from %r" % (want_s, err))

        # --cache-bytes 0 is the default cap (10 GiB), as cache_bytes=0 is
        # in C and Python.
        cache = os.path.join(tmp, "cache")
        rc, out, err = cat(url, "--cache-dir", cache, "--cache-bytes", "0")
        check(rc == 0 and out == want, "--cache-bytes 0: exit %d: %s" % (rc, err))
        check(rc != 0 or any(f.endswith(".rfc") for f in os.listdir(cache)),
              "--cache-bytes 0 cached nothing")

        # A sharded pack's name (d.rfs: the files are d-NNNNN.rfs and d.rfm)
        # and a directory without its trailing slash: hints, not bare codes.
        rc, out, err = rf("info", web.url + "ds/d.rfs")
        check(rc != 0 and "404" in err and web.url + "ds/d.rfm" in err,
              "info of a sharded pack's name: %r" % err)
        rc, out, err = rf("info", web.url + "ds")
        check(rc != 0 and "403" in err and web.url + "ds/BASE.rfm" in err,
              "info of a directory without its slash: %r" % err)

        # An open that gives up says how many attempts it made.
        proxy.set(e503=1.0)
        rc, out, err = rf("info", url, env={"RINGFEED_HTTP_RETRIES": "2"})
        proxy.set()
        check(rc != 0 and "gave up after 3 attempts" in err, "info, 503 forever: %r" % err)
finish()
