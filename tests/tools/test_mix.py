# SPDX-License-Identifier: MIT
# Description: `ringfeed cat --mix` and `bench --mix`: three sources packed
# from .npy files, mixed 0.7/0.2/0.1; the proportions of every 10-batch
# window, a --state-out / --state-in resume equal to the whole stream,
# names and bad weights in messages (--epoch-samples 0, a weight out of
# range, PATH:WEIGHT without --mix, an empty or repeated name), bench's
# JSON with a mixture.
import collections
import json
import os

import numpy as np

from clitest import TempDir, check, finish, run


def main(d):
    srcs = []
    for s, n in enumerate([3000, 200, 1000]):
        ids = np.arange(n, dtype=np.int64) + s * 1000000
        np.save(os.path.join(d, f"id{s}.npy"), ids)
        out = os.path.join(d, f"s{s}.rfs")
        run("pack", "-o", out, "--chunk-bytes", str(512 << s), "-q",
            "id=" + os.path.join(d, f"id{s}.npy"), expect=0)
        srcs.append(out)
    mix = ["--mix", f"web={srcs[0]}:0.7", f"code={srcs[1]}:0.2", f"{srcs[2]}:0.1"]
    common = mix + ["--field", "id", "--text", "--shuffle", "chunks", "--batch", "50"]
    rc, out, err = run("cat", *common, expect=0)
    ids = [int(x) for x in out.split()]
    check(len(ids) == 4200, f"{len(ids)} samples")
    src = [i // 1000000 for i in ids]
    for k in range(0, len(src) - 500 + 1, 50):
        c = collections.Counter(src[k:k + 500])
        for s, w in enumerate([0.7, 0.2, 0.1]):
            check(abs(c[s] - 500 * w) < 2, f"window at {k}: source {s} has {c[s]}")
    st = os.path.join(d, "pos.bin")
    rc, a, _ = run("cat", *common, "--batches", "23", "--state-out", st, expect=0)
    rc, b, _ = run("cat", *common, "--state-in", st, expect=0)
    check(a + b == out, "resumed stream differs")
    rc, _, err = run("cat", "--mix", f"web={srcs[0]}:0.7", f"code={srcs[1]}:-0.2", "--field", "id",
                     expect=1)
    check("code" in err and "negative" in err, err)
    rc, _, err = run("cat", "--mix", srcs[0], "--field", "id", expect=2)
    check("WEIGHT" in err, err)
    rc, _, err = run("cat", "--mix", f"web={srcs[0]}:1", f"gone={d}/none.rfs:1", "--field", "id",
                     expect=1)
    check("'gone'" in err, err)
    # What is wrong with an argument, said as such.
    two = [f"{srcs[0]}:0.7", f"{srcs[1]}:0.3"]
    for bad in ["0", "-5"]:
        rc, _, err = run("cat", "--mix", *two, "--field", "id", "--epoch-samples", bad, expect=2)
        check(">= 1" in err and "not a number" not in err, err)
    rc, _, err = run("cat", "--mix", f"{srcs[0]}:1e400", two[1], "--field", "id", expect=2)
    check("out of range" in err and "finite" in err, err)
    rc, _, err = run("cat", *two, "--field", "id", expect=1)
    check("--mix" in err, err)
    rc, _, err = run("cat", "--mix", "=" + two[0], two[1], "--field", "id", expect=2)
    check("name" in err and "empty" in err, err)
    rc, _, err = run("cat", "--mix", "w=" + two[0], "w=" + two[1], "--field", "id", expect=2)
    check("'w'" in err and "both" in err, err)
    # Images are not decoded in a mixture yet: said as such.
    rc, _, err = run("cat", *two, "--mix", "--field", "id", "--image-size", "32", expect=1)
    check("mixture" in err and "not supported" in err and "chunks" not in err, err)
    rc, out, err = run("bench", "--json", "-q", "--seconds", "0.2", "--device", "host", *mix, expect=0)
    j = json.loads(out)
    check(j["loader"]["samples"] > 0 and j["dataset"]["samples"] == 4200, out[:300])


with TempDir() as tmp:
    main(tmp)
finish()
