# SPDX-License-Identifier: MIT
# Description: shared setup of the `ringfeed bench` tests: numpy (a skip,
# exit 77, without it), the ringfeed executable named by the first
# argument, a check that records failures and goes on, and running the
# tool.
import os
import subprocess
import sys

failures = []
EXE = None


def need_numpy():
    """numpy, or exit 77 (skip) when it is not installed."""
    try:
        import numpy
    except ImportError:
        print("numpy is not available: skipping")
        sys.exit(77)
    return numpy


def exe():
    """The ringfeed executable given as the first argument (run() runs it);
    exits 1 with a usage line when it is missing."""
    global EXE
    EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
    if not EXE or not os.access(EXE, os.X_OK):
        print("usage: %s PATH/TO/ringfeed" % sys.argv[0])
        sys.exit(1)
    return EXE


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        failures.append(msg)
    return cond


def run(*args):
    """ringfeed ARGS: (exit status, stdout, stderr)."""
    p = subprocess.run([EXE] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr
