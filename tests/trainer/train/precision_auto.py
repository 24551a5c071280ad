#!/usr/bin/env python3
"""hora-train --precision auto under a real mpirun (2 ranks, ResNet-8, synthetic).

usage: precision_auto.py HORA_TRAIN

  auto      the default (no --precision): rank 0 prints one 'precision auto:'
            line and logs one "precision" record; the choice is fp32 or a
            measured candidate, the fastest of the medians it logged; the
            start line's compute dtype is the choice's (a low precision the
            backend could not compute natively would have fallen back or
            failed); the checkpoint's run_state holds the choice
  resume    --resume auto from that checkpoint keeps the choice without
            measuring again (source "checkpoint"), and says so
  explicit  --precision CHOICE (auto's choice) measures nothing: no 'precision
            auto' line, no "precision" record; and it trains exactly as the auto
            run did (the same loss at every step: the probe leaves no trace)

  old       a bf16 checkpoint written before the run state had its precision
            lines (the lines cut out, the file rewritten as CHECKPOINT.md says)
            resumes with --precision auto in bf16, as its model section's dtypes
            say (skipped where the backend has no native bf16)

That every rank takes the same choice, and the fastest one when a precision is
made slower on purpose, is test_precision_auto's (the measurement itself).
"""
import glob, json, os, re, subprocess, sys, tempfile, time  # noqa: E401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt"))
from ckpt_tool import read_ckpt, write_ckpt  # noqa: E402

COMPUTE = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}


def mpirun(args, timeout=300):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", HORA_TRAIN] + args
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    p.seconds = time.monotonic() - t0
    print(p.stdout)
    return p


def records(path, kind):
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if r["type"] == kind]


def start_compute(out):
    m = re.search(r"^hora-train: resnet8, .* compute (\w+), gradients", out, re.M)
    return m.group(1) if m else None


