#!/usr/bin/env python3
"""A checkpoint crosses backends: written on the cpu backend, resumed on
another (cuda), checkpointed there, resumed on cpu again; compared with the
same steps all on cpu within the tolerance trainer/ckpt/CHECKPOINT.md states
("Across backends").

usage: ckpt_backends.py OTHER HORA_TRAIN
  OTHER cuda  the middle segment on --backend cuda (NVIDIA_TF32_OVERRIDE=0:
              fp32 arithmetic, see CHECKPOINT.md); exit 77 (skipped) when
              hora-train lacks the cuda (or the cpu) backend or finds no
              usable CUDA device
  OTHER isa   the middle segment on the cpu backend with oneDNN held to AVX2
              (ONEDNN_MAX_CPU_ISA=AVX2: other kernels, 8-channel blocks) and
              2 threads: another summation order on any x86 CPU, which
              checks this script's comparisons in CI

The run (np 2, resnet8 on --synthetic 3x32x32 images, the same on every
backend, 8 steps an epoch, batch 16 per rank, fp32):
  A   steps 1-9 on cpu, checkpoints at 3, 6 and 9 (the reference);
  B   A's step-3 checkpoint (cpu-written) resumed on OTHER to step 6, which
      writes B6 there; B6 resumed on cpu to step 9 (B9);
  Z   A's step-3 checkpoint resumed on OTHER with --lr 0 for one step: its
      params section must be A3's bit for bit (the arenas go to the device
      and back unchanged).
Checks: B6 against A6 and B9 against A9, for params, momentum and BN
statistics: ||B - A|| / ||A - A3|| (the difference relative to how far the
steps since the common checkpoint moved the arena) within TOL_ARENA, and
every arena moved since step 3 on both; the loss of every step 4-9 within TOL_LOSS of A's
(relative); the runs say they resumed from the right files.
"""
import array, json, math, os, struct, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from test_checkpoint import run  # noqa: E402  (prints the command and its output, times it)

# The tolerances (derivation in trainer/ckpt/CHECKPOINT.md, "Across backends").
TOL_ARENA = {"params": 1e-2, "momentum": 1e-2, "bn_stats": 1e-3}
TOL_LOSS = 1e-4

NP = 2
BASE = ["--model", "resnet8", "--synthetic", "--steps-per-epoch", "8", "--batch", "16", "--threads", "1", "--overlap", "off", "--progress", "lines",
        "--print-every", "1", "--lr", "0.1", "--warmup-epochs", "0.5", "--epochs", "3", "--precision", "fp32",
        "--checkpoint-every-steps", "3", "--keep-checkpoints", "10"]
OTHERS = {
    "cuda": (["--backend", "cuda"], {"NVIDIA_TF32_OVERRIDE": "0"}),
    "isa": (["--backend", "cpu", "--threads", "2"], {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
}
# What hora-train prints when it cannot use a backend here: not built in, or
# (cuda) no device it can use.
NO_BACKEND = ("was built without the", "no usable CUDA device")


def mpirun(args, env=None):
    return run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(NP), HORA_TRAIN] + args, env=env)


def probe(backend):
    """None when hora-train runs a step on backend, else why not: ("skip", line) or ("fail", why)."""
    p = run(["mpirun", "-np", "1", HORA_TRAIN, "--backend", backend, "--synthetic", "--model", "resnet8", "--width", "8", "--image",
             "1x8x8", "--batch", "2", "--steps", "1", "--steps-per-epoch", "1", "--epochs", "1", "--threads", "1",
             "--progress", "lines"], timeout=120)
    if p.returncode == 0:
        return None
    for needle in NO_BACKEND:
        for line in p.stdout.splitlines():
            if needle in line:
                return ("skip", line.strip())
    return ("fail", f"hora-train --backend {backend} failed (exit {p.returncode}), not for want of the backend "
                    "or a device")


def ckpt_name(step):
    return f"ckpt-{step:010d}.hckpt"


def read_ckpt(path):
    """{section name: bytes} from the file's table (trainer/ckpt/CHECKPOINT.md)."""
    with open(path, "rb") as f:
        blob = f.read()
    count = struct.unpack_from("<I", blob, 12)[0]
    table_offset = struct.unpack_from("<Q", blob, 24)[0]
    out = {}
    for i in range(count):
        e = blob[table_offset + 64 * i: table_offset + 64 * i + 64]
        name = e[:24].split(b"\0")[0].decode()
        offset, size = struct.unpack_from("<QQ", e, 24)
        out[name] = blob[offset: offset + size]
    return out


def floats(blob):
    a = array.array("f")
    a.frombytes(blob)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def tensors(model_text):
    """[(name, offset, count)] of the params arena, from the model section."""
    out = []
    for line in model_text.decode().splitlines():
        w = line.split()
        if w and w[0] == "param":
            out.append((w[1], int(w[3]), int(w[4])))
    return out


def norm_diff(a, b, lo=0, hi=None):
    hi = len(a) if hi is None else hi
    return math.sqrt(sum((a[i] - b[i]) ** 2 for i in range(lo, hi)))


