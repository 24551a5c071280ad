#!/usr/bin/python3
"""torch_fmnist_ddp.py - PyTorch DDP time-to-accuracy peer for hora-train on Fashion-MNIST.

Runs the recipe hora-train runs, in PyTorch's DistributedDataParallel (gloo),
N processes x T threads on this machine, and reports the wall time until the
test top-1 first reaches the target (92%), and the training throughput.

    /usr/bin/python3 bench/peers/torch_fmnist_ddp.py [--nproc 2] [--epochs 8] [--json FILE]

Every knob of the recipe is a flag whose default is hora-train's default
(bench/peers/README.md lists them). Timing starts after the data is loaded and
the model built, just before the first step; "elapsed" includes evaluation,
"img/s" does not.
"""
import argparse
import gzip
import json
import math
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet import init_kaiming, resnet20  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="directory with the four IDX files (.gz or not)")
    ap.add_argument("--nproc", type=int, default=2, help="processes (ranks)")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--lr", type=float, default=0.2, help="base lr per 256 samples: peak = lr x global_batch / 256")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--nesterov", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--wd", type=float, default=5e-4, help="weight decay (on every parameter)")
    ap.add_argument("--warmup-epochs", type=float, default=1.0,
                    help="linear warmup from 0: lr = peak x (step+1) / warmup_steps")
    ap.add_argument("--poly-power", type=float, default=2.0,
                    help="after warmup: peak x (1 - (step - warm) / (total - warm))^power")
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--pad-crop", type=int, default=2, help="pad by this many pixels, random crop back (0 = off)")
    ap.add_argument("--pad-fill", choices=("raw", "normalized"), default="raw",
                    help="padding value: raw = pixel 0 (black, as the loader's zero pixels), "
                         "normalized = 0 after normalisation")
    ap.add_argument("--flip", action=argparse.BooleanOptionalAction, default=True,
                    help="per-sample random horizontal flip, p = 0.5")
    ap.add_argument("--mean", type=float, default=0.2860)
    ap.add_argument("--std", type=float, default=0.3530)
    ap.add_argument("--zero-init-last-bn", action=argparse.BooleanOptionalAction, default=True,
                    help="gamma = 0 in the last BN of every residual block (hora's default)")
    ap.add_argument("--init", choices=("kaiming", "torch"), default="kaiming",
                    help="kaiming = convs kaiming-normal fan_out (hora); torch = PyTorch's defaults")
    ap.add_argument("--seed", type=int, default=0, help="init, shuffle and augmentation seed")
    ap.add_argument("--target", type=float, default=0.92, help="top-1 for the time-to-accuracy figure")
    ap.add_argument("--eval-batch", type=int, default=1000)
    ap.add_argument("--eval-limit", type=int, default=0, help="score only the first N test images (smoke tests)")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="cap the steps per epoch (smoke tests; the lr schedule follows the cap)")
    ap.add_argument("--log-every", type=int, default=50, help="steps between train records in --log")
    ap.add_argument("--log", metavar="FILE.jsonl", help="JSON-lines log in hora-train's record format")
    ap.add_argument("--json", metavar="FILE", help="summary JSON")
    ap.add_argument("--port", type=int, default=0, help="rendezvous port (0 = pick a free one)")
    return ap.parse_args(argv)


def read_idx(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                b = f.read()
            if b[0] != 0 or b[1] != 0 or b[2] != 8:
                raise ValueError(f"{path}: not an unsigned-byte IDX file")
            nd = b[3]
            dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
            return torch.from_numpy(np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims).copy())
    raise FileNotFoundError(f"{directory}: no {stem}[.gz]")


def lr_at(step, peak, warm, total, power):
    if step < warm:
        return peak * (step + 1) / warm
    if total <= warm:
        return peak
    return peak * (1.0 - (step - warm) / (total - warm)) ** power


class Augment:
    """Per-sample random crop from a padded image and per-sample flip, in one gather."""

    def __init__(self, args, h, w, generator):
        self.pad, self.flip, self.g = args.pad_crop, args.flip, generator
        self.fill = 0.0 if args.pad_fill == "raw" else args.mean  # in pixel/255 units
        self.mean, self.std = args.mean, args.std
        self.ar_h, self.ar_w = torch.arange(h), torch.arange(w)

    def __call__(self, u8):  # (B, H, W) uint8 -> (B, 1, H, W) float, normalised
        x = u8.float().div_(255)
        b, h, w = x.shape
        if self.pad or self.flip:
            p = self.pad
            if p:
                x = F.pad(x, (p, p, p, p), value=self.fill)
            dy = torch.randint(0, 2 * p + 1, (b,), generator=self.g)
            dx = torch.randint(0, 2 * p + 1, (b,), generator=self.g)
            cols = self.ar_w.expand(b, w)
            if self.flip:
                flipped = torch.rand(b, generator=self.g) < 0.5
                cols = torch.where(flipped[:, None], (w - 1) - cols, cols)
            rows = dy[:, None] + self.ar_h[None, :]
            cols = dx[:, None] + cols
            x = x[torch.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]
        return x.sub_(self.mean).div_(self.std).unsqueeze(1)


