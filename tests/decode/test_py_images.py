# SPDX-License-Identifier: MIT
# Description: Loader(images=...) from Python over an image folder packed by
# `ringfeed pack --images`: the train pixels equal `ringfeed cat`'s (which
# test_loader_image.py checks against rf_image_load), a state_dict resume
# gives the same pixels, the eval transform of PNG files equals
# torchvision's Resize + CenterCrop on PIL images (when torchvision is
# installed), and bad options raise with the option's name.
# Run as: test_py_images.py PATH/TO/ringfeed  (PYTHONPATH: the module)
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imgdata import Image, mnist, np, photo  # noqa: E402

try:
    import ringfeed
except ImportError as e:
    print("the ringfeed module is not importable (%s): skipping" % e)
    sys.exit(77)

RINGFEED = sys.argv[1]
N = 40
failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def make(tmp):
    imgs, labels = mnist(N)
    folder = os.path.join(tmp, "folder")
    for i in range(N):
        d = os.path.join(folder, "c%d" % labels[i])
        os.makedirs(d, exist_ok=True)
        im = photo(imgs, i, 40 + (i * 29) % 120, 36 + (i * 41) % 110)
        if i % 2:
            im.save(os.path.join(d, "%03d.png" % i))
        else:
            im.save(os.path.join(d, "%03d.jpg" % i), quality=85)
    ds = os.path.join(tmp, "ds.rfs")
    subprocess.run([RINGFEED, "pack", "--images", folder, "-o", ds, "--chunk-bytes", "10K",
                    "-q"], check=True)
    return folder, ds


