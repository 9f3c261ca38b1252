# SPDX-License-Identifier: MIT
# Description: `ringfeed bench --device cuda` under the cudart emulator
# (RINGFEED_CUDART): batches go to the (emulated) device, the pinned
# host-to-device copy limit is measured through the runtime and counts, and
# the JSON report stays sane.
# Self-contained, not using benchtest.py: the GPU kit (tools/gpu/prepare)
# ships this file alone.
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipping")
    sys.exit(77)

EXE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
if not EXE or not os.access(EXE, os.X_OK) or not os.environ.get("RINGFEED_CUDART"):
    print("usage: RINGFEED_CUDART=libcudart-emulator.so %s PATH/TO/ringfeed" % sys.argv[0])
    sys.exit(1)

failures = []


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        failures.append(msg)


tmp = tempfile.mkdtemp(prefix="rf-bench-cuda-")
try:
    n = 2000
    rng = np.random.default_rng(3)
    np.save(os.path.join(tmp, "x.npy"), rng.integers(0, 256, (n, 512), dtype=np.uint8))
    np.save(os.path.join(tmp, "y.npy"), rng.integers(0, 10, n).astype(np.int32))
    data = os.path.join(tmp, "d.rfs")
    p = subprocess.run([EXE, "pack", "-q", "-o", data, "--chunk-bytes", "128K",
                        "x=" + os.path.join(tmp, "x.npy"), "y=" + os.path.join(tmp, "y.npy")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print("FAIL: pack: " + p.stderr)
        sys.exit(1)
    p = subprocess.run([EXE, "bench", "--json", "-q", "--device", "cuda", "--pinned", "16M",
                        "--batch", "128", "--seconds", "0.2", data],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 0, "bench --device cuda: exit %d\n%s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        doc = json.loads(p.stdout)
        ld, lim = doc["loader"], doc["limits"]["host_to_device"]
        check(ld["device"].startswith("cuda"), "device %r" % ld["device"])
        check(ld["samples"] > 0 and ld["device_peak"] > 0, "loader: %s" % ld)
        check(lim["measured"] and lim["applies"] and lim["gb_per_s"] > 0,
              "host-to-device limit: %s" % lim)
        check(0 < doc["efficiency"] < 10, "efficiency %s" % doc["efficiency"])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(1 if failures else 0)
