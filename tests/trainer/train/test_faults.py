#!/usr/bin/env python3
"""Errors one rank of hora-train hits end the whole job: within seconds,
every rank non-zero, the message printed, no hora object left in /dev/shm.

usage: test_faults.py MODE HORA_TRAIN HORA_MKRECORD
  strict      a corrupt record under --strict, read by one rank only; the
              rank that reads it prints the error once, with the message
              hora-mkrecord --verify gives for the same record
  checkpoint  a checkpoint write that fails on rank 0 (its directory
              replaced by a file after the first checkpoint; a full disk is
              test_checkpoint.py full-disk)
  oom         out of memory in a layer on one rank: rank 1's address space
              capped (prlimit) once it trains, so the larger evaluation batch
              cannot get its activations
"""
import glob, os, re, shutil, subprocess, sys, tempfile, time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# the test kit (tests/common)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fmnist_small  # noqa: E402

TRAIN_SAMPLES, VAL_SAMPLES = 2048, 256
BOUND_S = 30  # every fault must end the job well within this (HORA_TIMEOUT_S is 30 s by default)
BASE = ["--model", "resnet8", "--batch", "16", "--threads", "1", "--overlap", "off", "--precision", "fp32", "--progress", "lines",
        "--print-every", "8", "--lr", "0.4", "--epochs", "2"]


def hora_shm():
    return sorted(glob.glob("/dev/shm/hora-*"))


def start(np_, args, env=None):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_), "--tag-output", HORA_TRAIN] + args
    print("$", " ".join(cmd), flush=True)
    e = dict(os.environ)
    # Open MPI's shared-memory BTL leaves its segments behind when a job dies: keep them out of /dev/shm.
    e["OMPI_MCA_btl_vader_backing_directory"] = tempfile.gettempdir()
    e.update(env or {})
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)


def finish(p, t0, timeout=120):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        out += "\n(killed by the test: the job did not end)"
    seconds = time.monotonic() - t0
    print(out, flush=True)
    return out, seconds


def make_idx(d, n_val=VAL_SAMPLES):
    return fmnist_small.make_idx(d, TRAIN_SAMPLES, n_val)


def judge(name, out, seconds, needles, before):
    failures = []
    print(f"{name}: the job ended after {seconds:.1f} s")
    if "(killed by the test" in out:
        failures.append(f"{name}: the job did not end within 120 s")
    elif seconds > BOUND_S:
        failures.append(f"{name}: the job took {seconds:.1f} s to end (bound {BOUND_S} s)")
    for n in needles:
        if not re.search(n, out):
            failures.append(f"{name}: the output does not match '{n}'")
    if "final test top-1" in out:
        failures.append(f"{name}: some rank finished training")
    # Printed once, by hora-train's main: its hora_abort prints nothing more.
    if "hora_abort" in out:
        failures.append(f"{name}: an abort printed the error again")
    left = [s for s in hora_shm() if s not in before]
    if left:
        failures.append(f"{name}: left in /dev/shm: {left}")
    return failures


