# SPDX-License-Identifier: MIT
"""Helpers of the remote tests: the tools under test, a small dataset packed
by `ringfeed pack`, checks, and runs under a timeout (a hang is a failure,
never a stuck suite)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not available")
    sys.exit(SKIP)

if len(sys.argv) < 3:
    print("usage: %s RINGFEED REMOTE_READ" % sys.argv[0])
    sys.exit(1)
EXE = os.path.abspath(sys.argv[1])
READER = os.path.abspath(sys.argv[2])
if subprocess.run([READER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 77:
    print("SKIP: built without libcurl")
    sys.exit(SKIP)

failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def finish():
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("ok")
    sys.exit(0)


# Retries fast, stalls noticed fast: the tests run many faults in seconds.
FAST = {"RINGFEED_HTTP_BACKOFF_MS": "5", "RINGFEED_HTTP_STALL_MS": "700",
        "RINGFEED_HTTP_CONNECT_MS": "2000"}


def run(cmd, env=None, timeout=60):
    e = dict(os.environ)
    e.update(FAST)
    if env:
        e.update(env)
    try:
        p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired:
        fail("%s: still running after %d s (a hang)" % (" ".join(map(str, cmd)), timeout))
        return 124, "", ""
    return p.returncode, p.stdout, p.stderr


def rf(*args, env=None, timeout=60):
    return run([EXE] + list(args), env=env, timeout=timeout)


def read(url, local, *args, env=None, timeout=60):
    return run([READER, url, local] + [str(a) for a in args], env=env, timeout=timeout)


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="rf-remote-test-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def make_dataset(tmp, name="ds", n=3000, zstd=0, shard_bytes="64K", chunk_bytes="16K"):
    """A dataset of a few shards (a fixed and a variable field) in
    tmp/name/; returns the sorted shard names."""
    rng = np.random.default_rng(7)
    img = rng.integers(0, 60000, size=(n, 3, 4), dtype="<u2")
    lab = np.arange(n, dtype="<i8")
    ip, lp = os.path.join(tmp, "img.npy"), os.path.join(tmp, "lab.npy")
    np.save(ip, img)
    np.save(lp, lab)
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    args = ["pack", "-q", "--chunk-bytes", chunk_bytes, "--shard-bytes", shard_bytes,
            "-o", os.path.join(d, "d.rfs"), "image=" + ip, "label=" + lp]
    if zstd:
        args[1:1] = ["--zstd", str(zstd)]
    rc, out, err = rf(*args)
    if rc != 0:
        raise RuntimeError("pack failed: " + err)
    return sorted(f for f in os.listdir(d) if f.endswith(".rfs"))


def info_json(path, env=None):
    rc, out, err = rf("info", "--json", path, env=env)
    if not check(rc == 0, "info %s: exit %d: %s" % (path, rc, err)):
        return None
    j = json.loads(out)
    j.pop("shard_paths", None)
    return j
