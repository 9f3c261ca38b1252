# SPDX-License-Identifier: MIT
# Description: the GPU kit on a machine without a GPU.  tools/gpu/prepare
# builds it (within 48 MiB, every library the programs need carried beside
# them and found through the rpath); tools/gpu/run reports every GPU step as
# skipped, none failed, and its own plumbing (the kit's tool, library,
# Python module, dataset writer, report) as passed; report.json and
# report.md are written.  Then the same run against the cudart emulator
# (RF_GPU_EMULATOR): the gpu suite's programs and bench --device cuda pass
# there, and the report says in words that these are the emulator's
# results, not a GPU's, and judges no target.  On a machine with a GPU the
# first run is the real one: its GPU steps may pass, none may fail.
import json
import os
import shutil
import subprocess
import sys

src, work = sys.argv[1], sys.argv[2]
emulator = sys.argv[3] if len(sys.argv) > 3 else None
failures = []


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        failures.append(msg)


kit = os.path.join(work, "kit")
env = dict(os.environ)
env.pop("RINGFEED_CUDART", None)
env.pop("LD_LIBRARY_PATH", None)
env["RF_GPU_BUILD"] = os.path.join(work, "build")
env["RF_GPU_PYTHON"] = sys.executable
env["RF_GPU_QUICK"] = "1"
p = subprocess.run([os.path.join(src, "tools", "gpu", "prepare"), kit], env=env,
                   capture_output=True, text=True, timeout=540)
print(p.stdout, p.stderr)
if p.returncode != 0:
    print("FAIL: prepare exited %d" % p.returncode)
    sys.exit(1)
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(kit) for f in fs)
check(size <= 48 << 20, "kit of %d bytes" % size)
for f in ("bin/ringfeed", "bin/gpu-probe", "bin/test-gpu-device", "bin/test-loader-stream",
          "bin/test-loader-errors", "bin/test-loader-memory", "bin/test-loader-full",
          "lib/liburing.so.2", "lib/libzstd.so.1", "lib/libxxhash.so.0", "run",
          "share/report.py", "share/test_py_gpu.py", "MANIFEST"):
    check(os.path.exists(os.path.join(kit, f)), "kit lacks " + f)
# The carried libraries are the ones loaded, not the system's.
ldd = subprocess.run(["ldd", os.path.join(kit, "bin", "ringfeed")], capture_output=True,
                     text=True).stdout
for lib in ("libringfeed.so", "liburing.so", "libzstd.so", "libxxhash.so"):
    line = [x for x in ldd.splitlines() if lib in x]
    check(line and os.path.realpath(kit) in os.path.realpath(line[0].split("=>")[1].split()[0]),
          "%s not taken from the kit: %s" % (lib, line))
# The package ringfeed: one abi3 module for CPython 3.11 and later, one per
# older version.
pkg = os.path.join(kit, "python", "ringfeed")
pys = [f for f in os.listdir(pkg) if f.endswith(".so")] if os.path.isdir(pkg) else []
check(any("cpython-%d%d" % sys.version_info[:2] in f
          or (f.endswith(".abi3.so") and sys.version_info >= (3, 11)) for f in pys),
      "no module for this python: %s" % pys)
check(os.path.exists(os.path.join(pkg, "__init__.py")), "kit lacks python/ringfeed/__init__.py")


def run(outdir, extra):
    e = dict(env, **extra)
    shutil.rmtree(outdir, ignore_errors=True)
    r = subprocess.run([os.path.join(kit, "run"), outdir], env=e, capture_output=True,
                       text=True, timeout=300)
    print(r.stdout, r.stderr)
    try:
        with open(os.path.join(outdir, "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError) as ex:
        check(False, "report.json: %s" % ex)
        return r.returncode, None
    check(os.path.getsize(os.path.join(outdir, "report.md")) > 0, "report.md")
    return r.returncode, rep


# 1. No GPU (or a real one): nothing fails; without a device every GPU step skips.
rc, rep = run(os.path.join(work, "out-plain"), {})
if rep:
    steps = {s["name"]: s for s in rep["steps"]}
    failed = [n for n, s in steps.items() if s["status"] == "fail"]
    check(rc == 0 and not failed, "run exit %d, failed steps %s" % (rc, failed))
    plumbing = ["ringfeed-version"]
    # The kit's datasets are written by gpucheck, built where nvcc is.
    if os.path.exists(os.path.join(kit, "bin", "gpucheck")):
        plumbing += ["pack-small", "kit-verify", "kit-bench-host", "kit-python"]
    else:
        print("no nvcc where the kit was prepared: gpucheck and its datasets are absent")
    for n in plumbing:
        check(steps.get(n, {}).get("status") == "pass", "plumbing step %s: %s" % (n, steps.get(n)))
    if "device" not in rep["figures"]:
        gpu_steps = [n for n, s in steps.items()
                     if s["group"] in ("suite", "limits", "bench", "overlap", "vram", "sanitizer")
                     or n in ("device-info", "probe")]
        check(len(gpu_steps) >= 15, "GPU steps listed: %s" % gpu_steps)
        for n in gpu_steps:
            check(steps[n]["status"] == "skip" and steps[n].get("reason"),
                  "GPU step %s without a GPU: %s" % (n, steps[n]))
        check(not rep["gpu_proof"], "no device, yet gpu_proof")
        check(all(t["status"] == "not measured" for t in rep["targets"]),
              "targets judged without a GPU: %s" % rep["targets"])

# 2. Against the emulator: the plumbing of the GPU steps, labelled as such.
if emulator:
    rc, rep = run(os.path.join(work, "out-emulator"), {"RF_GPU_EMULATOR": emulator})
    if rep:
        steps = {s["name"]: s for s in rep["steps"]}
        check(rc == 0, "emulator run exit %d" % rc)
        check(rep["mode"] == "emulator" and not rep["gpu_proof"], "mode %s" % rep["mode"])
        for n in ("gpu-device", "gpu-loader-stream", "gpu-loader-stream-map", "gpu-loader-errors",
                  "gpu-loader-memory", "gpu-loader-full", "gpu-bench-cuda",
                  "bench-1m-ring", "bench-16m-ring", "bench-16m-transient"):
            check(steps.get(n, {}).get("status") == "pass", "%s on the emulator: %s"
                  % (n, steps.get(n)))
        check(rep["figures"]["bench"], "bench figures")
        check(all(t["status"] in ("not measured", "emulator: not judged")
                  for t in rep["targets"]), "targets judged on the emulator")
        with open(os.path.join(work, "out-emulator", "report.md")) as f:
            check("EMULATOR RUN" in f.read(), "the report does not say it is the emulator's")

if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("ok")
