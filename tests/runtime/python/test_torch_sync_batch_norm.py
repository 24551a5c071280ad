"""hvd.SyncBatchNorm against torch.nn.BatchNorm*d run by every rank on the
concatenated global batch: every rank builds every rank's input and output
gradient from (step, rank) and compares its own slice of the reference's
output and input gradient, the running statistics, and the weight and bias
gradients summed over ranks (they stay local, as in Horovod).
mpirun -np N python3 test_torch_sync_batch_norm.py   (N >= 2)"""
from common import check, hvd, raises, run
import torch

REFERENCE = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d, 5: torch.nn.BatchNorm3d}


def close(got, want, what, rtol=1e-4, atol=1e-5):
    ok = got.shape == want.shape and got.dtype == want.dtype and torch.allclose(got, want, rtol=rtol, atol=atol)
    diff = None
    if got.shape == want.shape and got.numel():
        diff = (got.double() - want.double()).abs().max().item()
    check(ok, "%s: max difference %s (shapes %s / %s, dtypes %s / %s)" %
          (what, diff, list(got.shape), list(want.shape), got.dtype, want.dtype))


def batch(step, q, rows, tail, c, dtype):
    """Rank q's input and output gradient at this step: an offset and a scale per channel."""
    g = torch.Generator().manual_seed(7919 * step + q)
    shape = [rows, c] + list(tail)
    scale = (1.0 + torch.arange(c, dtype=torch.float64)).reshape([1, c] + [1] * len(tail))
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + 3.0 * scale - q).to(dtype)
    dy = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return x, dy


def forward_backward(sbn, ref, xs, dys, rows, at, tol):
    """This rank's xs[r] through sbn and back from dys[r], beside ref on the
    concatenation: the output and input gradient of this rank's slice."""
    r = hvd.rank()
    first = sum(rows[:r])
    x = xs[r].clone().requires_grad_()
    y = sbn(x)
    y.backward(dys[r])
    gx = torch.cat(xs).requires_grad_()
    gy = ref(gx)
    gy.backward(torch.cat(dys))
    close(y, gy.detach()[first:first + rows[r]], "output, " + at, **tol)
    close(x.grad, gx.grad[first:first + rows[r]], "input gradient, " + at, **tol)


def compare(rows_of, tail=(5, 4), c=3, steps=3, affine=True, track=True, momentum=0.1, dtype=torch.float32,
            what=""):
    """steps of training with rank q holding rows_of(q) samples, then eval mode."""
    r, n = hvd.rank(), hvd.size()
    rows = [rows_of(q) for q in range(n)]
    first = sum(rows[:r])
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else {}
    sbn = hvd.SyncBatchNorm(c, momentum=momentum, affine=affine, track_running_stats=track).to(dtype)
    ref = REFERENCE[2 + len(tail)](c, momentum=momentum, affine=affine, track_running_stats=track).to(dtype)
    if affine:
        with torch.no_grad():
            for m in (sbn, ref):
                m.weight.copy_(1.0 + 0.25 * torch.arange(c))
                m.bias.copy_(0.5 - 0.125 * torch.arange(c))
    what = "%s rows %s%s" % (what, rows, "" if affine else " affine=False")
    for step in range(steps):
        xs, dys = zip(*[batch(step, q, rows[q], tail, c, dtype) for q in range(n)])
        at = "%s step %d" % (what, step)
        forward_backward(sbn, ref, xs, dys, rows, at, tol)
        if affine:
            for name in ("weight", "bias"):
                mine = getattr(sbn, name)
                total = hvd.allreduce(mine.grad, op=hvd.Sum, name="sbn.test.%s" % name)
                close(total, getattr(ref, name).grad, "%s gradient summed over ranks, %s" % (name, at), **tol)
                with torch.no_grad():  # move both by the global gradient, so the steps differ
                    mine -= 0.1 * total
                    getattr(ref, name).sub_(0.1 * getattr(ref, name).grad)
                mine.grad = None
                getattr(ref, name).grad = None
        if track:
            close(sbn.running_mean, ref.running_mean, "running_mean, " + at, **tol)
            close(sbn.running_var, ref.running_var, "running_var, " + at, **tol)
            check(int(sbn.num_batches_tracked) == int(ref.num_batches_tracked) == step + 1,
                  "num_batches_tracked %s / %s, %s" % (int(sbn.num_batches_tracked), int(ref.num_batches_tracked),
                                                      at))
        else:
            check(sbn.running_mean is None and sbn.num_batches_tracked is None, "buffers without tracking")
    # Eval: running estimates where tracked (no collective), else the global batch's statistics.
    sbn.eval()
    ref.eval()
    xs, _ = zip(*[batch(steps, q, rows[q], tail, c, dtype) for q in range(n)])
    with torch.no_grad():
        close(sbn(xs[r]), ref(torch.cat(xs))[first:first + rows[r]], "eval output, " + what, **tol)
    if track:
        check(int(sbn.num_batches_tracked) == steps, "eval moved num_batches_tracked, " + what)


