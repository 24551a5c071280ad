"""hora/__init__.py's search for libhora.so, in order: $HORA_LIBRARY (alone
when set), libhora.so inside the installed package, the build tree's
build/runtime/libhora.so, the system loader; the error names every place.
Each case copies the package (hora/__init__.py, hora/stacks.py) into a
scratch layout and imports it in a fresh python3, so the places are real
files. Usage: test_library_search.py SOURCE_ROOT LIBHORA (a built
libhora.so, its kernels library beside or reachable as the build made it)."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC, LIBHORA = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []

PROBE = "import hora, sys; print(hora.library_source); print(hora.library_path)"


def package_at(folder):
    """A copy of the hora package (no hora.torch: it needs torch) in folder/hora."""
    pkg = os.path.join(folder, "hora")
    os.makedirs(pkg)
    for f in ("__init__.py", "stacks.py"):
        shutil.copy(os.path.join(SRC, "runtime", "python", "hora", f), pkg)
    return pkg


def put_library(folder):
    """libhora.so (and the kernels library it needs) copied into folder."""
    os.makedirs(folder, exist_ok=True)
    shutil.copy(LIBHORA, os.path.join(folder, "libhora.so"))
    kernels_dir = os.path.join(os.path.dirname(os.path.dirname(LIBHORA)), "kernels")
    for name in os.listdir(kernels_dir):
        if name.startswith("libhora-kernels") and ".so" in name and not name.endswith(".p"):
            shutil.copy(os.path.join(kernels_dir, name), folder)


def run(folder, env_extra, what):
    env = {k: v for k, v in os.environ.items() if k not in ("HORA_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(env_extra)
    env["PYTHONPATH"] = folder
    # The libraries copied beside libhora.so are found through its RUNPATH
    # ($ORIGIN/../kernels) or LD_LIBRARY_PATH set by the case.
    return subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=folder, capture_output=True, text=True,
                          timeout=60)


def expect_loaded(r, source, path, what):
    lines = r.stdout.split("\n")
    if r.returncode != 0 or lines[:2] != [source, path]:
        failures.append("%s: want %s %s, got rc %d stdout %r stderr %s" %
                        (what, source, path, r.returncode, r.stdout, r.stderr[-600:]))


def expect_error(r, needles, what):
    if r.returncode == 0:
        failures.append("%s: imported, stdout %r" % (what, r.stdout))
        return
    for n in needles:
        if n not in r.stderr:
            failures.append("%s: the error lacks %r: %s" % (what, n, r.stderr[-800:]))


with tempfile.TemporaryDirectory(prefix="hora-search-") as tmp:
    # 1. Installed layout: site/hora/{__init__.py, libhora.so, libhora-kernels.so}.
    site = os.path.join(tmp, "site")
    pkg = package_at(site)
    put_library(pkg)
    lib_env = {"LD_LIBRARY_PATH": pkg}  # the kernels library beside it (the build's RUNPATH points elsewhere)
    expect_loaded(run(site, lib_env, "installed"), "installed package", os.path.join(pkg, "libhora.so"),
                  "installed package")
    # 2. $HORA_LIBRARY comes first, even with a library in the package.
    expect_loaded(run(site, dict(lib_env, HORA_LIBRARY=LIBHORA), "env"), "$HORA_LIBRARY", LIBHORA,
                  "$HORA_LIBRARY before the package")
    # 3. $HORA_LIBRARY naming a missing file: an error naming it, no fallback.
    missing = os.path.join(tmp, "nowhere", "libhora.so")
    expect_error(run(site, dict(lib_env, HORA_LIBRARY=missing), "env missing"),
                 ["$HORA_LIBRARY " + missing + ": no such file"], "$HORA_LIBRARY missing")
    # 4. Tree layout: <repo>/runtime/python/hora and <repo>/build/runtime/libhora.so.
    repo = os.path.join(tmp, "repo")
    tree_pkg = package_at(os.path.join(repo, "runtime", "python"))
    tree_lib_dir = os.path.join(repo, "build", "runtime")
    put_library(tree_lib_dir)
    expect_loaded(run(os.path.dirname(tree_pkg), {"LD_LIBRARY_PATH": tree_lib_dir}, "tree"), "build tree",
                  os.path.join(tree_lib_dir, "libhora.so"), "build tree")
    # 5. The package's own library before the build tree's.
    put_library(tree_pkg)
    expect_loaded(run(os.path.dirname(tree_pkg), {"LD_LIBRARY_PATH": tree_pkg}, "both"), "installed package",
                  os.path.join(tree_pkg, "libhora.so"), "package before build tree")
    # 6. Nowhere: the error names the three places and what to do.
    bare = os.path.join(tmp, "bare")
    package_at(bare)
    r = run(bare, {}, "none")
    expect_error(r, ["installed package " + os.path.join(bare, "hora", "libhora.so") + ": no such file",
                     "build tree ", "system loader libhora.so", "$HORA_LIBRARY=", "pip install .", "tools/setup"],
                 "nothing found")

for f in failures:
    print("FAIL:", f)
print("library search: %d failures" % len(failures))
sys.exit(1 if failures else 0)
