"""hora.torch's alltoall, barrier, reducescatter (and grouped), sparse
allreduce, collectives after a join, integer scaling and shared_tensors
(hora's zero-copy tensors), exactly: inputs are
a function of (rank, index) so each rank computes the expected result.
mpirun -np N python3 test_torch_collectives.py"""
import gc
import math
import time

from common import check, equal, hvd, raises, run
import torch

ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8,
              torch.int8, torch.int16, torch.bool]
C = 3  # columns of the 2-D cases


def supported(dtypes):
    return [d for d in dtypes if d in hvd.mpi_ops._DTYPES]


# ---- alltoall ------------------------------------------------------------------

def block(sender, dest, rows, k, cols=C, dtype=torch.int64):
    """The rows sender sends to dest: element (i, c) = ((sender * n + dest) * k + i) * cols + c
    (at most 2 * 3 * 3 * 3 + ... < 128 for the sizes used: fits int8)."""
    n = hvd.size()
    i = torch.arange(rows).reshape(rows, 1)
    c = torch.arange(cols).reshape(1, cols)
    v = ((sender * n + dest) * k + i) * cols + c
    return (v % 2 == 1) if dtype == torch.bool else v.to(dtype)


def send_tensor(r, splits, k, dtype, cols=C):
    n = hvd.size()
    parts = [block(r, q, splits[q], k, cols, dtype) for q in range(n)]
    return torch.cat(parts) if parts else torch.zeros(0, cols, dtype=dtype)


def want_tensor(r, splits_of, k, dtype, cols=C):
    n = hvd.size()
    return torch.cat([block(q, r, splits_of(q)[r], k, cols, dtype) for q in range(n)])


def test_alltoall_equal_split():
    r, n = hvd.rank(), hvd.size()
    k = 2
    for dt in supported(ALL_DTYPES):
        x = send_tensor(r, [k] * n, k, dt)
        want = want_tensor(r, lambda q: [k] * n, k, dt)
        out = hvd.alltoall(x)
        equal(out, want, "alltoall equal split %s" % dt)
        check(torch.equal(x, send_tensor(r, [k] * n, k, dt)), "alltoall left its input unchanged (%s)" % dt)
        out, rs = hvd.synchronize(hvd.alltoall_async(x))
        equal(out, want, "alltoall_async equal split %s" % dt)
        equal(rs, torch.full((n,), k, dtype=torch.int32), "alltoall_async received_splits %s" % dt)
    # 1-D and 3-D tensors.
    x = torch.arange(2 * n, dtype=torch.float32) + 100 * r
    want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * q for q in range(n)])
    equal(hvd.alltoall(x), want, "alltoall 1-D")
    x = (torch.arange(n * 2 * 2, dtype=torch.int32) + 1000 * r).reshape(n, 2, 2)
    want = torch.stack([(torch.arange(4 * r, 4 * r + 4, dtype=torch.int32) + 1000 * q).reshape(2, 2)
                        for q in range(n)])
    equal(hvd.alltoall(x), want, "alltoall 3-D")


def uneven(r):
    # (r + 2 q) % 3 rows from rank r to rank q: zeros included (to itself, to
    # another rank), different on every rank.
    return [(r + 2 * q) % 3 for q in range(hvd.size())]


