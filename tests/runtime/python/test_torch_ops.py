"""hora.torch collectives, exactly: inputs are a function of (rank, index)
so each rank computes the expected result. mpirun -np N python3 test_torch_ops.py"""
import math

from common import check, equal, hvd, raises, run
import torch

INT_DTYPES = [torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16]
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
COUNT = 37  # odd, not divisible by the number of ranks


def value(r, dtype, count=COUNT):
    # (r + 1) + (i % 3): small enough that sums and products of 3 ranks fit every dtype.
    return ((torch.arange(count) % 3) + r + 1).to(dtype)


def supported(dtypes):
    return [d for d in dtypes if d in hvd.mpi_ops._DTYPES]


def test_allreduce_ops():
    r, n = hvd.rank(), hvd.size()
    k = torch.arange(COUNT) % 3
    for dt in supported(INT_DTYPES + FLOAT_DTYPES):
        x = value(r, dt)
        s = sum(value(q, torch.int64) for q in range(n))
        equal(hvd.allreduce(x, op=hvd.Sum), s.to(dt), "sum %s" % dt)
        equal(hvd.allreduce(x, op=hvd.Min), (k + 1).to(dt), "min %s" % dt)
        equal(hvd.allreduce(x, op=hvd.Max), (k + n).to(dt), "max %s" % dt)
        p = torch.ones(COUNT, dtype=torch.int64)
        for q in range(n):
            p = p * value(q, torch.int64)
        equal(hvd.allreduce(x, op=hvd.Product), p.to(dt), "product %s" % dt)
        if dt.is_floating_point:
            equal(hvd.allreduce(x), (s.double() / n).to(dt), "average (default) %s" % dt)
            equal(hvd.allreduce(x, average=True), (s.double() / n).to(dt), "average=True %s" % dt)
            equal(hvd.allreduce(x, average=False), s.to(dt), "average=False %s" % dt)
            equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5), (s.double() * 0.5).to(dt), "prescale %s" % dt)
            equal(hvd.allreduce(x, op=hvd.Sum, postscale_factor=3.0), (s.double() * 3).to(dt), "postscale %s" % dt)
        else:
            equal(hvd.allreduce(x, op=hvd.Average), (s // n).to(dt), "average (truncating) %s" % dt)
        check(torch.equal(x, value(r, dt)), "allreduce left its input unchanged (%s)" % dt)
    if torch.bool in hvd.mpi_ops._DTYPES:
        b = torch.tensor([True, r == 0, False])
        equal(hvd.allreduce(b, op=hvd.Sum), torch.tensor([True, True, False]), "bool sum (any)")
        equal(hvd.allreduce(b, op=hvd.Min), torch.tensor([True, n == 1, False]), "bool min (all)")


def test_allreduce_shapes():
    r, n = hvd.rank(), hvd.size()
    x = (torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) + r)
    equal(hvd.allreduce(x, op=hvd.Sum), torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) * n + n * (n - 1) / 2,
          "3-d sum")
    equal(hvd.allreduce(torch.tensor(float(r)), op=hvd.Sum), torch.tensor(n * (n - 1) / 2), "0-d sum")
    equal(hvd.allreduce(torch.zeros(0), op=hvd.Sum), torch.zeros(0), "empty")


def test_allreduce_inplace():
    r, n = hvd.rank(), hvd.size()
    s = sum(value(q, torch.int64) for q in range(n))
    for dt in supported([torch.float32, torch.int32, torch.int64]):
        x = value(r, dt)
        y = hvd.allreduce_(x, op=hvd.Sum)
        check(y is x, "allreduce_ returns its tensor")
        equal(x, s.to(dt), "allreduce_ sum %s" % dt)
        x = value(r, dt)
        h = hvd.allreduce_async_(x, op=hvd.Max)
        equal(hvd.synchronize(h), (torch.arange(COUNT) % 3 + n).to(dt), "allreduce_async_ max %s" % dt)
    # A non-contiguous tensor, reduced in place.
    base = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + r)
    t = base.t()
    hvd.allreduce_(t, op=hvd.Sum)
    equal(base, (torch.arange(12, dtype=torch.float32).reshape(3, 4) * n + n * (n - 1) / 2), "non-contiguous in place")