def test_even():
    compare(lambda q: 4, what="4-D even")


def test_uneven():
    compare(lambda q: q + 1, what="4-D uneven")
    compare(lambda q: 2 * q + 3, affine=False, what="4-D uneven")


def test_empty_rank():
    # Rank 0 has no samples: its output and gradients are empty, the others' unchanged.
    compare(lambda q: 0 if q == 0 else q, what="4-D, rank 0 empty")


def test_no_running_stats():
    compare(lambda q: q + 2, track=False, what="track_running_stats=False")
    compare(lambda q: 3, track=False, affine=False, what="track_running_stats=False")


def test_cumulative_average():
    compare(lambda q: q + 1, momentum=None, steps=4, what="momentum=None")


def test_dims():
    compare(lambda q: q + 2, tail=(), c=5, what="2-D")
    compare(lambda q: 3 - q % 2, tail=(7,), c=4, what="3-D")
    compare(lambda q: q + 1, tail=(3, 2, 4), c=2, what="5-D")


def test_float64():
    compare(lambda q: q + 1, dtype=torch.float64, what="float64")


def test_eval_runs_no_collective():
    """Eval mode with running estimates is local: rank 0 calls it an extra
    time and the next collective still agrees."""
    sbn = hvd.SyncBatchNorm(2).eval()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 2, 2) + hvd.rank()
    for _ in range(2 if hvd.rank() == 0 else 1):
        out = sbn(x)
    close(out, x / (1 + 1e-5) ** 0.5, "eval with fresh estimates (mean 0, var 1)")
    s = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum, name="sbn.test.after_eval")
    check(s.item() == sum(range(hvd.size())), "allreduce after eval: %s" % s.item())


def test_horovod_assertions():
    """What Horovod's test_horovod_sync_batch_norm asserts (a GPU-only test
    there), on the CPU: rank r feeds one sample, sample r of a stack; its
    output and the running estimates match BatchNorm1d on the stack within
    rtol 1e-6 (atol 1e-8); the ranks' averaged weight, bias and input
    gradients of their own output's sum match BatchNorm1d's gradients of the
    mean over the stack's samples of the summed outputs. Where an exact
    result is 0, float32 BatchNorm1d on the CPU can be off by more than that
    atol (np 3: 1.2e-8 in a weight gradient, 6e-8 in an output): a value
    that misses it passes only if it meets the same tolerance against
    BatchNorm1d in float64 and float32 BatchNorm1d does not."""
    r, n = hvd.rank(), hvd.size()
    stacks = [torch.stack([torch.tensor([[q, q + 1], [2 * q, 2 * q + 1], [3 * q, 3 * q + 1], [4 * q, 4 * q + 1]])
                           for q in range(n)]),
              torch.stack([torch.tensor([[q + 1], [2 * q + 1], [3 * q + 1], [4 * q + 1]]) for q in range(n)])]
    for k, stack in enumerate(stacks):
        sbn = hvd.SyncBatchNorm(num_features=4)
        t1 = stack.float().requires_grad_()
        out = sbn(t1[r].unsqueeze(0))
        refs = []
        for dtype in (torch.float32, torch.float64):
            bn = torch.nn.BatchNorm1d(num_features=4).to(dtype)
            t2 = stack.to(dtype).requires_grad_()
            y = bn(t2)
            y.mean(dim=0).sum().backward()
            refs.append((y[r].unsqueeze(0).detach(), bn.running_mean, bn.running_var, bn.weight.grad, bn.bias.grad,
                         t2.grad))
        out.sum().backward()
        mine = [out.detach(), sbn.running_mean, sbn.running_var]
        for what, g in [("weight", sbn.weight.grad), ("bias", sbn.bias.grad), ("input", t1.grad)]:
            mine.append(hvd.allreduce(g, name="sbn.test.horovod.%s" % what))
        names = ["output", "running_mean", "running_var", "weight gradient", "bias gradient", "input gradient"]
        for what, got, want, exact in zip(names, mine, refs[0], refs[1]):
            if torch.allclose(got, want, 1e-6):
                continue
            ok = torch.allclose(got.double(), exact, 1e-6) and not torch.allclose(want.double(), exact, 1e-6)
            check(ok, "horovod %d: %s %s, BatchNorm1d %s (float64 %s)" % (k, what, got, want, exact))
            if ok:
                print("rank %d: horovod %d: %s within rtol 1e-6 of float64 BatchNorm1d, not of float32's (off by "
                      "%.3g)" % (r, k, what, (want.double() - exact).abs().max().item()), flush=True)


