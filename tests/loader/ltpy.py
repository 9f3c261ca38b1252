# SPDX-License-Identifier: MIT
# Description: shared helpers of the loader tests' Python scripts: a check
# that counts failures (the script goes on, to report them all), the exit
# status they make, and running `ringfeed cat`.
import os
import subprocess
import sys

failures = 0


def check(cond, what):
    global failures
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        failures += 1


def cat(ringfeed, args, env=None):
    """Run `ringfeed cat ARGS` with env added to this process's
    environment; the CompletedProcess, output captured as bytes."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([ringfeed, "cat"] + args, capture_output=True, env=e)


def finish():
    """Exit 1 if a check failed, else 0."""
    sys.exit(1 if failures else 0)
