#!/usr/bin/python3
"""elastic_train.py - one small data-parallel training loop written against Horovod's
PyTorch API, run over Horovod (`--backend horovod`, under horovodrun, with
/opt/hvd-gloo/bin/python: bench/peers/install-hvd-gloo) or hora.torch
(`--backend hora`, under hora-run); the two differ only in the import. Driven by
bench/elastic-vs-horovod.

    horovodrun --gloo -np 3 -H a:1,b:1,c:1 /opt/hvd-gloo/bin/python elastic_train.py --backend horovod --log-dir D
    horovodrun --gloo -np 3 --min-np 2 --host-discovery-script S /opt/hvd-gloo/bin/python elastic_train.py \\
        --backend horovod --elastic --log-dir D
    hora-run --nproc-per-node 3 --elastic --max-restarts 20 python3 elastic_train.py --backend hora --elastic --log-dir D

The model is ResNet-20 (resnet.py, CIFAR stem, 3x32x32, 10 classes) on fixed
synthetic inputs and labels (drawn per rank), cross-entropy, SGD (lr 0.05 x size,
momentum 0.9), DistributedOptimizer (op Average), --batch per rank,
torch.set_num_threads(--threads).

Without --elastic: parameters and optimizer state are broadcast from rank 0,
then --steps steps. With --elastic: the model, the optimizer and the step count
are a TorchState; the loop runs inside hvd.elastic.run and calls state.commit()
every --commit-every steps (Horovod's recipe); a lost worker makes the
survivors restore the last commit, re-form and carry on; a reset callback
rescales the learning rate to the new size.

Every process appends to DIR/<pid>.log (line-buffered, wall-clock times from
time.time(), so the driver can line them up with the moment it killed a worker):

    init T RANK SIZE          after hvd.init and after every re-form (reset callback)
    step T N RANK SIZE        step N (counted from 1: the step count after it) completed
    commit T N S RANK SIZE    state.commit() after step N took S seconds (--elastic)
    done T RANK SIZE          the loop ended
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resnet  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("horovod", "hora"), required=True)
    ap.add_argument("--elastic", action="store_true", help="hvd.elastic.run, TorchState, commit")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--commit-every", type=int, default=1)
    ap.add_argument("--log-dir", required=True)
    a = ap.parse_args()

    if a.backend == "hora":
        import hora.torch as hvd
    else:
        import horovod.torch as hvd

    torch.set_num_threads(a.threads)
    hvd.init()
    log = open(os.path.join(a.log_dir, f"{os.getpid()}.log"), "a", buffering=1)

    def note(what, *fields):
        log.write(" ".join([what, f"{time.time():.6f}", *map(str, fields), str(hvd.rank()), str(hvd.size())]) + "\n")

    note("init")
    torch.manual_seed(0)
    model = resnet.resnet20(in_channels=3, classes=10)
    base_lr = 0.05
    opt = torch.optim.SGD(model.parameters(), lr=base_lr * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), op=hvd.Average)
    gen = torch.Generator().manual_seed(1000 + hvd.rank())
    x = torch.randn(a.batch, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (a.batch,), generator=gen)

    def one_step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    if not a.elastic:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        for n in range(1, a.steps + 1):
            one_step()
            note("step", n)
    else:
        def on_reset():
            for group in opt.param_groups:
                group["lr"] = base_lr * hvd.size()
            note("init")

        @hvd.elastic.run
        def train(state):
            while state.step < a.steps:
                one_step()
                state.step += 1
                note("step", state.step)
                if state.step % a.commit_every == 0:
                    t = time.time()
                    state.commit()
                    note("commit", state.step, f"{time.time() - t:.6f}")

        state = hvd.elastic.TorchState(model, opt, step=0)
        state.register_reset_callbacks([on_reset])
        train(state)
    note("done")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
