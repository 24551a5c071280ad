"""Run by test_wheel.py in a venv where the hora wheel is installed, under
mpirun, with no PYTHONPATH and no HORA_LIBRARY: hora must come from the
venv and load the libhora inside it; a sum and an average allreduce of
values built from (rank, index) must be exact."""
import os
import sys

import torch

import hora
import hora.torch as hvd

failures = []
if hora.library_source != "installed package":
    failures.append("libhora found through the %s (%s), not the installed package" %
                    (hora.library_source, hora.library_path))
if not os.path.abspath(hora.__file__).startswith(os.path.abspath(sys.prefix) + os.sep):
    failures.append("hora imported from %s, outside the venv %s" % (hora.__file__, sys.prefix))
hvd.init()
r, n = hvd.rank(), hvd.size()
count = 1000
x = torch.arange(count, dtype=torch.float32) + 1000 * r
want = n * torch.arange(count, dtype=torch.float32) + 1000 * sum(range(n))
got = hvd.allreduce(x, op=hvd.Sum, name="wheel.sum")
if not torch.equal(got, want):
    failures.append("sum: first difference at %d" % int((got != want).nonzero()[0]))
y = torch.arange(count, dtype=torch.int64) * (r + 1)
got = hvd.allreduce(y, op=hvd.Sum, name="wheel.sum.i64")
want = torch.arange(count, dtype=torch.int64) * (n * (n + 1) // 2)
if not torch.equal(got, want):
    failures.append("int64 sum: first difference at %d" % int((got != want).nonzero()[0]))
hvd.shutdown()
for f in failures:
    print("rank %d: FAIL: %s" % (r, f))
print("rank %d: torch %s, hora from %s: %s" % (r, torch.__version__, os.path.dirname(hora.__file__),
                                               "FAILED" if failures else "allreduce exact"))
sys.exit(1 if failures else 0)