def main():
    fails = []
    base = ["--model", "resnet8", "--synthetic", "--image", "1x16x16", "--batch", "16", "--steps-per-epoch", "8",
            "--threads", "1", "--overlap", "off", "--progress", "lines", "--print-every", "1"]
    with tempfile.TemporaryDirectory() as d:
        ckpt, log = os.path.join(d, "ckpt"), os.path.join(d, "auto.jsonl")
        a = mpirun(base + ["--steps", "4", "--checkpoint-dir", ckpt, "--checkpoint-every-steps", "4", "--log", log])
        if a.returncode:
            return ["the auto run failed"]
        lines = re.findall(r"^hora-train: precision auto: (\w+)(.*)$", a.stdout, re.M)
        recs = records(log, "precision")
        if len(lines) != 1 or len(recs) != 1:
            return [f"auto: {len(lines)} 'precision auto' lines and {len(recs)} log records, want 1 and 1"]
        choice, rec = lines[0][0], recs[0]
        ms = rec.get("ms_per_step", {})
        print(f"auto chose {choice}: {ms}, left out: {rec.get('refused')}")
        if rec["precision"] != choice or rec.get("auto") is not True:
            fails.append(f"auto: the line says {choice}, the log {rec}")
        if rec["source"] == "measured":
            if "fp32" not in ms or choice not in ms or len(ms) < 2:
                fails.append(f"auto: measured {sorted(ms)}: fp32 and the choice must be among them")
            elif any(v <= 0 for v in ms.values()) or ms[choice] > min(ms.values()):
                fails.append(f"auto: chose {choice} but the medians are {ms}")
            elif not re.search(r"ms/step", lines[0][1]):
                fails.append("auto: the line does not give the timings")
        elif rec["source"] == "only-candidate":
            if choice != "fp32" or ms or len(rec.get("refused", {})) != 2:
                fails.append(f"auto: fp32 alone, but {rec}")
        else:
            fails.append(f"auto: source {rec['source']}")
        if choice in rec.get("refused", {}):
            fails.append(f"auto: chose {choice}, which it also left out")
        if start_compute(a.stdout) != COMPUTE.get(choice):
            fails.append(f"auto: chose {choice}, but the model computes in {start_compute(a.stdout)}")
        files = sorted(glob.glob(os.path.join(ckpt, "*.hckpt")))
        state = open(files[-1], "rb").read() if files else b""
        if f"\nprecision {choice}\nprecision_measured {int(rec['source'] == 'measured')}\n".encode() not in state:
            fails.append(f"auto: the checkpoint's run_state does not hold 'precision {choice}'")

        # resume: the choice is kept, nothing measured again.
        log2 = os.path.join(d, "resume.jsonl")
        b = mpirun(base + ["--steps", "6", "--checkpoint-dir", ckpt, "--resume", "auto", "--log", log2])
        recs = records(log2, "precision") if os.path.exists(log2) else []
        if b.returncode:
            fails.append("resume: the run failed")
        elif not re.search(rf"^hora-train: precision auto: {choice}, as the run that wrote the checkpoint chose it",
                           b.stdout, re.M):
            fails.append(f"resume: no 'precision auto: {choice}, as the run that wrote the checkpoint chose it'")
        elif len(recs) != 1 or recs[0]["source"] != "checkpoint" or recs[0]["precision"] != choice:
            fails.append(f"resume: log records {recs}")
        elif start_compute(b.stdout) != COMPUTE[choice]:
            fails.append(f"resume: computes in {start_compute(b.stdout)}, not {choice}")

        # explicit: no measurement, the same training.
        log3 = os.path.join(d, "explicit.jsonl")
        c = mpirun(base + ["--steps", "4", "--precision", choice, "--log", log3])
        want = [r["loss"] for r in records(log, "train")]
        if c.returncode:
            fails.append("explicit: the run failed")
        elif "precision auto" in c.stdout or records(log3, "precision"):
            fails.append(f"explicit --precision {choice} still measured")
        elif start_compute(c.stdout) != COMPUTE[choice]:
            fails.append(f"explicit: computes in {start_compute(c.stdout)}")
        elif len(want) != 4 or [r["loss"] for r in records(log3, "train")] != want:
            fails.append(f"explicit: losses {[r['loss'] for r in records(log3, 'train')]}, the auto run's {want}")

        # old: a checkpoint without the precision lines.
        if "bf16" not in rec.get("refused", {}):
            old_dir, old_log = os.path.join(d, "old"), os.path.join(d, "old.jsonl")
            e = mpirun(base + ["--steps", "2", "--precision", "bf16", "--checkpoint-dir", old_dir])
            files = sorted(glob.glob(os.path.join(old_dir, "*.hckpt")))
            if e.returncode or not files:
                fails.append("old: the bf16 run failed")
            else:
                s, order = read_ckpt(files[-1])
                text = s["run_state"].decode()
                cut = "".join(line for line in text.splitlines(True) if not line.startswith("precision"))
                if cut == text:
                    fails.append("old: the bf16 checkpoint has no precision lines to cut")
                s["run_state"] = cut.encode()
                path = os.path.join(d, "old.hckpt")
                write_ckpt(path, [(k, s[k]) for k in order])
                g = mpirun(base + ["--steps", "4", "--checkpoint-dir", os.path.join(d, "old2"), "--resume", path,
                                   "--log", old_log])
                if g.returncode:
                    fails.append("old: resuming a checkpoint without precision lines failed")
                elif not re.search(r"^hora-train: precision auto: bf16, as the run that wrote the checkpoint",
                                   g.stdout, re.M) or start_compute(g.stdout) != "bf16":
                    fails.append("old: the resume did not keep bf16 from the model section")
    return fails


if __name__ == "__main__":
    HORA_TRAIN = sys.argv[1]
    fails = main()
    for f in fails:
        print("FAIL:", f)
    print("precision_auto:", "FAIL" if fails else "PASS")
    sys.exit(1 if fails else 0)
