# SPDX-License-Identifier: MIT
# Description: the tool on a dataset with a variable-length field (written by
# make-var-dataset through the public API): info shows the variable
# dimension as '?' (null in --json), verify passes, export of the fixed field
# round trips, and export of the variable field fails with a clear message
# and no output file.
import json
import os
import subprocess
import sys

import numpy as np

from clitest import TempDir, check, finish, run

MAKE = os.path.abspath(sys.argv[2])

with TempDir() as tmp:
    n = 500
    ds = os.path.join(tmp, "var.rfs")
    subprocess.run([MAKE, ds, str(n)], check=True)
    rc, out, _ = run("info", ds, expect=0)
    check("[?]" in out and "variable" in out, "info text: %r" % out)
    rc, out, _ = run("info", "--json", ds, expect=0)
    info = json.loads(out)
    check(info["samples"] == n, "samples %s" % info["samples"])
    check(info["fields"][0] == {"name": "text", "dtype": "u8", "shape": [None], "var_dim": 0,
                                "item_bytes": 1}, "text field %s" % info["fields"][0])
    run("verify", "-q", ds, expect=0)
    back = os.path.join(tmp, "label.npy")
    run("export", ds, "--field", "label", "-o", back, expect=0)
    check(np.array_equal(np.load(back), np.arange(n, dtype="<i4")), "label export")
    bad = os.path.join(tmp, "text.npy")
    rc, _, err = run("export", ds, "--field", "text", "-o", bad, expect=1)
    check("variable-length" in err and "text" in err, "message: %r" % err)
    check(not os.path.exists(bad), "output left after a refused export")
    check(sorted(os.listdir(tmp)) == ["label.npy", "var.rfm", "var.rfs"],
          "files: %s" % os.listdir(tmp))
finish()