def test_grouped():
    r, n = hvd.rank(), hvd.size()
    sizes = [1, 5, COUNT, 1000]
    ts = [torch.arange(c, dtype=torch.float32) + r for c in sizes]
    want = [torch.arange(c, dtype=torch.float32) * n + n * (n - 1) / 2 for c in sizes]
    out = hvd.grouped_allreduce(ts, op=hvd.Sum)
    for o, w, c in zip(out, want, sizes):
        equal(o, w, "grouped_allreduce count %d" % c)
    out = hvd.grouped_allreduce(ts, op=hvd.Sum, postscale_factor=1.0 / n)
    for o, w, c in zip(out, want, sizes):
        equal(o, w / n, "grouped_allreduce postscale count %d" % c, atol=1e-4)
    hvd.grouped_allreduce_(ts, op=hvd.Sum)
    for t, w, c in zip(ts, want, sizes):
        equal(t, w, "grouped_allreduce_ count %d" % c)
    h = hvd.grouped_allreduce_async([torch.ones(3) * r, torch.ones(2, 2) * r], op=hvd.Max)
    a, b = hvd.synchronize(h)
    equal(a, torch.ones(3) * (n - 1), "grouped async a")
    equal(b, torch.ones(2, 2) * (n - 1), "grouped async b")


def test_async_poll():
    r, n = hvd.rank(), hvd.size()
    handles = [hvd.allreduce_async(torch.full((100 + j,), float(r + j)), op=hvd.Sum, name="async.%d" % j)
               for j in range(20)]
    for j, h in enumerate(handles):
        while not hvd.poll(h):
            pass
        check(hvd.poll(h), "poll stays true")
        equal(hvd.synchronize(h), torch.full((100 + j,), float(n * (n - 1) / 2 + n * j)), "async %d" % j)
    raises(ValueError, lambda: hvd.synchronize(handles[0]), "synchronize twice")
    # Unnamed requests in flight together get distinct, agreed names.
    hs = [hvd.allreduce_async(torch.full((3,), float(j)), op=hvd.Sum) for j in range(5)]
    for j, h in enumerate(reversed(hs)):
        equal(hvd.synchronize(h), torch.full((3,), float((4 - j) * n)), "unnamed async %d" % j)


def test_allgather():
    r, n = hvd.rank(), hvd.size()
    for dt in supported([torch.float32, torch.int64, torch.uint8, torch.float16, torch.int8]):
        x = (torch.arange((r + 1) * 3).reshape(r + 1, 3) + 10 * r).to(dt)
        want = torch.cat([(torch.arange((q + 1) * 3).reshape(q + 1, 3) + 10 * q).to(dt) for q in range(n)])
        equal(hvd.allgather(x), want, "allgather %s" % dt)
        equal(hvd.synchronize(hvd.allgather_async(x)), want, "allgather_async %s" % dt)
    # A rank with zero rows.
    x = torch.full((r % 2, 2), float(r))
    want = torch.cat([torch.full((q % 2, 2), float(q)) for q in range(n)])
    equal(hvd.allgather(x), want, "allgather with an empty rank")


def test_broadcast():
    r, n = hvd.rank(), hvd.size()
    for root in range(n):
        for dt in supported([torch.float32, torch.int32, torch.float64, torch.bfloat16, torch.int16, torch.bool]):
            x = (torch.arange(COUNT) * (r + 1) % 5).to(dt)
            want = (torch.arange(COUNT) * (root + 1) % 5).to(dt)
            equal(hvd.broadcast(x, root), want, "broadcast root %d %s" % (root, dt))
            check(torch.equal(x, (torch.arange(COUNT) * (r + 1) % 5).to(dt)), "broadcast left input unchanged")
            y = hvd.broadcast_(x, root)
            check(y is x, "broadcast_ returns its tensor")
            equal(x, want, "broadcast_ root %d %s" % (root, dt))
        equal(hvd.synchronize(hvd.broadcast_async(torch.full((2, 3), float(r)), root)), torch.full((2, 3), float(root)),
              "broadcast_async root %d" % root)