def test_join():
    """The last rank joins at once: the others' statistics and gradients are
    those of their own samples only (a joined rank adds zeros to all-reduces)."""
    r, n = hvd.rank(), hvd.size()
    if r == n - 1:
        hvd.join()
        return
    rows = [q + 2 for q in range(n - 1)]
    xs, dys = zip(*[batch(0, q, rows[q], (3,), 2, torch.float32) for q in range(n - 1)])
    sbn = hvd.SyncBatchNorm(2)
    ref = torch.nn.BatchNorm1d(2)
    forward_backward(sbn, ref, xs, dys, rows, "beside a joined rank", {})
    close(sbn.running_var, ref.running_var, "running_var beside a joined rank")
    hvd.join()


def test_distributed_optimizer():
    """A model with SyncBatchNorm under DistributedOptimizer (SGD, 3 steps,
    uneven batches): the averaged gradients of each rank's own loss move
    every parameter, BatchNorm's too, as one process moves BatchNorm1d's
    model on the concatenated batch with the mean of the ranks' losses."""
    r, n = hvd.rank(), hvd.size()
    rows = [q + 2 for q in range(n)]

    def model(norm):
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.Linear(6, 4), norm, torch.nn.Linear(4, 1))

    dist, ref = model(hvd.SyncBatchNorm(4)), model(torch.nn.BatchNorm1d(4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.05),
                                   named_parameters=dist.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(3):
        xs = [batch(step, q, rows[q], (), 6, torch.float32)[0] for q in range(n)]
        opt.zero_grad()
        dist(xs[r]).pow(2).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (ref(torch.cat(xs)).pow(2).sum() / n).backward()
        ref_opt.step()
    for (name, p), q in zip(dist.named_parameters(), ref.parameters()):
        close(p.detach(), q.detach(), "DistributedOptimizer: %s after 3 steps" % name)
    close(dist[1].running_var, ref[1].running_var, "DistributedOptimizer: running_var")
    dist.eval()
    ref.eval()
    with torch.no_grad():
        x = batch(9, r, 3, (), 6, torch.float32)[0]
        close(dist(x), ref(x), "DistributedOptimizer: eval output")


def test_errors():
    r = hvd.rank()
    sbn = hvd.SyncBatchNorm(3)
    raises(ValueError, lambda: sbn(torch.ones(3)), "1-D input", contains="at least 2D")
    raises(ValueError, lambda: sbn(torch.ones(4, 2, 5)), "2 channels into 3", contains="2 channels")
    check(int(sbn.num_batches_tracked) == 0, "a refused input moved num_batches_tracked")
    # One value per channel over all ranks: every rank refuses it after the
    # all-reduce (rank 0 holds the only sample), as BatchNorm refuses one sample.
    x = torch.ones(1 if r == 0 else 0, 3)
    raises(ValueError, lambda: sbn(x), "one value per channel over the ranks", contains="more than 1 value")
    # The module still works afterwards, on every rank.
    y = sbn(torch.arange(6, dtype=torch.float32).reshape(2, 3) + r)
    check(torch.isfinite(y).all().item() and tuple(y.shape) == (2, 3), "after the refusal: %s" % y)
    # Channel count mismatches do not matter without weights or estimates, as in torch.
    bare = hvd.SyncBatchNorm(3, affine=False, track_running_stats=False)
    check(tuple(bare(torch.ones(2, 4) * r).shape) == (2, 4), "4 channels into a bare 3-channel module")


def test_signature():
    sbn = hvd.SyncBatchNorm(6, 1e-3, 0.3, False, False)
    check((sbn.num_features, sbn.eps, sbn.momentum, sbn.affine, sbn.track_running_stats) == (6, 1e-3, 0.3, False,
                                                                                            False),
          "positional arguments in Horovod's order")
    check(isinstance(sbn, torch.nn.modules.batchnorm._BatchNorm), "a _BatchNorm")
    check(set(hvd.SyncBatchNorm(2).state_dict()) == set(torch.nn.BatchNorm2d(2).state_dict()),
          "state_dict keys as BatchNorm2d's")


if __name__ == "__main__":
    run([test_even, test_uneven, test_empty_rank, test_no_running_stats, test_cumulative_average, test_dims,
         test_float64, test_eval_runs_no_collective, test_horovod_assertions, test_join, test_distributed_optimizer,
         test_errors, test_signature])
