# SPDX-License-Identifier: MIT
# Description: `ringfeed pack` draws a progress bar (redrawn with \r) when
# stderr is a terminal and stays silent when it is not; SIGINT (Ctrl-C) while
# packing aborts the writer: exit 130, "interrupted" on stderr, and neither
# the output nor a temporary file left behind.
import os
import pty
import select
import signal
import subprocess
import time

import numpy as np

from clitest import EXE, TempDir, check, finish, run

with TempDir() as tmp:
    # Compressible bytes, so zstd at a high level is slow enough to interrupt.
    rng = np.random.default_rng(5)
    rows = 16384
    a = np.lib.format.open_memmap(os.path.join(tmp, "in.npy"), mode="w+", dtype="u1",
                                  shape=(rows, 4096))
    base = rng.integers(97, 123, size=(256, 4096), dtype="u1")
    for i in range(0, rows, 256):
        a[i:i + 256] = np.roll(base, i, axis=1)
    a.flush()
    del a
    src = os.path.join(tmp, "in.npy")

    # Not a terminal: no bar.
    out = os.path.join(tmp, "p.rfs")
    rc, _, err = run("pack", "--chunk-bytes", "256K", "-o", out, "x=" + src, expect=0)
    check("\r" not in err and "packing [" not in err, "bar drawn on a pipe: %r" % err[:200])
    os.unlink(out)
    os.unlink(out[:-4] + ".rfm")

    # A terminal: a bar with \r redraws.
    master, slave = pty.openpty()
    p = subprocess.Popen([EXE, "pack", "--chunk-bytes", "256K", "-o", out, "x=" + src],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    tty = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        tty += chunk
    p.wait(timeout=60)
    os.close(master)
    check(p.returncode == 0, "pack on a terminal: exit %s" % p.returncode)
    check(b"packing [" in tty and b"\r" in tty and b"MiB" in tty, "no bar on a tty: %r" % tty[:300])
    os.unlink(out)
    os.unlink(out[:-4] + ".rfm")

    # SIGINT once the writer has its temporary file.
    out = os.path.join(tmp, "z.rfs")
    p = subprocess.Popen([EXE, "pack", "--zstd", "19", "--chunk-bytes", "64K", "-o", out,
                          "x=" + src], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and p.poll() is None:
        if any(".tmp." in f for f in os.listdir(tmp)):
            break
        time.sleep(0.01)
    check(p.poll() is None, "pack finished before it could be interrupted")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    check(p.returncode == 130, "exit %s after SIGINT (stderr %r)" % (p.returncode, err))
    check("interrupted" in err, "message: %r" % err)
    check(sorted(os.listdir(tmp)) == ["in.npy"], "left behind: %s" % os.listdir(tmp))
finish()
