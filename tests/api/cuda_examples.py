#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: the CUDA C++ the manual shows compiles with nvcc, warnings as
# errors: every examples/*.cu, and the training loop and the device check of
# <ringfeed/ringfeed.h>'s comment, cut out of the header and wrapped in a
# main().  Compile only (no GPU needed); skips (77) without nvcc.
# Usage: cuda_examples.py NVCC INCLUDE_DIR HEADER FILE.cu...
import os
import subprocess
import sys
import tempfile

nvcc, inc, header, sources = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if not nvcc or not os.access(nvcc, os.X_OK):
    print("SKIP: no nvcc")
    sys.exit(77)

FLAGS = ["-std=c++17", "-I" + inc, "-Xcompiler", "-Wall,-Wextra,-Werror",
         "--Werror", "all-warnings"]


def header_examples():
    """The header's CUDA code blocks: (file-scope lines, body lines)."""
    lines = open(header).read().split("\n")
    start = next(i for i, l in enumerate(lines) if "A complete training loop" in l)
    blocks, cur = [], None
    for l in lines[start:]:
        if l.startswith(" */"):
            break
        if l.startswith(" *     "):
            if cur is None:
                cur = []
                blocks.append(cur)
            cur.append(l[7:])
        elif l.strip() != "*":
            cur = None
    return blocks


def wrap(blocks):
    out = ["#include <cstdint>", "#include <cstdio>", "#include <cstring>",
           "#include <cuda_runtime.h>", "#include <ringfeed/ringfeed.h>", ""]
    loop, auto = blocks[0], blocks[1]
    top = [l for l in loop if l.startswith("__global__")]
    body = [l for l in loop if not l.startswith("__global__")]
    out += top + ["", "int", "main(void)", "{"] + ["    " + l for l in body]
    # The device check right after an open, on a loader of its own.
    out += ["    rc = rf_loader_open(&ld, &cfg);", "    if (rc < 0)", "        return 1;"]
    out += ["    {"] + ["        " + l for l in auto] + ["    }"]
    out += ["    rf_loader_close(&ld);", "    return 0;", "}", ""]
    return "\n".join(out)


failures = 0
with tempfile.TemporaryDirectory() as tmp:
    blocks = header_examples()
    if len(blocks) < 2 or not any("<<<" in l for l in blocks[0]):
        print("FAILED: the header's example was not found", file=sys.stderr)
        sys.exit(1)
    src = os.path.join(tmp, "header_example.cu")
    with open(src, "w") as f:
        f.write(wrap(blocks))
    for cu in [src] + sources:
        r = subprocess.run([nvcc] + FLAGS + ["-c", "-o", os.path.join(tmp, "x.o"), cu],
                           capture_output=True, text=True)
        if r.returncode:
            print("FAILED: nvcc %s:\n%s%s" % (cu, r.stdout, r.stderr), file=sys.stderr)
            if cu == src:
                print(open(src).read(), file=sys.stderr)
            failures += 1
        else:
            print("ok:", os.path.basename(cu))
sys.exit(1 if failures else 0)
