#!/usr/bin/env python3
"""Checkpoints of hora-train under a real mpirun: exact resume, crashes at
every moment of a write, damaged files, another model, a full disk, another
number of ranks.

usage: test_checkpoint.py MODE HORA_TRAIN HORA_CKPT HORA_MKRECORD
  exact     N steps in one run and k steps + --resume auto to N give bitwise
            equal checkpoints (hora-ckpt diff says "equal"), at np 1 and 2,
            from IDX files and from record shards, in fp32 and bf16; and
            hora-ckpt diff does say "differ" for checkpoints that differ
  crash     rank 0 SIGKILLed (HORA_CKPT_CRASH) before the temp file, in the
            middle of its data, after the rename but before `latest`, and
            after `latest`: the directory still holds a good checkpoint,
            --resume auto continues from it (the leftover temp file removed)
            and ends on the uninterrupted run's exact final checkpoint
  corrupt   one flipped byte in the header and in each section of the newest
            checkpoint, and a truncated one: each is reported (file, section
            or header, offset) and the previous checkpoint is used; a damaged
            --resume FILE stops the run
  mismatch  resuming with another architecture, width, class count or
            precision, or with --keep-global-batch on a number of ranks that
            does not divide the checkpoint's global batch, is refused: exit
            non-zero, the field named with the checkpoint's value, this run's
            and the flag that continues it, in every rank's abort
  full-disk a tmpfs with room for one checkpoint: the second fails with "No
            space left on device", every rank exits non-zero, the first
            checkpoint is intact and `latest` names it, no temp file is left
  reshard   a checkpoint of 2 ranks resumed on 1 and 3 ranks (per-rank batch
            kept, and --keep-global-batch): the progress line says how the
            global batch and learning rate changed, the epoch continues after
            the samples already trained on, training ends normally
"""
import concurrent.futures, io, os, re, shutil, struct, subprocess, sys, tempfile, threading, time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# the test kit (tests/common)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fmnist_small  # noqa: E402

TRAIN_SAMPLES, VAL_SAMPLES = 256, 256
BASE = ["--model", "resnet8", "--batch", "16", "--threads", "1", "--overlap", "off", "--precision", "fp32", "--progress", "lines",
        "--print-every", "1000", "--lr", "0.4", "--warmup-epochs", "0.5", "--epochs", "3"]


# The independent cases of crash, corrupt and mismatch (each in its own
# directory) run CASE_WORKERS at a time: their jobs spend much of their time
# starting and ending (mpirun; a failed job's teardown takes Open MPI ~2 s)
# rather than computing. exact's runs compute, and stay one at a time. A
# case's output is kept and printed whole, in the cases' order.
CASE_WORKERS = 2
_case = threading.local()


def say(*args):
    buf = getattr(_case, "out", None)
    print(*args, file=buf if buf is not None else sys.stdout, flush=buf is None)


def in_parallel(fn, cases):
    """fn(case) -> failures, for every case, CASE_WORKERS at a time; all failures in the cases' order."""
    def one(case):
        _case.out = io.StringIO()
        try:
            return fn(case), _case.out.getvalue()
        finally:
            _case.out = None
    with concurrent.futures.ThreadPoolExecutor(CASE_WORKERS) as ex:
        results = list(ex.map(one, cases))
    failures = []
    for f, out in results:
        print(out, end="", flush=True)
        failures += f
    return failures


def run(cmd, env=None, timeout=300, quiet=False):
    say("$", " ".join(cmd))
    e = dict(os.environ)
    # Open MPI's shared-memory BTL leaves its segments behind when a job dies: keep them out of /dev/shm.
    e["OMPI_MCA_btl_vader_backing_directory"] = tempfile.gettempdir()
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=e)
    p.seconds = time.monotonic() - t0
    if not quiet or p.returncode != 0:
        say(p.stdout)
    return p


def mpirun(np_, args, env=None, timeout=300):
    return run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_), HORA_TRAIN] + args, env=env,
               timeout=timeout)


def make_data(d):
    """TRAIN_SAMPLES / VAL_SAMPLES images of Fashion-MNIST as IDX files and as record shards."""
    idx = fmnist_small.make_idx(d, TRAIN_SAMPLES, VAL_SAMPLES)
    rec = fmnist_small.make_records(d, idx, HORA_MKRECORD, 2)
    if rec is None:
        raise SystemExit("FAIL: hora-mkrecord failed")
    return idx, rec


def ckpt_name(step):
    return f"ckpt-{step:010d}.hckpt"


def latest(d):
    with open(os.path.join(d, "latest")) as f:
        return f.read().strip()


def diff(a, b):
    p = run([HORA_CKPT, "diff", a, b])
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p.returncode, last