def test_alltoall_uneven():
    r, n = hvd.rank(), hvd.size()
    k = 3  # rows per block at most 2 < k: the formula stays distinct
    for dt in supported(ALL_DTYPES):
        x = send_tensor(r, uneven(r), k, dt)
        want = want_tensor(r, uneven, k, dt)
        for splits in (uneven(r), torch.tensor(uneven(r), dtype=torch.int32)):
            out, rs = hvd.alltoall(x, splits)
            what = "alltoall splits %s (%s)" % (uneven(r), type(splits).__name__)
            equal(out, want, "%s %s" % (what, dt))
            equal(rs, torch.tensor([uneven(q)[r] for q in range(n)], dtype=torch.int32),
                  "%s received_splits %s" % (what, dt))
    # Rank 0 sends nothing at all (a 0-row tensor); the others one row to each rank.
    def zero_from_0(q):
        return [0] * n if q == 0 else [1] * n
    x = send_tensor(r, zero_from_0(r), k, torch.float32)
    out, rs = hvd.alltoall(x, zero_from_0(r))
    equal(out, want_tensor(r, zero_from_0, k, torch.float32), "alltoall with a rank sending nothing")
    equal(rs, torch.tensor([0] + [1] * (n - 1), dtype=torch.int32), "received_splits from a rank sending nothing")
    # Every split zero on every rank: an empty result.
    out, rs = hvd.alltoall(torch.zeros(0, C), [0] * n)
    equal(out, torch.zeros(0, C), "alltoall of nothing")
    equal(rs, torch.zeros(n, dtype=torch.int32), "alltoall of nothing: received_splits")
    # splits summing to less than the first dimension: the rows past the sum
    # are not sent (Horovod's rule).
    x = torch.cat([send_tensor(r, uneven(r), k, torch.float64), torch.full((2, C), -1.0, dtype=torch.float64)])
    out, rs = hvd.alltoall(x, uneven(r))
    equal(out, want_tensor(r, uneven, k, torch.float64), "alltoall with rows past the sum of splits")


def test_alltoall_grad():
    r, n = hvd.rank(), hvd.size()
    k = 3
    for splits in (None, [1] * n, uneven(r)):
        s = splits if splits is not None else [2] * n
        x = send_tensor(r, s, k, torch.float64).requires_grad_()
        if splits is None:
            y = hvd.alltoall(x)
        else:
            y, rs = hvd.alltoall(x, splits)
            check(not rs.requires_grad, "received_splits is not differentiable")
        # Every row's gradient goes back to the rank and row it came from.
        y.backward(y.detach() + 1)
        equal(x.grad, x.detach() + 1, "alltoall grad, splits %s" % (splits,))
    # Rows past the sum of splits got no gradient.
    x = torch.cat([send_tensor(r, uneven(r), k, torch.float64), torch.full((2, C), 5.0, dtype=torch.float64)])
    x.requires_grad_()
    y, _ = hvd.alltoall(x, uneven(r))
    y.backward(y.detach() + 1)
    want = x.detach() + 1
    want[-2:] = 0
    equal(x.grad, want, "alltoall grad with rows past the sum of splits")


def test_alltoall_errors():
    r, n = hvd.rank(), hvd.size()
    raises(ValueError, lambda: hvd.alltoall(torch.ones(n), torch.ones(n)), "float splits",
           contains="32-bit integer")
    raises(ValueError, lambda: hvd.alltoall(torch.ones(n), torch.ones(n, dtype=torch.int64)), "int64 splits",
           contains="32-bit integer")
    raises(ValueError, lambda: hvd.alltoall(torch.ones(n + 1), [1] * (n + 1)), "one split too many",
           contains="number of ranks")
    raises(ValueError, lambda: hvd.alltoall(torch.ones(n - 1), [1] * n), "splits summing past the first dimension",
           contains="greater")
    raises(ValueError, lambda: hvd.alltoall(torch.ones(n), [-1] + [1] * (n - 1)), "a negative split",
           contains="negative")
    raises(ValueError, lambda: hvd.alltoall(torch.tensor(1.0)), "alltoall of a 0-d tensor")
    if n > 1:
        # libhora's refusals: at the call (ValueError, as Horovod) ...
        raises(ValueError, lambda: hvd.alltoall(torch.ones(n + 1)), "equal split of a first dimension not a "
               "multiple of the number of ranks")
        # ... and in negotiation, on every rank (HorovodInternalError, a RuntimeError).
        raises(hvd.HorovodInternalError, lambda: hvd.alltoall(torch.ones(n, r + 1), name="a2a.bad.trailing"),
               "alltoall with different trailing dimensions", contains="a2a.bad.trailing")
        t = torch.ones(n, dtype=torch.int32 if r % 2 else torch.float32)
        raises(hvd.HorovodInternalError, lambda: hvd.alltoall(t, name="a2a.bad.dtype"),
               "alltoall with different dtypes", contains="a2a.bad.dtype")
    out = hvd.alltoall(torch.full((n,), float(r)))
    equal(out, torch.arange(n, dtype=torch.float32), "alltoall after the refusals")


