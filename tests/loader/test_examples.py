#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: runs the examples on small datasets packed first:
# train_loop on the loader tests' dataset (packed with the public writer API
# by lt-pack), two epochs in its default window shuffle, checking the sample
# count and the exact sum of every fixed field; llmc_loop on llm.c token
# shards (u16 and u32) packed with `ringfeed pack --llmc`, over more steps
# than two epochs have, checking every token of the int32 inputs and targets
# it dumps against the rows read from the .bin files by a reader of their
# own: in file order with shuffle none, each a distinct row per epoch with
# window.  On the host backend, auto and, when the cudart emulator is given,
# on cuda.
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


def write_llmc_bin(path, magic, version, toks):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = magic, version, len(toks)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(toks.tobytes())


def read_llmc_bin(path):
    """llm.c's .bin read on its own: a 256 x int32 header (magic, version,
    token count), then the tokens, u16 (GPT-2, v1) or u32 (Llama 3, v7)."""
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, n = (int(v) for v in np.frombuffer(raw[:1024], dtype="<i4")[:3])
    dtype = {(20240520, 1): "<u2", (20240801, 7): "<u4"}[(magic, version)]
    toks = np.frombuffer(raw[1024:], dtype=dtype)
    assert len(toks) == n, path
    return toks.astype(np.int64)


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
        check("plan: shuffle window," in r.stderr, f"train_loop {dev} shuffles by window")
        check(f"batches {2 * ((n + 49) // 50)} samples {2 * n}" in out, f"train_loop {dev} counts")
        check(out.count(f": {n} samples") == 2, f"train_loop {dev} epochs")
        for name, s in want.items():
            check(f"field {name} sum {2 * s} " in out, f"train_loop {dev} sum of {name}")

    # --- llmc_loop on llm.c token shards (GPT-2 u16 and Llama 3 u32) ---
    T, B = 16, 4
    rng = np.random.default_rng(7)
    for kind, magic, version, dtype, vocab in (("gpt2", 20240520, 1, "<u2", 50257),
                                               ("llama3", 20240801, 7, "<u4", 128256)):
        sub = f"{d}/{kind}"
        os.mkdir(sub)
        for i, k in enumerate((301, 250)):
            write_llmc_bin(f"{sub}/tok_{i}.bin", magic, version,
                           rng.integers(0, vocab, size=k).astype(dtype))
        r = subprocess.run([ringfeed, "pack", "-q", "-o", f"{sub}/tok.rfs", "--llmc",
                            f"{sub}/tok_*.bin", "--seq-len", str(T), "--chunk-bytes", "256"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"pack --llmc {kind}: " + r.stderr)
        # The rows llm.c would read, from the .bin files themselves: T + 1
        # tokens every T tokens, each shard cut on its own, shards in order.
        rows = []
        for name in sorted(os.listdir(sub)):
            if name.endswith(".bin"):
                toks = read_llmc_bin(f"{sub}/{name}")
                rows += [toks[k * T: k * T + T + 1] for k in range((len(toks) - 1) // T)]
        rows = np.array(rows, dtype=np.int64)
        where = {tuple(row): i for i, row in enumerate(rows)}
        check(len(where) == len(rows), f"{kind}: rows distinct (test data)")
        per_epoch = len(rows) // B  # drop_last
        steps = per_epoch * 2 + 3   # more than two epochs
        for dev, env in devices + [("auto", {})]:
            for shuffle in ("none", "window"):
                what = f"llmc_loop {kind} {dev} {shuffle}"
                dump = f"{sub}/dump"
                r = run([llmc_loop, "--device", dev, "--batch", str(B), "--steps", str(steps),
                         "--shuffle", shuffle, "--seed", "5", "--dump", dump,
                         f"{sub}/tok.rfs"], env)
                check(r.returncode == 0, f"{what} exit")
                if r.returncode != 0:
                    continue
                got = np.fromfile(dump, dtype="<i4").astype(np.int64)
                check(got.size == steps * 2 * B * T, f"{what}: dumped {got.size} tokens")
                if got.size != steps * 2 * B * T:
                    continue
                got = got.reshape(steps, 2, B, T)
                epochs = [int(e) for e in re.findall(r"^step \d+: inputs \(\d+, \d+\) targets "
                                                     r"\(\d+, \d+\), epoch (\d+)", r.stdout,
                                                     re.M)]
                check(epochs == [s // per_epoch for s in range(steps)], f"{what}: epochs")
                check(f"inputs ({B}, {T}) targets ({B}, {T})" in r.stdout, f"{what} shapes")
                # Every row of every step: inputs = tokens [0, T) and targets =
                # [1, T + 1) of one row of the .bin files; in file order with
                # shuffle none, each row at most once per epoch with window.
                taken = []
                for s in range(steps):
                    idx = []
                    for j in range(B):
                        i = where.get(tuple(got[s, 0, j]) + (int(got[s, 1, j, -1]),), -1)
                        check(i >= 0 and (got[s, 1, j] == rows[i][1:]).all(),
                              f"{what}: step {s} row {j} is no row of the .bin files")
                        idx.append(i)
                    taken.append(idx)
                for e in range(2):
                    ep = [i for idx in taken[e * per_epoch:(e + 1) * per_epoch] for i in idx]
                    check(len(set(ep)) == per_epoch * B, f"{what}: epoch {e} repeats a row")
                    if shuffle == "none":
                        check(ep == list(range(per_epoch * B)), f"{what}: epoch {e} order")
                    else:
                        check(ep != list(range(per_epoch * B)), f"{what}: epoch {e} unshuffled")
                if shuffle == "window":
                    check(taken[:per_epoch] != taken[per_epoch:2 * per_epoch],
                          f"{what}: epochs 0 and 1 in the same order")
                m = re.search(r"steps (\d+) tokens (\d+) input_sum (\d+) target_sum (\d+)",
                              r.stdout)
                check(m is not None, f"{what} summary")
                if m:
                    check(int(m.group(1)) == steps, f"{what} steps {m.group(1)} != {steps}")
                    check(int(m.group(2)) == steps * B * T, f"{what} tokens")
                    check(int(m.group(3)) == int(got[:, 0].sum()), f"{what} input sum")
                    check(int(m.group(4)) == int(got[:, 1].sum()), f"{what} target sum")

sys.exit(1 if failures else 0)
