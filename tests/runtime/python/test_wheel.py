"""The hora wheel as a user gets it: tools/wheel builds it (CUDA off, to stay
short; its meson build is the checkout's build-wheel/, tools/venv's, so
after the build it only packs), it holds libhora, its kernels and every file of
runtime/python/hora, and installed into a fresh venv that sees Debian's
python3 packages (torch 1.13) `python -m hora.torch --check-build` and a
2-rank allreduce (wheel_allreduce.py) work with no PYTHONPATH and no
HORA_LIBRARY, from a folder outside the tree. Where a venv with torch 2.x
exists (--torch2 PATH, default /opt/torch2: ../shared/anchors/install-peers
torch2), the same wheel again in a fresh venv that sees that venv's packages.
Usage: test_wheel.py SOURCE_ROOT MPIRUN [--torch2 VENV]"""
import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

p = argparse.ArgumentParser()
p.add_argument("source")
p.add_argument("mpirun")
p.add_argument("--torch2", default="/opt/torch2")
args = p.parse_args()
args.source = os.path.abspath(args.source)
failures = []


def sh(cmd, env=None, cwd=None, timeout=600):
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s exited %d:\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:],
                                                         r.stderr[-3000:]))
    return r.stdout


def user_env():
    """The environment of a user who installed the wheel: no path settings of ours."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HORA_LIBRARY", "LD_LIBRARY_PATH")}


def check_venv(venv, what, tmp):
    py = os.path.join(venv, "bin", "python")
    sh([py, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel])
    out = sh([py, "-m", "hora.torch", "--check-build"], env=user_env(), cwd=tmp)
    site_lib = sh([py, "-c", "import hora; print(hora.library_path)"], env=user_env(), cwd=tmp).strip()
    if not site_lib.startswith(venv + os.sep) or "(installed package)" not in out.split("\n")[0]:
        failures.append("%s: --check-build's first line %r (libhora %s)" % (what, out.split("\n")[0], site_lib))
    out = sh([args.mpirun, "--oversubscribe", "-np", "2", py,
              os.path.join(args.source, "tests", "runtime", "python", "wheel_allreduce.py")], env=user_env(), cwd=tmp)
    if out.count("allreduce exact") != 2:
        failures.append("%s: the 2-rank allreduce: %s" % (what, out))
    print("%s: %s" % (what, " | ".join(line for line in out.split("\n") if line)))


with tempfile.TemporaryDirectory(prefix="hora-wheel-") as tmp:
    out = sh([os.path.join(args.source, "tools", "wheel"), "--out", os.path.join(tmp, "dist"), "--build-dir",
              os.path.join(args.source, "build-wheel"), "-Dcuda=disabled"])
    wheel = out.strip().split("\n")[-1]
    print("wheel:", wheel)
    if not (os.path.isfile(wheel) and os.path.basename(wheel).startswith("hora-")):
        raise SystemExit("FAIL: tools/wheel printed %r, not a wheel" % wheel)
    names = set(zipfile.ZipFile(wheel).namelist())
    pkg_root = os.path.join(args.source, "runtime", "python")
    want = {"hora/libhora.so", "hora/libhora-kernels.so"}
    for d, _, files in os.walk(os.path.join(pkg_root, "hora")):
        want |= {os.path.relpath(os.path.join(d, f), pkg_root) for f in files if f.endswith(".py")}
    if want - names:
        failures.append("the wheel lacks %s" % sorted(want - names))

    venv = os.path.join(tmp, "venv-debian")
    sh(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
    check_venv(venv, "Debian's python3 (torch 1.13)", tmp)

    torch2_py = os.path.join(args.torch2, "bin", "python")
    if os.path.exists(torch2_py):
        torch2_site = sh([torch2_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
        venv2 = os.path.join(tmp, "venv-torch2")
        sh(["/usr/bin/python3", "-m", "venv", venv2])
        site2 = sh([os.path.join(venv2, "bin", "python"), "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
        # The fresh venv sees the torch 2.x venv's packages (torch, its
        # nvidia-* wheels) without changing that venv.
        with open(os.path.join(site2, "torch2.pth"), "w") as f:
            f.write(torch2_site + "\n")
        check_venv(venv2, "torch 2.x venv (%s)" % args.torch2, tmp)
    else:
        print("torch 2.x: no %s, not checked" % torch2_py)

for f in failures:
    print("FAIL:", f)
print("wheel: %d failures" % len(failures))
sys.exit(1 if failures else 0)