# ---- barrier ---------------------------------------------------------------------

def test_barrier():
    r, n = hvd.rank(), hvd.size()
    hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)
    # Rank 0 arrives 0.5 s late: nobody leaves before it came.
    hvd.allreduce(torch.zeros(1), name="barrier.start")
    t0 = time.monotonic()
    if r == 0:
        time.sleep(0.5)
    hvd.barrier()
    waited = time.monotonic() - t0
    check(waited >= 0.45, "barrier returned after %.3f s, before rank 0 (0.5 s late) arrived" % waited)
    # Between async requests: they complete as usual.
    h1 = hvd.allreduce_async(torch.full((5,), float(r)), op=hvd.Sum, name="barrier.ar")
    h2 = hvd.allgather_async(torch.full((1, 2), float(r)), name="barrier.ag")
    hvd.barrier()
    equal(hvd.synchronize(h1), torch.full((5,), float(n * (n - 1) / 2)), "allreduce across a barrier")
    equal(hvd.synchronize(h2), torch.arange(n, dtype=torch.float32).repeat_interleave(2).reshape(n, 2),
          "allgather across a barrier")
    for _ in range(20):
        hvd.barrier()


# ---- reducescatter ---------------------------------------------------------------

def shard(d0, r, n):
    """The rows of rank r: the first d0 % n ranks get one more (Horovod's split)."""
    q, m = divmod(d0, n)
    lo = r * q + min(r, m)
    return lo, q + (1 if r < m else 0)


def rs_input(r, shape, dtype, sign=1):
    # (index + 1) * (r + 1), times sign: sums over ranks are (index + 1) * n (n + 1) / 2.
    numel = 1
    for d in shape:
        numel *= d
    return (sign * (torch.arange(numel) + 1) * (r + 1)).reshape(shape).to(dtype)


