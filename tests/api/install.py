#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Description: what a program that installs ringfeed meets.  The build is
# installed into a fresh temporary directory (meson install --destdir);
# ringfeed.pc names no path outside the prefix and links no CUDA runtime; a
# C program built with gcc against the installed header and pkg-config file
# (shared, with -Wl,-rpath from `pkg-config --variable=libdir`, and fully
# static with `pkg-config --static`) and the installed `ringfeed` tool run
# with no environment variable at all and stream exactly the packed data;
# the man pages ringfeed(1) and libringfeed(3) are installed and name every
# option of each subcommand's --help.  The static program asked for the cuda
# device (RINGFEED_CUDART naming the cudart emulator, RF_CUDA_EMULATOR) fails
# with a clear error, not a crash in the dlopened runtime.
# Usage: install.py MESON BUILD_ROOT CC
import os
import re
import shutil
import subprocess
import sys
import tempfile

meson, build_root, cc = sys.argv[1], sys.argv[2], sys.argv[3]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        failures += 1


def run(cmd, env=None, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if r.returncode:
        print("$ " + " ".join(cmd), "->", r.returncode, "\n" + r.stdout + r.stderr,
              file=sys.stderr)
    return r


PROG = r"""
#include <inttypes.h>
#include <stdio.h>
#include <ringfeed/ringfeed.h>

int
main(int argc, char **argv)
{
	if (argc != 2 && argc != 3)
		return 2;
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {argv[1]};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 7;
	cfg.device = argc == 3 ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg.pinned_bytes = 1 << 20;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}
	uint64_t n = 0, sum = 0;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		const uint32_t *x = b->fields[0].data;
		for (uint32_t i = 0; i < b->samples; i++)
			sum += x[i];
		n += b->samples;
		rf_loader_release(ld, b, NULL);
	}
	rf_loader_close(&ld);
	printf("%s %" PRIu64 " %" PRIu64 "\n", rf_version_string(), n, sum);
	return rc < 0;
}
"""

if os.environ.get("RF_SANITIZED") == "1":
    # An instrumented library cannot be loaded by the plain program built
    # here without the sanitizer's runtime in its environment.
    print("SKIP: sanitizer build")
    sys.exit(77)
for tool in (cc, "pkg-config"):
    if not shutil.which(tool):
        print("SKIP: no", tool)
        sys.exit(77)

with tempfile.TemporaryDirectory(prefix="rf-install-") as top:
    dest = os.path.join(top, "root")
    r = run([meson, "install", "-C", build_root, "--destdir", dest, "--no-rebuild", "--quiet"])
    check(r.returncode == 0, "meson install")
    if r.returncode:
        sys.exit(1)
    pcs = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "ringfeed.pc"]
    check(len(pcs) == 1, "one ringfeed.pc installed: %r" % pcs)
    pc = pcs[0]
    pcdir = os.path.dirname(pc)
    text = open(pc).read()
    prefix = re.search(r"^prefix=(.*)$", text, re.M).group(1)
    check("cuda" not in text.lower(), "ringfeed.pc names no CUDA library:\n" + text)
    # nvcc takes the link line as it is; it rejects -pthread.
    check(" -pthread" not in text, "ringfeed.pc has -lpthread, not -pthread:\n" + text)
    for line in text.splitlines():
        if line.startswith(("Libs", "Cflags")):
            for word in line.split(":", 1)[1].split():
                check(not word.startswith("/") and not re.match(r"-[LI]/", word),
                      "%s: no absolute path outside ${prefix}: %s" % (line, word))
    root = dest + prefix

    # pkg-config against the destdir: the prefix moved.
    def pkg(*args):
        r = run(["pkg-config", "--define-variable=prefix=" + root] + list(args),
                env={"PKG_CONFIG_PATH": pcdir, "PATH": os.environ.get("PATH", "")})
        check(r.returncode == 0, "pkg-config " + " ".join(args))
        return r.stdout.split()

    cflags = pkg("--cflags", "ringfeed")
    libdir = pkg("--variable=libdir", "ringfeed")[0]
    tool = os.path.join(root, "bin", "ringfeed")
    check(os.access(tool, os.X_OK), "the tool is installed")
    for man in ("man1/ringfeed.1", "man3/libringfeed.3"):
        found = [d for d, _, fs in os.walk(root) if d.endswith(os.path.dirname(man))
                 and os.path.basename(man) in fs]
        check(found, "man page %s installed" % man)

    # Data, packed by the installed tool with an empty environment.
    n = 1000
    raw = os.path.join(top, "x.bin")
    with open(raw, "wb") as f:
        for i in range(n):
            f.write((i * 7 + 3).to_bytes(4, "little"))
    want_sum = sum(i * 7 + 3 for i in range(n))
    ds = os.path.join(top, "d.rfs")
    r = run([tool, "pack", "-q", "-o", ds, "--raw", raw, "--field", "x:u32",
             "--chunk-bytes", "1K"], env={})
    check(r.returncode == 0, "the installed tool packs with no environment")
    r = run([tool, "info", ds], env={})
    check(r.returncode == 0 and str(n) in r.stdout, "the installed tool: info")
    r = run([tool, "--version"], env={})
    check(r.returncode == 0, "the installed tool: --version")

    src = os.path.join(top, "prog.c")
    with open(src, "w") as f:
        f.write(PROG)
    progs = {
        "shared": [cc, "-std=c11", "-Wall", "-Werror", "-o", os.path.join(top, "prog-shared"),
                   src] + cflags + pkg("--libs", "ringfeed") + ["-Wl,-rpath," + libdir],
        "static": [cc, "-std=c11", "-Wall", "-Werror", "-static", "-o",
                   os.path.join(top, "prog-static"), src] + cflags +
                  pkg("--static", "--libs", "ringfeed"),
    }
    for kind, cmd in progs.items():
        r = run(cmd)
        check(r.returncode == 0, "%s link against the installed pkg-config" % kind)
        if r.returncode:
            continue
        exe = cmd[cmd.index("-o") + 1]
        r = run([exe, ds], env={})
        check(r.returncode == 0 and r.stdout.split()[1:] == [str(n), str(want_sum)],
              "%s program with no environment: %r" % (kind, r.stdout))
        needed = run(["readelf", "-d", exe]).stdout
        check("cudart" not in needed, "%s program links no CUDA runtime" % kind)
        check((kind == "static") == ("libringfeed" not in needed),
              "%s program: libringfeed %s" % (kind, "linked in" if kind == "static"
                                                else "loaded"))
        emu = os.environ.get("RF_CUDA_EMULATOR")
        if kind == "static" and emu:
            r = run([exe, ds, "cuda"], env={"RINGFEED_CUDART": emu})
            check(r.returncode == 1 and "statically linked" in r.stderr,
                  "static program, device cuda: a clear error, not a crash: rc %d, %r"
                  % (r.returncode, r.stderr))

    # The man page lists every long option of each subcommand's --help.
    man = open([os.path.join(d, "ringfeed.1") for d, _, fs in os.walk(root)
                if "ringfeed.1" in fs][0]).read().replace("\\-", "-")
    for cmd in ("pack", "info", "verify", "export", "cat", "bench"):
        r = run([tool, cmd, "--help"], env={})
        opts = set(re.findall(r"(--[a-z][a-z-]*)", r.stdout))
        sect = re.search(r"^\.SS %s\n(.*?)(?=^\.SS |^\.SH )" % cmd, man, re.M | re.S)
        check(sect is not None, "ringfeed(1) has a section for %s" % cmd)
        if sect:
            missing = sorted(o for o in opts if o not in sect.group(1) and o != "--help")
            check(not missing, "ringfeed(1) %s lacks %s" % (cmd, " ".join(missing)))

sys.exit(1 if failures else 0)
