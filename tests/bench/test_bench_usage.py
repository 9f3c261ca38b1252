# SPDX-License-Identifier: MIT
# Description: `ringfeed bench` exits 2 with a message naming the problem for
# every kind of bad command line, and 0 for --help.
import subprocess
import sys

from benchtest import exe

EXE = exe()

failures = 0


def run(args):
    p = subprocess.run([EXE, "bench"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# Each bad command line with a word its message must contain.  The dataset
# path does not exist: usage is checked before anything is opened.
BAD = [
    ([], "missing PATH"),
    (["--batch", "0", "x.rfs"], "--batch"),
    (["--batch", "abc", "x.rfs"], "--batch"),
    (["--shuffle", "sideways", "x.rfs"], "--shuffle"),
    (["--device", "gpu", "x.rfs"], "--device"),
    (["--pin", "sometimes", "x.rfs"], "--pin"),
    (["--pinned", "12Q", "x.rfs"], "--pinned"),
    (["--depth", "0", "x.rfs"], "--depth"),
    (["--seconds", "-1", "x.rfs"], "--seconds"),
    (["--seconds", "nan", "x.rfs"], "--seconds"),
    (["--epochs", "0", "x.rfs"], "--epochs"),
    (["--step-us", "fast", "x.rfs"], "--step-us"),
    (["--io-depth", "0", "x.rfs"], "--io-depth"),
    (["--decode-threads", "0", "x.rfs"], "--decode-threads"),
    (["--seed", "-3", "x.rfs"], "--seed"),
    (["--frobnicate", "x.rfs"], "--frobnicate"),
    (["--batch"], "--batch"),
]

for args, word in BAD:
    rc, out, err = run(args)
    if rc != 2:
        print("FAIL: bench %s: exit %d, expected 2\n%s" % (args, rc, err))
        failures += 1
    elif word not in err or "usage:" not in err:
        print("FAIL: bench %s: message does not name %r or lacks the usage line:\n%s"
              % (args, word, err))
        failures += 1

rc, out, err = run(["--help"])
if rc != 0 or "--step-us" not in out:
    print("FAIL: bench --help: exit %d\n%s" % (rc, out))
    failures += 1

# A missing dataset is a runtime failure (1), not bad usage.
rc, out, err = run(["--seconds", "0.1", "/nonexistent/nothing.rfs"])
if rc != 1:
    print("FAIL: bench on a missing dataset: exit %d, expected 1\n%s" % (rc, err))
    failures += 1

sys.exit(1 if failures else 0)