def rs_sum(shape, n, sign=1):
    numel = 1
    for d in shape:
        numel *= d
    return (sign * (torch.arange(numel, dtype=torch.int64) + 1) * (n * (n + 1) // 2)).reshape(shape)


def test_reducescatter():
    r, n = hvd.rank(), hvd.size()
    shapes = [(2 * n, C), (2 * n + 1, C), (n - 1, 2, 2), (4 * n + 2,), (1, 2)]  # even, uneven, ranks with 0 rows
    for shape in shapes:
        lo, cnt = shard(shape[0], r, n)
        for dt in supported([torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]):
            if dt in (torch.float16, torch.bfloat16) and math.prod(shape) * n * (n + 1) // 2 > 256:
                continue  # integers past 256 are not all exact in bfloat16
            x = rs_input(r, shape, dt)
            full = rs_sum(shape, n)
            got = hvd.reducescatter(x, op=hvd.Sum)
            equal(got, full[lo:lo + cnt].to(dt), "reducescatter sum %s %s" % (shape, dt))
            check(torch.equal(x, rs_input(r, shape, dt)), "reducescatter left its input unchanged")
            if dt.is_floating_point:
                equal(hvd.reducescatter(x), (full[lo:lo + cnt].double() / n).to(dt),
                      "reducescatter average (default) %s %s" % (shape, dt))
                equal(hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5),
                      (full[lo:lo + cnt].double() * 0.5).to(dt), "reducescatter prescale %s %s" % (shape, dt))
                equal(hvd.reducescatter(x, op=hvd.Sum, postscale_factor=4.0),
                      (full[lo:lo + cnt].double() * 4).to(dt), "reducescatter postscale %s %s" % (shape, dt))
                if dt in (torch.float32, torch.float64):  # 4 / n need not be exact: within rounding
                    equal(hvd.reducescatter(x, op=hvd.Average, postscale_factor=4.0),
                          (full[lo:lo + cnt].double() * 4 / n).to(dt),
                          "reducescatter average postscale %s %s" % (shape, dt), atol=1e-4)
            else:
                # Integer averages truncate toward zero, negative sums included.
                equal(hvd.reducescatter(x, op=hvd.Average), torch.div(full[lo:lo + cnt], n, rounding_mode="trunc")
                      .to(dt), "reducescatter average (truncating) %s %s" % (shape, dt))
                xn = rs_input(r, shape, dt, sign=-1)
                equal(hvd.reducescatter(xn, op=hvd.Average),
                      torch.div(rs_sum(shape, n, sign=-1)[lo:lo + cnt], n, rounding_mode="trunc").to(dt),
                      "reducescatter average of negatives (toward zero) %s %s" % (shape, dt))
    # Async: every request in flight, then waited for in reverse.
    hs = [(shape, hvd.reducescatter_async(rs_input(r, shape, torch.float32), op=hvd.Sum)) for shape in shapes]
    for shape, h in reversed(hs):
        lo, cnt = shard(shape[0], r, n)
        equal(hvd.synchronize(h), rs_sum(shape, n)[lo:lo + cnt].float(), "reducescatter_async %s" % (shape,))
    # Other ops run too (libhora's; Horovod has Sum and Average only).
    x = rs_input(r, (2 * n + 1, 2), torch.int32)
    lo, cnt = shard(2 * n + 1, r, n)
    base = (torch.arange((2 * n + 1) * 2) + 1).reshape(2 * n + 1, 2)[lo:lo + cnt]
    equal(hvd.reducescatter(x, op=hvd.Min), base.to(torch.int32), "reducescatter min")
    equal(hvd.reducescatter(x, op=hvd.Max), (base * n).to(torch.int32), "reducescatter max")


def test_reducescatter_errors():
    r, n = hvd.rank(), hvd.size()
    raises(ValueError, lambda: hvd.reducescatter(torch.tensor(float(r))), "reducescatter of a 0-d tensor")
    raises(NotImplementedError, lambda: hvd.reducescatter(torch.ones(n), op=hvd.Adasum), "reducescatter Adasum",
           contains="Adasum")
    if n > 1:
        raises(hvd.HorovodInternalError, lambda: hvd.reducescatter(torch.ones(n + r, 2), name="rs.bad.shape"),
               "reducescatter of different first dimensions", contains="rs.bad.shape")
        dims = (4, 6) if r == 0 else (4, 2, 3)
        raises(hvd.HorovodInternalError, lambda: hvd.reducescatter(torch.ones(dims), name="rs.bad.rank"),
               "reducescatter of different ranks (same element count)", contains="rs.bad.rank")
        t = torch.ones(4, dtype=torch.int32 if r % 2 else torch.float32)
        raises(hvd.HorovodInternalError, lambda: hvd.reducescatter(t, name="rs.bad.dtype"),
               "reducescatter of different dtypes", contains="rs.bad.dtype")
    if r != 0:
        time.sleep(0.3)
    h = hvd.reducescatter_async(torch.ones(n, 2), name="rs.dup", op=hvd.Sum)
    if r == 0 and n > 1:
        raises(ValueError, lambda: hvd.reducescatter_async(torch.ones(n, 2), name="rs.dup"),
               "reducescatter duplicate name in flight", contains="rs.dup")
    equal(hvd.synchronize(h), torch.full((1, 2), float(n)), "the first reducescatter still completes")


def test_reducescatter_grad():
    r, n = hvd.rank(), hvd.size()
    for shape in [(2 * n, 2), (2 * n + 1, 2), (n - 1, 3)]:
        for op, pre, post, scale in [(hvd.Sum, 1.0, 1.0, n), (hvd.Average, 1.0, 1.0, 1), (hvd.Sum, 0.5, 1.0, n * 0.5),
                                     (hvd.Average, 1.0, 4.0, 4)]:
            x = rs_input(r, shape, torch.float64).requires_grad_()
            y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post)
            y.backward(torch.full(y.shape, float(r + 1), dtype=torch.float64))
            # Horovod's gradient: the allgather of every rank's output gradient,
            # times n for Sum, times the scales.
            want = torch.cat([torch.full((shard(shape[0], q, n)[1],) + shape[1:], float(q + 1) * scale,
                                         dtype=torch.float64) for q in range(n)])
            equal(x.grad, want, "reducescatter grad %s op %d pre %g post %g" % (shape, op, pre, post))


