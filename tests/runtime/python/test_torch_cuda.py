"""hora.torch with CUDA tensors (hora/torch/device.py), every rank on the
device HORA_CUDA_DEVICE=local gave it (the host-local rank's, modulo the
devices: on a one-GPU machine every rank shares it). Exact results from
(rank, index) as the other files check them, on the device:
 - the device requests (libhora's device memory where hora_cuda_device() >= 0):
   allreduce / allreduce_ / average / prescale, grouped, broadcast_, f16 and
   bf16, a result read on the stream without a host wait, and a tensor
   produced by work still queued on a side stream when it is submitted (the
   request must wait for it: torch.cuda._sleep before the fill);
 - the staged ones (allgather with uneven rows, reducescatter, alltoall, a
   process set, op Adasum where the world is a power of two): results back on
   the device;
 - DistributedOptimizer on a CUDA model: gradients equal the average of every
   rank's own (computed locally on each rank's batch and allgathered), and
   after the first step they are views of one device block;
 - SyncBatchNorm on CUDA against BatchNorm2d on the concatenated batch;
 - hvd.cuda_built() as the loaded libhora's build says.
Exits 77 on every rank where torch sees no GPU (before hvd.init), so the
mpirun exits 77: a skip.
mpirun -np N python3 test_torch_cuda.py   (N >= 2)"""
import sys

import torch

if not torch.cuda.is_available():
    print("SKIP: torch %s sees no CUDA device" % torch.__version__)
    sys.exit(77)

from common import check, equal, hvd, raises, run  # noqa: E402
import hora as _h  # noqa: E402
from hora.torch import device as _device  # noqa: E402


def dev():
    return torch.device("cuda", torch.cuda.current_device())


def ramp(n, r, dtype=torch.float32):
    """Rank r's input: exact in every dtype checked (small integers)."""
    return ((torch.arange(n, dtype=torch.int64) % 31) + 3 * r).to(dtype)


def ramp_sum(n, size, dtype=torch.float32):
    return sum(ramp(n, q, torch.float64) for q in range(size)).to(dtype)


def case_device_choice():
    want = hvd.local_rank() % torch.cuda.device_count()
    check(torch.cuda.current_device() == want, "current device %d, want the local rank's %d" %
          (torch.cuda.current_device(), want))
    check(hvd.cuda_built() == (_h.build_info().get("cuda") == "1"), "cuda_built() %s against build_info %s" %
          (hvd.cuda_built(), _h.build_info()))
    if _h.lib.hora_cuda_device() >= 0:
        check(_h.lib.hora_cuda_device() == want, "libhora uses cuda:%d, want %d" % (_h.lib.hora_cuda_device(), want))
        check(_device.placement([torch.ones(4, device=dev())], "test", True) == "cuda",
              "a world all-reduce of a CUDA tensor is not a device request")
    print("rank %d: libhora device %d (build cuda=%s)" % (hvd.rank(), _h.lib.hora_cuda_device(),
                                                         _h.build_info().get("cuda")), flush=True)


def case_allreduce():
    n, size, r = 1000003, hvd.size(), hvd.rank()
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.float64):
        x = ramp(n, r, dtype).to(dev())
        y = hvd.allreduce(x, op=hvd.Sum, name="cuda.sum.%s" % dtype)
        check(y.device == x.device, "allreduce result on %s" % y.device)
        equal(y.cpu(), ramp_sum(n, size, dtype), "allreduce sum %s" % dtype)
        equal(x.cpu(), ramp(n, r, dtype), "allreduce left its input alone (%s)" % dtype)
    x = ramp(4099, r).to(dev())
    hvd.allreduce_(x, op=hvd.Sum, name="cuda.inplace")
    equal(x.cpu(), ramp_sum(4099, size), "allreduce_ in place")
    avg = hvd.allreduce(ramp(64, r, torch.float64).to(dev()), name="cuda.avg")
    equal(avg.cpu(), ramp_sum(64, size, torch.float64) / size, "allreduce average", atol=1e-12)
    pre = hvd.allreduce(ramp(64, r).to(dev()), op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5,
                        name="cuda.scaled")
    equal(pre.cpu(), ramp_sum(64, size), "allreduce pre 2 / post 0.5")
    strided = ramp(2 * 513, r).to(dev()).reshape(513, 2).t()  # not contiguous
    hvd.allreduce_(strided, op=hvd.Sum, name="cuda.strided")
    equal(strided.cpu(), ramp_sum(2 * 513, size).reshape(513, 2).t(), "allreduce_ of a transposed tensor")


