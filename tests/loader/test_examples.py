#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: runs the examples on small datasets packed first:
# train_loop on the loader tests' dataset (packed with the public writer API
# by lt-pack), two epochs, checking the sample count and the exact sum of
# every fixed field; llmc_loop on llm.c token shards packed with `ringfeed
# pack --llmc`, checking the step count, shapes and the exact sums of the
# inputs [0,T) and targets [1,T+1) over more steps than one epoch has.  On
# the host backend and, when the cudart emulator is given, on cuda.
# Usage: test_examples.py TRAIN_LOOP LLMC_LOOP LT_PACK RINGFEED [EMULATOR]
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

train_loop, llmc_loop, lt_pack, ringfeed = sys.argv[1:5]
emulator = sys.argv[5] if len(sys.argv) > 5 else ""
failures = 0


def check(cond, what):
    global failures
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        failures += 1


def run(args, env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run(args, capture_output=True, env=e, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
    return r


devices = [("host", {})]
if emulator:
    devices.append(("cuda", {"RINGFEED_CUDART": emulator, "RINGFEED_EMU_BW": "1G"}))

with tempfile.TemporaryDirectory(dir=".") as d:
    # --- train_loop on the loader tests' dataset (lt.h's values) ---
    n = 1003
    check(subprocess.run([lt_pack, d, "lt", str(n), "1", "4096", "16384", "1"]).returncode == 0,
          "lt-pack")
    g = np.arange(n, dtype=np.uint64)
    want = {
        "x": int(sum(((g * 7 + j) & 0xFFFF).astype(np.int64).sum() for j in range(3))),
        "y": int((g.astype(np.int64) * 1000003 - 5).sum()),
        "img": int(sum(((g * 13 + j * 3) & 0xFF).astype(np.int64).sum() for j in range(20))),
    }
    for dev, env in devices:
        r = run([train_loop, "--device", dev, "--batch", "50", "--epochs", "2", d], env)
        out = r.stdout
        check(r.returncode == 0, f"train_loop {dev} exit")
        check(f"device {dev}" in out or (dev == "cuda" and "device cuda" in out),
              f"train_loop {dev} device line: {out[:80]}")
        check(f"batches {2 * ((n + 49) // 50)} samples {2 * n}" in out, f"train_loop {dev} counts")
        check(out.count(f": {n} samples") == 2, f"train_loop {dev} epochs")
        for name, s in want.items():
            check(f"field {name} sum {2 * s} " in out, f"train_loop {dev} sum of {name}")

    # --- llmc_loop on llm.c token shards ---
    T, B = 16, 4
    rng = np.random.default_rng(7)
    shards = [rng.integers(0, 50257, size=k, dtype=np.uint16) for k in (301, 250)]
    for i, toks in enumerate(shards):
        hdr = np.zeros(256, dtype=np.int32)
        hdr[0], hdr[1], hdr[2] = 20240520, 1, len(toks)
        with open(f"{d}/tok_{i}.bin", "wb") as f:
            f.write(hdr.tobytes())
            f.write(toks.tobytes())
    r = subprocess.run([ringfeed, "pack", "-q", "-o", f"{d}/tok.rfs", "--llmc", f"{d}/tok_*.bin",
                        "--seq-len", str(T), "--chunk-bytes", "256"], capture_output=True, text=True)
    check(r.returncode == 0, "pack --llmc: " + r.stderr)
    samples = []
    for toks in shards:
        k = 0
        while k * T + T + 1 <= len(toks):
            samples.append(toks[k * T: k * T + T + 1].astype(np.uint64))
            k += 1
    per_epoch = len(samples) // B
    steps = per_epoch * 2 + 3  # more than two epochs
    in_sum = tg_sum = 0
    for s in range(steps):
        k = s % per_epoch
        for row in samples[k * B:(k + 1) * B]:
            in_sum += int(row[:T].sum())
            tg_sum += int(row[1:].sum())
    for dev, env in devices:
        r = run([llmc_loop, "--device", dev, "--batch", str(B), "--steps", str(steps),
                 f"{d}/tok.rfs"], env)
        check(r.returncode == 0, f"llmc_loop {dev} exit")
        check(f"inputs ({B}, {T}) targets ({B}, {T})" in r.stdout, f"llmc_loop {dev} shapes")
        m = re.search(r"steps (\d+) tokens (\d+) input_sum (\d+) target_sum (\d+)", r.stdout)
        check(m is not None, f"llmc_loop {dev} summary")
        if m:
            check(int(m.group(1)) == steps, f"llmc_loop {dev} steps {m.group(1)} != {steps}")
            check(int(m.group(2)) == steps * B * T, f"llmc_loop {dev} tokens")
            check(int(m.group(3)) == in_sum, f"llmc_loop {dev} input sum")
            check(int(m.group(4)) == tg_sum, f"llmc_loop {dev} target sum")

sys.exit(1 if failures else 0)
