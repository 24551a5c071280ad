#!/usr/bin/python3
"""torch_dist.py - one PyTorch training script and one gradient-set loop, run the
same way over hora.torch, Horovod and PyTorch DDP (gloo), for bench/hora-torch-vs-peers.

    mpirun -np 2 /usr/bin/python3 bench/peers/torch_dist.py train --backend hora
    mpirun -np 2 /opt/hvd/bin/python bench/peers/torch_dist.py train --backend horovod
    mpirun -np 2 /usr/bin/python3 bench/peers/torch_dist.py train --backend ddp
    mpirun -np 2 /usr/bin/python3 bench/peers/torch_dist.py gradset --backend hora [--grouped | --shared | --optimizer]
    mpirun -np 2 /opt/hvd/bin/python bench/peers/torch_dist.py gradset --backend horovod

train: ResNet-20 (resnet.py, 1x28x28, 10 classes), synthetic inputs and labels,
cross-entropy, Nesterov SGD (lr 0.1, momentum 0.9, wd 1e-4), --batch per rank,
torch.set_num_threads(--threads) per rank. hora and horovod wrap the optimizer in
DistributedOptimizer (op Average) and broadcast parameters and optimizer state
from rank 0; ddp wraps the model in DistributedDataParallel over gloo (the ranks
meet through MPI's environment: OMPI_COMM_WORLD_RANK/SIZE, a TCP store on
127.0.0.1). --warmup untimed steps, then --steps timed between two barriers;
img/s = ranks x batch x steps / time. --no-allreduce (hora, horovod) leaves the
optimizer unwrapped: the ranks compute the same steps without exchanging
gradients, the ceiling any backend can reach on this machine.

gradset: ResNet-50's 161 gradient tensors (resnet.py's resnet50, torchvision's
names and sizes, 25,557,032 values, in backprop order), separate torch tensors
like a model's .grad, all-reduced per step with allreduce_async_ and
synchronize (or, --grouped, one grouped_allreduce_async_), op Sum; --shared
(hora only) puts them in one block of hora.torch.shared_tensors, in that order,
so that the fused all-reduce runs in place (hora's zero-copy path); --optimizer
(hora only) takes them as an ordinary resnet50 model's .grad tensors and
all-reduces them with its DistributedOptimizer's synchronize() (which, after
the first step, holds them as views into shared memory). Step time =
mean over --iters steps per rank, max over ranks; then one step is checked
(every rank fills rank + 1, expects n(n+1)/2 everywhere).

Prints one line `RESULT <json>` on rank 0.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resnet  # noqa: E402

class Dist:
    """What the two loops need of a backend: rank, size, barrier, max/sum of a float."""

    def __init__(self, backend):
        self.backend = backend
        if backend in ("hora", "horovod"):
            if backend == "hora":
                import hora.torch as hvd
            else:
                import horovod.torch as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
        else:
            import torch.distributed as dist
            self.rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
            self.size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29577")
            dist.init_process_group("gloo", rank=self.rank, world_size=self.size)
            self.dist = dist

    def barrier(self):
        if self.backend == "ddp":
            self.dist.barrier()
        else:
            self.hvd.barrier()

    def reduce(self, value, op):
        t = torch.tensor([value], dtype=torch.float64)
        if self.backend == "ddp":
            self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX if op == "max" else self.dist.ReduceOp.SUM)
            return t.item()
        return self.hvd.allreduce(t, op=self.hvd.Max if op == "max" else self.hvd.Sum, name="reduce." + op).item()

    def version(self):
        if self.backend == "hora":
            return "hora.torch"
        if self.backend == "horovod":
            import horovod
            return "horovod " + horovod.__version__
        return "ddp gloo"

    def shutdown(self):
        if self.backend == "ddp":
            self.dist.destroy_process_group()
        else:
            self.hvd.shutdown()


def train(a, d):
    torch.manual_seed(1234 + d.rank)
    model = resnet.resnet20()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    if d.backend == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        hvd = d.hvd
        if not a.no_allreduce:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), op=hvd.Average)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    model.train()

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    d.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    d.barrier()
    dt = time.perf_counter() - t0
    return {"img_per_s": d.size * a.batch * a.steps / dt, "seconds": dt, "last_loss": loss}


def gradset(a, d):
    hvd = d.hvd
    model = resnet.resnet50()
    params = [(n, p.numel()) for n, p in model.named_parameters()]
    order = list(reversed(params))
    opt = None
    if a.optimizer:
        for p in model.parameters():
            p.grad = torch.ones_like(p)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), op=hvd.Sum)
        tensors = None
    elif a.shared:
        tensors = hvd.shared_tensors([(c,) for _, c in order])
        for t in tensors:
            t.fill_(1.0)
    else:
        tensors = [torch.ones(c) for _, c in order]
    names = [n for n, _ in order]

    def step():
        if opt is not None:
            opt.synchronize()
            return
        if a.grouped:
            hvd.synchronize(hvd.grouped_allreduce_async_(tensors, name="gradset", op=hvd.Sum))
            return
        hs = [hvd.allreduce_async_(t, name=n, op=hvd.Sum) for n, t in zip(names, tensors)]
        for h in hs:
            hvd.synchronize(h)

    for _ in range(a.warmup):
        step()
        if opt is not None:  # the optimizer's gradients (views once it laid them out)
            tensors = [p.grad for p in model.parameters()]
        for t in tensors:
            t.fill_(1.0)
    d.barrier()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()  # sums double the values every step: 2^iters stays exact in f32
    dt = d.reduce((time.perf_counter() - t0) / a.iters, "max")
    for t in tensors:
        t.fill_(float(d.rank + 1))
    step()
    want = d.size * (d.size + 1) / 2
    wrong = d.reduce(float(sum(int((t != want).sum()) for t in tensors)), "sum")
    total = sum(c for _, c in order)
    return {"step_ms": dt * 1e3, "tensors": len(order), "bytes": total * 4, "wrong": int(wrong),
            "grouped": a.grouped, "shared": a.shared, "optimizer": a.optimizer,
            "copies": getattr(opt, "_hora_copies", None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("train", "gradset"))
    ap.add_argument("--backend", choices=("hora", "horovod", "ddp"), required=True)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--grouped", action="store_true", help="gradset: one grouped allreduce per step")
    ap.add_argument("--no-allreduce", action="store_true", help="train: no DistributedOptimizer (compute only)")
    ap.add_argument("--shared", action="store_true", help="gradset, hora: tensors from hora.torch.shared_tensors")
    ap.add_argument("--optimizer", action="store_true",
                    help="gradset, hora: a model's .grad tensors through DistributedOptimizer.synchronize")
    a = ap.parse_args()
    if a.what == "gradset" and a.backend == "ddp":
        ap.error("gradset runs over hora or horovod")
    if a.no_allreduce and (a.what != "train" or a.backend == "ddp"):
        ap.error("--no-allreduce is for train over hora or horovod")
    if a.shared and (a.what != "gradset" or a.backend != "hora"):
        ap.error("--shared is for gradset over hora")
    if a.optimizer and (a.what != "gradset" or a.backend != "hora" or a.shared or a.grouped):
        ap.error("--optimizer is for gradset over hora, without --shared and --grouped")
    torch.set_num_threads(a.threads)
    d = Dist(a.backend)
    out = train(a, d) if a.what == "train" else gradset(a, d)
    out.update({"what": a.what, "backend": d.version(), "np": d.size, "torch": torch.__version__,
                "batch": a.batch, "threads": a.threads, "no_allreduce": a.no_allreduce})
    if d.rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    d.shutdown()
    return 1 if out.get("wrong") else 0


if __name__ == "__main__":
    sys.exit(main())