def sections(path):
    """{name: (offset, bytes)} from the file's table (trainer/ckpt/CHECKPOINT.md)."""
    with open(path, "rb") as f:
        head = f.read(64)
        count = struct.unpack_from("<I", head, 12)[0]
        table_offset = struct.unpack_from("<Q", head, 24)[0]
        f.seek(table_offset)
        table = f.read(64 * count)
    out = {}
    for i in range(count):
        e = table[64 * i: 64 * i + 64]
        name = e[:24].split(b"\0")[0].decode()
        offset, size = struct.unpack_from("<QQ", e, 24)
        out[name] = (offset, size)
    return out


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x20]))


def exact(work):
    idx, rec = make_data(work)
    failures = []
    # 12 steps cross the epoch boundary at np 2 (8 steps per epoch), k = 5 stops inside the first.
    n_steps, k_steps = 12, 5
    for np_ in (1, 2):
        for data_name, data in (("idx", idx), ("records", rec)):
            for precision in ("fp32", "bf16"):
                tag = f"np{np_} {data_name} {precision}"
                a, b = os.path.join(work, f"A-{np_}-{data_name}-{precision}"), os.path.join(
                    work, f"B-{np_}-{data_name}-{precision}")
                args = BASE + ["--data", data, "--precision", precision, "--checkpoint-every-steps", "4"]
                ra = mpirun(np_, args + ["--checkpoint-dir", a, "--steps", str(n_steps)])
                rb1 = mpirun(np_, args + ["--checkpoint-dir", b, "--steps", str(k_steps)])
                rb2 = mpirun(np_, args + ["--checkpoint-dir", b, "--steps", str(n_steps), "--resume", "auto"])
                if ra.returncode or rb1.returncode or rb2.returncode:
                    failures.append(f"{tag}: a hora-train run failed")
                    continue
                if f"resuming from {os.path.join(b, ckpt_name(k_steps))}" not in rb2.stdout:
                    failures.append(f"{tag}: the second run did not say it resumed from step {k_steps}")
                code, last = diff(os.path.join(a, ckpt_name(n_steps)), os.path.join(b, ckpt_name(n_steps)))
                if code != 0 or last != "equal":
                    failures.append(f"{tag}: {n_steps} steps in one run and {k_steps} + resume differ ({last})")
                else:
                    print(f"{tag}: {n_steps} steps == {k_steps} steps + resume to {n_steps}: bitwise equal")
                # The same comparison must be able to fail.
                code, last = diff(os.path.join(a, ckpt_name(n_steps)), os.path.join(b, ckpt_name(k_steps)))
                if code != 1 or last != "differ":
                    failures.append(f"{tag}: hora-ckpt diff of step {n_steps} against step {k_steps} said "
                                    f"'{last}' (exit {code}), not differ")
    return failures


def crash(work):
    idx, _ = make_data(work)
    args = BASE + ["--data", idx, "--checkpoint-every-steps", "3"]
    ref = os.path.join(work, "ref")
    if mpirun(2, args + ["--checkpoint-dir", ref, "--steps", "9"]).returncode:
        return ["the uninterrupted run failed"]

    def case(point):
        failures = []
        d = os.path.join(work, point)
        p = mpirun(2, args + ["--checkpoint-dir", d, "--steps", "9"], env={"HORA_CKPT_CRASH": f"{point}@6"})
        say(f"crash {point}: mpirun ended after {p.seconds:.1f} s with {p.returncode}")
        if p.returncode == 0:
            return [f"{point}: the run with rank 0 killed exited 0"]
        if p.seconds > 60:
            failures.append(f"{point}: the job took {p.seconds:.0f} s to end after rank 0 died")
        names = sorted(os.listdir(d))
        say(f"{point}: left {names}, latest -> {latest(d)}")
        want_latest = ckpt_name(6) if point == "after-latest" else ckpt_name(3)
        if latest(d) != want_latest:
            failures.append(f"{point}: latest names {latest(d)}, expected {want_latest}")
        temps = [n for n in names if ".tmp." in n]
        if point == "mid-data" and not temps:
            failures.append("mid-data: no partial temp file was left (the crash point did not happen)")
        if point == "before-temp" and ckpt_name(6) in names:
            failures.append("before-temp: step 6's checkpoint exists")
        if point in ("before-latest", "after-latest") and ckpt_name(6) not in names:
            failures.append(f"{point}: step 6's checkpoint is missing after its rename")
        for n in names:
            if n.endswith(".hckpt") and run([HORA_CKPT, "verify", os.path.join(d, n)]).returncode != 0:
                failures.append(f"{point}: {n} left in the directory does not verify")
        r = mpirun(2, args + ["--checkpoint-dir", d, "--steps", "9", "--resume", "auto"])
        if r.returncode != 0:
            return failures + [f"{point}: --resume auto failed"]
        if temps and "left by an interrupted checkpoint" not in r.stdout:
            failures.append(f"{point}: the leftover temp file was not reported as removed")
        if any(".tmp." in n for n in os.listdir(d)):
            failures.append(f"{point}: a temp file is still there after the resumed run")
        code, last = diff(os.path.join(ref, ckpt_name(9)), os.path.join(d, ckpt_name(9)))
        if code != 0 or last != "equal":
            failures.append(f"{point}: the resumed run's final checkpoint differs from the uninterrupted one")
        else:
            say(f"crash {point}: resumed from {want_latest}, final weights bitwise equal to the uninterrupted run")
        return failures

    return in_parallel(case, ("before-temp", "mid-data", "before-latest", "after-latest"))


