"""hora.torch errors: requests that disagree across ranks raise on every rank
with libhora's message (no hang) and the runtime keeps serving; a duplicate
name in flight is a ValueError at submission."""
import time

from common import check, equal, hvd, raises, run
import torch


def test_shape_mismatch():
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        return
    msg = raises(hvd.HorovodInternalError, lambda: hvd.allreduce(torch.ones(r + 2, 3), name="bad.shape"),
                 "allreduce of different shapes")
    check(msg is not None and "bad.shape" in msg, "message names the tensor: %r" % msg)
    print("rank %d: %s" % (r, msg), flush=True)
    equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)), "allreduce after a mismatch")


def test_dtype_mismatch():
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        return
    t = torch.ones(4, dtype=torch.float32 if r == 0 else torch.float64)
    raises(hvd.HorovodInternalError, lambda: hvd.allreduce(t, name="bad.dtype"), "allreduce of different dtypes")
    raises(hvd.HorovodInternalError, lambda: hvd.broadcast(torch.ones(2), root_rank=r, name="bad.root"),
           "broadcast with different roots")
    raises(hvd.HorovodInternalError, lambda: hvd.allgather(torch.ones(2, r + 1), name="bad.gather"),
           "allgather with different trailing dimensions")
    equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)), "allreduce after mismatches")


def test_duplicate_name():
    r, n = hvd.rank(), hvd.size()
    if r != 0:
        time.sleep(0.5)  # so that rank 0's request is still in flight when it submits the duplicate
    h = hvd.allreduce_async(torch.ones(5), name="dup", op=hvd.Sum)
    if r == 0 and n > 1:
        raises(ValueError, lambda: hvd.allreduce_async(torch.ones(5), name="dup"), "duplicate name in flight",
               contains="dup")
    equal(hvd.synchronize(h), torch.full((5,), float(n)), "the first request still completes")


if __name__ == "__main__":
    run([test_shape_mismatch, test_dtype_mismatch, test_duplicate_name])