def test_grouped_reducescatter():
    r, n = hvd.rank(), hvd.size()
    shapes = [(2 * n, C), (2 * n + 1,), (n - 1, 2), (3 * n + 1, 2, 2)]
    for dt in supported([torch.float32, torch.float64, torch.int32, torch.int64]):
        xs = [rs_input(r, s, dt) for s in shapes]
        out = hvd.grouped_reducescatter(xs, op=hvd.Sum)
        check(len(out) == len(shapes), "grouped_reducescatter returns one tensor per input")
        for s, o in zip(shapes, out):
            lo, cnt = shard(s[0], r, n)
            equal(o, rs_sum(s, n)[lo:lo + cnt].to(dt), "grouped_reducescatter sum %s %s" % (s, dt))
        out = hvd.synchronize(hvd.grouped_reducescatter_async(xs, op=hvd.Average))
        for s, o in zip(shapes, out):
            lo, cnt = shard(s[0], r, n)
            full = rs_sum(s, n)[lo:lo + cnt]
            want = (full.double() / n).to(dt) if dt.is_floating_point else torch.div(full, n, rounding_mode="trunc").to(dt)
            equal(o, want, "grouped_reducescatter_async average %s %s" % (s, dt))
        if dt.is_floating_point:
            out = hvd.grouped_reducescatter(xs, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
            for s, o in zip(shapes, out):
                lo, cnt = shard(s[0], r, n)
                equal(o, (rs_sum(s, n)[lo:lo + cnt].double() * 1.5).to(dt),
                      "grouped_reducescatter pre/postscale %s %s" % (s, dt))
    raises(ValueError, lambda: hvd.grouped_reducescatter([torch.ones(n), torch.ones(n, dtype=torch.int32)]),
           "grouped_reducescatter of mixed dtypes", contains="one dtype")
    raises(ValueError, lambda: hvd.grouped_reducescatter([torch.ones(n), torch.tensor(1.0)]),
           "grouped_reducescatter with a 0-d member")
    # Gradients: Horovod's (grouped_allgather of the scaled output gradients).
    xs = [rs_input(r, s, torch.float64).requires_grad_() for s in shapes[:3]]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Sum, prescale_factor=0.5)
    sum(((y * float(r + 1 + j)).sum() for j, y in enumerate(ys)), torch.zeros((), dtype=torch.float64)).backward()
    for j, (s, x) in enumerate(zip(shapes[:3], xs)):
        want = torch.cat([torch.full((shard(s[0], q, n)[1],) + s[1:], float(q + 1 + j) * n * 0.5,
                                     dtype=torch.float64) for q in range(n)])
        equal(x.grad, want, "grouped_reducescatter grad %s" % (s,))


# ---- integer scaling: truncation toward zero, as Horovod ---------------------------

