# SPDX-License-Identifier: MIT
# Description: helpers shared by the end-to-end tests of the `ringfeed` tool:
# running it, temporary directories, skipping without numpy, and reading a
# shard's index straight from the bytes (docs/format.md) to find chunks.
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import numpy as np  # noqa: F401
except ImportError:
    print("numpy is not available: skipping")
    sys.exit(SKIP)

EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
if not EXE or not os.access(EXE, os.X_OK):
    print("usage: %s PATH/TO/ringfeed" % sys.argv[0])
    sys.exit(1)

failures = []


def run(*args, expect=None):
    """Run ringfeed with args; returns (rc, stdout, stderr).  With expect,
    a different exit status is recorded as a failure."""
    p = subprocess.run([EXE] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if expect is not None and p.returncode != expect:
        fail("ringfeed %s: exit %d, expected %d\nstdout: %s\nstderr: %s"
             % (" ".join(str(a) for a in args), p.returncode, expect, p.stdout, p.stderr))
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="rf-cli-test-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def npy_data(path):
    """The raw array bytes of a .npy file (after its header)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[6] == 1:
        (hlen,) = struct.unpack_from("<H", b, 8)
        return b[10 + hlen:]
    (hlen,) = struct.unpack_from("<I", b, 8)
    return b[12 + hlen:]


def shard_chunks(path):
    """[(offset, stored_size, samples)] of every chunk of a shard, from its
    footer and index."""
    with open(path, "rb") as f:
        b = f.read()
    index_offset, nchunks = struct.unpack_from("<QQ", b, len(b) - 64)
    out = []
    for k in range(nchunks):
        off, stored, raw, first, samples = struct.unpack_from("<QQQQI", b, index_offset + 64 * k)
        out.append((off, stored, samples))
    return out


def leftovers(directory, keep):
    """Files in directory other than those in keep (temporary files left
    behind by an interrupted or failed write)."""
    return sorted(set(os.listdir(directory)) - set(keep))


def finish():
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("ok")
    sys.exit(0)