def compare(tag, start, ref, got, failures):
    """got against ref, both steps after start (three checkpoints' sections)."""
    for section in ("params", "momentum", "bn_stats"):
        s, r, g = floats(start[section]), floats(ref[section]), floats(got[section])
        if not (len(s) == len(r) == len(g)):
            failures.append(f"{tag} {section}: sizes {len(s)}, {len(r)}, {len(g)}")
            continue
        if any(not math.isfinite(x) for x in g):
            failures.append(f"{tag} {section}: not finite")
            continue
        moved, moved_got, off = norm_diff(r, s), norm_diff(g, s), norm_diff(g, r)
        rel = off / moved if moved else (0.0 if off == 0 else math.inf)
        worst = ""
        if section == "params":
            per = []
            for name, o, n in tensors(ref["model"]):
                m = norm_diff(r, s, o, o + n)
                if m:
                    per.append((norm_diff(g, r, o, o + n) / m, name))
            if per:
                w = max(per)
                worst = f"; worst tensor {w[1]} {w[0]:.2e}"
        tol = TOL_ARENA[section]
        ok = rel <= tol
        print(f"{tag} {section}: ||B - A|| / ||A - A3|| = {off:.3e} / {moved:.3e} = {rel:.2e} "
              f"(tolerance {tol:g}){worst} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{tag} {section}: relative difference {rel:.2e} > {tol:g}")
        if not moved or not moved_got:
            failures.append(f"{tag} {section}: did not change since step 3 (A {moved:.3e}, B {moved_got:.3e})")


def losses(log):
    """{step: loss} of a --log file (JSON lines; a resumed run appends)."""
    out = {}
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "train":
                out[e["step"]] = e["loss"]
    return out


def across(work, other):
    other_args, other_env = OTHERS[other]
    base = BASE
    failures = []
    a, b, z = (os.path.join(work, n) for n in ("A", "B", "Z"))
    a_log, b_log = os.path.join(work, "A.jsonl"), os.path.join(work, "B.jsonl")
    if mpirun(base + ["--checkpoint-dir", a, "--steps", "9", "--log", a_log]).returncode:
        return ["the all-cpu run failed"]
    a3 = os.path.join(a, ckpt_name(3))
    # B: from the cpu-written checkpoint on the other backend to step 6 ...
    r = mpirun(base + other_args + ["--checkpoint-dir", b, "--resume", a3, "--steps", "6", "--log", b_log],
               env=other_env)
    if r.returncode:
        return [f"resuming the cpu checkpoint on {other} failed"]
    if f"resuming from {a3}" not in r.stdout:
        failures.append(f"the {other} run did not say it resumed from {a3}")
    # ... and back on cpu to step 9.
    b6 = os.path.join(b, ckpt_name(6))
    r = mpirun(base + ["--checkpoint-dir", b, "--resume", "auto", "--steps", "9", "--log", b_log])
    if r.returncode:
        return failures + [f"resuming the {other} checkpoint on cpu failed"]
    if f"resuming from {b6}" not in r.stdout:
        failures.append(f"the cpu run did not say it resumed from {b6}")
    # Z: one step at lr 0 on the other backend leaves the weights as they were.
    r = mpirun(base + other_args + ["--checkpoint-dir", z, "--resume", a3, "--steps", "4", "--lr", "0",
                                    "--checkpoint-every-steps", "1"], env=other_env)
    if r.returncode:
        failures.append(f"the lr 0 run on {other} failed")
    else:
        same = read_ckpt(a3)["params"] == read_ckpt(os.path.join(z, ckpt_name(4)))["params"]
        print(f"lr 0 on {other}: params {'bit for bit' if same else 'NOT'} those of the cpu checkpoint "
              f"{'ok' if same else 'FAIL'}")
        if not same:
            failures.append(f"a cpu checkpoint loaded on {other} and written back (lr 0) changed its params")

    start = read_ckpt(a3)
    compare(f"step 6 ({other})", start, read_ckpt(os.path.join(a, ckpt_name(6))), read_ckpt(b6), failures)
    compare("step 9 (back on cpu)", start, read_ckpt(os.path.join(a, ckpt_name(9))),
            read_ckpt(os.path.join(b, ckpt_name(9))), failures)
    la, lb = losses(a_log), losses(b_log)
    worst = 0.0
    for step in range(4, 10):
        if step not in la or step not in lb:
            failures.append(f"no loss logged for step {step}")
            continue
        rel = abs(lb[step] - la[step]) / abs(la[step])
        worst = max(worst, rel)
        print(f"step {step}: loss A {la[step]:.6f} B {lb[step]:.6f} relative difference {rel:.2e}")
    print(f"losses of steps 4-9: worst relative difference {worst:.2e} (tolerance {TOL_LOSS:g}) "
          f"{'ok' if worst <= TOL_LOSS else 'FAIL'}")
    if worst > TOL_LOSS:
        failures.append(f"loss differs by {worst:.2e} > {TOL_LOSS:g}")
    return failures


if __name__ == "__main__":
    other, HORA_TRAIN = sys.argv[1:3]
    if other not in OTHERS:
        sys.exit(f"usage: ckpt_backends.py {'|'.join(OTHERS)} HORA_TRAIN")
    # cuda: both backends must be in this hora-train (a GPU-only build has
    # no cpu backend) and find what they need, else the test is skipped.
    for backend in (["cuda", "cpu"] if other == "cuda" else []):
        why = probe(backend)
        if why and why[0] == "skip":
            print(f"SKIP ckpt_backends.py {other}: {why[1]}")
            sys.exit(77)
        if why:
            print("FAIL:", why[1])
            sys.exit(1)
    with tempfile.TemporaryDirectory() as work:
        failures = across(work, other)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