def test_integer_scaling_truncates():
    r, n = hvd.rank(), hvd.size()
    for dt in supported([torch.int32, torch.int64, torch.int16, torch.int8]):
        # The brief case: 7s summed, times 0.5 -> 7 * n / 2 (exact for n = 2: 7).
        x = torch.full((4,), 7, dtype=dt)
        got = hvd.allreduce(x, op=hvd.Sum, postscale_factor=0.5)
        equal(got, torch.full((4,), int(7 * n * 0.5), dtype=dt), "7s summed times 0.5 (%s)" % dt)
        # Cases where truncation and rounding differ. prescale: each rank's 7 *
        # 0.5 = 3.5 -> 3 (rounding: 4), -7 -> -3 (rounding and floor: -4); then
        # summed: 3n / -3n.
        x = torch.tensor([7, -7, 7, -7], dtype=dt)
        equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5), torch.tensor([3, -3, 3, -3], dtype=dt) * n,
              "prescale 0.5 truncates 3.5 to 3 and -3.5 to -3 before the sum (%s)" % dt)
        # postscale: sums of 1 and -1 are n and -n; times 0.875: 1.75 / 2.625
        # -> 1 / 2 (rounding: 2 / 3), -1.75 / -2.625 -> -1 / -2 (rounding and floor: -2 / -3).
        x = torch.tensor([1, -1], dtype=dt)
        want = torch.tensor([int(n * 0.875), -int(n * 0.875)], dtype=dt)
        equal(hvd.allreduce(x, op=hvd.Sum, postscale_factor=0.875), want,
              "postscale 0.875 truncates toward zero (%s): n=%d" % (dt, n))
        # The same through reducescatter (2 rows per rank).
        xr = torch.tensor([1, -1] * n, dtype=dt).reshape(n, 2)
        equal(hvd.reducescatter(xr, op=hvd.Sum, postscale_factor=0.875), want.reshape(1, 2),
              "reducescatter postscale truncates (%s)" % dt)
        xr = torch.tensor([7, -7] * n, dtype=dt).reshape(n, 2)
        equal(hvd.reducescatter(xr, op=hvd.Sum, prescale_factor=0.5), torch.tensor([[3 * n, -3 * n]], dtype=dt),
              "reducescatter prescale truncates (%s)" % dt)


# ---- sparse allreduce ------------------------------------------------------------

def sparse_input(r, hybrid=False):
    # 6 x 2, rows r, r + 1 and 5 non-zero with values (r + 1) * (10 row + col + 1); rank 1 has none.
    n = hvd.size()
    d = torch.zeros(6, 2)
    if not (r == 1 and n > 2):
        for row in (r, r + 1, 5):
            for col in range(2):
                d[row, col] = (r + 1) * (10 * row + col + 1)
    return d, (d.to_sparse(1) if hybrid else d.to_sparse())


def test_sparse_allreduce():
    r, n = hvd.rank(), hvd.size()
    for hybrid in (False, True):
        dense_sum = sum(sparse_input(q, hybrid)[0] for q in range(n))
        _, t = sparse_input(r, hybrid)
        h_sum = hvd.sparse_allreduce_async(t, name="sparse.sum.%d" % hybrid, op=hvd.Sum)
        h_avg = hvd.sparse_allreduce_async(t, name="sparse.avg.%d" % hybrid, op=hvd.Average)
        got = h_sum()
        check(got.is_sparse, "sparse_allreduce returns a sparse tensor")
        equal(got.to_dense(), dense_sum, "sparse allreduce sum (hybrid=%s)" % hybrid)
        equal(h_avg().to_dense(), dense_sum / n, "sparse allreduce average (hybrid=%s)" % hybrid, atol=1e-5)
        # As Horovod's test: the same as an allreduce of the dense tensor.
        equal(hvd.allreduce(t.to_dense(), op=hvd.Sum), dense_sum, "dense allreduce of the same")
    raises(ValueError, lambda: hvd.allreduce(sparse_input(r)[1]), "allreduce of a sparse tensor",
           contains="sparse_allreduce_async")


