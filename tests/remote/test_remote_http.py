# SPDX-License-Identifier: MIT
# Description: a dataset served by nginx over HTTP and over HTTPS (HTTP/2, a
# self-signed certificate made here): `info` and `verify` of its shard URLs,
# of a shard list and of one shard say exactly what they say of the local
# copy (a corrupted chunk included); the remote reader's ranged reads return
# the local bytes; a missing shard, a non-shard, a list naming a missing
# shard and an untrusted certificate fail with clear messages.
import os
import shutil

from remotetest import (TempDir, check, finish, info_json, make_dataset, read, rf)
from servers import Nginx

with TempDir() as tmp:
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shards = make_dataset(www, "plain")
    zs = make_dataset(www, "zstd", zstd=3)
    check(len(shards) >= 3, "shards: %s" % shards)
    plain = os.path.join(www, "plain")
    with open(os.path.join(plain, "list.txt"), "w") as f:
        f.write("# the shards\n\n" + "\n".join(shards) + "\n")
    with open(os.path.join(www, "zstd", "list.txt"), "w") as f:
        f.write("\n".join(zs) + "\n")
    with open(os.path.join(www, "notashard.rfs"), "wb") as f:
        f.write(b"<html>hello</html>" * 400)
    with open(os.path.join(www, "missing.txt"), "w") as f:
        f.write("plain/%s\nplain/gone.rfs\n" % shards[0])

    # A pack manifest (docs/format.md, "Manifest"), as `ringfeed pack` wrote
    # it: the shards it names, in its order.  In directories of their own.
    for m in ("mf", "mfbad", "mixed"):
        os.makedirs(os.path.join(www, m))
        for n in shards:
            shutil.copy(os.path.join(plain, n), os.path.join(www, m, n))
        shutil.copy(os.path.join(plain, "d.rfm"), os.path.join(www, m, "d.rfm"))
    with open(os.path.join(www, "mfbad", "d.rfm"), "r+b") as f:
        f.seek(len("ringfeed-manifest 1\npack "))
        c = f.read(1)
        f.seek(len("ringfeed-manifest 1\npack "))
        f.write(b"1" if c != b"1" else b"2")
    # Other data packed under the same name is another pack (another pack
    # id): one of its shards among the first pack's is refused, by name.
    again = make_dataset(tmp, "again", n=2990)
    check(shards[1] in again, "repacked names: %s" % again)
    shutil.copy(os.path.join(tmp, "again", shards[1]), os.path.join(www, "mixed", shards[1]))

    with Nginx(www, tmp) as web, Nginx(www, tmp, tls=True) as tls:
        check(info_json(web.url + "mf/d.rfm") == info_json(plain), "info of a pack manifest")
        rc, out, err = rf("info", web.url + "mfbad/d.rfm")
        check(rc == 1 and "checksum" in err, "tampered manifest: %r" % err)
        rc, out, err = rf("info", web.url + "plain/")
        check(rc == 1 and "HTTP 403" in err and "BASE.rfm" in err,
              "a directory URL: %d %r" % (rc, err))
        rc, out, err = rf("info", web.url + "mixed/d.rfm")
        check(rc == 1 and "not of this pack" in err and "mixed/" + shards[1] in err and
              "mixed/" + shards[0] not in err, "a shard of another pack: %d %r" % (rc, err))
        for base, env in ((web.url, None), (tls.url, {"RINGFEED_CA_BUNDLE": tls.ca})):
            for ds in ("plain", "zstd"):
                local = info_json(os.path.join(www, ds), env=env)
                remote = info_json(base + ds + "/list.txt", env=env)
                check(local is not None and local == remote,
                      "%s%s: info differs:\nlocal  %s\nremote %s" % (base, ds, local, remote))
            one = info_json(base + "plain/" + shards[1], env=env)
            check(one == info_json(os.path.join(plain, shards[1])), "info of one shard differs")
            # A query after the path, as in a presigned URL: still a shard.
            q = info_json(base + "plain/" + shards[1] + "?X-Amz-Signature=ab%2Fc&x=.txt", env=env)
            check(q == one, "info of a shard URL with a query differs")
            rc, out, err = rf("verify", base + "plain/list.txt", env=env)
            check(rc == 0 and out.startswith("ok: %d shard(s)" % len(shards)),
                  "verify %splain/list.txt: %d %r %r" % (base, rc, out, err))
            for s in shards:
                rc, out, err = read(base + "plain/" + s, os.path.join(plain, s), 150, 8, 20000,
                                    env=env)
                check(rc == 0, "remote-read %s%s: %d %s %s" % (base, s, rc, out, err))

        # Kept-alive connections: remote-read's 151 reads per shard at depth
        # 8 came over a handful of connections, not one each; and over
        # HTTPS, HTTP/2.
        for srv, proto in ((web, "HTTP/1.1"), (tls, "HTTP/2.0")):
            log = srv.log()
            conns = set(l[1] for l in log)
            print("%s: %d requests over %d connections" % (srv.url, len(log), len(conns)))
            check(len(log) > 400 and len(conns) <= 60, "%s: %d requests over %d connections"
                  % (srv.url, len(log), len(conns)))
            check(all(l[0] == proto for l in log), "%s: protocols %s" % (srv.url, set(l[0] for l in log)))

        # A shard several times the tail fetched at open: the index is read
        # with its own ranged GET.
        big = make_dataset(tmp, "big", n=60000, shard_bytes="4M")
        os.rename(os.path.join(tmp, "big", big[0]), os.path.join(www, "big.rfs"))
        check(info_json(web.url + "big.rfs") == info_json(os.path.join(www, "big.rfs")),
              "info of a large shard differs")
        rc, out, err = rf("verify", web.url + "big.rfs")
        check(rc == 0, "verify of a large shard: %s" % err)
        rc, out, err = read(web.url + "big.rfs", os.path.join(www, "big.rfs"), 100, 32, 300000)
        check(rc == 0, "remote-read of a large shard: %s" % err)

        # More shards than are fetched together at open (64).
        many = make_dataset(www, "many", n=9000, shard_bytes="12K", chunk_bytes="4K")
        check(len(many) > 64, "only %d shards" % len(many))
        with open(os.path.join(www, "many", "list.txt"), "w") as f:
            f.write("\n".join(many) + "\n")
        check(info_json(web.url + "many/list.txt") == info_json(os.path.join(www, "many")),
              "info of %d shards differs" % len(many))
        rc, out, err = rf("verify", web.url + "many/list.txt")
        check(rc == 0 and out.startswith("ok: %d shard(s)" % len(many)), "verify of %d shards: %r"
              % (len(many), err))

        # Corrupt a chunk: verify reports it as for the local file.
        victim = os.path.join(plain, shards[1])
        with open(victim, "r+b") as f:
            f.seek(4096 + 100)
            b = f.read(1)
            f.seek(4096 + 100)
            f.write(bytes([b[0] ^ 0xFF]))
        rcl, outl, errl = rf("verify", victim)
        rcr, outr, errr = rf("verify", web.url + "plain/" + shards[1])
        check(rcl == 1 and rcr == 1, "verify of a corrupt shard: exit %d local, %d remote"
              % (rcl, rcr))
        print("verify of the corrupt shard, remote:", errr.strip())
        check(errr.replace(web.url + "plain/", "") == errl.replace(plain + "/", ""),
              "verify's report differs:\nlocal  %r\nremote %r" % (errl, errr))

        # Clear errors.
        rc, out, err = rf("info", web.url + "plain/gone.rfs")
        check(rc == 1 and "gone.rfs" in err and "404" in err, "missing shard: %r" % err)
        rc, out, err = rf("info", web.url + "notashard.rfs")
        check(rc == 1 and "not a ringfeed shard" in err, "non-shard: %r" % err)
        rc, out, err = rf("info", web.url + "missing.txt")
        check(rc == 1 and "gone.rfs" in err and "404" in err, "list naming a missing shard: %r"
              % err)
        rc, out, err = rf("info", tls.url + "plain/list.txt",
                          env={"RINGFEED_CA_BUNDLE": "", "CURL_CA_BUNDLE": ""})
        check(rc == 1 and "certificate" in err.lower(), "untrusted certificate: %r" % err)
        rc, out, err = read(web.url + "plain/gone.rfs", victim, 5, 2, 100)
        check(rc == 3 and "404" in err, "remote-read of a missing shard: %d %r" % (rc, err))
        os.rename(os.path.join(tmp, "img.npy"), os.path.join(www, "img.npy"))
        rc, out, err = rf("info", web.url + "img.npy")
        check(rc == 1 and "not a shard list" in err, "binary non-list: %r" % err)
finish()