def test_broadcast_parameters():
    r = hvd.rank()
    torch.manual_seed(1000 + r)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    torch.manual_seed(1000)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for (k, v), (_, w) in zip(sorted(model.state_dict().items()), sorted(ref.state_dict().items())):
        equal(v, w, "broadcast_parameters state_dict %s" % k)
    torch.manual_seed(2000 + r)
    model2 = torch.nn.Linear(5, 2)
    hvd.broadcast_parameters(model2.named_parameters(), root_rank=hvd.size() - 1)
    torch.manual_seed(2000 + hvd.size() - 1)
    ref2 = torch.nn.Linear(5, 2)
    equal(model2.weight.data, ref2.weight.data, "broadcast_parameters named_parameters weight")
    equal(model2.bias.data, ref2.bias.data, "broadcast_parameters named_parameters bias")


def test_broadcast_optimizer_state():
    r = hvd.rank()
    torch.manual_seed(7)
    model = torch.nn.Linear(3, 2)
    for opt_cls, kw in [(torch.optim.SGD, dict(lr=0.1 * (r + 1), momentum=0.9)), (torch.optim.Adam, dict(lr=0.01 * (r + 1)))]:
        opt = opt_cls(model.parameters(), **kw)
        if r == 0:  # only the root has state: the others get it created, then overwritten
            loss = model(torch.ones(4, 3)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        mine = [(k, v.clone() if torch.is_tensor(v) else v) for s in opt.state_dict()["state"].values()
                for k, v in sorted(s.items())]
        root = hvd.broadcast_object(mine, root_rank=0)
        check(len(mine) == len(root) and len(mine) > 0, "%s state entries" % opt_cls.__name__)
        for (k, v), (_, w) in zip(mine, root):
            if torch.is_tensor(v):
                equal(v, w, "%s state %s" % (opt_cls.__name__, k))
            else:
                check(v == w, "%s state %s: %r vs %r" % (opt_cls.__name__, k, v, w))
        check(math.isclose(opt.param_groups[0]["lr"], kw["lr"] / (r + 1)), "%s lr from root: %r" % (opt_cls.__name__,
                                                                                     opt.param_groups[0]["lr"]))


def test_objects():
    r, n = hvd.rank(), hvd.size()
    for root in range(n):
        obj = {"rank": r, "list": list(range(r)), "text": "x" * (100 * r)}
        got = hvd.broadcast_object(obj, root_rank=root)
        check(got == {"rank": root, "list": list(range(root)), "text": "x" * (100 * root)},
              "broadcast_object root %d: %r" % (root, got))
    got = hvd.allgather_object({"rank": r, "pad": "y" * r})
    check(got == [{"rank": q, "pad": "y" * q} for q in range(n)], "allgather_object: %r" % got)


def test_autograd():
    r, n = hvd.rank(), hvd.size()
    w = float(r + 1)
    for op, want in [(hvd.Sum, n * (n + 1) / 2), (hvd.Average, (n + 1) / 2)]:
        x = torch.arange(5, dtype=torch.float64).requires_grad_()
        (hvd.allreduce(x, op=op) * w).sum().backward()
        equal(x.grad, torch.full((5,), want, dtype=torch.float64), "allreduce grad op %d" % op)
    x = torch.ones(r + 1, 2, dtype=torch.float64).requires_grad_()
    y = hvd.allgather(x)
    check(y.shape == (n * (n + 1) // 2, 2), "allgather shape")
    (y * w).sum().backward()
    equal(x.grad, torch.full((r + 1, 2), (n + 1) / 2, dtype=torch.float64), "allgather grad")
    x = torch.ones(3, dtype=torch.float64).requires_grad_()
    (hvd.broadcast(x, 0) * w).sum().backward()
    equal(x.grad, torch.full((3,), (n + 1) / 2 if r == 0 else 0.0, dtype=torch.float64), "broadcast grad")
    xs = [torch.ones(2, dtype=torch.float64).requires_grad_(), torch.ones(3, dtype=torch.float64).requires_grad_()]
    out = hvd.grouped_allreduce(xs, op=hvd.Sum)
    (out[0].sum() * w + out[1].sum() * 2 * w).backward()
    equal(xs[0].grad, torch.full((2,), n * (n + 1) / 2, dtype=torch.float64), "grouped grad 0")
    equal(xs[1].grad, torch.full((3,), n * (n + 1), dtype=torch.float64), "grouped grad 1")


def test_compression():
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(10, dtype=torch.float32) + r
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    check(y.dtype == torch.float32, "fp16 compression returns float32")
    equal(y, torch.arange(10, dtype=torch.float32) * n + n * (n - 1) / 2, "fp16 compression sum")


def test_topology():
    n = hvd.size()
    check(0 <= hvd.rank() < n, "rank")
    check(0 <= hvd.local_rank() < hvd.local_size() <= n, "local rank/size")
    check(0 <= hvd.cross_rank() < hvd.cross_size(), "cross rank/size")
    check(hvd.is_initialized(), "is_initialized")
    check(hvd.local_size() * hvd.cross_size() == n, "local_size * cross_size == size on one host")


def test_refusals():
    # A ProcessSet whose id libhora never gave out: every rank refuses it at the call.
    forged = hvd.ProcessSet([0])
    forged.process_set_id = 77
    for name, fn in [("allreduce", lambda: hvd.allreduce(torch.ones(2), process_set=forged)),
                     ("alltoall", lambda: hvd.alltoall(torch.ones(2), process_set=forged)),
                     ("reducescatter", lambda: hvd.reducescatter(torch.ones(2), process_set=forged)),
                     ("barrier", lambda: hvd.barrier(process_set=forged))]:
        raises(ValueError, fn, "%s on an unknown process set" % name, contains="does not exist")
    # Adasum (test_torch_adasum.py has the rest): a binary tree of pairs, integers have no dot product.
    if hvd.size() & (hvd.size() - 1):
        raises(NotImplementedError, lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum), "Adasum",
               contains="power-of-two")
    else:
        raises(ValueError, lambda: hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum), "Adasum i32",
               contains="adasum")
    raises(TypeError, lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64)), "complex64", contains="complex64")
    raises(ValueError, lambda: hvd.allreduce(torch.ones(2).to_sparse()), "sparse", contains="sparse")
    raises(ValueError, lambda: hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum), "average and op")


def test_join():
    r, n = hvd.rank(), hvd.size()
    # Rank 0 joins at once; the others all-reduce twice first: rank 0 contributes zeros.
    if r == 0:
        last = hvd.join()
    else:
        for j in range(2):
            equal(hvd.allreduce(torch.full((4,), float(r)), op=hvd.Sum, name="join.%d" % j),
                  torch.full((4,), float(n * (n - 1) / 2)), "allreduce while rank 0 has joined")
        last = hvd.join()
    lasts = hvd.allgather(torch.tensor([last]))
    check(bool((lasts == lasts[0]).all()) and 0 <= int(lasts[0]) < n, "join's last rank agrees: %s" % lasts)
    if n > 1:
        check(int(lasts[0]) != 0, "rank 0 was not the last to join")
    equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)), "allreduce after join")


if __name__ == "__main__":
    run([test_topology, test_allreduce_ops, test_allreduce_shapes, test_allreduce_inplace, test_grouped,
         test_async_poll, test_allgather, test_broadcast, test_broadcast_parameters, test_broadcast_optimizer_state,
         test_objects, test_autograd, test_compression, test_refusals, test_join])
