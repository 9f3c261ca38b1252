# SPDX-License-Identifier: MIT
# Description: `ringfeed bench --json` on tiny datasets (uncompressed and
# zstd) prints one JSON object with the documented keys and sane values:
# samples delivered, every sample of every epoch with --epochs, limits
# measured on the same files, efficiency in (0, 10), the page cache report
# of --cold, and the human table by default.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from benchtest import check, exe, failures, need_numpy, run

np = need_numpy()

EXE = exe()

# Which half to run: "basic" (keys, uncompressed and zstd, the table,
# Ctrl-C) or "modes" (--epochs, --cold/--step-us/--touch, shuffles); "all".
PART = sys.argv[2] if len(sys.argv) > 2 else "all"


# The documented keys (docs/bench.md), section by section.
KEYS = {
    None: ["ringfeed_version", "interrupted", "failed", "machine", "dataset", "config", "cache", "loader",
           "limits", "binding_limit", "efficiency"],
    "dataset": ["paths", "shards", "samples", "chunks", "zstd_chunks", "stored_bytes",
                "raw_bytes", "value_bytes_per_sample"],
    "config": ["batch", "shuffle", "seed", "device", "pinned_bytes", "depth", "pin", "io_depth",
               "decode_threads", "direct", "verify", "touch", "seconds", "epochs", "cold",
               "step_us"],
    "cache": ["cold", "dropped", "pages", "resident_pages", "resident_fraction", "note",
              "cold_first_epoch_only"],
    "loader": ["open_seconds", "seconds", "epochs", "batches", "samples", "batches_per_s",
               "samples_per_s", "per_batch_us", "gb_per_s", "read_gb_per_s",
               "bytes_delivered", "bytes_read", "thread_cpu_s", "cpu_s_per_gb",
               "cpu_us_per_batch", "process_cpu_s", "process_cpu_s_per_gb",
               "process_cpu_us_per_batch", "loader_cpu_share", "stall_share",
               "stall_s", "pinned_peak", "device_peak", "peak_rss", "io_engine", "io_direct",
               "device", "batches_in_place"],
}
LIMIT_KEYS = ["measured", "applies", "gb_per_s", "per_thread_gb_per_s", "bytes_per_sample",
              "samples_per_s", "loader_ratio", "bytes", "seconds", "note"]
LIMITS = ["storage_sequential", "storage_random", "zstd", "memcpy", "host_to_device"]


def bench_json(tag, *args):
    rc, out, err = run("bench", "--json", "-q", "--device", "host", "--pinned", "16M", *args)
    if not check(rc == 0, "%s: exit %d\n%s" % (tag, rc, err)):
        return None
    try:
        doc = json.loads(out)
    except ValueError as e:
        check(False, "%s: not JSON (%s):\n%s" % (tag, e, out))
        return None
    check(out.count("\n") == 1 and out.endswith("}\n"), "%s: not one object on one line" % tag)
    for section, keys in KEYS.items():
        obj = doc if section is None else doc.get(section, {})
        for k in keys:
            check(k in obj, "%s: key %s missing in %s" % (tag, k, section or "top level"))
    for name in LIMITS:
        lim = doc["limits"].get(name)
        if check(lim is not None, "%s: limit %s missing" % (tag, name)):
            for k in LIMIT_KEYS:
                check(k in lim, "%s: key %s missing in limit %s" % (tag, k, name))
    return doc


