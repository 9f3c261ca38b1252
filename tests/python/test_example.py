# SPDX-License-Identifier: MIT
# Description: examples/pytorch_train.py runs end to end on a small dataset
# (ringfeed and DataLoader versions, one epoch each), ringfeed in its default
# window shuffle, and the model trained on ringfeed batches learns (accuracy
# above chance by far).
import os
import subprocess
import sys

from rftest import check, need_torch, tmpdir

need_torch()
example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "pytorch_train.py")
d = tmpdir()
r = subprocess.run([sys.executable, example, "--data", d, "--samples", "3000", "--epochs", "1",
                    "--workers", "0", "--device", "cpu", "--min-accuracy", "0.5"],
                   capture_output=True, text=True, timeout=120)
print(r.stdout, r.stderr)
check(r.returncode == 0, "exit status %d" % r.returncode)
check("ringfeed   accuracy" in r.stdout and "DataLoader accuracy" in r.stdout, "both ran")
check("shuffle window" in r.stdout, "ringfeed trains on window-shuffled epochs by default")
print("ok")
