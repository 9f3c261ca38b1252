# SPDX-License-Identifier: MIT
# Description: test images made from Debian's Fashion-MNIST (real photographs
# of clothes, 28x28 grey) with PIL: colour pictures of several sizes, and the
# edge cases of the image tests.  Shared by the decode and pack tests.
import gzip
import os
import struct
import sys
import zlib

SKIP = 77
MNIST = "/usr/share/datasets/fashion-mnist"

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    print("numpy or PIL is not available (%s): skipping" % e)
    sys.exit(SKIP)


def mnist(n=300, kind="t10k"):
    """The first n Fashion-MNIST images ([n, 28, 28] uint8) and labels."""
    path = os.path.join(MNIST, "%s-images-idx3-ubyte.gz" % kind)
    if not os.path.exists(path):
        print("%s is missing (dataset-fashion-mnist): skipping" % path)
        sys.exit(SKIP)
    with gzip.open(path) as f:
        magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
        n = min(n, count)
        imgs = np.frombuffer(f.read(n * rows * cols), np.uint8).reshape(n, rows, cols)
    with gzip.open(os.path.join(MNIST, "%s-labels-idx1-ubyte.gz" % kind)) as f:
        f.read(8)
        labels = np.frombuffer(f.read(n), np.uint8)
    return imgs, labels


def photo(imgs, i, w, h):
    """A colour picture w x h: three garments as R, G, B, upscaled (bicubic,
    so the picture has smooth gradients and sharp edges, like a photo)."""
    k = len(imgs)
    rgb = np.stack([imgs[i % k], imgs[(i + 1) % k], 255 - imgs[(i + 2) % k]], axis=-1)
    return Image.fromarray(rgb, "RGB").resize((w, h), Image.BICUBIC)


def png16(path, arr):
    """Write a 16-bit PNG (grey [h, w] or RGB [h, w, 3] uint16): PIL cannot
    write 16-bit RGB."""
    arr = np.asarray(arr, dtype=">u2")
    h, w = arr.shape[:2]
    ctype = 0 if arr.ndim == 2 else 2
    raw = b"".join(b"\x00" + arr[y].tobytes() for y in range(h))

    def chunk(t, d):
        c = struct.pack(">I", len(d)) + t + d
        return c + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, ctype, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw)))
        f.write(chunk(b"IEND", b""))
