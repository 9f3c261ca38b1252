# SPDX-License-Identifier: MIT
# Description: the image module (src/decode/image.h) against PIL: decoded
# pixels of JPEG and PNG of every kind (exact for PNG, within JPEG_TOL for
# JPEG), the transforms against PIL's crop + bilinear resize (exact without
# DCT scaling), the errors of damaged files, and the random crops'
# determinism.  Run as: test_image.py PATH/TO/image-helper
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imgdata import Image, mnist, np, photo, png16  # noqa: E402

HELPER = sys.argv[1]
# The documented JPEG tolerance: a full-size decode is within 1 of PIL's
# (both are libjpeg-turbo with the same settings; 0 when the same build).
JPEG_TOL = 1
# DCT-domain scaling against PIL's full decode + resize: the mean absolute
# difference per channel value.
DCT_MEAN_TOL = 1.0

RF_EFORMAT, RF_ECORRUPT, RF_ETRUNCATED = -1000, -1001, -1004
failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def helper(*args):
    p = subprocess.run([HELPER] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        fail("image-helper %s: exit %d: %s" % (" ".join(map(str, args)), p.returncode,
                                             p.stderr))
        return ["error", "0", "helper failed"]
    return p.stdout.split()


def decode(tmp, path):
    """(array, info words) or (None, error words)."""
    out = os.path.join(tmp, "out.rgb")
    r = helper("decode", path, out)
    if r[0] != "ok":
        return None, r
    w, h = int(r[1]), int(r[2])
    return np.fromfile(out, np.uint8).reshape(h, w, 3), r


def pil_rgb(path):
    im = Image.open(path)
    if im.mode in ("I", "I;16", "I;16B"):
        # PIL clips 16-bit grey to 0..255 when converting; the module keeps
        # the high byte (what 16-bit RGB gives in PIL too).
        a = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
        return np.stack([a, a, a], axis=-1)
    return np.asarray(im.convert("RGB"))


def compare(name, got, want, tol):
    if got is None:
        fail("%s: not decoded" % name)
        return
    if got.shape != want.shape:
        fail("%s: shape %s, PIL %s" % (name, got.shape, want.shape))
        return
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    if d.max() > tol:
        fail("%s: max difference %d > %d (%d values differ)" % (name, d.max(), tol,
                                                                int((d > tol).sum())))


def make_images(tmp, imgs):
    """name -> (path, tolerance against PIL)."""
    files = {}

    def add(name, im, tol, **kw):
        path = os.path.join(tmp, name)
        im.save(path, **kw)
        files[name] = (path, tol)

    for i, (w, h) in enumerate([(28, 28), (37, 53), (224, 224), (500, 300), (640, 480)]):
        for q in (50, 75, 95):
            for sub in (0, 1, 2):  # 4:4:4, 4:2:2, 4:2:0
                add("p%d-q%d-s%d.jpg" % (i, q, sub), photo(imgs, i, w, h), JPEG_TOL,
                    quality=q, subsampling=sub)
        add("p%d.png" % i, photo(imgs, i, w, h), 0)
    add("progressive.jpg", photo(imgs, 7, 320, 240), JPEG_TOL, quality=85, progressive=True)
    add("gray.jpg", photo(imgs, 8, 200, 150).convert("L"), JPEG_TOL, quality=90)
    add("cmyk.jpg", photo(imgs, 9, 160, 120).convert("CMYK"), JPEG_TOL, quality=95)
    add("gray.png", photo(imgs, 10, 90, 70).convert("L"), 0)
    rgba = photo(imgs, 11, 80, 60).convert("RGBA")
    rgba.putalpha(Image.fromarray(imgs[12]).resize((80, 60)))
    add("rgba.png", rgba, 0)
    add("la.png", photo(imgs, 13, 50, 40).convert("LA"), 0)
    add("palette.png", photo(imgs, 14, 64, 48).convert("P", palette=Image.ADAPTIVE), 0)
    add("one.jpg", Image.new("RGB", (1, 1), (200, 30, 90)), JPEG_TOL)
    add("one.png", Image.new("RGB", (1, 1), (200, 30, 90)), 0)
    add("wide.jpg", photo(imgs, 15, 8000, 1200), JPEG_TOL, quality=80)
    g16 = (np.asarray(photo(imgs, 16, 60, 45).convert("L")).astype(np.uint16) * 257 + 7)
    png16(os.path.join(tmp, "gray16.png"), g16)
    files["gray16.png"] = (os.path.join(tmp, "gray16.png"), 0)
    c16 = np.asarray(photo(imgs, 17, 60, 45)).astype(np.uint16) * 256 + 255
    png16(os.path.join(tmp, "rgb16.png"), c16)
    files["rgb16.png"] = (os.path.join(tmp, "rgb16.png"), 0)
    # EXIF orientation 6 (rotate 90 on display): decoded in stored order.
    exif = Image.Exif()
    exif[0x0112] = 6
    add("exif6.jpg", photo(imgs, 18, 120, 80), JPEG_TOL, quality=90, exif=exif.tobytes())
    # Data after the end marker (a camera's trailer): decoded as PIL does.
    for name in ("p2-q75-s2.jpg", "p2.png"):
        path, tol = files[name]
        with open(path, "rb") as f:
            data = f.read()
        trailer = os.path.join(tmp, "trailer-" + name)
        with open(trailer, "wb") as f:
            f.write(data + bytes(1500) + b"TRAILER")
        files["trailer-" + name] = (trailer, tol)
    return files


def test_decode(tmp, files):
    for name, (path, tol) in sorted(files.items()):
        got, info = decode(tmp, path)
        if got is None:
            fail("%s: %s" % (name, " ".join(info)))
            continue
        want = pil_rgb(path)
        if name == "rgb16.png":
            want = (np.asarray(np.load(path + ".npy")) if os.path.exists(path + ".npy")
                    else want)
        compare("decode " + name, got, want, tol)
    # What the info says.
    _, info = decode(tmp, files["cmyk.jpg"][0])
    if info[:6] != ["ok", "160", "120", "4", "8", "1"]:
        fail("cmyk.jpg info: %s" % info)
    _, info = decode(tmp, files["gray16.png"][0])
    if info[:5] != ["ok", "60", "45", "1", "16"]:
        fail("gray16.png info: %s" % info)
    _, info = decode(tmp, files["exif6.jpg"][0])
    if info[:3] != ["ok", "120", "80"]:
        fail("exif6.jpg: EXIF orientation must not be applied: %s" % info)


def test_errors(tmp, files):
    def write(name, data):
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    jpg = open(files["p3-q75-s2.jpg"][0], "rb").read()
    png = open(files["p3.png"][0], "rb").read()
    prog = open(files["progressive.jpg"][0], "rb").read()
    cases = [
        ("truncated.jpg", jpg[:len(jpg) // 2], RF_ETRUNCATED, "truncated"),
        ("truncated-header.jpg", jpg[:100], RF_ETRUNCATED, "truncated"),
        ("truncated-progressive.jpg", prog[:len(prog) * 2 // 3], RF_ETRUNCATED, "truncated"),
        ("truncated.png", png[:len(png) // 2], RF_ETRUNCATED, "truncated"),
        ("truncated-sig.png", png[:5], RF_ETRUNCATED, "truncated"),
        ("empty.jpg", b"", RF_ETRUNCATED, "empty"),
        ("text.jpg", b"hello, this is not an image\n", RF_EFORMAT, "not a JPEG or PNG"),
        ("gif.jpg", b"GIF89a" + bytes(40), RF_EFORMAT, "GIF"),
    ]
    # A corrupt PNG: one byte of the image data changed (its CRC fails).
    bad = bytearray(png)
    i = png.index(b"IDAT") + 40
    bad[i] ^= 0x55
    cases.append(("corrupt.png", bytes(bad), RF_ECORRUPT, "corrupt PNG"))
    # A corrupt JPEG: the frame header says 0 components.
    bad = bytearray(jpg)
    sof = jpg.index(b"\xff\xc0")
    bad[sof + 9] = 0
    cases.append(("corrupt.jpg", bytes(bad), RF_ECORRUPT, "corrupt JPEG"))
    for name, data, code, words in cases:
        path = write(name, data)
        got, r = decode(tmp, path)
        if got is not None:
            fail("%s: decoded without error" % name)
            continue
        if int(r[1]) != code or words not in " ".join(r[2:]):
            fail("%s: got %s, expected code %d and '%s'" % (name, " ".join(r), code, words))
        # The transforms report the same.
        r2 = helper("load", path, os.path.join(tmp, "o.rgb"), "train", 32, 32, 0, 1, 1, 0, 0)
        if r2[0] != "error" or int(r2[1]) != code:
            fail("%s: load gave %s" % (name, " ".join(r2)))


def load(tmp, path, mode, ow, oh, resize, dct, seed, epoch, index):
    out = os.path.join(tmp, "load.rgb")
    r = helper("load", path, out, mode, ow, oh, resize, dct, seed, epoch, index)
    if r[0] != "ok":
        fail("load %s: %s" % (path, " ".join(r)))
        return None, None
    return np.fromfile(out, np.uint8).reshape(oh, ow, 3), [int(v) for v in r[1:]]


def test_transforms(tmp, files):
    # Train without DCT scaling: PIL's crop + resize(BILINEAR) + flip exactly.
    n = 0
    for name in ("p3.png", "p4.png", "p1.png", "gray.png", "rgba.png", "one.png",
                 "p4-q95-s0.jpg", "p2-q75-s2.jpg", "cmyk.jpg", "progressive.jpg"):
        path, tol = files[name]
        src = Image.fromarray(pil_rgb(path))
        for idx in range(6):
            for (ow, oh) in ((224, 224), (32, 48)):
                got, c = load(tmp, path, "train", ow, oh, 0, 0, 42, 3, idx)
                if got is None:
                    continue
                x, y, w, h, flip = c[:5]
                want = src.crop((x, y, x + w, y + h)).resize((ow, oh), Image.BILINEAR)
                if flip:
                    want = want.transpose(Image.FLIP_LEFT_RIGHT)
                compare("train %s #%d %dx%d crop %s" % (name, idx, ow, oh, c), got,
                        np.asarray(want), tol)
                n += 1
    # Eval: torchvision's Resize(resize) + CenterCrop(out) on the PIL image.
    for name in ("p3.png", "p4.png", "p1.png", "p4-q95-s0.jpg", "wide.jpg"):
        path, tol = files[name]
        src = Image.fromarray(pil_rgb(path))
        for (ow, oh, rs) in ((224, 224, 256), (20, 30, 40), (224, 224, 224)):
            got, c = load(tmp, path, "center", ow, oh, rs, 0, 0, 0, 0)
            if got is None:
                continue
            W, H = src.size
            if W <= H:
                nw, nh = rs, int(rs * H / W)
            else:
                nw, nh = int(rs * W / H), rs
            r = src.resize((nw, nh), Image.BILINEAR)
            left, top = int(round((nw - ow) / 2.0)), int(round((nh - oh) / 2.0))
            want = np.asarray(r.crop((left, top, left + ow, top + oh)))
            compare("center %s %dx%d/%d" % (name, ow, oh, rs), got, want, tol)
            n += 1
    # PIL's resize with a fractional box.
    path = files["p4.png"][0]
    src = Image.open(path).convert("RGB")
    for box, (ow, oh) in (((10.5, 3.25, 300.75, 200.0), (64, 48)),
                          ((0, 0, 640, 480), (700, 500)), ((100, 100, 101, 102), (9, 9))):
        out = os.path.join(tmp, "rs.rgb")
        r = helper("resize", path, out, *box, ow, oh)
        if r[0] != "ok":
            fail("resize %s: %s" % (box, r))
            continue
        got = np.fromfile(out, np.uint8).reshape(oh, ow, 3)
        compare("resize box %s" % (box,), got, np.asarray(src.resize((ow, oh), Image.BILINEAR,
                                                                   box=box)), 0)
    # DCT-domain scaling: used on a large JPEG, close to the full decode.
    path = files["wide.jpg"][0]
    src = Image.open(path).convert("RGB")
    scaled = 0
    for idx in range(8):
        got, c = load(tmp, path, "train", 224, 224, 0, 1, 7, 0, idx)
        full, c0 = load(tmp, path, "train", 224, 224, 0, 0, 7, 0, idx)
        if got is None or full is None:
            continue
        if c[:5] != c0[:5]:
            fail("dct scaling changed the crop: %s vs %s" % (c, c0))
        if c[5] * 2 <= c[6]:
            scaled += 1
            # Never scaled below the output size.
            if c[2] * c[5] / c[6] < 224 or c[3] * c[5] / c[6] < 224:
                fail("dct scale %d/%d makes crop %s smaller than 224" % (c[5], c[6], c))
        d = np.abs(got.astype(np.int16) - full.astype(np.int16))
        if d.mean() > DCT_MEAN_TOL:
            fail("dct #%d: mean difference %.2f > %.2f (scale %d/%d)" % (idx, d.mean(),
                                                                      DCT_MEAN_TOL, c[5], c[6]))
    if scaled == 0:
        fail("wide.jpg: DCT scaling never used")
    got, c = load(tmp, path, "center", 224, 224, 256, 1, 0, 0, 0)
    if got is not None:
        if not (c[5] * 2 <= c[6]):
            fail("center on 8000x1200: no DCT scaling (%s)" % c)
        full, _ = load(tmp, path, "center", 224, 224, 256, 0, 0, 0, 0)
        if full is not None and np.abs(got.astype(np.int16) - full).mean() > DCT_MEAN_TOL:
            fail("center dct: mean difference too large")
    print("transforms: %d compared with PIL" % n)


def crops(*args):
    out = subprocess.run([HELPER, "crops"] + [str(a) for a in args], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    return [tuple(int(v) for v in line.split()) for line in out.splitlines()]


def test_random(tmp, files):
    a = crops(640, 480, 42, 3, 0, 2000)
    if a != crops(640, 480, 42, 3, 0, 2000):
        fail("crops differ between runs")
    # A resumed or re-sharded run asks for any range of indices: same draws.
    if a[1234:1300] != crops(640, 480, 42, 3, 1234, 66):
        fail("crops depend on where a run starts")
    if a == crops(640, 480, 42, 4, 0, 2000) or a == crops(640, 480, 43, 3, 0, 2000):
        fail("crops do not depend on the epoch or the seed")
    flips = sum(c[4] for c in a) / len(a)
    if not 0.45 < flips < 0.55:
        fail("flip rate %.3f" % flips)
    areas, ratios = [], []
    for x, y, w, h, f in a:
        if not (0 <= x and x + w <= 640 and 0 <= y and y + h <= 480 and w > 0 and h > 0):
            fail("crop out of the image: %s" % ((x, y, w, h),))
            break
        areas.append(w * h / (640 * 480))
        ratios.append(w / h)
    areas, ratios = np.array(areas), np.array(ratios)
    # torchvision's get_params, simulated with numpy's generator: the same
    # algorithm gives the same distribution of areas (not the same draws).
    rng = np.random.default_rng(0)
    ref = []
    for _ in range(20000):
        for _ in range(10):
            ta = 640 * 480 * rng.uniform(0.08, 1.0)
            ar = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            w, h = int(round(np.sqrt(ta * ar))), int(round(np.sqrt(ta / ar)))
            if 0 < w <= 640 and 0 < h <= 480:
                ref.append(w * h / (640 * 480))
                break
        else:
            ref.append(1.0)
    ref = np.array(ref)
    if not (0.075 <= areas.min() and areas.max() <= 1.0 and
            abs(areas.mean() - ref.mean()) < 0.02 and abs(np.median(areas) - np.median(ref)) < 0.03):
        fail("area fractions: min %.3f max %.3f mean %.3f (torchvision's algorithm: %.3f)"
             % (areas.min(), areas.max(), areas.mean(), ref.mean()))
    if not (ratios.min() > 0.7 and ratios.max() < 1.4):
        fail("aspect ratios %.3f .. %.3f" % (ratios.min(), ratios.max()))
    # The fallback: a 1000 x 10 strip admits no crop of ratio 3/4..4/3 and
    # area >= 0.08 -> the centred crop of ratio 4/3.
    for x, y, w, h, f in crops(1000, 10, 1, 0, 0, 20):
        if (w, h) != (13, 10) or x != (1000 - 13) // 2 or y != 0:
            fail("fallback crop %s, expected 13x10 centred" % ((x, y, w, h),))
            break
    # Pixels: the same sample gives the same bytes in another process.
    path = files["p4-q75-s2.jpg"][0]
    one, _ = load(tmp, path, "train", 224, 224, 0, 1, 5, 2, 77)
    two, _ = load(tmp, path, "train", 224, 224, 0, 1, 5, 2, 77)
    if one is not None and two is not None and not np.array_equal(one, two):
        fail("the same sample gave different pixels")


def test_sequence(tmp, files):
    """One scratch over every file, bad ones in between: each file gives
    what it gives in a process of its own (a failed JPEG must not spoil the
    decoder for the next one; buffers grown for a large image serve small
    ones)."""
    bad = sorted(os.path.join(tmp, f) for f in os.listdir(tmp)
                 if f.startswith(("truncated", "corrupt", "text", "gif", "empty")))
    good = [files[n][0] for n in sorted(files)]
    seq = []
    for i, g in enumerate(good):
        seq.append(g)
        if i < len(bad):
            seq.append(bad[i])
    outdir = os.path.join(tmp, "seq")
    os.makedirs(outdir, exist_ok=True)
    p = subprocess.run([HELPER, "seq", outdir] + seq, stdout=subprocess.PIPE, text=True,
                       timeout=300)
    lines = p.stdout.splitlines()
    if lines and lines[-1].startswith("scratch"):
        used, bound = (int(v) for v in lines.pop().split()[1:])
        if used > bound:
            fail("scratch holds %d bytes, more than its bound %d" % (used, bound))
    else:
        fail("seq: no scratch line")
    if p.returncode != 0 or len(lines) != len(seq):
        fail("seq: exit %d, %d lines for %d files" % (p.returncode, len(lines), len(seq)))
        return
    for i, (path, line) in enumerate(zip(seq, lines)):
        alone, r = decode(tmp, path)
        if alone is None:
            if line.split()[:2] != r[:2]:
                fail("seq %s: '%s', alone '%s'" % (path, line, " ".join(r[:2])))
            continue
        if not line.startswith("ok"):
            fail("seq %s: '%s' after other files, decodes alone" % (path, line))
            continue
        got = np.fromfile(os.path.join(outdir, "%d.rgb" % i), np.uint8)
        if not np.array_equal(got, alone.reshape(-1)):
            fail("seq %s: pixels differ from a decode alone" % path)
        one, _ = load(tmp, path, "train", 64, 48, 0, 1, 1, 2, i + 3)
        got = np.fromfile(os.path.join(outdir, "%d.load" % i), np.uint8)
        if one is not None and not np.array_equal(got, one.reshape(-1)):
            fail("seq %s: transform differs from one alone" % path)


def main():
    imgs, _ = mnist(40)
    tmp = tempfile.mkdtemp(prefix="rf-image-test-")
    try:
        files = make_images(tmp, imgs)
        # 16-bit RGB: PIL reads it as 8-bit RGB (high bytes), nothing to fix.
        test_decode(tmp, files)
        test_errors(tmp, files)
        test_sequence(tmp, files)
        test_transforms(tmp, files)
        test_random(tmp, files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
