"""hora.torch with torch 2's torch.compile (torch >= 2 only; an older torch
is a failure: meson registers it only for a python with torch 2): a small model compiled with torch.compile,
trained a few steps through DistributedOptimizer (torch 2's zero_grad
default, set_to_none=True), ends identical on every rank and equal (float
tolerance) to the same model trained uncompiled through hora.torch and to
one process training uncompiled on the concatenated batch; also with
backward_passes_per_step=2. Collectives called inside a compiled function
(allreduce, allgather, broadcast, grouped allreduce, and allreduce's
gradient) give the exact results they give uncompiled: hora.torch's calls
may break the graph, they must not fail, and dynamo does not trace into them
(no "Dynamo does not know how to trace" warning: hora/torch/compiled.py)."""
import sys
import warnings

import torch

if int(torch.__version__.split(".")[0]) < 2:
    print("FAIL: torch %s has no torch.compile (needs torch >= 2)" % torch.__version__)
    sys.exit(1)

from common import check, equal, hvd, run  # noqa: E402

STEPS = 4
BATCH = 8
TOL = 1e-5


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(BATCH, 6, generator=g), torch.randint(0, 3, (BATCH,), generator=g)


def loss_of(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def train(compiled, passes=1):
    model = make_model()
    run_model = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), backward_passes_per_step=passes)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(STEPS):
        opt.zero_grad()  # torch 2: set_to_none=True, every step starts with grads None
        x, y = batch(hvd.rank(), step)
        for h in range(passes):
            part = slice(h * BATCH // passes, (h + 1) * BATCH // passes)
            loss_of(run_model, x[part], y[part]).backward()
        opt.step()
    return model


def train_alone(passes=1):
    """One process, no hora: every rank's batch of each step concatenated."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        parts = [batch(r, step) for r in range(hvd.size())]
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        if passes == 1:
            loss_of(model, x, y).backward()
        else:
            # Each rank's pass h: the mean over its half, averaged over ranks, summed over passes.
            for h in range(passes):
                xs = torch.cat([p[0][h * BATCH // passes:(h + 1) * BATCH // passes] for p in parts])
                ys = torch.cat([p[1][h * BATCH // passes:(h + 1) * BATCH // passes] for p in parts])
                loss_of(model, xs, ys).backward()
        opt.step()
    return model


def same_on_every_rank(model, what):
    for name, p in model.state_dict().items():
        root = hvd.broadcast(p.detach().clone(), root_rank=0, name="same.%s.%s" % (what, name))
        equal(p, root, "%s: %s differs from rank 0's" % (what, name))


def close(a, b, what):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        equal(p, q, "%s: %s" % (what, name), atol=TOL)


def test_compiled_model():
    compiled = train(True)
    same_on_every_rank(compiled, "compiled")
    close(compiled, train(False), "compiled against uncompiled")
    close(compiled, train_alone(), "compiled against one process on the concatenated batch")
    moved = any(not torch.equal(p, q) for p, q in zip(compiled.state_dict().values(),
                                                      make_model().state_dict().values()))
    check(moved, "compiled: the weights never moved")


def test_compiled_model_accumulation():
    compiled = train(True, passes=2)
    same_on_every_rank(compiled, "compiled passes=2")
    close(compiled, train_alone(passes=2), "compiled passes=2 against one process")


def test_collectives_in_compiled_function():
    r, n = hvd.rank(), hvd.size()

    @torch.compile
    def f(x):
        s = hvd.allreduce(x * 2, op=hvd.Sum, name="compiled.sum")
        g = hvd.allgather(x[:1] + 1, name="compiled.gather")
        b = hvd.broadcast(x + 3, root_rank=n - 1, name="compiled.bcast")
        ga, gb = hvd.grouped_allreduce([x, x * x], op=hvd.Sum, name="compiled.grouped")
        return s + 1, g, b, ga, gb

    x = torch.arange(6, dtype=torch.float32) + 10 * r
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        s, g, b, ga, gb = f(x)
    traced = [str(w.message) for w in seen if "Dynamo" in str(w.message)]
    check(not traced, "dynamo traced into hora.torch: %s" % traced[:1])
    base = torch.arange(6, dtype=torch.float32)
    ranks = [base + 10 * k for k in range(n)]
    equal(s, sum(2 * t for t in ranks) + 1, "compiled allreduce")
    equal(g, torch.stack([t[0] for t in ranks]).reshape(n) + 1, "compiled allgather")
    equal(b, ranks[-1] + 3, "compiled broadcast")
    equal(ga, sum(ranks), "compiled grouped allreduce [0]")
    equal(gb, sum(t * t for t in ranks), "compiled grouped allreduce [1]")


def test_allreduce_gradient_in_compiled_function():
    r, n = hvd.rank(), hvd.size()

    @torch.compile
    def f(x):
        return (hvd.allreduce(x * (r + 1), op=hvd.Sum, name="compiled.grad") ** 2).sum()

    x = (torch.arange(4, dtype=torch.float64) + r).requires_grad_()
    f(x).backward()
    # y = sum_k (k+1) x_k; d/dx_r sum(y^2) = allreduce(2 y) * (r+1), and every rank's y is the same.
    y = sum((k + 1) * (torch.arange(4, dtype=torch.float64) + k) for k in range(n))
    equal(x.grad, (2 * y * n) * (r + 1), "compiled allreduce gradient")


if __name__ == "__main__":
    run([test_compiled_model, test_compiled_model_accumulation, test_collectives_in_compiled_function,
         test_allreduce_gradient_in_compiled_function])
