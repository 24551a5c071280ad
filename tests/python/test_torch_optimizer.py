"""hora.torch.DistributedOptimizer: ranks with different data end with the
same parameters, equal (within float tolerance) to one process training on
the concatenated batch (the average of the ranks' gradients);
backward_passes_per_step, gradient_predivide_factor, op=Sum, fp16
compression, synchronize()/skip_synchronize(), the zero_grad guard, and the
metric averaging Horovod's examples use."""
import warnings

from common import check, equal, hvd, raises, run
import torch

STEPS = 5
BATCH = 8


def make_model():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def batch(rank, step, half=None):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(BATCH, 4, generator=g, dtype=torch.float64).float()
    y = torch.randn(BATCH, 1, generator=g, dtype=torch.float64).float()
    if half is not None:
        return x[half * BATCH // 2:(half + 1) * BATCH // 2], y[half * BATCH // 2:(half + 1) * BATCH // 2]
    return x, y


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def train(passes, predivide=1.0, op=hvd.Average, compression=hvd.Compression.none, lr=0.05):
    r = hvd.rank()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), backward_passes_per_step=passes,
                                   gradient_predivide_factor=predivide, op=op, compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(STEPS):
        opt.zero_grad()
        if passes == 1:
            loss_fn(model, *batch(r, step)).backward()
        else:
            for h in range(passes):
                loss_fn(model, *batch(r, step, h)).backward()
        opt.step()
    return model


def reference(passes, scale=1.0, lr=0.05):
    """One process: the gradient is the mean over ranks (scale: times n for Sum)
    of each rank's (accumulated) gradient."""
    n = hvd.size()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        total = 0
        for q in range(n):
            if passes == 1:
                total = total + loss_fn(model, *batch(q, step))
            else:
                for h in range(passes):
                    total = total + loss_fn(model, *batch(q, step, h))
        (total * scale / n).backward()
        opt.step()
    return model


def compare(model, ref, what, atol):
    for (k, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        equal(p.data, q.data, "%s: %s against the single-process run" % (what, k), atol=atol)
        flat = p.data.reshape(1, -1)
        every = hvd.allgather(flat)
        check(bool((every == flat).all()), "%s: %s identical on every rank" % (what, k))


def test_average():
    compare(train(1), reference(1), "average", 1e-5)


def test_backward_passes_per_step():
    compare(train(2), reference(2), "backward_passes_per_step=2", 1e-5)


def test_predivide():
    compare(train(1, predivide=2.0), reference(1), "gradient_predivide_factor=2", 1e-5)


def test_sum():
    compare(train(1, op=hvd.Sum, lr=0.02), reference(1, scale=hvd.size(), lr=0.02), "op=Sum", 1e-5)


def test_fp16():
    compare(train(1, compression=hvd.Compression.fp16), reference(1), "fp16 compression", 2e-3)


def test_guards():
    r = hvd.rank()
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    loss_fn(model, *batch(r, 0)).backward()
    if hvd.size() > 1:
        raises(AssertionError, opt.zero_grad, "zero_grad between backward and step", contains="zero_grad")
    opt.synchronize()
    with opt.skip_synchronize():
        opt.step()
    opt.zero_grad()
    loss_fn(model, *batch(r, 1)).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt.step()  # synchronize() then step() outside skip_synchronize: Horovod's warning
    check(hvd.size() == 1 or any("skip_synchronize" in str(x.message) for x in w), "step after synchronize warns")
    flat = torch.cat([p.data.reshape(-1) for p in model.parameters()]).reshape(1, -1)
    check(bool((hvd.allgather(flat) == flat).all()), "parameters identical after synchronize/skip_synchronize")
    raises(ValueError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                      named_parameters=[("a", p) for p in model.parameters()]),
           "duplicate parameter names", contains="unique")
    raises(ValueError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                                      gradient_predivide_factor=2.0), "predivide with Sum")
    raises(NotImplementedError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                               op=hvd.Adasum), "Adasum optimizer", contains="Adasum")
    # Gradients computed twice with backward_passes_per_step=1: Horovod's assertion.
    model = make_model()  # a fresh model: opt's hooks stay on the first one
    opt2 = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                    named_parameters=model.named_parameters())
    if hvd.size() > 1:
        loss_fn(model, *batch(r, 2)).backward()
        raises(AssertionError, lambda: loss_fn(model, *batch(r, 3)).backward(), "two backward passes",
               contains="backward_passes_per_step")
        opt2.synchronize()


def test_metric_average():
    # As Horovod's examples: hvd.allreduce(torch.tensor(val), name=...).item()
    r, n = hvd.rank(), hvd.size()
    avg = hvd.allreduce(torch.tensor(float(r)), name="avg_loss").item()
    check(abs(avg - (n - 1) / 2) < 1e-9, "metric average %r" % avg)


if __name__ == "__main__":
    run([test_average, test_backward_passes_per_step, test_predivide, test_sum, test_fp16, test_guards,
         test_metric_average])
