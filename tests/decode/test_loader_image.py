# SPDX-License-Identifier: MIT
# Description: images decoded in the loader (rf_config.images) over an image
# folder packed by `ringfeed pack --images`, through `ringfeed cat`: every
# delivered pixel equals rf_image_load on the same file with the same (seed,
# epoch, sample index) (image-helper), and PIL's Resize + CenterCrop for PNG
# with the eval transform; a resume gives the same pixels; two ranks are
# disjoint, complete and give the same pixels per sample; a damaged image is
# an error naming its shard, sample and file, and with --on-error skip its
# chunk comes as black images.
# Run as: test_loader_image.py PATH/TO/ringfeed PATH/TO/image-helper
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imgdata import Image, mnist, np, photo  # noqa: E402

RINGFEED, HELPER = sys.argv[1], sys.argv[2]
N = 72
failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def run(args, ok=True):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    if ok and p.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(map(str, args)), p.returncode,
                                  p.stderr.decode(errors="replace")))
    return p


def make_folder(root, imgs, labels):
    """DIR/CLASS/FILE of JPEG and PNG pictures of several sizes and kinds."""
    for i in range(N):
        d = os.path.join(root, "c%d" % labels[i])
        os.makedirs(d, exist_ok=True)
        w, h = 30 + (i * 37) % 170, 28 + (i * 53) % 150
        im = photo(imgs, i, w, h)
        if i % 9 == 4:
            im = im.convert("L")
        elif i % 9 == 7:
            im = im.convert("RGBA")
        if i % 3 == 0 or im.mode == "RGBA":
            im.save(os.path.join(d, "%03d.png" % i))
        else:
            im.save(os.path.join(d, "%03d.jpg" % i), quality=60 + i % 40)


def pack(folder, out):
    run([RINGFEED, "pack", "--images", folder, "-o", out, "--chunk-bytes", "12K", "-q"])


def names(ds, *extra):
    p = run([RINGFEED, "cat", ds, "--field", "name", "--text", "-q"] + list(extra))
    return [bytes(int(v) for v in line.split()).decode() for line in
            p.stdout.decode().splitlines()]


def cat_pixels(ds, h, w, c, *extra):
    p = run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "%dx%d" % (h, w), "-q"] +
            list(extra))
    a = np.frombuffer(p.stdout, np.uint8)
    if a.size % (h * w * c):
        fail("cat %s: %d bytes, not a multiple of %d" % (extra, a.size, h * w * c))
        return np.zeros((0, h, w, c), np.uint8)
    return a.reshape(-1, h, w, c)


def helper_load(tmp, path, mode, w, h, resize, dct, seed, epoch, index):
    out = os.path.join(tmp, "load.rgb")
    p = run([HELPER, "load", path, out, mode, w, h, resize, dct, seed, epoch, index])
    r = p.stdout.decode().split()
    if not r or r[0] != "ok":
        fail("image-helper load %s: %s" % (path, " ".join(r)))
        return None
    return np.fromfile(out, np.uint8).reshape(h, w, 3)


def pil_eval(path, resize, h, w):
    """torchvision's Resize(resize) + CenterCrop((h, w)) with PIL's bilinear."""
    im = Image.open(path).convert("RGB")
    iw, ih = im.size
    if iw <= ih:
        nw, nh = resize, int(resize * ih / iw)
    else:
        nh, nw = resize, int(resize * iw / ih)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - h) / 2.0)), int(round((nw - w) / 2.0))
    return np.asarray(im.crop((left, top, left + w, top + h)))


def test_train(tmp, ds, folder, order):
    """Train transform, shuffled chunks: each sample as rf_image_load keys it."""
    h, w = 24, 32
    opts = ["--image-transform", "train", "--shuffle", "chunks", "--seed", "5", "--batch", "8"]
    got = cat_pixels(ds, h, w, 3, *opts)
    delivered = names(ds, "--shuffle", "chunks", "--seed", "5", "--batch", "8")
    if len(got) != N or sorted(delivered) != sorted(order):
        fail("train: %d samples delivered, %d names" % (len(got), len(delivered)))
        return None, None
    if delivered == order:
        fail("train: shuffle chunks delivered the file order")
    for k, name in enumerate(delivered):
        want = helper_load(tmp, os.path.join(folder, name), "train", w, h, 0, 1, 5, 0,
                           order.index(name))
        if want is not None and not np.array_equal(got[k], want):
            fail("train: sample %d (%s): %d pixels differ from rf_image_load" %
                 (k, name, int((got[k] != want).sum())))
    return got, delivered


def test_eval(tmp, ds, folder, order):
    """Eval transform without DCT scaling: PNG equal to PIL, JPEG to rf_image_load."""
    h, w, resize = 20, 20, 26
    got = cat_pixels(ds, h, w, 3, "--image-resize", resize, "--image-no-dct", "--batch", "7")
    if len(got) != N:
        fail("eval: %d samples" % len(got))
        return
    npng = 0
    for k, name in enumerate(order):
        path = os.path.join(folder, name)
        if name.endswith(".png"):
            want = pil_eval(path, resize, h, w)
            npng += 1
        else:
            want = helper_load(tmp, path, "center", w, h, resize, 0, 0, 0, k)
        if want is not None and not np.array_equal(got[k], want):
            fail("eval: %s: %d values differ (max %d)" % (
                name, int((got[k] != want).sum()),
                int(np.abs(got[k].astype(int) - want.astype(int)).max())))
    if npng < 10:
        fail("eval: only %d PNG compared" % npng)
    # Luma: PIL's convert("L") of the RGB output.
    luma = cat_pixels(ds, h, w, 1, "--image-resize", resize, "--image-no-dct",
                      "--image-channels", "1")
    for k in range(len(luma)):
        want = np.asarray(Image.fromarray(got[k], "RGB").convert("L"))
        if not np.array_equal(luma[k, :, :, 0], want):
            fail("eval: luma of sample %d differs from PIL's convert('L')" % k)
            break


