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
  precision  short bf16 / bf16 + static loss scale / fp16 runs: the start line,
             the loss scale in the log (static stays, dynamic doubles per
             window), the fp16 fallback where the CPU has no f16 kernels, a
             falling loss in each
  progress   one epoch of 20 steps, tiny: --progress auto into a pipe (and
             behind a wrapper shell) prints one plain line per update, at
             least 5 for the epoch and one at its end, no '\r' and no ANSI
             escape, although mpirun gives the rank a pseudo-terminal; into a
             terminal (a pty here) the live bar; --progress bar and lines
             force either way
  accuracy   the demo's recipe (Fashion-MNIST, 2 ranks, the precision auto
             picks) on ResNet-8 cut to 2 epochs reaches 82% test top-1
"""
import json, os, re, shlex, subprocess, sys, tempfile, threading

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


def precision(exe):
    """Short runs of each precision: what the start line says, the loss scale
    in the progress line and the log, the fp16 fallback message on a CPU
    without f16 kernels, and training that lowers the loss in each."""
    cases = [
        (["--precision", "bf16"], "compute bf16, gradients bf16, loss scale none", None),
        (["--precision", "bf16", "--loss-scale", "1024", "--grad-dtype", "f32"],
         "compute bf16, gradients f32, loss scale 1024", 1024.0),
        (["--precision", "fp16", "--loss-scale-window", "10"], "gradients f16, loss scale dynamic from 65536", None),
    ]
    with tempfile.TemporaryDirectory() as d:
        for extra, start, static in cases:
            log = os.path.join(d, "log.jsonl")
            p = mpirun(2, [exe, "--synthetic", "--model", "resnet8", "--image", "3x16x16", "--batch", "16",
                           "--steps-per-epoch", "40", "--lr", "0.4", "--lr-decay", "none", "--wd", "0",
                           "--threads", "1", "--progress", "lines", "--print-every", "10", "--log", log] + extra)
            if p.returncode != 0:
                return f"{extra}: hora-train failed"
            if start not in p.stdout:
                return f"{extra}: the start line does not say '{start}'"
            trains = [r for r in read_log(log) if r["type"] == "train"]
            finals = [r for r in read_log(log) if r["type"] == "final"]
            if len(trains) != 4 or len(finals) != 1 or "skipped_steps" not in finals[0]:
                return f"{extra}: expected 4 train records and a final one with skipped_steps: {trains} {finals}"
            if not trains[-1]["loss"] < trains[0]["loss"]:
                return f"{extra}: the loss did not fall: {[r['loss'] for r in trains]}"
            scales = [r["loss_scale"] for r in trains]
            if static is not None and any(s != static for s in scales):
                return f"{extra}: a static scale moved: {scales}"
            if "fp16" in extra:
                if "--precision fp16:" in p.stdout and "computes in f32 instead" in p.stdout:
                    print("fp16 falls back to f32 compute here (said so)")
                elif "compute f16" not in p.stdout:
                    return f"{extra}: neither f16 compute nor the fallback message"
                # Window 10, no overflow at these magnitudes: 65536 doubles after steps 10, 20, 30, 40.
                want = [65536.0 * 2 ** (k + 1) for k in range(4)]
                if scales != want and trains[-1]["skipped_steps"] == 0:
                    return f"{extra}: dynamic scale {scales}, expected {want} without overflows"
            print(f"{extra}: ok, losses {[round(r['loss'], 3) for r in trains]}, scales {scales}")
    return None


def accuracy(exe):
    """The demo's recipe (tools/demo: 2 ranks x batch 64, lr 0.2, wd 5e-4, poly
    decay, pad-crop and flip, the default --precision auto) on ResNet-8 instead
    of ResNet-20, over 2 epochs instead of 10, with a half-epoch warmup instead
    of one, must reach 82% test top-1. Measured: 83.80% in 41 s in fp32 (what
    auto picks on an Intel Xeon without AMX). ResNet-20 over the same 2 epochs
    (87.29%) took 114 s of CI's 20 minutes; the whole demo (ResNet-20, 10
    epochs, 92%+) is tools/demo's to show."""
    if not os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        return f"{FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)"
    p = mpirun(2, [exe, "--model", "resnet8", "--data", FMNIST, "--epochs", "2", "--batch", "64", "--lr", "0.2",
                   "--wd", "5e-4", "--warmup-epochs", "0.5", "--pad-crop", "2", "--flip", "--threads", "1",
                   "--progress", "lines"], timeout=900)
    if p.returncode != 0:
        return "hora-train failed"
    chosen = re.search(r"precision auto: (\w+):", p.stdout)
    if not chosen:
        return "no 'precision auto: P:' line: was the precision not measured?"
    top = final_line(p.stdout)
    if not top:
        return "no final line"
    print(f"{chosen.group(1)} (precision auto): final top-1 {top[0]}% top-5 {top[1]}%")
    if top[0] < 82.0:
        return f"{chosen.group(1)} reached {top[0]}% top-1 in 2 epochs, below 82%"
    return None