def corrupt(work):
    idx, _ = make_data(work)
    failures = []
    args = BASE + ["--data", idx, "--checkpoint-every-steps", "3"]
    good = os.path.join(work, "good")
    if mpirun(1, args + ["--checkpoint-dir", good, "--steps", "6"]).returncode:
        return ["the run writing two checkpoints failed"]
    newest = ckpt_name(6)
    secs = sections(os.path.join(good, newest))
    if sorted(secs) != ["bn_stats", "model", "momentum", "params", "run_state"]:
        failures.append(f"sections are {sorted(secs)}")
    cases = [("header", 20, "header")] + [(n, off + size // 2, f"section '{n}'") for n, (off, size) in secs.items()]
    size = os.path.getsize(os.path.join(good, newest))
    cases.append(("truncated", None, "truncated"))

    def case(c):
        what, offset, needle = c
        failures = []
        d = os.path.join(work, f"bad-{what}")
        shutil.copytree(good, d)
        path = os.path.join(d, newest)
        if offset is None:
            os.truncate(path, size - 100)
        else:
            flip(path, offset)
        v = run([HORA_CKPT, "verify", path])
        if v.returncode == 0 or needle not in v.stdout:
            failures.append(f"{what}: hora-ckpt verify did not reject it naming {needle}")
        # Named explicitly, the damaged file stops the run.
        r = mpirun(2, args + ["--checkpoint-dir", d, "--steps", "7", "--resume", path])
        if r.returncode == 0 or needle not in r.stdout:
            failures.append(f"{what}: --resume {newest} did not stop the run naming {needle}")
        # auto reports it and takes the one before (and then rewrites step 6).
        r = mpirun(1, args + ["--checkpoint-dir", d, "--steps", "7", "--resume", "auto"])
        if r.returncode != 0:
            return failures + [f"{what}: --resume auto failed instead of using the previous checkpoint"]
        if path not in r.stdout or needle not in r.stdout:
            failures.append(f"{what}: the damaged checkpoint was not reported with its file and {needle}")
        if f"resuming from {os.path.join(d, ckpt_name(3))}" not in r.stdout:
            failures.append(f"{what}: the previous checkpoint (step 3) was not used")
        if offset is not None and not re.search(r"offset \d+", r.stdout):
            failures.append(f"{what}: the report names no offset")
        return failures

    return failures + in_parallel(case, cases)


def mismatch(work):
    idx, _ = make_data(work)
    d = os.path.join(work, "c")
    args = BASE + ["--data", idx]
    if mpirun(1, args + ["--checkpoint-dir", d, "--steps", "2"]).returncode:
        return ["the run writing the checkpoint failed"]

    def case(c):
        np_, extra, needles = c
        # Its own copy of the directory: the refused runs side by side never share one.
        dc = os.path.join(work, "c-" + "".join(ch for ch in "".join(extra) if ch.isalnum()) + f"-np{np_}")
        shutil.copytree(d, dc)
        r = mpirun(np_, args + ["--checkpoint-dir", dc, "--steps", "4", "--resume", "auto"] + extra)
        failures = []
        if r.returncode == 0:
            failures.append(f"np {np_} {' '.join(extra)}: the resume was not refused (exit 0)")
        failures += [f"np {np_} {' '.join(extra)}: no '{n}' in the output" for n in needles if n not in r.stdout]
        # The reason is printed once, by rank 0: the others end with it unprinted (their aborts carry
        # rank 0's words and print nothing).
        said = len(re.findall(r"^hora-train: cannot resume", r.stdout, re.M))
        if said != 1:
            failures.append(f"np {np_} {' '.join(extra)}: the reason was printed {said} times, not once")
        if "hora_abort" in r.stdout:
            failures.append(f"np {np_} {' '.join(extra)}: an abort printed the error again")
        if "main_resume_apply" in r.stdout or "main_resume_read" in r.stdout:
            failures.append(f"np {np_} {' '.join(extra)}: a bare 'main_resume_...(r) failed' line was printed")
        return failures

    ck = f"cannot resume from {os.path.join(work, 'c-')}"
    return in_parallel(case, [
        (2, ["--model", "resnet20"], [ck, "the checkpoint has arch resnet8, this run asks for resnet20: "
                                          "--model resnet8 continues it"]),
        (2, ["--classes", "12"], ["the checkpoint has classes 10, this run asks for 12: --classes 10 continues it"]),
        (2, ["--precision", "bf16"], ["the checkpoint has compute dtype f32 (precision fp32), this run asks for bf16: "
                                      "--precision fp32, or --precision auto (which keeps the checkpoint's), "
                                      "continues it"]),
        (2, ["--width", "8"], ["the checkpoint has width 16, this run asks for 8: --width 16 continues it"]),
        # The world-size rule: the checkpoint's global batch 16 (1 rank x 16) does not divide over 3 ranks.
        (3, ["--keep-global-batch"], ["cannot resume with --keep-global-batch: the checkpoint has global batch 16 "
                                      "(1 ranks x 16), which this run's 3 ranks do not divide"])])


def full_disk(work):
    idx, _ = make_data(work)
    mnt = os.path.join(work, "small")
    os.mkdir(mnt)
    # resnet8's checkpoint is ~630 KB: 1 MB holds one.
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt]).returncode != 0:
        return ["cannot mount a 1 MB tmpfs (this test needs root, as CI has)"]
    failures = []
    try:
        d = os.path.join(mnt, "ckpt")
        r = mpirun(2, BASE + ["--data", idx, "--checkpoint-dir", d, "--checkpoint-every-steps", "3",
                              "--steps", "9"], timeout=120)
        print(f"full disk: the job ended after {r.seconds:.1f} s with {r.returncode}")
        if r.returncode == 0:
            failures.append("the run exited 0 although its second checkpoint could not be written")
        if "No space left on device" not in r.stdout:
            failures.append("no 'No space left on device' in the output")
        if r.seconds > 60:
            failures.append(f"the job took {r.seconds:.0f} s to end")
        names = sorted(os.listdir(d))
        print(f"full disk: left {names}")
        if any(".tmp." in n for n in names):
            failures.append(f"a temp file was left: {names}")
        if ckpt_name(3) not in names or latest(d) != ckpt_name(3):
            failures.append(f"the first checkpoint is not there or latest does not name it: {names}")
        elif run([HORA_CKPT, "verify", os.path.join(d, ckpt_name(3))]).returncode != 0:
            failures.append("the first checkpoint does not verify")
    finally:
        subprocess.run(["umount", mnt])
    return failures