def sane(tag, doc, samples, zstd):
    ld = doc["loader"]
    check(ld["samples"] > 0, "%s: no samples delivered" % tag)
    check(ld["batches"] > 0 and ld["samples_per_s"] > 0 and ld["gb_per_s"] > 0,
          "%s: rates not positive: %s" % (tag, ld))
    check(ld["bytes_delivered"] >= ld["samples"] * 785, "%s: fewer bytes than samples x 785" % tag)
    check(0 <= ld["stall_share"] <= 1, "%s: stall share %s" % (tag, ld["stall_share"]))
    check(ld["peak_rss"] > 0, "%s: peak RSS %s" % (tag, ld["peak_rss"]))
    # CPU: the whole process's during the run (the consumer touches every
    # byte: not zero), per GB delivered and per batch, and the loader
    # threads' share of it.
    check(ld["process_cpu_s"] > 0, "%s: process CPU %s" % (tag, ld["process_cpu_s"]))
    gb = ld["bytes_delivered"] / 1e9
    check(abs(ld["process_cpu_s_per_gb"] - ld["process_cpu_s"] / gb)
          <= 1e-3 * ld["process_cpu_s_per_gb"],
          "%s: process CPU per GB %s, not %s / %s GB" % (tag, ld["process_cpu_s_per_gb"],
                                                        ld["process_cpu_s"], gb))
    check(abs(ld["process_cpu_us_per_batch"] - ld["process_cpu_s"] * 1e6 / ld["batches"])
          <= 1e-3 * ld["process_cpu_us_per_batch"],
          "%s: process CPU per batch %s" % (tag, ld["process_cpu_us_per_batch"]))
    check(abs(ld["cpu_us_per_batch"] - ld["thread_cpu_s"] * 1e6 / ld["batches"])
          <= 1e-3 * ld["cpu_us_per_batch"] + 1e-3,
          "%s: loader CPU per batch %s" % (tag, ld["cpu_us_per_batch"]))
    check(0 <= ld["loader_cpu_share"] <= 1,
          "%s: loader CPU share %s" % (tag, ld["loader_cpu_share"]))
    check(ld["device"] == "host", "%s: device %r" % (tag, ld["device"]))
    check(ld["io_engine"] != "", "%s: no I/O engine" % tag)
    check(0 < ld["pinned_peak"] <= doc["config"]["pinned_bytes"],
          "%s: pinned peak %s outside (0, budget]" % (tag, ld["pinned_peak"]))
    check(doc["dataset"]["samples"] == samples, "%s: dataset samples %s" % (tag, doc["dataset"]))
    lim = doc["limits"]
    check(lim["storage_sequential"]["measured"] and lim["storage_sequential"]["gb_per_s"] > 0,
          "%s: storage not measured: %s" % (tag, lim["storage_sequential"]))
    check(lim["memcpy"]["measured"] and lim["memcpy"]["gb_per_s"] > 0,
          "%s: memcpy not measured" % tag)
    check(lim["zstd"]["measured"] == zstd, "%s: zstd measured %s, expected %s"
          % (tag, lim["zstd"]["measured"], zstd))
    check(not lim["host_to_device"]["applies"], "%s: host-to-device applies on host" % tag)
    # any documented limit may bind (memcpy_parallel with decode threads)
    check(doc["binding_limit"] in lim and lim[doc["binding_limit"]]["applies"],
          "%s: binding limit %r" % (tag, doc["binding_limit"]))
    # The binding limit is the smallest applicable one, in samples/s.
    applicable = [v["samples_per_s"] for v in lim.values() if v["applies"]]
    check(lim[doc["binding_limit"]]["samples_per_s"] == min(applicable),
          "%s: binding limit is not the smallest" % tag)
    check(0 < doc["efficiency"] < 10, "%s: efficiency %s outside (0, 10)" % (tag, doc["efficiency"]))