def case_stream_order():
    """Submitted while the work that fills the tensor is still queued on a
    side stream: the request waits for it; the result is read on the same
    stream after synchronize() with no host wait in between."""
    n, size, r = 1 << 20, hvd.size(), hvd.rank()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.zeros(n, device=dev())
        torch.cuda._sleep(50 * 1000 * 1000)  # some tens of ms of GPU time before the fill
        x.fill_(float(r + 1))
        h = hvd.allreduce_async_(x, op=hvd.Sum, name="cuda.ordered")
        out = hvd.synchronize(h)
        y = out * 2  # queued behind the all-reduce on the side stream
    side.synchronize()
    want = float(sum(q + 1 for q in range(size)))
    equal(y.cpu(), torch.full((n,), 2 * want), "result used on the stream after synchronize()")
    equal(x.cpu(), torch.full((n,), want), "the tensor itself")


def case_grouped_broadcast():
    size, r = hvd.size(), hvd.rank()
    xs = [ramp(k * 97 + 1, r).to(dev()) for k in range(5)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name="cuda.grouped")
    for k, y in enumerate(ys):
        equal(y.cpu(), ramp_sum(k * 97 + 1, size), "grouped member %d" % k)
    zs = [ramp(33, r).to(dev()) for _ in range(3)]
    hvd.grouped_allreduce_(zs, op=hvd.Sum, name="cuda.grouped_")
    for k, z in enumerate(zs):
        equal(z.cpu(), ramp_sum(33, size), "grouped_ member %d in place" % k)
    root = size - 1
    b = ramp(777, r, torch.float64).to(dev())
    hvd.broadcast_(b, root_rank=root, name="cuda.bcast")
    equal(b.cpu(), ramp(777, root, torch.float64), "broadcast_ from the last rank")
    b2 = hvd.broadcast(ramp(5, r).to(dev()), root_rank=0, name="cuda.bcast.copy")
    equal(b2.cpu(), ramp(5, 0), "broadcast")


def case_staged():
    size, r = hvd.size(), hvd.rank()
    rows = r + 1
    x = (torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) + 100 * r).to(dev())
    g = hvd.allgather(x, name="cuda.allgather")
    want = torch.cat([torch.arange((q + 1) * 3, dtype=torch.float32).reshape(q + 1, 3) + 100 * q
                      for q in range(size)])
    check(g.device == x.device, "allgather result on %s" % g.device)
    equal(g.cpu(), want, "allgather of uneven rows")
    d0 = 2 * size + 1
    rs = hvd.reducescatter(ramp(d0 * 4, r).reshape(d0, 4).to(dev()), op=hvd.Sum, name="cuda.rs")
    full = ramp_sum(d0 * 4, size).reshape(d0, 4)
    first = sum(d0 // size + (1 if q < d0 % size else 0) for q in range(r))
    mine = d0 // size + (1 if r < d0 % size else 0)
    equal(rs.cpu(), full[first:first + mine], "reducescatter rows of this rank")
    send = torch.tensor([[100 * r + q] for q in range(size)], dtype=torch.int64).to(dev())
    got = hvd.alltoall(send, name="cuda.alltoall")
    equal(got.cpu(), torch.tensor([[100 * q + r] for q in range(size)], dtype=torch.int64), "alltoall")
    check(got.device == send.device, "alltoall result on %s" % got.device)
    got, splits = hvd.alltoall(send, splits=torch.ones(size, dtype=torch.int32), name="cuda.alltoall.splits")
    equal(got.cpu(), torch.tensor([[100 * q + r] for q in range(size)], dtype=torch.int64), "alltoall with splits")
    equal(splits, torch.ones(size, dtype=torch.int32), "alltoall received splits (on the splits' device)")
    members = [0, 1] if size > 2 else [1]  # not every rank: that set is the global one
    ps = hvd.add_process_set(members)
    if r in members:
        s = hvd.allreduce(ramp(50, r).to(dev()), op=hvd.Sum, name="cuda.set", process_set=ps)
        equal(s.cpu(), sum(ramp(50, q) for q in members), "allreduce on process set %s" % members)
    hvd.remove_process_set(ps)
    if size & (size - 1) == 0:
        a = hvd.allreduce(torch.full((8,), float(r + 1), device=dev()), op=hvd.Adasum, name="cuda.adasum")
        check(a.device.type == "cuda", "Adasum result on %s" % a.device)
        cpu = hvd.allreduce(torch.full((8,), float(r + 1)), op=hvd.Adasum, name="cpu.adasum")
        equal(a.cpu(), cpu, "Adasum on CUDA (staged) against the CPU's")
    empty = hvd.allreduce(torch.empty(0, device=dev()), op=hvd.Sum, name="cuda.empty")
    check(empty.numel() == 0 and empty.device.type == "cuda", "empty allreduce")


def case_optimizer():
    size, r = hvd.size(), hvd.rank()
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev())
    ref = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   named_parameters=model.named_parameters())
    for step in range(3):
        g = torch.Generator().manual_seed(100 * step + r)
        x = torch.randn(8, 16, generator=g).to(dev())
        # This rank's own gradient, without the hooks: a copy of the model.
        twin = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev())
        with torch.no_grad():
            for t, p in zip(twin.parameters(), ref):
                t.copy_(p)
        twin(x).square().sum().backward()
        own = torch.cat([t.grad.reshape(-1) for t in twin.parameters()]).cpu()
        every = hvd.allgather(own.reshape(1, -1), name="cuda.opt.own.%d" % step)
        want = every.double().mean(0)
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
        got = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).cpu().double()
        check(torch.allclose(got, want, rtol=1e-5, atol=1e-6), "step %d: gradients against the average of the "
              "ranks' own (max difference %g)" % (step, (got - want).abs().max().item()))
    if _h.lib.hora_cuda_device() >= 0:
        bases = {p.grad._base.data_ptr() if p.grad._base is not None else None for p in model.parameters()}
        check(len(bases) == 1 and None not in bases, "after the first step the gradients are views of one "
              "device block (bases %s)" % bases)
        check(all(p.grad.device.type == "cuda" for p in model.parameters()), "the views are on the device")


