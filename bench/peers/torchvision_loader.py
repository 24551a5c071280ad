#!/usr/bin/python3
"""torchvision_loader.py - the PyTorch/torchvision peer of hora-bench-loader.

The standard ImageNet training input pipeline, as the PyTorch examples write it:
ImageFolder (PIL decode) -> RandomResizedCrop(size) -> RandomHorizontalFlip ->
ToTensor -> Normalize(ImageNet mean/std), batched by a DataLoader with
num_workers worker processes. Measured like hora-bench-loader: the first batch
is untimed (worker start-up), then batches for --seconds, epochs restarting as
needed. Reports images/s (wall) and CPU seconds per image, counting this
process and its worker processes (read from /proc while they run, since a
DataLoader's workers are reaped only when it is torn down).

    /usr/bin/python3 bench/peers/torchvision_loader.py --data DIR/img \
        --workers 1,2 --seconds 5 [--batch 32] [--size 224] [--json FILE]

DIR/img is an ImageFolder tree (hora-bench-loader --keep DIR writes one).
Needs Debian's python3-torch and python3-torchvision.
"""
import argparse
import json
import os
import sys
import time


def proc_cpu_seconds(pids):
    """utime + stime of the given processes, from /proc (0 for gone ones)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def run(args, workers):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.set_num_threads(1)  # the main process only collates
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    dataset = datasets.ImageFolder(args.data, transforms.Compose([
        transforms.RandomResizedCrop(args.size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]))
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=workers,
                        drop_last=True, persistent_workers=True, prefetch_factor=2)
    images, t0, c0, warm = 0, 0.0, 0.0, False
    pids = []
    while True:
        done = False
        for x, _ in loader:
            if not warm:
                warm = True
                it = loader._iterator
                pids = [os.getpid()] + [w.pid for w in getattr(it, "_workers", [])]
                t0, c0 = time.monotonic(), proc_cpu_seconds(pids)
                continue
            images += x.shape[0]
            if time.monotonic() - t0 >= args.seconds:
                done = True
                break
        if done:
            break
    wall = time.monotonic() - t0
    cpu = proc_cpu_seconds(pids) - c0
    del loader
    return {"threads": workers, "images": images, "wall_s": wall,
            "images_per_s": images / wall, "cpu_s": cpu}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="ImageFolder directory")
    p.add_argument("--workers", default="1", help="comma-separated worker counts")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--json")
    args = p.parse_args()
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("torchvision_loader.py: torchvision is missing "
              "(apt-get install python3-torchvision)", file=sys.stderr)
        return 77
    print(f"# torchvision {torchvision.__version__}: {args.data}, batch {args.batch}, "
          f"{args.size}x{args.size}, RandomResizedCrop + flip + ToTensor + Normalize, "
          f"{args.seconds:.1f} s per row")
    print(f"{'workers':>8} {'images':>10} {'wall_s':>10} {'images/s':>12} {'images/s/thr':>14} "
          f"{'cpu_ms/image':>14}")
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        r = run(args, workers)
        rows.append(r)
        rate = r["images_per_s"]
        print(f"{workers:>8} {r['images']:>10} {r['wall_s']:>10.2f} {rate:>12.1f} "
              f"{rate / workers:>14.1f} {1e3 * r['cpu_s'] / max(r['images'], 1):>14.2f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "torchvision_loader", "data": args.data, "batch": args.batch,
                       "size": args.size, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
