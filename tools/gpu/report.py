# SPDX-License-Identifier: MIT
"""report.py OUTDIR: turns the GPU kit's raw results (OUTDIR/steps.tsv,
OUTDIR/env.txt, OUTDIR/logs/) into OUTDIR/report.json and OUTDIR/report.md:
every step's pass/fail/skip, every figure, and the targets of docs/gpu.md."""
import json
import os
import re
import sys

out = sys.argv[1]
MiB = 1 << 20


def read(name):
    try:
        with open(os.path.join(out, "logs", name), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def js(name):
    """The last JSON object a step printed on stdout, or None."""
    for line in reversed(read(name + ".out").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    try:
        return json.loads(read(name + ".out"))
    except ValueError:
        return None


env = {}
with open(os.path.join(out, "env.txt")) as f:
    for line in f:
        k, _, v = line.rstrip("\n").partition("=")
        env[k] = v
steps = []
with open(os.path.join(out, "steps.tsv")) as f:
    next(f)
    for line in f:
        name, group, status, rc, secs, cmd = line.rstrip("\n").split("\t", 5)
        s = {"name": name, "group": group, "status": status, "rc": int(rc),
             "seconds": float(secs), "command": cmd}
        if status != "pass":
            text = (read(name + ".out") + "\n" + read(name + ".err")).strip()
            lines = [x for x in text.splitlines() if x.strip()]
            s["reason"] = " | ".join(lines[-3:])[:400] if lines else ""
        steps.append(s)
by = {s["name"]: s for s in steps}
emulated = env.get("mode") == "emulator"

fig = {}
info = js("device-info")
if info and "name" in info:
    fig["device"] = info
fig["nvidia_smi"] = read("nvidia-smi-query.out").strip() or None

copy = js("copy-limit")
copy_at = {}
if copy:
    for c in copy.get("host_to_device_pinned", []):
        copy_at[int(float(c["mib"]))] = c["gb_per_s"]
    fig["copy_limit_gb_per_s"] = {str(k): v for k, v in copy_at.items()}

bench = []
runs = [(mib, pin, "") for mib in (1, 16, 64) for pin in ("ring", "transient")]
runs += [(16, pin, "-hot") for pin in ("ring", "transient")]
for mib, pin, hot in runs:
    name = "bench-%dm-%s%s" % (mib, pin, hot)
    d = js(name) if by.get(name, {}).get("status") == "pass" else None
    if not d:
        continue
    ld, lim = d["loader"], d["limits"]["host_to_device"]
    mp = d["limits"].get("memcpy_parallel") or {}
    row = {"batch_mib": mib, "pinning": pin, "read": "map, hot" if hot else "O_DIRECT",
           "loader_gb_per_s": ld["gb_per_s"],
           "storage_gb_per_s": (d["limits"]["storage_sequential"]["gb_per_s"]
                                if d["limits"]["storage_sequential"]["measured"] else None),
           "memcpy_gb_per_s": (d["limits"]["memcpy"]["gb_per_s"]
                               if d["limits"]["memcpy"]["measured"] else None),
           "memcpy_parallel_gb_per_s": mp.get("gb_per_s") if mp.get("measured") else None,
           "cpu_s_per_gb": ld.get("cpu_s_per_gb"),
           "bench_copy_limit_gb_per_s": lim["gb_per_s"] if lim["measured"] else None,
           "efficiency_vs_bench_limit": lim["loader_ratio"] if lim["measured"] else None,
           "gpucheck_copy_limit_gb_per_s": copy_at.get(mib),
           "efficiency_vs_gpucheck_limit": (ld["gb_per_s"] / copy_at[mib]
                                            if copy_at.get(mib) else None),
           "binding_limit": d.get("binding_limit"), "efficiency": d.get("efficiency"),
           "stall_share": ld["stall_share"], "per_batch_us": ld["per_batch_us"],
           "device": ld.get("device")}
    bench.append(row)
fig["bench"] = bench

overlap = {}
for k in ("0x", "1x", "2x", "2x-depth4"):
    d = js("overlap-" + k)
    if d and "batches" in d:
        overlap[k] = d
fig["overlap"] = overlap
peers = js("peers-gpu")
if peers and "rows" in peers:
    fig["peers"] = peers
vram = js("vram")
if vram and "batches" in vram:
    fig["vram"] = vram
for tool in ("memcheck", "synccheck"):
    log = read("sanitizer-%s.log" % tool)
    m = re.search(r"ERROR SUMMARY: (\d+) error", log)
    if m:
        fig["sanitizer_" + tool + "_errors"] = int(m.group(1))

# The targets (docs/gpu.md): met, missed, or not measured.
targets = []


def target(name, value, goal, ok):
    if ok is None:
        status = "not measured"
    elif emulated:
        status = "emulator: not judged"
    else:
        status = "met" if ok else "missed"
    targets.append({"target": name, "value": value, "goal": goal, "status": status})


r16 = [b for b in bench if b["batch_mib"] == 16]
for b in r16:
    if b["read"] == "O_DIRECT":
        # From storage: held to the smaller of the disk and the copy engine.
        eff = b["efficiency"]
        target("delivery at 16 MiB, %s pinning, O_DIRECT / binding limit (%s)" % (
            b["pinning"], b["binding_limit"]), eff, ">= 0.9", None if eff is None else eff >= 0.9)
    else:
        eff = b["efficiency_vs_bench_limit"]
        target("delivery at 16 MiB, %s pinning, hot / pinned copy limit" % b["pinning"],
               eff, ">= 0.9", None if eff is None else eff >= 0.9)
if not r16:
    target("delivery at 16 MiB / pinned copy limit", None, ">= 0.9", None)
for k in ("1x", "2x"):
    d = overlap.get(k)
    target("GPU stall share, step = %s the loader's time per batch" % k,
           d["gpu_stall_share"] if d else None, "< 0.01",
           None if not d else d["gpu_stall_share"] < 0.01)
if vram:
    ok = (vram["bad"] == 0 and vram["samples"] == vram["dataset_samples"]
          and vram["device_peak"] == vram["device_expected"]
          and vram["bytes"] >= 3 * vram["free_before"]
          and vram["free_max"] - vram["free_min"] <= 64 * MiB)
    target("3x free memory streamed exactly, device memory = depth x batch, flat",
           {"dataset_bytes": vram["bytes"], "free_before": vram["free_before"],
            "bad_batches": vram["bad"], "device_peak": vram["device_peak"],
            "device_expected": vram["device_expected"],
            "free_swing": vram["free_max"] - vram["free_min"]}, "exact, flat", ok)
else:
    target("3x free memory streamed exactly, device memory = depth x batch, flat", None,
           "exact, flat", None)

counts = {k: sum(1 for s in steps if s["status"] == k) for k in ("pass", "fail", "skip")}
report = {"mode": env.get("mode"), "gpu_proof": env.get("mode") == "gpu" and "device" in fig,
          "env": env, "counts": counts, "steps": steps, "figures": fig, "targets": targets}
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)


def fmt(v, nd=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%%.%df" % nd) % v
    return str(v)


md = ["# ringfeed GPU kit report", ""]
if emulated:
    md += ["**EMULATOR RUN: the CUDA runtime was the cudart emulator. These results check the "
           "kit's plumbing; they are not GPU figures and prove nothing about a GPU.**", ""]
elif "device" not in fig:
    md += ["**No CUDA device: every GPU step was skipped. Nothing here is a GPU figure.**", ""]
dev = fig.get("device")
md += ["- device: %s" % ("%s, cc %s, %d SMs, %.1f GiB (%.1f GiB free), driver %s, runtime %s" % (
    dev["name"], dev["cc"], dev["sms"], dev["total_bytes"] / 2**30, dev["free_bytes"] / 2**30,
    dev["driver_version"], dev["runtime_version"]) if dev else "none"),
       "- runtime loaded: %s" % (env.get("cudart") or "none"),
       "- kit commit: %s; host %s, %s CPUs; %s; %s" % (
           env.get("kit_commit"), env.get("host"), env.get("cpus"), env.get("python"),
           env.get("glibc")),
       "- steps: %d passed, %d failed, %d skipped; run time %s s" % (
           counts["pass"], counts["fail"], counts["skip"], env.get("seconds", "?")), ""]
md += ["## Targets", "", "| target | value | goal | status |", "|---|---|---|---|"]
for t in targets:
    v = t["value"]
    md.append("| %s | %s | %s | %s |" % (t["target"], json.dumps(v) if isinstance(v, dict)
                                         else fmt(v), t["goal"], t["status"]))
md += ["", "## Bench: the loader against the disk, the host's copies and the copy engine", "",
       "| batch | pinning | read | loader GB/s | storage GB/s | memcpy GB/s (1 thread / "
       "parallel) | copy limit (bench) GB/s | / copy limit | copy limit (gpucheck) GB/s | "
       "binding | / binding | CPU s/GB | stall share | us/batch |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for b in bench:
    md.append("| %d MiB | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        b["batch_mib"], b["pinning"], b["read"], fmt(b["loader_gb_per_s"]),
        fmt(b["storage_gb_per_s"]), fmt(b["memcpy_gb_per_s"]),
        fmt(b["memcpy_parallel_gb_per_s"]), fmt(b["bench_copy_limit_gb_per_s"]),
        fmt(b["efficiency_vs_bench_limit"]), fmt(b["gpucheck_copy_limit_gb_per_s"]),
        b["binding_limit"], fmt(b["efficiency"]), fmt(b["cpu_s_per_gb"]),
        fmt(b["stall_share"], 4), fmt(b["per_batch_us"], 1)))
if not bench:
    md.append("| - | - | - | not measured | | | | | | | | | | |")
md += ["", "## Overlap (16 MiB batches, a spin kernel per batch)", "",
       "| step | depth | step us | loader us/batch | GPU stall share | waits us: p50 / p99 / "
       "max / first 16 / sum over 100 | loader stall share | GB/s | bad |",
       "|---|---|---|---|---|---|---|---|---|"]
for k, d in overlap.items():
    gaps = " / ".join(fmt(d.get(g), 1) for g in ("gap_us_p50", "gap_us_p99", "gap_us_max",
                                                 "gap_us_first16", "gap_us_over100"))
    md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        k, d.get("depth", "-"), fmt(d["step_us"], 1), fmt(d["per_batch_us"], 1),
        fmt(d["gpu_stall_share"], 4), gaps, fmt(d["loader_stall_share"], 4),
        fmt(d["gb_per_s"]), d["bad"]))
