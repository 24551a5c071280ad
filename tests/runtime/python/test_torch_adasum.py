"""hora.torch's op=hvd.Adasum (libhora's HORA_OP_ADASUM): allreduce,
allreduce_, allreduce_async, grouped_allreduce and DistributedOptimizer(op=
hvd.Adasum), against a float64 reference of the pairwise tree computed here
from (rank, index)-derived inputs; orthogonal inputs must give their sum and
identical inputs their mean exactly; every rank gets the same bits. With a
world size that is not a power of two every rank gets NotImplementedError
naming the reason. mpirun -np N python3 test_torch_adasum.py"""
from common import check, equal, hvd, raises, run
import torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def power_of_two():
    n = hvd.size()
    return n & (n - 1) == 0


def inputs(r, count, kind):
    i = torch.arange(count, dtype=torch.float64)
    if kind == "orthogonal":  # rank r's vector lives where i % n == r
        return torch.where((torch.arange(count) % hvd.size()) == r, 1.0 + (i % 5) * 0.25, torch.zeros(count))
    if kind == "identical":
        return ((i * 11) % 13 - 6) * 0.125
    return ((i * 7 + r * 13) % 17 - 8) * 0.0625 + (r + 1) * (i % 3 + 1) * 0.03125


def adasum_reference(vectors):
    """The pairwise tree in rank order, in float64."""
    v = [x.double().clone() for x in vectors]
    step = 1
    while step < len(v):
        for r in range(0, len(v), 2 * step):
            a, b = v[r], v[r + step]
            dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
            ca = 1 - dot / (2 * aa) if aa >= 1.4916681462400413e-154 else 1.0
            cb = 1 - dot / (2 * bb) if bb >= 1.4916681462400413e-154 else 1.0
            v[r] = ca * a + cb * b
        step *= 2
    return v[0]


def close(got, want, dt, what):
    """Within a few roundings of dt at the reference's scale (the C test,
    tests/runtime/coll/test_adasum.c, derives the bound element-wise)."""
    eps = torch.finfo(dt).eps
    err = (got.double() - want).abs().max().item() if want.numel() else 0.0
    scale = want.abs().max().item() if want.numel() else 0.0
    check(err <= 4 * eps * (scale + 1e-30), "%s: off by %g (scale %g, eps %g)" % (what, err, scale, eps))


def same_on_every_rank(t, what):
    ref = hvd.broadcast(t, root_rank=0, name="adasum.bits." + what)
    check(torch.equal(ref, t), "%s: rank %d's bits differ from rank 0's" % (what, hvd.rank()))


def test_allreduce():
    if not power_of_two():
        return
    r, n = hvd.rank(), hvd.size()
    for dt in FLOATS:
        for count in (1, 5, 1000):
            for kind in ("general", "orthogonal", "identical"):
                x = inputs(r, count, kind).to(dt)
                want = adasum_reference([inputs(q, count, kind).to(dt) for q in range(n)])
                got = hvd.allreduce(x, op=hvd.Adasum, name="adasum.%s.%d.%s" % (dt, count, kind))
                what = "allreduce %s %d %s" % (dt, count, kind)
                check(got.dtype == dt and got.shape == x.shape, what + ": dtype/shape")
                if kind == "general":
                    close(got, want, dt, what)
                else:
                    equal(got, want.to(dt), what)
                same_on_every_rank(got, what)
                check(torch.equal(x, inputs(r, count, kind).to(dt)), what + ": input changed")


def test_inplace_async_grouped():
    if not power_of_two():
        return
    r, n = hvd.rank(), hvd.size()
    shape = (4, 5)
    want = adasum_reference([inputs(q, 20, "general").float() for q in range(n)]).reshape(shape)
    x = inputs(r, 20, "general").float().reshape(shape)
    hvd.allreduce_(x, op=hvd.Adasum, name="adasum.inplace")
    close(x, want, torch.float32, "allreduce_")
    h = hvd.allreduce_async(inputs(r, 20, "general").float().reshape(shape), op=hvd.Adasum, name="adasum.async")
    close(hvd.synchronize(h), want, torch.float32, "allreduce_async")
    # A group: each tensor is its own vector (not one concatenated vector).
    ts = [inputs(r, 20, "general").float(), inputs(r, 7, "orthogonal").float()]
    out = hvd.grouped_allreduce(ts, op=hvd.Adasum, name="adasum.grouped")
    close(out[0], want.reshape(-1), torch.float32, "grouped[0]")
    equal(out[1], adasum_reference([inputs(q, 7, "orthogonal").float() for q in range(n)]).float(), "grouped[1]")
    # Scales apply before and after (Adasum is homogeneous of degree 1).
    s = hvd.allreduce(inputs(r, 20, "general").float(), op=hvd.Adasum, prescale_factor=0.5, postscale_factor=4.0,
                      name="adasum.scaled")
    close(s, want.reshape(-1) * 2, torch.float32, "scaled")


def test_refusals():
    r = hvd.rank()
    if not power_of_two():
        raises(NotImplementedError, lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum, name="adasum.np"),
               "allreduce Adasum at np %d" % hvd.size(), "power-of-two")
        model = torch.nn.Linear(3, 1)
        raises(NotImplementedError, lambda: hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(), op=hvd.Adasum),
            "DistributedOptimizer Adasum at np %d" % hvd.size(), "power-of-two")
        return
    raises(ValueError, lambda: hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum, name="adasum.int"),
           "allreduce Adasum of int32", "adasum")
    raises(NotImplementedError, lambda: hvd.reducescatter(torch.ones(4), op=hvd.Adasum), "reducescatter Adasum",
           "Adasum")
    check(r == hvd.rank(), "still up")


def test_optimizer():
    """Horovod's Adasum optimizer: each rank's SGD change (-lr * its gradient)
    is combined by Adasum and added to the parameter; backward_passes_per_step
    and the zero_grad guard."""
    if not power_of_two():
        return
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1, bias=False)
    w0 = hvd.broadcast(model.weight.detach().clone(), root_rank=0, name="adasum.w0")
    with torch.no_grad():
        model.weight.copy_(w0)
    lr = 0.5
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)

    def x_of(q):  # loss = w . x_q: the gradient is x_q
        return inputs(q, 6, "general").float().reshape(1, 6)

    for step in range(2):
        opt.zero_grad()
        model(x_of(r)).sum().backward()
        opt.step()
        w0 = w0.double() + adasum_reference([-lr * x_of(q).double().reshape(-1) for q in range(n)]).reshape(1, 6)
        close(model.weight.detach(), w0, torch.float32, "optimizer step %d" % step)
        same_on_every_rank(model.weight.detach(), "optimizer step %d" % step)
    raises(AssertionError, lambda: opt.skip_synchronize().__enter__(), "skip_synchronize")
    # Two backward passes per step: the change is SGD's on the accumulated gradient 2 x_r.
    opt.set_backward_passes_per_step(2)
    opt.zero_grad()
    for _ in range(2):
        model(x_of(r)).sum().backward()
    raises(AssertionError, opt.zero_grad, "zero_grad between backward and step", "zero_grad")
    opt.step()
    w0 = w0 + adasum_reference([-2 * lr * x_of(q).double().reshape(-1) for q in range(n)]).reshape(1, 6)
    close(model.weight.detach(), w0, torch.float32, "optimizer, backward_passes_per_step=2")


if __name__ == "__main__":
    run([test_allreduce, test_inplace_async_grouped, test_refusals, test_optimizer])
