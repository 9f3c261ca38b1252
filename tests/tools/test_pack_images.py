# SPDX-License-Identifier: MIT
# Description: `ringfeed pack --images DIR` and `--tar GLOB` on pictures
# made from Debian's Fashion-MNIST: what `cat` streams back is exactly each
# file's bytes, label and name in ImageFolder order (classes sorted by name,
# files by path, nested folders included, hidden files left out); `info`
# shows the class names (also for one shard of a sharded pack, never for a
# later pack of other data to the same name); --shuffle gives the order of
# rf_pack_order; -j gives the same bytes; bad files (text, truncated JPEG,
# unreadable) fail the pack naming the path or are skipped and counted with
# --skip-bad; tar samples group members by key, cls becomes the label and
# txt/json their own fields.
import io
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "decode"))
from clitest import TempDir, check, finish, run  # noqa: E402
from imgdata import mnist, np, photo  # noqa: E402

CLASSES = ["T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]


def values(path, field):
    """Field values of every sample as bytes (variable) or ints (label)."""
    rc, out, err = run("cat", path, "--field", field, "--text", "--batch", "7", "--shuffle",
                       "none", expect=0)
    if field == "label":
        return [int(v) for v in out.split()]
    return [bytes(int(v) for v in line.split()) for line in out.splitlines()]


def make_folder(root, imgs, labels, n):
    """An image folder; returns [(relative path, label index)] in ImageFolder order."""
    files = []
    for i in range(n):
        cls = CLASSES[labels[i]]
        sub = "nested/" if i % 7 == 3 else ""
        ext = ("jpg", "png", "jpeg")[i % 3]
        rel = "%s/%s%03d.%s" % (cls, sub, i, ext)
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        photo(imgs, i, 40 + i, 30 + (i % 5)).save(os.path.join(root, rel),
                                                  "JPEG" if ext != "png" else "PNG")
        if i in (4, 5):
            # Bytes after the end marker (a camera's trailer) are kept.
            with open(os.path.join(root, rel), "ab") as f:
                f.write(bytes(700) + b"TRAILER")
        files.append(rel)
    # Hidden files and files outside a class folder are not samples.
    open(os.path.join(root, CLASSES[labels[0]], ".hidden.jpg"), "w").write("x")
    open(os.path.join(root, "README"), "w").write("x")
    names = sorted(set(CLASSES[v] for v in labels[:n]))
    out = []
    for c, name in enumerate(names):
        for rel in sorted(f for f in files if f.startswith(name + "/")):
            out.append((rel, c))
    return out, names


def classes_of(path):
    rc, out, err = run("info", "--json", path, expect=0)
    return json.loads(out).get("classes", {}).get("names") if rc == 0 else None


def main():
    imgs, labels = mnist(60)
    with TempDir() as d:
        root = os.path.join(d, "folder")
        expect, names = make_folder(root, imgs, labels, 60)
        out = os.path.join(d, "imgs.rfs")
        run("pack", "-q", "-o", out, "--images", root, "--chunk-bytes", "16K", expect=0)
        got_img, got_lab, got_name = (values(out, "image"), values(out, "label"),
                                      values(out, "name"))
        check(len(got_img) == len(expect), "%d samples, expected %d" % (len(got_img),
                                                                        len(expect)))
        for i, (rel, c) in enumerate(expect[:len(got_img)]):
            data = open(os.path.join(root, rel), "rb").read()
            check(got_img[i] == data, "sample %d (%s): image bytes differ" % (i, rel))
            check(got_lab[i] == c, "sample %d (%s): label %d, expected %d" % (i, rel,
                                                                              got_lab[i], c))
            check(got_name[i] == rel.encode(), "sample %d: name %r, expected %r"
                  % (i, got_name[i], rel))
        check(classes_of(out) == names, "info classes %s, expected %s" % (classes_of(out),
                                                                         names))
        rc, text, _ = run("info", out, expect=0)
        check("classes:      %d" % len(names) in text and ("  1    %s" % names[1]) in text,
              "info text lacks the classes:\n" + text)

        # Files without an image extension are left out, counted.
        cls0 = sorted(e for e in os.listdir(root) if not e.startswith("."))[0]
        extra = [os.path.join(root, cls0, "notes.txt"), os.path.join(root, cls0, "LICENSE")]
        for x in extra:
            with open(x, "w") as fh:
                fh.write("not an image\n")
        out_x = os.path.join(d, "extra.rfs")
        rc, _, err = run("pack", "-o", out_x, "--images", root, "--chunk-bytes", "16K",
                         expect=0)
        check("2 file(s)" in err and "no image extension" in err,
              "pack --images with notes.txt: %s" % err)
        check(values(out_x, "name") == got_name, "pack --images with notes.txt: other names")
        for x in extra:
            os.unlink(x)

        # Options of the other transform are refused, naming them; the
        # largest size is not blamed on a resize the user did not give.
        for args, word in ((["--image-flip", "0.2"], "--image-flip"),
                           (["--image-scale", "0.5,1"], "--image-scale"),
                           (["--image-transform", "train", "--image-resize", "40"],
                            "--image-resize")):
            rc, _, err = run("cat", out, "--field", "image", "--image-size", "24", *args)
            check(rc == 2 and word in err, "cat %s: rc %d: %s" % (args, rc, err))
        rc, _, err = run("cat", out, "--field", "image", "--image-size", "65535",
                         "--batches", "1")
        check(rc != 0 and "resize" not in err, "cat --image-size 65535: %s" % err)
        junk = os.path.join(d, "junk.state")
        with open(junk, "wb") as fh:
            fh.write(b"junkjunkjunk")
        rc, _, err = run("cat", out, "--field", "label", "--state-in", junk)
        check(rc != 0 and "resume state" in err and "resume: resume" not in err,
              "cat --state-in junk: %s" % err)

        # bench --image-*: a decode limit row, and the options in the config.
        rc, text, err = run("bench", out, "--image-size", "24", "--seconds", "0.3",
                            "--batch", "8", "--json", expect=0)
        try:
            js = json.loads(text)
            im, dl = js["config"]["image"], js["limits"]["image_decode"]
            check(im["height"] == 24 and im["width"] == 24 and im["transform"] == "eval"
                  and im["resize"] == 27 and im["field"] == "image",
                  "bench --json: config image %r" % im)
            check(dl["measured"] and dl["applies"] and dl["samples_per_s"] > 0,
                  "bench --json: image_decode %r" % dl)
        except (ValueError, KeyError, TypeError) as e:
            check(False, "bench --json with --image-size: %r: %s" % (e, text[-2000:]))
        run("bench", out, "--image-size", "24", "--seconds", "0.2", "--batch", "8",
            "--fields", "image,label", "--var-bytes", "64K", "--json", expect=0)
        rc, _, err = run("bench", out, "--seconds", "0.2", "--fields", "image,nope")
        check(rc != 0 and "nope" in err, "bench --fields image,nope: %d %s" % (rc, err))

        # -j: the same bytes.
        out_j = os.path.join(d, "imgs-j.rfs")
        run("pack", "-q", "-j", "2", "-o", out_j, "--images", root, "--chunk-bytes", "16K",
            expect=0)
        check(open(out, "rb").read() == open(out_j, "rb").read(), "-j 2 changed the bytes")

        # --shuffle: rf_pack_order's order (as an .npy pack of ids shows it).
        n = len(expect)
        ids = os.path.join(d, "ids.npy")
        np.save(ids, np.arange(n, dtype=np.int64))
        ids_out = os.path.join(d, "ids.rfs")
        run("pack", "-q", "-o", ids_out, "--shuffle", "9", "id=" + ids, expect=0)
        perm = [int(v) for v in run("cat", ids_out, "--field", "id", "--text")[1].split()]
        out_s = os.path.join(d, "shuf.rfs")
        run("pack", "-q", "-o", out_s, "--images", root, "--shuffle", "9", expect=0)
        s_names, s_labels = values(out_s, "name"), values(out_s, "label")
        check(s_names == [got_name[p] for p in perm] and s_labels == [got_lab[p] for p in perm],
              "--shuffle 9 is not rf_pack_order's order")
        check(s_names != got_name, "--shuffle left the order as it was")
        check(classes_of(out_s) == names, "shuffled pack: classes %s" % classes_of(out_s))

        # Sharded: every shard has the class names, and one shard alone too.
        out_sh = os.path.join(d, "sh.rfs")
        run("pack", "-q", "-o", out_sh, "--images", root, "--shard-bytes", "40K",
            "--chunk-bytes", "8K", expect=0)
        shards = sorted(f for f in os.listdir(d) if f.startswith("sh-"))
        check(len(shards) > 1, "expected several shards, got %s" % shards)
        check(classes_of(os.path.join(d, "sh-*.rfs")) == names, "sharded: no classes")
        check(classes_of(os.path.join(d, shards[1])) == names, "one shard: no classes")

        # A later pack of other data to the same name: its stale class file
        # is not shown.
        run("pack", "-q", "-o", out, "id=" + ids, expect=0)
        check(classes_of(out) is None, "stale classes shown: %s" % classes_of(out))

        # Bad files: named, the pack fails and leaves nothing; --skip-bad.
        bad_cases = [
            ("notes.jpg", b"just some text\n", "not a JPEG or PNG"),
            ("cut.jpg", open(os.path.join(root, expect[0][0]), "rb").read()[:300]
             if expect[0][0].endswith("jpg") else None, "truncated"),
        ]
        jpg = next(os.path.join(root, r) for r, _ in expect if r.endswith(".jpg"))
        bad_cases[1] = ("cut.jpg", open(jpg, "rb").read()[:300], "truncated")
        for fname, data, words in bad_cases:
            bad_root = os.path.join(d, "bad-" + fname)
            os.makedirs(os.path.join(bad_root, "a"))
            os.makedirs(os.path.join(bad_root, "b"))
            for k in range(3):
                photo(imgs, k, 30, 30).save(os.path.join(bad_root, "a", "%d.png" % k))
            open(os.path.join(bad_root, "b", fname), "wb").write(data)
            photo(imgs, 5, 30, 30).save(os.path.join(bad_root, "b", "z.jpg"))
            bad_out = os.path.join(d, "bad-%s.rfs" % fname)
            rc, _, err = run("pack", "-o", bad_out, "--images", bad_root, expect=1)
            check(os.path.join(bad_root, "b", fname) in err and words in err,
                  "%s: the error does not name the file and '%s': %s" % (fname, words, err))
            check(not os.path.exists(bad_out), "%s: a failed pack left %s" % (fname, bad_out))
            rc, _, err = run("pack", "-o", bad_out, "--images", bad_root, "--skip-bad",
                             expect=0)
            check("skipped 1 of 5" in err, "%s: --skip-bad does not say how many: %s"
                  % (fname, err))
            check(values(bad_out, "name") == [b"a/0.png", b"a/1.png", b"a/2.png", b"b/z.jpg"],
                  "%s: --skip-bad kept %s" % (fname, values(bad_out, "name")))
            check(values(bad_out, "label") == [0, 0, 0, 1], "%s: labels after skipping"
                  % fname)
        # An unreadable file (not as root: root reads anything).
        if os.geteuid() != 0:
            p = os.path.join(root, expect[2][0])
            os.chmod(p, 0)
            rc, _, err = run("pack", "-o", os.path.join(d, "x.rfs"), "--images", root,
                             expect=1)
            check(p in err and "cannot read" in err, "unreadable file: %s" % err)
            os.chmod(p, 0o644)

        # A symbolic link loop ends with an error, not a crash.
        loop = os.path.join(d, "loop")
        os.makedirs(os.path.join(loop, "a"))
        os.symlink("..", os.path.join(loop, "a", "up"))
        rc, _, err = run("pack", "-o", os.path.join(d, "loop.rfs"), "--images", loop, expect=1)
        check("symbolic link loop" in err, "a link loop: %s" % err)

        # --tar: WebDataset shards.
        tars, want = [], []
        for t in range(3):
            tp = os.path.join(d, "shard-%02d.tar" % t)
            with tarfile.open(tp, "w") as tf:
                for k in range(5):
                    i = 5 * t + k
                    key = "s%04d" % i
                    buf = io.BytesIO()
                    fmt = "png" if i % 2 else "jpg"
                    photo(imgs, i, 32, 24).save(buf, "PNG" if fmt == "png" else "JPEG")
                    members = [(key + "." + fmt, buf.getvalue()),
                               (key + ".cls", b"%d\n" % labels[i])]
                    if i % 3 == 0:
                        members.append((key + ".txt", b"caption %d" % i))
                    if i % 4 == 0:
                        members.append((key + ".json", b'{"i": %d}' % i))
                    members.append((key + ".other", b"ignored"))
                    for name, data in members:
                        info = tarfile.TarInfo(name)
                        info.size = len(data)
                        tf.addfile(info, io.BytesIO(data))
                    want.append(dict(name=("%s:%s" % (tp, key)).encode(), image=members[0][1],
                                     label=int(labels[i]),
                                     txt=b"caption %d" % i if i % 3 == 0 else b"",
                                     json=b'{"i": %d}' % i if i % 4 == 0 else b""))
            tars.append(tp)
        tout = os.path.join(d, "tar.rfs")
        for j in ("1", "2"):
            run("pack", "-q", "-j", j, "-o", tout, "--tar", os.path.join(d, "shard-*.tar"),
                expect=0)
            for f in ("image", "label", "name", "txt", "json"):
                got = values(tout, f)
                check(got == [w[f] for w in want], "--tar -j %s: field %s differs" % (j, f))
        run("pack", "-q", "-o", tout, "--tar", os.path.join(d, "shard-*.tar"), "--shuffle", "9",
            expect=0)
        got = values(tout, "name")
        check(sorted(got) == sorted(w["name"] for w in want) and got != [w["name"] for w in want],
              "--tar --shuffle: not a permutation of the samples")
        # A sample without its .cls fails, naming it; --skip-bad skips it.
        tp = os.path.join(d, "nocls.tar")
        with tarfile.open(tp, "w") as tf:
            for key, members in (("a", [("a.jpg", want[0]["image"]), ("a.cls", b"1")]),
                                 ("b", [("b.jpg", want[0]["image"])]),
                                 ("c", [("c.cls", b"2")])):
                for name, data in members:
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        rc, _, err = run("pack", "-o", tout, "--tar", tp, expect=1)
        check(tp + ":b" in err and ".cls" in err, "a sample without cls: %s" % err)
        rc, _, err = run("pack", "-o", tout, "--tar", tp, "--skip-bad", expect=0)
        check("skipped 2 of 3" in err and values(tout, "label") == [1],
              "--skip-bad with tar: %s" % err)
    finish()


main()