tmp = tempfile.mkdtemp(prefix="rf-bench-test-")
try:
    n = 3000
    rng = np.random.default_rng(7)
    def touch_sum(*fields):
        # What --touch sums: the 64-bit words of each field of each batch,
        # modulo 2^64.  Every value here is a whole number of words, so
        # that is the sum of the words of every value, whatever the batches.
        total = 0
        for a in fields:
            assert a[0].nbytes % 8 == 0
            total += int(np.ascontiguousarray(a).reshape(len(a), -1).view(np.uint64).sum(dtype=np.uint64))
        return total % (1 << 64)

    img = np.zeros((n, 28, 28), dtype=np.uint8)
    img[:, 8:20, 8:20] = rng.integers(0, 4, (n, 12, 12), dtype=np.uint8)  # compressible
    lbl = rng.integers(0, 10, n).astype(np.int64)
    np.save(os.path.join(tmp, "img.npy"), img)
    np.save(os.path.join(tmp, "lbl.npy"), lbl)
    plain = os.path.join(tmp, "plain.rfs")
    packed = os.path.join(tmp, "zstd.rfs")
    for out, extra in ((plain, []), (packed, ["--zstd", "3"])):
        rc, _, err = run("pack", "-q", "-o", out, "--chunk-bytes", "256K", *extra,
                         "image=" + os.path.join(tmp, "img.npy"),
                         "label=" + os.path.join(tmp, "lbl.npy"))
        if not check(rc == 0, "pack %s: %s" % (out, err)):
            sys.exit(1)

    if PART in ("basic", "all"):
        doc = bench_json("plain", "--seconds", "0.2", "--batch", "64", plain)
        if doc:
            sane("plain", doc, n, False)
            check(doc["config"]["batch"] == 64 and doc["config"]["cold"] is False,
                  "plain: config %s" % doc["config"])

        doc = bench_json("zstd", "--seconds", "0.2", "--batch", "64", packed)
        if doc:
            sane("zstd", doc, n, True)
            check(doc["dataset"]["zstd_chunks"] == doc["dataset"]["chunks"] > 0,
                  "zstd: chunks %s" % doc["dataset"])

    if PART in ("modes", "all"):
        # --timings: one line per delivered batch, in order.
        tfile = os.path.join(tmp, "timings.txt")
        doc = bench_json("timings", "--epochs", "1", "--batch", "128", "--timings", tfile, plain)
        if doc:
            with open(tfile) as f:
                rows = [ln.split() for ln in f if not ln.startswith("#")]
            check(len(rows) == doc["loader"]["batches"], "timings: %d lines for %d batches"
                  % (len(rows), doc["loader"]["batches"]))
            check([int(r[0]) for r in rows] == list(range(len(rows))), "timings: batch order")
            check(sum(int(r[2]) for r in rows) == n, "timings: samples do not add up to %d" % n)

    if PART in ("modes", "all"):
        # --epochs: exactly that many passes, every sample of each (last partial
        # batches kept), whatever --seconds says.
        doc = bench_json("epochs", "--epochs", "2", "--seconds", "100", "--batch", "100", plain)
        if doc:
            sane("epochs", doc, n, False)
            check(doc["loader"]["epochs"] == 2 and doc["loader"]["samples"] == 2 * n,
                  "epochs: %s epochs, %s samples; expected 2, %d"
                  % (doc["loader"]["epochs"], doc["loader"]["samples"], 2 * n))
            check(doc["loader"]["batches"] == 2 * 30, "epochs: %s batches" % doc["loader"]["batches"])

    if PART in ("modes", "all"):
        # --cold, a simulated step and --touch: the cache report is a fraction,
        # and the consumer's checksum covers every delivered byte.
        doc = bench_json("cold", "--cold", "--epochs", "1", "--step-us", "50", "--touch", plain)
        if doc:
            sane("cold", doc, n, False)
            c = doc["cache"]
            check(c["cold"] is True and 0 <= c["resident_fraction"] <= 1 and c["pages"] > 0,
                  "cold: cache %s" % c)
            check(c["dropped"] is True or c["note"], "cold: no drop and no reason: %s" % c)
            expect = touch_sum(img, lbl)
            check(doc["loader"]["checksum"] == expect,
                  "cold: checksum %s, expected %d (the bytes of every sample)"
                  % (doc["loader"]["checksum"], expect))
            check(c["cold_first_epoch_only"] is False, "cold, one epoch: %s" % c)
        # Through the page cache, two epochs: the second came from the cache
        # the first filled, and the report says so.
        doc = bench_json("cold-map", "--cold", "--map", "--epochs", "2", plain)
        if doc:
            check(doc["cache"]["cold_first_epoch_only"] is True,
                  "cold, --map, 2 epochs: %s" % doc["cache"])
            # The raw read, buffered too, reads each chunk once in each of
            # its two halves (a second pass would be served by the cache).
            seq = doc["limits"]["storage_sequential"]
            stored = doc["dataset"]["stored_bytes"]
            check(0 < seq["bytes"] <= 2 * stored,
                  "cold, buffered raw read: %s bytes, the dataset %d" % (seq["bytes"], stored))

    if PART in ("modes", "all"):
        # A shuffled order delivers the same samples: every one, once an epoch.
        doc = bench_json("chunks", "--shuffle", "chunks", "--seed", "3", "--epochs", "1", "--touch",
                         plain)
        if doc:
            sane("chunks", doc, n, False)
            check(doc["config"]["shuffle"] == "chunks" and doc["config"]["seed"] == 3,
                  "chunks: config %s" % doc["config"])
            check(doc["loader"]["samples"] == n, "chunks: %s samples" % doc["loader"]["samples"])
            expect = touch_sum(img, lbl)
            check(doc["loader"]["checksum"] == expect, "chunks: checksum differs from the data's")

    if PART in ("modes", "all"):
        # Full shuffle: the storage limit becomes random reads at the sample
        # size, or this loader version refuses the mode with a message.
        rc, out, err = run("bench", "--json", "-q", "--device", "host", "--pinned", "16M",
                           "--shuffle", "full", "--seconds", "0.2", plain)
        if rc == 0:
            doc = json.loads(out)
            lim = doc["limits"]["storage_random"]
            check(lim["measured"] and lim["applies"] and lim["samples_per_s"] > 0,
                  "full: random reads not measured: %s" % lim)
            check(not doc["limits"]["storage_sequential"]["applies"],
                  "full: sequential reads count as a limit")
        else:
            check(rc == 1 and "full" in err, "full: exit %d without naming the mode:\n%s" % (rc, err))

    if PART in ("basic", "all"):
        # Ctrl-C: the run stops, the summary is still printed, exit 130.
        proc = subprocess.Popen([EXE, "bench", "--json", "-q", "--device", "host", "--pinned", "16M",
                                 "--seconds", "60", plain], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # past start-up, where the handler is installed
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        check(proc.returncode == 130, "interrupt: exit %d, expected 130\n%s" % (proc.returncode, err))
        try:
            check(json.loads(out)["interrupted"] is True, "interrupt: not marked interrupted")
        except ValueError:
            check(False, "interrupt: no JSON summary:\n%s" % out)

    if PART in ("basic", "all"):
        # The default output is the table, with the version and the efficiency.
        rc, out, err = run("bench", "-q", "--device", "host", "--pinned", "16M", "--seconds", "0.1", plain)
        check(rc == 0 and "efficiency:" in out and "ringfeed " in out and "samples/s" in out,
              "table: exit %d\n%s\n%s" % (rc, out, err))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(1 if failures else 0)
