"""Shared helpers of hora.torch's tests: run under mpirun, every rank checks
exact results computed from (rank, index), and the job fails if any rank
fails. Missing torch or libhora is a failure, not a skip (tools/setup
installs python3-torch; skips are for a missing GPU only)."""
import os
import sys
import traceback

try:
    import torch  # noqa: F401
except ImportError:
    print("FAIL: this python (%s) has no torch (tools/setup installs python3-torch)" % sys.executable)
    sys.exit(1)
try:
    import hora.torch as hvd
except ImportError as e:
    print("FAIL: %s" % e)
    sys.exit(1)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL %s" % (hvd.rank(), what), flush=True)


def equal(got, want, what, atol=0.0):
    import torch
    ok = got.shape == want.shape and got.dtype == want.dtype
    if ok:
        if atol:
            ok = torch.allclose(got.double(), want.double(), rtol=0, atol=atol)
        else:
            ok = torch.equal(got, want)
    check(ok, "%s: got %s, want %s" % (what, got, want))


def raises(exc, fn, what, contains=None):
    try:
        fn()
    except exc as e:
        if contains is not None:
            check(contains in str(e), "%s: message %r lacks %r" % (what, str(e), contains))
        return str(e)
    except Exception as e:  # the wrong kind
        check(False, "%s: raised %s (%s), want %s" % (what, type(e).__name__, e, exc.__name__))
        return None
    check(False, "%s: did not raise %s" % (what, exc.__name__))
    return None


def run(cases):
    """Run each case (a function), then agree on the outcome across ranks."""
    import torch
    hvd.init()
    for case in cases:
        try:
            case()
        except Exception:
            failures.append(case.__name__)
            print("rank %d: FAIL %s raised:\n%s" % (hvd.rank(), case.__name__, traceback.format_exc()), flush=True)
        if hvd.rank() == 0:
            print("%s done" % case.__name__, flush=True)
    bad = hvd.allreduce(torch.tensor([len(failures)], dtype=torch.int64), op=hvd.Sum, name="test.failures")
    hvd.shutdown()
    if hvd_rank_was_zero[0]:
        print("%s: %d failure(s) over %d ranks, %d cases" % (os.path.basename(sys.argv[0]), int(bad.item()),
                                                              hvd_size[0], len(cases)))
    sys.exit(1 if int(bad.item()) else 0)


hvd_rank_was_zero = [False]
hvd_size = [0]
_orig_init = hvd.init


def _init(*args, **kwargs):
    _orig_init(*args, **kwargs)
    hvd_rank_was_zero[0] = hvd.rank() == 0
    hvd_size[0] = hvd.size()


hvd.init = _init