def strict(work):
    idx = make_idx(work)
    rec = fmnist_small.make_records(work, idx, HORA_MKRECORD, 1)
    if rec is None:
        return ["hora-mkrecord failed"]
    # One byte of a record's payload in the middle of the shard: its CRC fails
    # for whichever rank reads it, the other rank has no bad data.
    shard = glob.glob(os.path.join(rec, "train-*.hrec"))[0]
    size = os.path.getsize(shard)
    with open(shard, "r+b") as f:
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    v = subprocess.run([HORA_MKRECORD, "--verify", shard], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    print(v.stdout, end="")
    m = re.search(r"^hora-mkrecord: bad record: (.+)$", v.stdout, re.M)
    before = hora_shm()
    t0 = time.monotonic()
    p = start(2, BASE + ["--data", rec, "--strict"])
    out, seconds = finish(p, t0)
    f = judge("strict", out, seconds, [r"bad sample \d+ \(strict: stopping\)", r"aborted|abort"], before)
    if p.returncode == 0:
        f.append("strict: mpirun exited 0")
    # One error channel: the same text as hora-mkrecord's, printed once by
    # hora-train's main on the rank that read it (not also by the loader).
    if not m:
        f.append("strict: hora-mkrecord --verify named no bad record")
    else:
        said = re.findall(r"^(?:\[\d+,\d+\]<std\w+>:)?hora-train: rank \d+: training data, epoch \d+ step \d+: bad sample \d+ \(strict: stopping\): "
                          + re.escape(m.group(1)) + "$", out, re.M)
        if len(said) != 1:
            f.append(f"strict: {len(said)} lines of hora-train's main carry hora-mkrecord's message '{m.group(1)}'")
        if re.search(r"hora loader: .*" + re.escape(m.group(1)), out):
            f.append("strict: the loader printed the error too")
    return f


def checkpoint(work):
    idx = make_idx(work)
    d = os.path.join(work, "ckpt")
    before = hora_shm()
    t0 = time.monotonic()
    p = start(2, BASE + ["--data", idx, "--checkpoint-dir", d, "--checkpoint-every-steps", "4"])
    # After the first checkpoint, the directory becomes a file: the next write fails.
    while time.monotonic() - t0 < 60 and not os.path.exists(os.path.join(d, "latest")):
        time.sleep(0.05)
    # A rank may be writing into it meanwhile (rmtree then leaves it behind):
    # again until the file takes its place.
    for _ in range(200):
        shutil.rmtree(d, ignore_errors=True)
        try:
            with open(d, "x") as f:
                f.write("not a directory\n")
            break
        except (IsADirectoryError, FileExistsError):
            time.sleep(0.01)
    out, seconds = finish(p, t0)
    f = judge("checkpoint", out, seconds, [r"checkpoint failed: .*(Not a directory|No such file)", r"aborted|abort"],
              before)
    if p.returncode == 0:
        f.append("checkpoint: mpirun exited 0")
    return f


def rank_pid(p, rank):
    """The pid of hora-train rank `rank` started by mpirun p (a child of its orted/mpirun)."""
    for _ in range(400):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if HORA_TRAIN.encode() in cmd.split(b"\0")[0] and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
                return int(pid)
        time.sleep(0.05)
    return None


def oom(work):
    # 4096 test images: each rank's 2048 are one evaluation batch.
    idx = make_idx(work, n_val=4096)
    before = hora_shm()
    t0 = time.monotonic()
    # Training batch 16 needs some 25 MB of activations; an evaluation batch of 2048 about 3 GB.
    p = start(2, BASE + ["--data", idx, "--eval-batch", "4096", "--eval-every", "1"])
    pid = rank_pid(p, 1)
    if pid is None:
        p.kill()
        return ["oom: rank 1 never appeared"]
    # Wait until the job trains (rank 0's first progress line, 8 steps in: rank 1's activations exist),
    # then cap rank 1's address space 1 GB above what it has mapped: training goes on, the first
    # evaluation cannot get its activations. (A fixed 3 s wait was too long where an epoch takes under
    # a second: both evaluations were done before the cap.)
    head = []
    for line in p.stdout:
        head.append(line)
        if re.search(r"epoch \d+/\d+ step \d+ ", line):
            break
    print("".join(head), end="", flush=True)
    with open(f"/proc/{pid}/status") as f:
        vm = int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024
    limit = vm + (1 << 30)
    subprocess.run(["prlimit", f"--pid={pid}", f"--as={limit}:{limit}"], check=True)
    print(f"oom: rank 1 (pid {pid}) capped at {limit >> 20} MB of address space", flush=True)
    out, seconds = finish(p, t0)
    out = "".join(head) + out
    f = judge("oom", out, seconds, [r"out of memory", r"aborted|abort"], before)
    if p.returncode == 0:
        f.append("oom: mpirun exited 0")
    return f


if __name__ == "__main__":
    mode, HORA_TRAIN, HORA_MKRECORD = sys.argv[1:4]
    HORA_TRAIN = os.path.abspath(HORA_TRAIN)
    if not fmnist_small.available():
        print(f"FAIL: {fmnist_small.FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as work:
        failures = {"strict": strict, "checkpoint": checkpoint, "oom": oom}[mode](work)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