# ---- after a join ---------------------------------------------------------------

def test_join_then_collectives():
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        return
    if r == 0:
        last = hvd.join()
    else:
        # Rank 0 has joined: everything but allreduce fails on the ranks that submit it, as in Horovod.
        msg = raises(hvd.HorovodInternalError, lambda: hvd.allgather(torch.ones(2, 2), name="join.ag"),
                     "allgather after a rank joined")
        check(msg is not None and "join.ag" in msg, "the message names the tensor: %r" % msg)
        print("rank %d: %s" % (r, msg), flush=True)
        raises(hvd.HorovodInternalError, lambda: hvd.broadcast(torch.ones(3), 1, name="join.bc"),
               "broadcast after a rank joined")
        raises(hvd.HorovodInternalError, lambda: hvd.alltoall(torch.ones(n, 2), name="join.a2a"),
               "alltoall after a rank joined")
        raises(hvd.HorovodInternalError, lambda: hvd.reducescatter(torch.ones(n, 2), name="join.rs"),
               "reducescatter after a rank joined")
        raises(hvd.HorovodInternalError, hvd.barrier, "barrier after a rank joined")
        # allreduce still runs: rank 0 adds zeros.
        equal(hvd.allreduce(torch.full((3,), float(r)), op=hvd.Sum, name="join.ar"),
              torch.full((3,), float(n * (n - 1) / 2)), "allreduce after a rank joined")
        last = hvd.join()
    check(last != 0, "rank 0 joined first, so not last: %d" % last)
    lasts = hvd.allgather_object(last)
    check(lasts == [last] * n, "join's last rank agrees: %s" % lasts)
    # Everything works again once all joined.
    equal(hvd.allgather(torch.full((1,), float(r))), torch.arange(n, dtype=torch.float32), "allgather after join")
    hvd.barrier()
    lo, cnt = shard(n, r, n)
    equal(hvd.reducescatter(torch.ones(n, 1), op=hvd.Sum), torch.full((cnt, 1), float(n)), "reducescatter after join")
    each_rank_joins_first()


def each_rank_joins_first():
    """Horovod's join tests at any size: each rank in turn joins first while the
    others call unnamed collectives. The joined rank does not call them, so its
    counters fall behind and the others' names disagree with each other
    (allgather.noname.N vs .N+1): each must still raise at once (it hung at
    np 3). faulthandler ends a hang with the stacks instead of the test's
    timeout."""
    import faulthandler
    r, n = hvd.rank(), hvd.size()
    faulthandler.dump_traceback_later(60, exit=True)
    for first in range(n):
        if r == first:
            last = hvd.join()
        else:
            raises(hvd.HorovodInternalError, lambda: hvd.allgather(torch.ones(2, 3)),
                   "unnamed allgather while rank %d has joined" % first, "rank %d has already joined" % first)
            raises(hvd.HorovodInternalError, lambda: hvd.broadcast(torch.ones(3), (first + 1) % n),
                   "unnamed broadcast while rank %d has joined" % first, "rank %d has already joined" % first)
            last = hvd.join()
        check(last != first, "rank %d joined first, so not last: %d" % (first, last))
        lasts = hvd.allgather_object(last)
        check(lasts == [last] * n, "join's last rank agrees: %s" % lasts)
    faulthandler.cancel_dump_traceback_later()
    # Every rank called each unnamed collective n - 1 times: the names agree again.
    equal(hvd.allgather(torch.full((1, 2), float(r))), torch.arange(n, dtype=torch.float32).repeat_interleave(2)
          .reshape(n, 2), "unnamed allgather after the joins")
    equal(hvd.broadcast(torch.full((2,), float(r)), n - 1), torch.full((2,), float(n - 1)),
          "unnamed broadcast after the joins")