def test_resume(tmp, ds, full):
    """Three batches, save, resume: the same bytes as one run."""
    h, w = 24, 32
    opts = ["--image-transform", "train", "--shuffle", "chunks", "--seed", "5", "--batch", "8"]
    state = os.path.join(tmp, "pos.state")
    a = cat_pixels(ds, h, w, 3, *(opts + ["--batches", "3", "--state-out", state]))
    b = cat_pixels(ds, h, w, 3, *(opts + ["--state-in", state]))
    both = np.concatenate([a, b])
    if len(a) != 24 or not np.array_equal(both, full):
        fail("resume: %d + %d samples, equal to one run: %s" % (
            len(a), len(b), both.shape == full.shape and np.array_equal(both, full)))


def test_ranks(ds, full, delivered, world):
    """Ranks: disjoint, complete but for the last N % world, same pixels."""
    h, w = 24, 32
    by_name = {n: full[k] for k, n in enumerate(delivered)}
    seen = []
    for r in range(world):
        opts = ["--shuffle", "chunks", "--seed", "5", "--batch", "4", "--rank", str(r),
                "--world", str(world)]
        px = cat_pixels(ds, h, w, 3, "--image-transform", "train", *opts)
        nm = names(ds, *opts)
        # The rank decodes its own samples alone, not its chunks' others.
        p = run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "%dx%d" % (h, w),
                 "--image-transform", "train", "-v"] + opts)
        m = re.search(rb"(\d+) images decoded", p.stderr)
        if not m or int(m.group(1)) != len(nm):
            fail("rank %d: %s images decoded for %d delivered" % (
                r, m and int(m.group(1)), len(nm)))
        if len(px) != len(nm):
            fail("rank %d: %d images, %d names" % (r, len(px), len(nm)))
            continue
        for k, n in enumerate(nm):
            if not np.array_equal(px[k], by_name[n]):
                fail("rank %d: %s: pixels differ from the one-rank run" % (r, n))
        seen += nm
    if len(set(seen)) != len(seen):
        fail("ranks: %d samples delivered twice" % (len(seen) - len(set(seen))))
    if len(set(seen)) < N - 4 * world + 1:
        fail("ranks: %d of %d samples delivered" % (len(set(seen)), N))


def test_bad(tmp, folder, order):
    """A PNG whose image data is damaged after packing's header check."""
    bad = os.path.join(tmp, "bad")
    shutil.copytree(folder, bad)
    victim = [n for n in order if n.endswith(".png")][3]
    path = os.path.join(bad, victim)
    data = bytearray(open(path, "rb").read())
    at = data.index(b"IDAT") + 4
    for i in range(at + 8, min(at + 40, len(data) - 20)):
        data[i] ^= 0x5a
    open(path, "wb").write(bytes(data))
    ds = os.path.join(tmp, "bad.rfs")
    pack(bad, ds)
    p = run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "16", "--batch", "8"],
            ok=False)
    err = p.stderr.decode(errors="replace")
    idx = order.index(victim)
    if p.returncode != 1 or victim not in err or "sample %d" % idx not in err or \
            "bad.rfs" not in err:
        fail("damaged %s: exit %d, message: %s" % (victim, p.returncode, err.strip()))
    else:
        print("error message: " + err.strip())
    # Skip: the chunk's samples are zeros, the others as without the damage.
    p = run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "16", "--batch", "8",
             "--on-error", "skip", "-v"])
    got = np.frombuffer(p.stdout, np.uint8).reshape(-1, 16, 16, 3)
    ref = cat_pixels(os.path.join(tmp, "ds.rfs"), 16, 16, 3, "--batch", "8")
    if len(got) != N:
        fail("skip: %d samples" % len(got))
        return
    zero = [k for k in range(N) if not got[k].any()]
    if idx not in zero or len(zero) >= N // 2:
        fail("skip: zero samples %s, the damaged one is %d" % (zero, idx))
    for k in range(N):
        if k not in zero and not np.array_equal(got[k], ref[k]):
            fail("skip: sample %d differs from the undamaged run" % k)
    if "skipped" not in p.stderr.decode(errors="replace"):
        fail("skip: no warning: %s" % p.stderr.decode(errors="replace"))


def test_usage(ds):
    p = run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "16", "--shuffle",
             "window"], ok=False)
    if p.returncode == 0 or b"shuffle none or chunks" not in p.stderr:
        fail("window: exit %d: %s" % (p.returncode, p.stderr))
    p = run([RINGFEED, "cat", ds, "--field", "label", "--image-size", "16"], ok=False)
    if p.returncode == 0 or b"not a variable-size field of bytes" not in p.stderr:
        fail("label as image: exit %d: %s" % (p.returncode, p.stderr))


def main():
    imgs, labels = mnist(N)
    tmp = tempfile.mkdtemp(prefix="rf-loader-image-")
    try:
        folder = os.path.join(tmp, "folder")
        make_folder(folder, imgs, labels)
        ds = os.path.join(tmp, "ds.rfs")
        pack(folder, ds)
        if failures:
            return 1
        order = names(ds)
        if len(order) != N:
            fail("pack: %d names" % len(order))
            return 1
        full, delivered = test_train(tmp, ds, folder, order)
        test_eval(tmp, ds, folder, order)
        if full is not None:
            test_resume(tmp, ds, full)
            test_ranks(ds, full, delivered, 2)
            test_ranks(ds, full, delivered, 4)
        test_bad(tmp, folder, order)
        test_usage(ds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