def collect(loader, n=None):
    out = []
    for k, b in enumerate(loader):
        if n is not None and k >= n:
            break
        out.append((np.asarray(b["image"]).copy(), None))
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="rf-py-images-")
    try:
        folder, ds = make(tmp)
        train = {"image": {"size": (24, 32), "transform": "train", "scale": (0.2, 1.0)}}
        kw = dict(shuffle="chunks", seed=9, device="cpu", drop_last=False,
                  fields=["image", "label"])
        got = collect(ringfeed.Loader(ds, 8, images=train, **kw))
        px = np.concatenate([g[0] for g in got])
        if px.shape != (N, 24, 32, 3) or px.dtype != np.uint8:
            fail("train: shape %s %s" % (px.shape, px.dtype))
        cat = subprocess.run([RINGFEED, "cat", ds, "--field", "image", "--image-size", "24x32",
                              "--image-transform", "train", "--image-scale", "0.2,1",
                              "--shuffle", "chunks", "--seed", "9", "--batch", "8", "-q"],
                             stdout=subprocess.PIPE, check=True).stdout
        if not np.array_equal(px.reshape(-1), np.frombuffer(cat, np.uint8)):
            fail("train: Python's pixels differ from ringfeed cat's")

        # Resume after 2 batches: the rest equals the uninterrupted run.
        ld = ringfeed.Loader(ds, 8, images=train, **kw)
        it = iter(ld)
        for _ in range(2):
            next(it)
        state = ld.state_dict()
        del it
        ld.close()
        ld2 = ringfeed.Loader(ds, 8, images=train, **kw)
        ld2.load_state_dict(state)
        rest = collect(ld2)
        if len(rest) != len(got) - 2 or any(not np.array_equal(a[0], b[0])
                                            for a, b in zip(rest, got[2:])):
            fail("resume: %d batches after the state, pixels equal: %s" % (
                len(rest), [np.array_equal(a[0], b[0]) for a, b in zip(rest, got[2:])]))

        # Ranks: each decodes the samples it takes, no other, with the
        # pixels of the one-rank run (named by the "name" field).
        def by_name(world, rank):
            ld = ringfeed.Loader(ds, 4, images=train, rank=rank, world=world,
                                 **dict(kw, fields=["image", "name"]))
            out = {}
            for b in ld:
                offs, data = (np.asarray(x) for x in b["name"])
                img = np.asarray(b["image"])
                for i in range(len(offs) - 1):
                    out[bytes(data[offs[i]:offs[i + 1]]).decode()] = img[i].copy()
            st = ld.stats()
            ld.close()
            return out, st
        # A pass reads the next epoch's first chunks ahead: images_decoded
        # counts those too (the exact share is checked through `ringfeed
        # cat`, which streams one epoch, in test_loader_image.py).
        one, st1 = by_name(1, 0)
        if st1["images_decoded"] < N or len(one) != N:
            fail("one rank: %d images decoded, %d delivered, of %d" % (
                st1["images_decoded"], len(one), N))
        for world in (2, 4):
            seen = 0
            for r in range(world):
                got_r, st = by_name(world, r)
                seen += len(got_r)
                if st["images_decoded"] < len(got_r):
                    fail("world %d rank %d: %d images decoded for %d samples delivered "
                         "(%d chunks read)" % (world, r, st["images_decoded"], st["samples"],
                                               st["chunks"]))
                for n, im in got_r.items():
                    if not np.array_equal(im, one[n]):
                        fail("world %d rank %d: %s: pixels differ from one rank's" % (
                            world, r, n))
            if seen < N - 4 * world:
                fail("world %d: %d of %d samples delivered" % (world, seen, N))

        # Eval on PNG: torchvision's Resize(36) + CenterCrop(28), PIL bilinear.
        try:
            from torchvision import transforms
        except ImportError:
            transforms = None
            print("torchvision is not installed: the eval comparison is skipped")
        ev = collect(ringfeed.Loader(ds, 10, images={"image": {"size": 28, "resize": 36,
                                                                "dct": False}},
                                     fields=["image", "name"], device="cpu", drop_last=False))
        if transforms is not None:
            tf = transforms.Compose([transforms.Resize(36), transforms.CenterCrop(28)])
            loader_names = []
            for b in ringfeed.Loader(ds, 10, fields=["name"], device="cpu", drop_last=False):
                offs, data = b["name"]
                offs, data = np.asarray(offs), np.asarray(data)
                loader_names += [bytes(data[offs[i]:offs[i + 1]]).decode()
                                 for i in range(len(offs) - 1)]
            names = loader_names
            pix = np.concatenate([e[0] for e in ev])
            npng = 0
            for k, name in enumerate(names):
                if not name.endswith(".png"):
                    continue
                want = np.asarray(tf(Image.open(os.path.join(folder, name)).convert("RGB")))
                npng += 1
                if not np.array_equal(pix[k], want):
                    fail("eval %s: %d values differ from torchvision's" % (
                        name, int((pix[k] != want).sum())))
            if npng != N // 2:
                fail("eval: %d PNG compared" % npng)

        for bad, word in (({"image": {"size": 0}}, "image size"),
                          ({"image": {"size": 24, "transform": "random"}}, "transform"),
                          ({"image": {"size": 24, "scale": 3, "transform": "train"}}, "scale"),
                          ({"image": 24, "label": 24}, "label"),
                          ({"image": {"size": 24, "flip": 2, "transform": "train"}}, "flip"),
                          ({"image": {"size": 24, "dct": "no"}}, "dct"),
                          ({"image": {"size": 24, "dct": 0}}, "dct"),
                          ({"image": {"size": 24, "flip": 0.3}}, "flip"),
                          ({"image": {"size": 24, "scale": (0.5, 1)}}, "scale"),
                          ({"image": {"size": 24, "resize": 30, "transform": "train"}},
                           "resize")):
            try:
                ringfeed.Loader(ds, 8, images=bad, device="cpu")
                fail("images=%r: accepted" % (bad,))
            except (ValueError, TypeError, OverflowError, ringfeed.Error) as e:
                if word not in str(e):
                    fail("images=%r: %s" % (bad, e))

        # A budget too small: with the names loaded (no fields=), the
        # message says their region is sized from whole samples, images
        # included, and names the fixes; without them it does not.
        for fields, want in ((None, True), (["image", "label"], False)):
            try:
                ringfeed.Loader(ds, 8, images={"image": 28}, device="cpu",
                                pinned_bytes=8192, fields=fields)
                fail("pinned_bytes=8192: accepted")
            except ringfeed.Error as e:
                said = "fields=[" in str(e) and "var_bytes" in str(e)
                if said != want:
                    fail("pinned_bytes=8192, fields=%r: %s" % (fields, e))

        # Shuffle modes images refuse: the advice is what they take.
        for mode in ("full", "window", True):
            try:
                ringfeed.Loader(ds, 8, images={"image": 28}, device="cpu", shuffle=mode)
                fail("images with shuffle=%r: accepted" % (mode,))
            except ringfeed.Error as e:
                if "none or chunks" not in str(e) or "use shuffle window" in str(e):
                    fail("images with shuffle=%r: %s" % (mode, e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
