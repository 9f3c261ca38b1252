# SPDX-License-Identifier: MIT
# Description: the remote reader through a fault proxy in front of nginx.
# Under delays, connection resets, 500/503/429, bodies cut short (closed or
# with a short Content-Length), bodies longer than the range and stalls,
# every read completes exactly once with exactly the local bytes (retries
# ask for the missing part only); a server stopped and started again mid-read
# is ridden out; info and verify through the faults say what they say
# locally.  When retries are spent (a server that answers 503 forever, or
# is gone) the read fails with a clear message, in bounded time; a 404 or
# 403 fails at once, without retries.  Every run is under a timeout.
import os
import threading
import time

from remotetest import (TempDir, check, finish, info_json, make_dataset, read, rf)
from servers import FaultProxy, Nginx

with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shards = make_dataset(www, "ds")
    ds = os.path.join(www, "ds")
    with open(os.path.join(ds, "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    shard = shards[0]
    local = os.path.join(ds, shard)

    with Nginx(www, tmp) as web, FaultProxy(web.port, seed=3) as proxy:
        url = proxy.url + "ds/" + shard
        cases = [
            ("delay", dict(delay_s=0.02)),
            ("reset", dict(reset=0.3)),
            ("500/503", dict(e500=0.15, e503=0.15)),
            ("429", dict(e429=0.3)),
            ("truncated", dict(truncate=0.3)),
            ("short body", dict(short=0.3)),
            ("long body", dict(long=0.3)),
            ("stall", dict(stall=0.05)),
            ("all at once", dict(reset=0.05, e503=0.05, truncate=0.05, short=0.05, long=0.05)),
        ]
        for name, faults in cases:
            proxy.set(**faults)
            before = proxy.injected
            t0 = time.time()
            # Faults are drawn at random: enough retries that a run of
            # them on one read is not the likely outcome.
            rc, out, err = read(url, local, 120, 8, 20000, 5, env={"RINGFEED_HTTP_RETRIES": "12"})
            check(rc == 0, "%s: exit %d\n%s%s" % (name, rc, out, err))
            check(name == "delay" or proxy.injected > before, "%s: no fault was injected" % name)
            print("%-12s %3d faults, %.1f s" % (name, proxy.injected - before, time.time() - t0))

        # info and verify through the faults: as for the local copy.
        proxy.set(reset=0.1, e503=0.1, truncate=0.1, long=0.05)
        many = {"RINGFEED_HTTP_RETRIES": "12"}
        check(info_json(proxy.url + "ds/list.txt", env=many) == info_json(ds),
              "info through faults")
        rc, out, err = rf("verify", proxy.url + "ds/list.txt", env=many)
        check(rc == 0 and out.startswith("ok: %d shard(s)" % len(shards)),
              "verify through faults: %d %r %r" % (rc, out, err))

        # s3:// through the proxy (nginx serves ds/ as bucket "ds"): the
        # requests carry SigV4 for the environment's key, region and
        # session token.
        proxy.set()
        del proxy.seen[:]
        env = {"AWS_ENDPOINT_URL": proxy.url.rstrip("/"), "AWS_ACCESS_KEY_ID": "AKIDTEST",
               "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok/en+1",
               "AWS_REGION": "eu-west-3"}
        check(info_json("s3://ds/" + shard, env=env) == info_json(local), "s3:// via the proxy")
        h = {k.lower(): v for k, v in proxy.seen[0][1].items()} if proxy.seen else {}
        auth = h.get("authorization", "")
        check(proxy.seen and proxy.seen[0][0] == "/ds/" + shard, "s3 path: %s" % proxy.seen[:1])
        check(auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/") and
              "/eu-west-3/s3/aws4_request" in auth and "x-amz-security-token" in auth,
              "Authorization: %r" % auth)
        check(h.get("x-amz-security-token") == "tok/en+1" and "x-amz-date" in h and
              h.get("x-amz-content-sha256") == "UNSIGNED-PAYLOAD", "S3 headers: %s" % h)

        # Retries spent: a clear error, soon.
        proxy.set(e503=1.0)
        t0 = time.time()
        rc, out, err = read(url, local, 4, 2, 1000, env={"RINGFEED_HTTP_RETRIES": "3"})
        check(rc == 3 and "HTTP 503" in err and "gave up after 4 attempts" in err and url in err,
              "503 forever: %d %r" % (rc, err))
        check(time.time() - t0 < 20, "503 forever took %.1f s" % (time.time() - t0))
        rc, out, err = rf("info", url, env={"RINGFEED_HTTP_RETRIES": "2"})
        check(rc == 1 and "503" in err and "SlowDown" in err, "info, 503 forever: %r" % err)

        # 404 fails at once: one request, no retry.
        proxy.set()
        before = proxy.requests
        rc, out, err = read(proxy.url + "ds/gone.rfs", local, 1, 1, 100)
        check(rc == 3 and "HTTP 404" in err and "gone.rfs" in err, "404: %d %r" % (rc, err))
        # the reader's read and its tail read: two requests, not retried
        check(proxy.requests - before <= 2, "404 was retried: %d requests"
              % (proxy.requests - before))

        # The server goes away mid-read and comes back: nothing lost.
        proxy.set(delay_s=0.01)
        res = {}

        def reader():
            res["r"] = read(url, local, 300, 4, 20000, 9, env={"RINGFEED_HTTP_RETRIES": "10",
                                                                "RINGFEED_HTTP_BACKOFF_MS": "50"})

        th = threading.Thread(target=reader)
        th.start()
        time.sleep(0.4)
        proxy.stop()
        time.sleep(1.0)
        proxy.start()
        th.join(90)
        rc, out, err = res.get("r", (124, "", "no result"))
        check(rc == 0, "restart mid-read: %d %s %s" % (rc, out, err))

        # Gone for good: an error once retries are spent, not a hang.
        proxy.stop()
        t0 = time.time()
        rc, out, err = read(url, local, 4, 2, 1000, env={"RINGFEED_HTTP_RETRIES": "2"})
        check(rc == 3 and "gave up" in err and ("connect" in err.lower() or "Couldn't" in err),
              "server gone: %d %r" % (rc, err))
        check(time.time() - t0 < 20, "server gone took %.1f s" % (time.time() - t0))
finish()