def reshard(work):
    idx, _ = make_data(work)
    failures = []
    d = os.path.join(work, "np2")
    args = BASE + ["--data", idx]
    # 2 ranks x 16: 8 steps per epoch; stop after 3 (96 samples of epoch 1 trained on).
    if mpirun(2, args + ["--checkpoint-dir", d, "--steps", "3"]).returncode:
        return ["the 2-rank run failed"]
    src = os.path.join(d, ckpt_name(3))
    for np_, extra, global_batch, lr in [(1, [], 16, "0.05 -> 0.025"), (3, [], 48, "0.05 -> 0.075"),
                                         (1, ["--keep-global-batch"], 32, "0.05 -> 0.05")]:
        out = os.path.join(work, f"np{np_}{'-kg' if extra else ''}")
        r = mpirun(np_, args + ["--checkpoint-dir", out, "--resume", src, "--epochs", "1"] + extra)
        if r.returncode != 0:
            failures.append(f"np {np_} {extra}: the resumed run failed")
            continue
        want = f"global {global_batch}) from a checkpoint of 2 x 16 (global 32)"
        if want not in r.stdout or f"peak lr {lr}" not in r.stdout:
            failures.append(f"np {np_} {extra}: the progress line does not say '{want}' and 'peak lr {lr}'")
        if "continues after its first 96 samples" not in r.stdout:
            failures.append(f"np {np_} {extra}: the epoch did not continue after the 96 samples trained on")
        # The rest of epoch 1: (256 - 96) samples over np_ ranks of the new batch.
        per_rank_batch = global_batch // np_
        steps_left = -(-((TRAIN_SAMPLES - 96) // np_) // per_rank_batch)
        m = re.search(r"training: (\d+) steps", r.stdout)
        first = re.search(r"at step (\d+)", r.stdout)
        if not m or not first or int(m.group(1)) - int(first.group(1)) != steps_left:
            failures.append(f"np {np_} {extra}: expected {steps_left} more steps to finish the epoch")
    return failures


if __name__ == "__main__":
    mode, HORA_TRAIN, HORA_CKPT, HORA_MKRECORD = sys.argv[1:5]
    modes = {"exact": exact, "crash": crash, "corrupt": corrupt, "mismatch": mismatch, "full-disk": full_disk,
             "reshard": reshard}
    if not fmnist_small.available():
        print(f"FAIL: {fmnist_small.FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as work:
        failures = modes[mode](work)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