def case_sync_batch_norm():
    size, r = hvd.size(), hvd.rank()
    c, rows = 3, [2 + q for q in range(size)]
    xs = [torch.randn(rows[q], c, 4, 4, generator=torch.Generator().manual_seed(31 + q), dtype=torch.float64)
          .float() * (q + 1) + q for q in range(size)]
    dys = [torch.randn(rows[q], c, 4, 4, generator=torch.Generator().manual_seed(71 + q)) for q in range(size)]
    sbn = hvd.SyncBatchNorm(c).to(dev())
    ref = torch.nn.BatchNorm2d(c)
    x = xs[r].to(dev()).clone().requires_grad_()
    y = sbn(x)
    y.backward(dys[r].to(dev()))
    gx = torch.cat([t.detach() for t in xs]).requires_grad_()
    gy = ref(gx)
    gy.backward(torch.cat(dys))
    first = sum(rows[:r])
    tol = dict(rtol=1e-4, atol=1e-4)
    check(torch.allclose(y.detach().cpu(), gy.detach()[first:first + rows[r]], **tol), "SyncBatchNorm output")
    check(torch.allclose(x.grad.cpu(), gx.grad[first:first + rows[r]], **tol), "SyncBatchNorm input gradient")
    check(torch.allclose(sbn.running_mean.cpu(), ref.running_mean, **tol), "running mean")
    check(torch.allclose(sbn.running_var.cpu(), ref.running_var, **tol), "running variance")


def case_refusals():
    if torch.cuda.device_count() > 1 and _h.lib.hora_cuda_device() >= 0:
        other = (torch.cuda.current_device() + 1) % torch.cuda.device_count()
        raises(ValueError, lambda: hvd.allreduce(torch.ones(4, device=torch.device("cuda", other)),
                                                 name="cuda.wrong"), "a tensor on another device", "libhora uses")
    raises(ValueError, lambda: hvd.grouped_allreduce([torch.ones(4), torch.ones(4, device=dev())],
                                                     name="cuda.mixed"), "CPU and CUDA in one group",
           "different devices")


run([case_device_choice, case_allreduce, case_stream_order, case_grouped_broadcast, case_staged, case_optimizer,
     case_sync_batch_norm, case_refusals])
