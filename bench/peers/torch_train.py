#!/usr/bin/python3
"""torch_train.py - PyTorch training-throughput peer for hora-bench-train.

Synthetic inputs, Nesterov SGD, N processes x T threads (DDP over gloo when N > 1,
a plain model when N = 1); prints the images per second of all ranks together.

    /usr/bin/python3 bench/peers/torch_train.py --model resnet20 --image 1x28x28 --batch 64 --nproc 2 --threads 1 --steps 20
    /usr/bin/python3 bench/peers/torch_train.py --model resnet50 --image 3x224x224 --batch 16 --nproc 1 --threads 2 --steps 3
    /usr/bin/python3 bench/peers/torch_train.py --model resnet50 --batch 16 --threads 2 --autocast bf16 --channels-last
    python3 bench/peers/torch_train.py --device cuda --model resnet50 --batch 256 --autocast fp16 --channels-last --warmup 20 --steps 50

--batch is per rank. The first --warmup steps (oneDNN primitive creation, DDP's
bucket rebuild) are not timed; the timed steps lie between two barriers.
--autocast bf16 runs forward and loss under torch.autocast("cpu", torch.bfloat16)
(the weights, their gradients and the optimizer stay fp32); --channels-last puts
the model and the input batch in torch.channels_last (NHWC). The variant's name
(fp32, fp32+cl, bf16, bf16+cl, fp16+cl) is in the printout and the JSON.

--device cuda (one process per GPU; --nproc > 1 uses NCCL there) is the peer of
hora-train --backend cuda: the batch on the GPU, torch.backends.cudnn.benchmark on,
--autocast fp16 runs forward and loss under torch.autocast("cuda", torch.float16)
with a torch.cuda.amp.GradScaler starting at --loss-scale (1024, as hora-train's
default), and the timed steps lie between two torch.cuda.synchronize().
"""
import argparse
import contextlib
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resnet  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("resnet20", "resnet50"), default="resnet20")
    ap.add_argument("--image", default=None, help="CxHxW (default 1x28x28 for resnet20, 3x224x224 for resnet50)")
    ap.add_argument("--classes", type=int, default=None, help="default 10 for resnet20, 1000 for resnet50")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--autocast", choices=("none", "bf16", "fp16"), default="none",
                    help="bf16 / fp16: forward and loss under torch.autocast(device, dtype); fp16 needs --device cuda")
    ap.add_argument("--loss-scale", type=float, default=1024.0,
                    help="--autocast fp16: the GradScaler's initial scale")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and input in torch.channels_last memory format")
    ap.add_argument("--own-resnet50", action="store_true",
                    help="use bench/peers/resnet.py's ResNet-50 even when torchvision is installed")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    if args.image is None:
        args.image = "1x28x28" if args.model == "resnet20" else "3x224x224"
    if args.classes is None:
        args.classes = 10 if args.model == "resnet20" else 1000
    try:
        args.shape = tuple(int(v) for v in args.image.lower().split("x"))
        assert len(args.shape) == 3 and min(args.shape) > 0
    except (ValueError, AssertionError):
        ap.error(f"--image {args.image}: expected CxHxW, e.g. 3x224x224")
    if min(args.batch, args.nproc, args.threads, args.steps) < 1 or args.warmup < 0:
        ap.error("--batch, --nproc, --threads and --steps must be at least 1, --warmup at least 0")
    if args.autocast == "fp16" and args.device != "cuda":
        ap.error("--autocast fp16 needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch.cuda.is_available() is False (no GPU, or a CPU-only torch)")
    args.variant = (args.autocast if args.autocast != "none" else "fp32") + ("+cl" if args.channels_last else "")
    return args


def build(args):
    c = args.shape[0]
    if args.model == "resnet20":
        m = resnet.resnet20(in_channels=c, classes=args.classes)
        resnet.init_kaiming(m, zero_init_last_bn=True)
        return m, "bench/peers/resnet.py"
    if not args.own_resnet50:
        try:
            import torchvision
            m = torchvision.models.resnet50(num_classes=args.classes)
            if c != 3:
                m.conv1 = torch.nn.Conv2d(c, 64, 7, 2, 3, bias=False)
            return m, f"torchvision {torchvision.__version__}"
        except ImportError:
            pass
    m = resnet.resnet50(in_channels=c, classes=args.classes)
    resnet.init_kaiming(m, zero_init_last_bn=True)
    return m, "bench/peers/resnet.py"


def worker(rank, args, port, result_queue):
    torch.set_num_threads(args.threads)
    distributed = args.nproc > 1
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())
        torch.backends.cudnn.benchmark = True
    if distributed:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=args.nproc)
    torch.manual_seed(1234 + rank)
    model, source = build(args)
    x = torch.randn(args.batch, *args.shape)
    y = torch.randint(0, args.classes, (args.batch,))
    if cuda:
        model, x, y = model.cuda(), x.cuda(), y.cuda()
    if args.channels_last:
        # Before DDP wraps it: DDP's buckets are views of the parameters as they are then.
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    net = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum, nesterov=True,
                          weight_decay=args.wd)
    net.train()
    if args.autocast != "none":
        dtype = torch.bfloat16 if args.autocast == "bf16" else torch.float16
        precision = lambda: torch.autocast(args.device, dtype=dtype)  # noqa: E731
    else:
        precision = contextlib.nullcontext
    scaler = torch.cuda.amp.GradScaler(init_scale=args.loss_scale) if args.autocast == "fp16" else None
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        with precision():
            loss = F.cross_entropy(net(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()  # outside autocast, as PyTorch's AMP recipe has it
            opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    sync()
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    if distributed:
        dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        img_per_s = args.nproc * args.batch * args.steps / dt
        where = torch.cuda.get_device_name() if cuda else "cpu"
        print(f"torch {torch.__version__} {args.model} ({source}) on {where} {args.image} batch {args.batch}/rank "
              f"np={args.nproc} threads={args.threads} {args.variant} (autocast {args.autocast}, "
              f"channels_last {'on' if args.channels_last else 'off'}): {args.steps} steps in {dt:.3f} s, "
              f"last loss {loss.item():.3f}")
        print(f"img/s: {img_per_s:.2f}", flush=True)
        result_queue.put({"peer": "torch_train", "torch": torch.__version__, "model": args.model,
                          "model_source": source, "image": args.image, "classes": args.classes,
                          "batch_per_rank": args.batch, "device": where, "nproc": args.nproc, "threads": args.threads,
                          "variant": args.variant, "autocast": args.autocast,
                          "channels_last": args.channels_last, "steps": args.steps, "warmup": args.warmup,
                          "seconds": dt, "step_s": dt / args.steps, "img_per_s": img_per_s,
                          "last_loss": loss.item()})
    if distributed:
        dist.destroy_process_group()


def main():
    args = parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    if args.nproc > 1:
        port = args.port
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        mp.spawn(worker, args=(args, port, q), nprocs=args.nproc, join=True)
    else:
        worker(0, args, 0, q)
    summary = q.get()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