if peers:
    base = {r["shuffle"]: r.get("gb_per_s") for r in peers["rows"]
            if r["name"] in ("numpy-memmap", "numpy-memmap-seq")}
    md += ["", "## What training does: hot batches of %d x %d B to %s, against a PyTorch "
           "user's own loop (tools/gpu/peers_gpu.py, torch %s)" % (
               peers["batch"], peers["row_bytes"], peers["device"], peers["torch"]), "",
           "| loader | order | GB/s | samples/s | / numpy memmap loop, same order |",
           "|---|---|---|---|---|"]
    for r in peers["rows"]:
        if "error" in r:
            md.append("| %s | %s | failed: %s | | |" % (r["name"], r["shuffle"],
                                                      r["error"][:120].replace("|", "/")))
            continue
        b = base.get("none" if r["shuffle"] == "none" else "full")
        md.append("| %s | %s | %s | %s | %s |" % (
            r["name"], r["shuffle"], fmt(r["gb_per_s"]), fmt(r["samples_per_s"], 0),
            fmt(r["gb_per_s"] / b) if b else "-"))
if vram:
    md += ["", "## Larger than VRAM", "",
           "filled %.2f GiB, free before %.2f GiB; streamed %.2f GiB (%.1fx free) in %d batches, "
           "%d checked on the device, %d wrong; device peak %d (depth x batch %d); free memory "
           "%.1f..%.1f MiB" % (
               vram["filled_bytes"] / 2**30, vram["free_before"] / 2**30, vram["bytes"] / 2**30,
               vram["bytes"] / max(vram["free_before"], 1), vram["batches"], vram["checked"],
               vram["bad"], vram["device_peak"], vram["device_expected"],
               vram["free_min"] / MiB, vram["free_max"] / MiB)]
md += ["", "## Steps", "", "| step | group | status | seconds | reason |", "|---|---|---|---|---|"]
for s in steps:
    md.append("| %s | %s | %s | %.1f | %s |" % (s["name"], s["group"], s["status"], s["seconds"],
                                               s.get("reason", "").replace("|", "/")))
md += ["", "Logs of every step: logs/NAME.out and logs/NAME.err.", ""]
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("\n".join(md))
print("\n".join(md[:8]))
