"""`python -m hora.torch --check-build` against what meson configured: the
version, the library it names (as $HORA_LIBRARY, which the test sets), torch's
version as that python reports it, and a [X] or [ ] for each transport and
CUDA as this build has them. Usage: test_check_build.py PYTHON LIBHORA VERSION
UCX(0/1) CUDA(0/1). No mpirun: the report needs no MPI job."""
import os
import subprocess
import sys

python, libhora, version, ucx, cuda = sys.argv[1:6]
failures = []


def fail(msg):
    failures.append(msg)


env = dict(os.environ, HORA_LIBRARY=os.path.abspath(libhora))
r = subprocess.run([python, "-m", "hora.torch", "--check-build"], env=env, capture_output=True, text=True,
                   timeout=120)
out = r.stdout
if r.returncode != 0:
    fail("--check-build exited %d: %s" % (r.returncode, r.stderr[-800:]))
torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                               text=True, timeout=120).stdout.strip()
lines = out.split("\n")
want_first = "hora v%s, libhora %s ($HORA_LIBRARY)" % (version, os.path.abspath(libhora))
if not lines or lines[0] != want_first:
    fail("first line %r, want %r" % (lines[0] if lines else "", want_first))
if len(lines) < 2 or lines[1] != "torch " + torch_version or not torch_version:
    fail("second line %r, want 'torch %s'" % (lines[1] if len(lines) > 1 else "", torch_version))


def section(title):
    """{name: mark} of the lines under `title` up to the next blank line."""
    if title not in lines:
        fail("no section %r in:\n%s" % (title, out))
        return {}
    got = {}
    for line in lines[lines.index(title) + 1:]:
        if not line.strip():
            break
        mark, name = line.strip()[:3], line.strip()[4:]
        got[name] = mark
    return got


def expect(title, want):
    got = section(title)
    if got and got != want:
        fail("%s %s, want %s" % (title, got, want))


x = {"1": "[X]", "0": "[ ]"}
expect("Available Frameworks:", {"TensorFlow": "[ ]", "PyTorch": "[X]", "MXNet": "[ ]"})
expect("Available Controllers:", {"MPI": "[X]", "Gloo": "[ ]"})
expect("Available Tensor Operations:", {"NCCL": "[ ]", "DDL": "[ ]", "CCL": "[ ]", "MPI": "[X]", "Gloo": "[ ]"})
expect("Transports (libhora):", {"shm": "[X]", "UCX": x[ucx], "MPI": "[X]", "CUDA IPC": x[cuda]})
expect("Device engine (libhora):", {"CUDA": x[cuda]})

# Without the flag: the usage, exit 2.
r = subprocess.run([python, "-m", "hora.torch"], env=env, capture_output=True, text=True, timeout=120)
if r.returncode != 2 or "--check-build" not in r.stdout:
    fail("without --check-build: exit %d, stdout %r (want 2 and the usage)" % (r.returncode, r.stdout))

for f in failures:
    print("FAIL:", f)
print("check-build: %d failures" % len(failures))
sys.exit(1 if failures else 0)
