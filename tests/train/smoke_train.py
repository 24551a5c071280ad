#!/usr/bin/env python3
"""Training smoke tests of hora-train under a real mpirun (2 ranks).

usage: smoke_train.py HORA_TRAIN MODE [HORA_MKRECORD]
  synthetic  a fixed random batch per rank: the loss must fall well below its
             start (the model memorises it), the log and final line must exist,
             and --overlap auto must have logged its decision once
  fmnist     a few dozen steps on Fashion-MNIST (Debian dataset-fashion-mnist):
             test top-1 over the whole 10k test set must beat chance by far;
             a missing dataset is a failure (tools/setup installs it)
  records    the same through record shards written by hora-mkrecord --from idx
  errors     bad flags and a bad data directory fail cleanly with a message
"""
import json, os, subprocess, sys, tempfile

FMNIST = "/usr/share/datasets/fashion-mnist"


def mpirun(np_, args, timeout=600):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + args
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    print(p.stdout)
    return p


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def final_line(out):
    for line in out.splitlines():
        if line.startswith("final test top-1 "):
            parts = line.split()
            return float(parts[3].rstrip("%")), float(parts[5].rstrip("%"))
    return None


def synthetic(exe):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        p = mpirun(2, [exe, "--model", "resnet8", "--synthetic", "--image", "1x16x16", "--batch", "16",
                       "--steps-per-epoch", "60", "--epochs", "1", "--lr", "1.6", "--lr-decay", "none", "--wd", "0",
                       "--progress", "lines",
                       "--threads", "1", "--print-every", "5", "--log", log])
        if p.returncode != 0:
            return "hora-train failed"
        recs = read_log(log)
        train = [r for r in recs if r["type"] == "train"]
        if len(train) < 4 or not final_line(p.stdout):
            return "log or final line missing"
        first, last = train[0]["loss"], train[-1]["loss"]
        print(f"loss {first:.4f} -> {last:.4f}")
        if not last < 0.5 * first:
            return f"loss did not fall: {first} -> {last}"
        if train[-1]["step"] != 60:
            return "wrong step count"
        decided = [r for r in recs if r["type"] == "overlap"]
        if len(decided) != 1 or not (decided[0]["ms_per_step_on"] > 0 and decided[0]["ms_per_step_off"] > 0):
            return f"--overlap auto (the default) did not log one decision with both timings: {decided}"
        if "hora-train: overlap auto: " not in p.stdout:
            return "--overlap auto did not print its decision"
    return None


def fmnist(exe, records=False):
    if not os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        return f"{FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)"
    with tempfile.TemporaryDirectory() as d:
        data = FMNIST
        if records:
            # Shards as hora-mkrecord writes them; the loader reads DIR/train-*, DIR/val-*.
            mkrecord = MKRECORD
            data = os.path.join(d, "records")
            os.mkdir(data)
            for split, img, lab in [("train", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
                                    ("val", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")]:
                cmd = [mkrecord, "--from", "idx", os.path.join(FMNIST, img), os.path.join(FMNIST, lab),
                       os.path.join(data, split), "--shards", "3"]
                print("$", " ".join(cmd), flush=True)
                if subprocess.run(cmd).returncode != 0:
                    return "hora-mkrecord failed"
        log = os.path.join(d, "log.jsonl")
        p = mpirun(2, [exe, "--model", "resnet8", "--data", data, "--batch", "32", "--steps", "150",
                       "--lr", "0.4", "--warmup-epochs", "0.02", "--threads", "1", "--progress", "lines",
                       "--log", log])
        if p.returncode != 0:
            return "hora-train failed"
        top = final_line(p.stdout)
        if not top:
            return "no final line"
        evals = [r for r in read_log(log) if r["type"] == "eval"]
        if not evals or evals[-1]["images"] != 10000:
            return "evaluation did not cover the 10000 test images exactly once"
        print(f"top-1 {top[0]}% top-5 {top[1]}% after 150 steps")
        if not (top[0] > 40.0 and top[1] > top[0]):
            return f"accuracy too low for 150 steps: {top}"
    return None


def errors(exe):
    for args, needle in [(["--synthetic", "--bogus"], "unknown option"),
                         (["--synthetic", "--batch", "0"], "--batch"),
                         (["--synthetic", "--model", "resnet7"], "unknown model"),
                         (["--synthetic", "--overlap", "sometimes"], "--overlap wants"),
                         (["--data", "/nonexistent-dir"], "cannot open")]:
        p = mpirun(1, [exe] + args, timeout=120)
        if p.returncode == 0 or needle not in p.stdout:
            return f"{args}: expected a failure mentioning '{needle}'"
    return None


if __name__ == "__main__":
    exe, mode = sys.argv[1], sys.argv[2]
    MKRECORD = sys.argv[3] if len(sys.argv) > 3 else "hora-mkrecord"
    err = {"synthetic": synthetic, "fmnist": fmnist, "records": lambda e: fmnist(e, records=True),
           "errors": errors}[mode](exe)
    print("FAIL: " + err if err else "PASS")
    sys.exit(1 if err else 0)