def worker(rank, args, port, result_queue):
    torch.set_num_threads(args.threads)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    n = args.nproc

    xtr, ytr = read_idx(args.data, "train-images-idx3-ubyte"), read_idx(args.data, "train-labels-idx1-ubyte").long()
    xte, yte = read_idx(args.data, "t10k-images-idx3-ubyte"), read_idx(args.data, "t10k-labels-idx1-ubyte").long()
    if args.eval_limit:
        xte, yte = xte[:args.eval_limit], yte[:args.eval_limit]
    h, w = xtr.shape[1:]
    xte_n = xte.float().div_(255).sub_(args.mean).div_(args.std).unsqueeze(1)
    lo, hi = rank * len(xte) // n, (rank + 1) * len(xte) // n  # this rank's part of the test set

    torch.manual_seed(args.seed)
    model = resnet20(in_channels=1, classes=10)
    if args.init == "kaiming":
        init_kaiming(model, args.zero_init_last_bn)
    elif args.zero_init_last_bn:
        for blk in model.residual_blocks():
            torch.nn.init.zeros_(blk.last_bn().weight)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.0, momentum=args.momentum, nesterov=args.nesterov,
                          weight_decay=args.wd)

    global_batch = n * args.batch
    peak = args.lr * global_batch / 256
    # Every sample of an epoch, as hora-train: each rank takes len // n of the
    # permutation, and the last step what is left of them (the same on every rank).
    per_rank = len(xtr) // n
    steps_per_epoch = (per_rank + args.batch - 1) // args.batch
    if args.max_steps:
        steps_per_epoch = min(steps_per_epoch, args.max_steps)
    total = args.epochs * steps_per_epoch
    warm = int(round(args.warmup_epochs * steps_per_epoch))
    aug = Augment(args, h, w, torch.Generator().manual_seed(args.seed * 1000003 + rank))
    log = open(args.log, "w") if (args.log and rank == 0) else None

    def emit(rec):
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()

    per_epoch, t_target, train_s, step, images_total = [], None, 0.0, 0, 0
    dist.barrier()
    t0 = time.perf_counter()
    for ep in range(1, args.epochs + 1):
        # The same permutation on every rank; rank r takes every n-th sample.
        perm = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(args.seed * 7919 + ep))
        mine = perm[rank::n][:per_rank]
        ddp.train()
        t_ep = time.perf_counter()
        loss_sum, t_last, imgs_last, imgs = 0.0, t_ep, 0, 0
        for i in range(steps_per_epoch):
            lr = lr_at(step, peak, warm, total, args.poly_power)
            for group in opt.param_groups:
                group["lr"] = lr
            ix = mine[i * args.batch:(i + 1) * args.batch]
            x, y = aug(xtr[ix]), ytr[ix]
            imgs += n * len(ix)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(x), y, label_smoothing=args.label_smoothing)
            loss.backward()
            opt.step()
            step += 1
            lv = loss.item()
            loss_sum += lv
            if log and (step % args.log_every == 0 or i == steps_per_epoch - 1):
                now = time.perf_counter()
                # hora-train's record: epoch = fractional position (0-based epoch + done
                # fraction), step = steps done in the run.
                emit({"type": "train", "epoch": round(ep - 1 + (i + 1) / steps_per_epoch, 4), "step": step,
                      "loss": lv, "lr": lr, "img_per_s": (imgs - imgs_last) / max(now - t_last, 1e-9),
                      "elapsed_s": now - t0})
                t_last, imgs_last = now, imgs
        train_s += time.perf_counter() - t_ep
        images_total += imgs

        ddp.eval()
        counts = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for j in range(lo, hi, args.eval_batch):
                k = min(j + args.eval_batch, hi)
                pred5 = ddp.module(xte_n[j:k]).topk(5, 1).indices
                hit = pred5 == yte[j:k, None]
                counts[0] += hit[:, 0].sum()
                counts[1] += hit.any(1).sum()
        dist.all_reduce(counts)
        top1, top5 = (counts / len(xte)).tolist()
        elapsed = time.perf_counter() - t0
        if t_target is None and top1 >= args.target:
            t_target = elapsed
        per_epoch.append({"epoch": ep, "top1": top1, "top5": top5, "elapsed_s": elapsed,
                          "train_loss": loss_sum / max(steps_per_epoch, 1)})
        emit({"type": "eval", "epoch": ep, "top1": top1, "top5": top5, "images": len(xte), "elapsed_s": elapsed})
        if rank == 0:
            print(f"epoch {ep}: test top-1 {top1 * 100:.2f}% top-5 {top5 * 100:.2f}% elapsed {elapsed:.1f} s",
                  flush=True)

    img_per_s = images_total / train_s if train_s > 0 else 0.0
    if per_epoch:
        emit({"type": "final", "steps": step, "top1": per_epoch[-1]["top1"], "top5": per_epoch[-1]["top5"],
              "elapsed_s": time.perf_counter() - t0, "train_img_per_s": img_per_s})
    if rank == 0:
        pct = f"{args.target * 100:g}%"
        print(f"time to {pct}: {t_target:.1f} s" if t_target is not None else f"time to {pct}: not reached")
        print(f"img/s: {img_per_s:.1f}", flush=True)
        result_queue.put({
            "peer": "torch_fmnist_ddp", "torch": torch.__version__, "nproc": n, "threads": args.threads,
            "batch_per_rank": args.batch, "global_batch": global_batch, "lr_peak": peak,
            "epochs": args.epochs, "steps_per_epoch": steps_per_epoch, "warmup_steps": warm,
            "per_epoch": per_epoch, "target": args.target,
            "time_to_target_s": t_target, "time_to_92_s": t_target if args.target == 0.92 else None,
            "final_top1": per_epoch[-1]["top1"] if per_epoch else None,
            "train_s": train_s, "img_per_s": img_per_s, "args": vars(args),
        })
    if log:
        log.close()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    if args.nproc < 1 or args.batch < 1 or args.epochs < 1 or args.threads < 1:
        sys.exit("--nproc, --batch, --epochs and --threads must be at least 1")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, args.port or free_port(), q), nprocs=args.nproc, join=True)
    summary = q.get()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    return 0 if summary["img_per_s"] > 0 and not math.isnan(summary["img_per_s"]) else 1


if __name__ == "__main__":
    sys.exit(main())
