"""hora.torch.DistributedOptimizer: ranks with different data end with the
same parameters, equal (within float tolerance) to one process training on
the concatenated batch (the average of the ranks' gradients);
backward_passes_per_step, gradient_predivide_factor, op=Sum, fp16
compression, groups (an int, a list of parameter lists: grouped allreduces),
sparse gradients (Horovod's sparse path and sparse_as_dense),
synchronize()/skip_synchronize(), the zero_grad guard, and the metric
averaging Horovod's examples use."""
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


def train(passes, predivide=1.0, op=hvd.Average, compression=hvd.Compression.none, lr=0.05, groups=None,
          seen=None):
    """seen: a list that receives, after each backward, the keys of the
    optimizer's pending gradients (a tuple for a group's grouped allreduce)."""
    r = hvd.rank()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if callable(groups):
        groups = groups(model)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), backward_passes_per_step=passes,
                                   gradient_predivide_factor=predivide, op=op, compression=compression,
                                   groups=groups)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(STEPS):
        opt.zero_grad()
        if passes == 1:
            loss_fn(model, *batch(r, step)).backward()
        else:
            for h in range(passes):
                loss_fn(model, *batch(r, step, h)).backward()
        if seen is not None:
            seen.append(list(opt._handles))
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


def group_sizes(seen):
    """The sizes of the grouped allreduces of the first step (0: a parameter alone)."""
    return sorted(len(k) if isinstance(k, tuple) else 0 for k in seen[0])


def test_groups():
    n = hvd.size()
    ref = reference(1)
    # An int: the 4 parameters (in rank 0's order) in that many near-equal groups.
    for groups, want in [(1, [4]), (2, [2, 2]), (3, [1, 1, 2]), (4, [1, 1, 1, 1])]:
        seen = []
        compare(train(1, groups=groups, seen=seen), ref, "groups=%d" % groups, 1e-5)
        check(n == 1 or group_sizes(seen) == want, "groups=%d: grouped allreduces %s, want %s" %
              (groups, group_sizes(seen), want))
    # A list of parameter lists; those not listed are a group each.
    seen = []
    compare(train(1, groups=lambda m: [[m[0].weight, m[2].bias]], seen=seen), ref, "groups=[[w0, b2]]", 1e-5)
    check(n == 1 or group_sizes(seen) == [1, 1, 2], "groups=[[w0, b2]]: %s" % group_sizes(seen))
    # With gradient accumulation, predivide and fp16: still the average.
    compare(train(2, groups=2), reference(2), "groups=2, backward_passes_per_step=2", 1e-5)
    compare(train(1, groups=2, predivide=2.0), ref, "groups=2, predivide 2", 1e-5)
    compare(train(1, groups=2, compression=hvd.Compression.fp16), ref, "groups=2, fp16", 2e-3)
    # num_groups: deprecated, the same as groups.
    model = make_model()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), num_groups=2)
    check(any(issubclass(x.category, DeprecationWarning) for x in w), "num_groups warns")
    check(opt._groups == 2, "num_groups sets groups")
    for bad, what in [(-1, "a negative number"), ([[1.0]], "a non-tensor"),
                      ([[model[0].weight], [model[0].weight]], "a parameter twice")]:
        raises(ValueError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                          named_parameters=model.named_parameters(), groups=bad),
               "groups with %s" % what)


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.embedding = torch.nn.Embedding(10, 3, sparse=True)

    def forward(self, x):
        return self.embedding(x)


def embed_input(r):
    # Different rows on every rank, some shared (duplicates add up).
    return torch.tensor([[1, 2 + r, 4], [4, (3 * r) % 10, 9]])


def test_sparse():
    r, n = hvd.rank(), hvd.size()
    # One process: the gradient is the mean of the ranks' gradients.
    ref = Embed()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for step in range(3):
        ref_opt.zero_grad()
        (sum((ref(embed_input(q)) * (q + 1 + step)).sum() for q in range(n)) / n).backward()
        ref_opt.step()
    for sparse_as_dense in (False, True):
        model = Embed()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                       named_parameters=model.named_parameters(), sparse_as_dense=sparse_as_dense)
        for step in range(3):
            opt.zero_grad()
            (model(embed_input(r)) * (r + 1 + step)).sum().backward()
            opt.synchronize()
            check(model.embedding.weight.grad.is_sparse, "the gradient stays sparse (sparse_as_dense=%s)" %
                  sparse_as_dense)
            with opt.skip_synchronize():
                opt.step()
        equal(model.embedding.weight.data, ref.embedding.weight.data,
              "sparse embedding (sparse_as_dense=%s) against one process" % sparse_as_dense, atol=1e-5)
        w = model.embedding.weight.data.reshape(1, -1)
        check(bool((hvd.allgather(w) == w).all()), "sparse embedding identical on every rank")
    # Horovod's test: SparseAdam over the sparse path and sparse_as_dense.
    for sparse_as_dense in (False, True):
        model = Embed()
        opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(model.parameters()), lr=0.1),
                                       named_parameters=model.named_parameters(), sparse_as_dense=sparse_as_dense)
        opt.zero_grad()
        model(embed_input(r)).sum().backward()
        opt.step()
        w = model.embedding.weight.data.reshape(1, -1)
        check(bool((hvd.allgather(w) == w).all()), "SparseAdam (sparse_as_dense=%s) identical on every rank" %
              sparse_as_dense)


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
    if hvd.size() & (hvd.size() - 1):  # Adasum's pairs need a power of two (test_torch_adasum.py: the rest)
        raises(NotImplementedError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                                   op=hvd.Adasum), "Adasum optimizer",
               contains="power-of-two")
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
    run([test_average, test_backward_passes_per_step, test_predivide, test_sum, test_fp16, test_groups, test_sparse,
         test_guards, test_metric_average])
