# SPDX-License-Identifier: MIT
# Description: JPEGs for bench_image, ImageNet-like: Fashion-MNIST garments
# (Debian's dataset-fashion-mnist) as colour pictures of 500 x 375 and
# other typical sizes, quality 90, 4:2:0.  Usage: make-images.py DIR [N]
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "decode"))
from imgdata import mnist, photo  # noqa: E402

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
os.makedirs(out, exist_ok=True)
imgs, _ = mnist(n)
sizes = [(500, 375), (375, 500), (500, 333), (640, 480), (500, 500), (800, 600)]
for i in range(n):
    w, h = sizes[i % len(sizes)]
    photo(imgs, i, w, h).save(os.path.join(out, "%04d.jpg" % i), quality=90, subsampling=2)
print("%d JPEGs in %s" % (n, out))