# ---- shared tensors --------------------------------------------------------------

def test_shared_tensors():
    """hora's shared_tensors: the layout it promises, zeros, exact in-place
    all-reduces grouped and one by one (again through the response cache),
    other dtypes, a view keeping the block, refusals."""
    r, n = hvd.rank(), hvd.size()
    shapes = [(5, 3), (0,), (7,), (2, 2, 2), (1,)]
    ts = hvd.shared_tensors(shapes)
    check([tuple(t.shape) for t in ts] == shapes, "shapes: %s" % [tuple(t.shape) for t in ts])
    check(all(hvd.is_shared(t) for t in ts if t.numel()), "every tensor lies in shared memory")
    check(not hvd.is_shared(torch.ones(4)), "a plain tensor is not shared")
    off = 0
    for t, shape in zip(ts, shapes):
        off = -(-off // 64) * 64
        if t.numel():  # an empty tensor's data_ptr means nothing
            check(t.data_ptr() == ts[0].data_ptr() + off, "%s starts %d bytes into the block" % (shape, off))
        off += math.prod(shape) * 4
    check(all(torch.equal(t, torch.zeros(s)) for t, s in zip(ts, shapes)), "zero-filled")

    def fill(k):
        for i, t in enumerate(ts):
            t.copy_((torch.arange(t.numel(), dtype=torch.float32) + 10 * i + 100 * r + k).reshape(t.shape))

    def want(i, t, k):  # the sum over ranks q of arange + 10 i + 100 q + k
        v = (torch.arange(t.numel(), dtype=torch.float32) + 10 * i + k) * n + 100 * n * (n - 1) / 2
        return v.reshape(t.shape)

    for k in range(3):
        fill(k)
        hvd.synchronize(hvd.grouped_allreduce_async_(ts, op=hvd.Sum, name="shared.group"))
        for i, t in enumerate(ts):
            equal(t, want(i, t, k), "grouped allreduce of shared tensor %d, round %d" % (i, k))
        fill(k + 7)
        for h in [hvd.allreduce_async_(t, op=hvd.Sum, name="shared.%d" % i) for i, t in enumerate(ts)]:
            hvd.synchronize(h)
        for i, t in enumerate(ts):
            equal(t, want(i, t, k + 7), "allreduce of shared tensor %d, round %d" % (i, k))
    for dt in supported([torch.float64, torch.bfloat16, torch.int32, torch.int8]):
        a, b = hvd.shared_tensors([(3,), (4,)], dtype=dt)
        a.copy_((torch.arange(3) + r).to(dt))
        b.copy_((torch.arange(4) * 2 + r).to(dt))
        hvd.grouped_allreduce_([a, b], op=hvd.Sum, name="shared.%s" % dt)
        equal(a, (torch.arange(3) * n + n * (n - 1) // 2).to(dt), "shared %s tensor a" % dt)
        equal(b, (torch.arange(4) * 2 * n + n * (n - 1) // 2).to(dt), "shared %s tensor b" % dt)
    view = ts[2][2:4]
    kept = view.clone()
    ts = t = a = b = None  # only the view is left of the first block
    gc.collect()
    check(hvd.is_shared(view), "a view keeps its block")
    equal(view, kept, "a view outlives the other tensors of its block")
    raises(ValueError, lambda: hvd.shared_tensors([(2, -1)]), "a negative dimension", "negative")
    raises(TypeError, lambda: hvd.shared_tensors([(2,)], dtype=torch.complex64), "a dtype libhora lacks")


if __name__ == "__main__":
    run([test_alltoall_equal_split, test_alltoall_uneven, test_alltoall_grad, test_alltoall_errors, test_barrier,
         test_reducescatter, test_reducescatter_errors, test_reducescatter_grad, test_grouped_reducescatter,
         test_integer_scaling_truncates, test_sparse_allreduce, test_join_then_collectives,
         test_shared_tensors])