def progress(exe):
    """--progress auto/bar/lines into a pipe and into a terminal (a pty made here)."""
    args = ["--model", "resnet8", "--synthetic", "--image", "1x8x8", "--batch", "8", "--steps-per-epoch", "20",
            "--epochs", "1", "--threads", "1", "--overlap", "off", "--precision", "fp32", "--print-every", "2"]
    mpi = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]

    def to_pipe(cmd):
        print("$", shlex.join(cmd), "| (a pipe)", flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=120)
        print(p.stdout.decode(errors="replace"))
        return p.returncode, p.stdout

    def to_terminal(cmd):
        print("$", shlex.join(cmd), "(on a pty)", flush=True)
        master, slave = os.openpty()
        job = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        chunks = []

        def read():
            while True:
                try:
                    b = os.read(master, 65536)
                except OSError:  # EIO: every writer has gone
                    return
                if not b:
                    return
                chunks.append(b)
        reader = threading.Thread(target=read)
        reader.start()
        job.wait(timeout=120)
        reader.join(timeout=30)
        os.close(master)
        out = b"".join(chunks)
        print(out.decode(errors="replace"))
        return job.returncode, out

    def bare_cr(out):  # the bar's; a terminal ends every line with "\r\n"
        return len(re.findall(rb"\r(?!\n)", out))

    def updates(out):
        return re.findall(rb"^epoch 1/1 step (\d+) \(\d+%\)", out.replace(b"\r\n", b"\n"), re.M)

    for how, cmd in [("auto into a pipe", mpi + [exe] + args),
                     ("auto into a pipe behind a wrapper shell", mpi + ["sh", "-c", '"$0" "$@"; exit $?', exe] + args),
                     ("lines on a terminal", mpi + [exe] + args + ["--progress", "lines"])]:
        rc, out = (to_terminal if "terminal" in how else to_pipe)(cmd)
        steps = [int(x) for x in updates(out)]
        if rc != 0:
            return f"{how}: hora-train failed"
        escapes = out.count(b"\x1b")
        if bare_cr(out) or escapes:
            return f"{how}: {bare_cr(out)} carriage returns, {escapes} escapes in the output"
        if len(steps) < 5 or steps[-1] != 20:
            return f"{how}: {len(steps)} progress lines for one epoch (steps {steps}), expected >= 5 ending at 20"
    for how, cmd in [("auto on a terminal", lambda: to_terminal(mpi + [exe] + args)),
                     ("bar into a pipe", lambda: to_pipe(mpi + [exe] + args + ["--progress", "bar"]))]:
        rc, out = cmd()
        if rc != 0:
            return f"{how}: hora-train failed"
        if bare_cr(out) < 5 or b"[####################] step 20" not in out:
            return f"{how}: no live bar ({bare_cr(out)} carriage returns)"
        if updates(out):
            return f"{how}: plain progress lines beside the bar"
    return None


def errors(exe):
    """Each bad argument in its own 1-rank job; the jobs are independent and
    spend most of their time starting mpirun, so they run side by side."""
    cases = [(["--synthetic", "--bogus"], "unknown option"),
             (["--synthetic", "--batch", "0"], "--batch"),
             (["--synthetic", "--model", "resnet7"], "unknown model"),
             (["--synthetic", "--overlap", "sometimes"], "--overlap wants"),
             (["--synthetic", "--precision", "fp8"], "--precision wants"),
             (["--synthetic", "--loss-scale", "0"], "--loss-scale wants"),
             (["--synthetic", "--loss-scale", "sometimes"], "--loss-scale wants"),
             (["--synthetic", "--grad-dtype", "f64"], "--grad-dtype wants"),
             (["--data", "/nonexistent-dir"], "cannot open")]
    jobs = []
    for args, needle in cases:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1", exe] + args
        jobs.append((cmd, args, needle, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                          text=True)))
    err = None
    for cmd, args, needle, job in jobs:
        try:
            out = job.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            job.kill()
            out = job.communicate()[0] + "\n(timed out after 120 s)"
        print("$", " ".join(cmd), flush=True)
        print(out)
        if err is None and (job.returncode == 0 or needle not in out):
            err = f"{args}: expected a failure mentioning '{needle}'"
    return err


if __name__ == "__main__":
    exe, mode = sys.argv[1], sys.argv[2]
    MKRECORD = sys.argv[3] if len(sys.argv) > 3 else "hora-mkrecord"
    err = {"synthetic": synthetic, "fmnist": fmnist, "records": lambda e: fmnist(e, records=True),
           "errors": errors, "precision": precision, "progress": progress, "accuracy": accuracy}[mode](exe)
    print("FAIL: " + err if err else "PASS")
    sys.exit(1 if err else 0)
