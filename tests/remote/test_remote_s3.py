# SPDX-License-Identifier: MIT
# Description: a dataset in an S3-compatible store (moto in server mode, which
# checks SigV4 signatures) uploaded with boto3: info and verify of
# s3://bucket/prefix/ (listed in pages), of one s3:// shard, of a shard list
# and of keys that need escaping say what they say of the local copy;
# ranged reads return the local bytes; credentials come from the environment
# or from a profile of the shared credentials file; a wrong secret, an
# unknown key id, a missing bucket, a missing key and an empty prefix fail
# with the server's error code.
import os

from remotetest import TempDir, check, finish, info_json, make_dataset, read, rf
from servers import Moto

with TempDir() as tmp:
    shards = make_dataset(tmp, "ds")
    ds = os.path.join(tmp, "ds")
    with open(os.path.join(ds, "list.txt"), "w") as f:
        f.write("\n".join(shards) + "\n")
    with Moto(tmp) as moto:
        key, secret = moto.make_user()
        moto.boto("s3.create_bucket(Bucket='bkt')\n"
                  "d = sys.argv[1]\n"
                  "for f in sorted(os.listdir(d)):\n"
                  "    s3.upload_file(os.path.join(d, f), 'bkt', 'data/v1/' + f)\n"
                  "    s3.upload_file(os.path.join(d, f), 'bkt', 'odd dir+x=y/' + f)\n"
                  "s3.put_object(Bucket='bkt', Key='data/v1/.hidden.rfs', Body=b'x')\n"
                  "s3.put_object(Bucket='bkt', Key='data/v1/readme.txt', Body=b'x')\n",
                  ds, key=key, secret=secret)
        env = {"AWS_ENDPOINT_URL": moto.url, "AWS_ACCESS_KEY_ID": key,
               "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1",
               "AWS_SHARED_CREDENTIALS_FILE": os.path.join(tmp, "none"),
               "AWS_CONFIG_FILE": os.path.join(tmp, "none")}
        local = info_json(ds)
        for url, extra in (("s3://bkt/data/v1/", {}),
                           ("s3://bkt/data/v1/", {"RINGFEED_S3_MAX_KEYS": "1"}),
                           ("s3://bkt/data/v1/list.txt", {}),
                           ("s3://bkt/odd dir+x=y/", {"RINGFEED_S3_MAX_KEYS": "2"})):
            e = dict(env, **extra)
            check(info_json(url, env=e) == local, "info %s %s differs" % (url, extra))
            rc, out, err = rf("verify", url, env=e)
            check(rc == 0 and out.startswith("ok: %d shard(s)" % len(shards)),
                  "verify %s: %d %r %r" % (url, rc, out, err))
        rc, out, err = rf("info", "s3://bkt/data/v1/", env=env)
        check("s3://bkt/data/v1/%s" % shards[0] in out and ".hidden" not in out,
              "listed shards: %s" % out)
        one = "s3://bkt/data/v1/" + shards[1]
        check(info_json(one, env=env) == info_json(os.path.join(ds, shards[1])),
              "info of one s3:// shard")
        rc, out, err = read(one, os.path.join(ds, shards[1]), 100, 8, 20000, env=env)
        check(rc == 0, "remote-read %s: %d %s" % (one, rc, err))

        # The shared credentials file, with a profile.
        creds = os.path.join(tmp, "credentials")
        with open(creds, "w") as f:
            f.write("[default]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = x\n\n"
                    "[test]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    "region = us-east-1\n" % (key, secret))
        fenv = {"AWS_ENDPOINT_URL": moto.url, "AWS_SHARED_CREDENTIALS_FILE": creds,
                "AWS_PROFILE": "test", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
                "AWS_CONFIG_FILE": os.path.join(tmp, "none")}
        check(info_json("s3://bkt/data/v1/", env=fenv) == local, "credentials file, profile")
        rc, out, err = rf("info", "s3://bkt/data/v1/", env=dict(fenv, AWS_PROFILE="default"))
        check(rc == 1 and "403" in err and "InvalidAccessKeyId" in err,
              "default profile's unknown key: %r" % err)

        # Clear errors.
        for url, e, want in (
                ("s3://bkt/data/v1/", dict(env, AWS_SECRET_ACCESS_KEY="wrong"),
                 ["403", "SignatureDoesNotMatch"]),
                (one, dict(env, AWS_SECRET_ACCESS_KEY="wrong"), ["403", "SignatureDoesNotMatch",
                                                                 one]),
                (one, dict(env, AWS_ACCESS_KEY_ID="AKIANOBODY"), ["403", "InvalidAccessKeyId"]),
                ("s3://nobucket/data/", env, ["404", "NoSuchBucket"]),
                ("s3://nobucket/x.rfs", env, ["404", "NoSuchBucket"]),
                ("s3://bkt/data/v1/gone.rfs", env, ["404", "NoSuchKey", "gone.rfs"]),
                ("s3://bkt/nothing/", env, ["no .rfs objects"]),
                ("s3://bkt/data/v1/readme.txt", env, ["does not name a .rfs shard"]),
                ("s3:///x.rfs", env, ["no bucket"])):
            rc, out, err = rf("info", url, env=e)
            check(rc == 1 and all(w in err for w in want), "%s: %d %r, wanted %s"
                  % (url, rc, err, want))
finish()
