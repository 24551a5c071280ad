#!/usr/bin/env python3
"""Preemption of hora-train under a real mpirun -np 2 (trainer/README.md,
"Preemption"): a clean stop at a step boundary, a checkpoint, exit 0 on every
rank, and --resume auto continuing to the uninterrupted run's exact result.

usage: test_preempt.py MODE HORA_TRAIN HORA_CKPT
  sigterm   SIGTERM to rank 1's process (its pid from a file its wrapper
            writes) after rank 0 has printed step 4 of 40
  file      HORA_PREEMPT_FILE created after step 4 (every rank looks for it)
In both: mpirun exits 0; every rank prints "preempted at step K; resume with
--resume auto" with the same K, K at or after the step seen and before the
end; rank 0 names the rank and the cause; the directory's `latest` names the
checkpoint of step K, which hora-ckpt verify accepts; --resume auto to step
40 resumes from it and ends on a checkpoint bitwise equal (hora-ckpt diff) to
the one of an uninterrupted 40-step run. The time from the request to
mpirun's exit is printed. `file` also checks the refusals: --preempt on
without --checkpoint-dir, and a HORA_PREEMPT_FILE whose directory does not
exist (hora_init fails naming it).
"""
import os, re, signal, subprocess, sys, tempfile, time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fmnist_small  # noqa: E402

STEPS, SEEN = 40, 4
# 8 steps per epoch at np 2: the stop falls inside an epoch, the resume crosses epoch boundaries.
BASE = ["--model", "resnet8", "--batch", "16", "--threads", "1", "--overlap", "off", "--precision", "fp32",
        "--progress", "lines", "--print-every", "1", "--lr", "0.4", "--warmup-epochs", "0.5", "--epochs", "6",
        "--steps", str(STEPS)]
# The rank's shell writes its pid, then becomes hora-train (exec keeps the pid).
WRAP = 'echo $$ > "$PID_DIR/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"'


def env_with(extra=None):
    e = dict(os.environ)
    # Open MPI's shared-memory BTL leaves its segments behind when a job dies: keep them out of /dev/shm.
    e["OMPI_MCA_btl_vader_backing_directory"] = tempfile.gettempdir()
    e.update(extra or {})
    return e


def mpirun_cmd(args):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "sh", "-c", WRAP, "sh", HORA_TRAIN] + args


def run(args, env=None):
    print("$", " ".join(args), flush=True)
    p = subprocess.run(mpirun_cmd(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300, env=env_with(env))
    return p


def ckpt_name(step):
    return f"ckpt-{step:010d}.hckpt"


def preempted_run(work, args, request, env=None):
    """Start the job, call request() once rank 0 printed step SEEN; returns (exit code, output, seconds from
    the request to mpirun's exit)."""
    e = env_with(dict(env or {}, PID_DIR=work))
    print("$", " ".join(args), flush=True)
    p = subprocess.Popen(mpirun_cmd(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)
    out, t_request = [], None
    deadline = time.monotonic() + 300
    for line in p.stdout:
        out.append(line)
        if t_request is None and re.match(rf"epoch \d+/\d+ step {SEEN} ", line):
            request()
            t_request = time.monotonic()
        if time.monotonic() > deadline:
            p.kill()
            break
    code = p.wait()
    seconds = time.monotonic() - t_request if t_request else float("nan")
    text = "".join(out)
    print(text, flush=True)
    return code, text, seconds, t_request is not None


def check_stop(tag, code, text, seconds, requested, directory, cause_words):
    failures = []
    if not requested:
        return [f"{tag}: rank 0 never printed step {SEEN}"]
    if code != 0:
        failures.append(f"{tag}: mpirun exited {code}, not 0")
    stops = re.findall(r"^hora-train: preempted at step (\d+); resume with --resume auto$", text, flags=re.M)
    if len(stops) != 2 or len(set(stops)) != 1:
        return failures + [f"{tag}: expected the preempted line once per rank with one step, got {stops}"]
    k = int(stops[0])
    if not SEEN <= k < STEPS:
        failures.append(f"{tag}: stopped at step {k}, outside [{SEEN}, {STEPS})")
    if not re.search(rf"^hora-train: stop asked by rank {cause_words}; checkpoint: step {k} in ", text, flags=re.M):
        failures.append(f"{tag}: rank 0 did not say 'stop asked by rank {cause_words}; checkpoint: step {k} ...'")
    if re.search(r"^final test top-1", text, flags=re.M):
        failures.append(f"{tag}: the stopped run went on to its final evaluation")
    latest = open(os.path.join(directory, "latest")).read().strip()
    if latest != ckpt_name(k):
        failures.append(f"{tag}: latest names {latest}, not {ckpt_name(k)}")
    v = subprocess.run([HORA_CKPT, "verify", os.path.join(directory, ckpt_name(k))], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if v.returncode != 0:
        failures.append(f"{tag}: hora-ckpt verify of step {k}'s checkpoint failed: {v.stdout}")
    print(f"{tag}: asked after step {SEEN} was printed, every rank stopped at step {k}; "
          f"{seconds:.2f} s from the request to mpirun's exit", flush=True)
    return failures


def resume_equal(tag, args, directory, reference, k, env=None):
    failures = []
    p = run(args + ["--checkpoint-dir", directory, "--resume", "auto"], env=env)
    print(p.stdout, flush=True)
    if p.returncode != 0:
        return [f"{tag}: the resumed run exited {p.returncode}"]
    if f"resuming from {os.path.join(directory, ckpt_name(k))}" not in p.stdout:
        failures.append(f"{tag}: the resumed run did not resume from step {k}'s checkpoint")
    d = subprocess.run([HORA_CKPT, "diff", os.path.join(reference, ckpt_name(STEPS)),
                        os.path.join(directory, ckpt_name(STEPS))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    last = d.stdout.strip().splitlines()[-1] if d.stdout.strip() else ""
    if d.returncode != 0 or last != "equal":
        failures.append(f"{tag}: {STEPS} steps in one run and a stop at {k} + resume differ ({last})")
    else:
        print(f"{tag}: stopped at {k} + --resume auto to {STEPS} == {STEPS} steps in one run: bitwise equal",
              flush=True)
    return failures


def reference(work, args):
    ref = os.path.join(work, "ref")
    p = run(args + ["--checkpoint-dir", ref, "--preempt", "off"], env={"PID_DIR": work})
    if p.returncode != 0:
        print(p.stdout)
        raise SystemExit("FAIL: the uninterrupted run failed")
    return ref


def sigterm(work, args):
    ref = reference(work, args)
    d = os.path.join(work, "sigterm")

    def request():
        with open(os.path.join(work, "pid.1")) as f:
            os.kill(int(f.read()), signal.SIGTERM)

    code, text, seconds, requested = preempted_run(work, args + ["--checkpoint-dir", d], request)
    failures = check_stop("sigterm", code, text, seconds, requested, d, r"1 \(SIGTERM\)")
    if failures:
        return failures
    k = int(re.search(r"preempted at step (\d+)", text).group(1))
    return resume_equal("sigterm", args, d, ref, k, env={"PID_DIR": work})


def file(work, args):
    failures = []
    # The refusals first (no job runs): --preempt on needs a directory to save into ...
    p = subprocess.run([HORA_TRAIN, "--synthetic", "--preempt", "on"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env_with(), timeout=60)
    if p.returncode != 2 or "--preempt on writes its checkpoint into --checkpoint-dir" not in p.stdout:
        failures.append(f"--preempt on without --checkpoint-dir: exit {p.returncode}, output {p.stdout!r}")
    # ... and a file that could never appear is a bad setting.
    bad = os.path.join(work, "no-such-dir", "stop")
    p = run(args + ["--checkpoint-dir", os.path.join(work, "bad")], env={"PID_DIR": work, "HORA_PREEMPT_FILE": bad})
    if p.returncode == 0 or f"bad value for HORA_PREEMPT_FILE: '{bad}'" not in p.stdout:
        print(p.stdout)
        failures.append(f"HORA_PREEMPT_FILE={bad}: exit {p.returncode}, without the message naming it")

    ref = reference(work, args)
    d, stop = os.path.join(work, "file"), os.path.join(work, "stop-now")

    def request():
        open(stop, "w").close()

    code, text, seconds, requested = preempted_run(work, args + ["--checkpoint-dir", d], request,
                                                   env={"HORA_PREEMPT_FILE": stop})
    # Every rank looks: the lowest that saw it is named (rank 1 when the file came between the two ranks' looks).
    f = check_stop("file", code, text, seconds, requested, d, r"[01] \(HORA_PREEMPT_FILE\)")
    if f:
        return failures + f
    k = int(re.search(r"preempted at step (\d+)", text).group(1))
    os.unlink(stop)  # still there, the resumed run would stop again at its first step
    return failures + resume_equal("file", args, d, ref, k, env={"PID_DIR": work, "HORA_PREEMPT_FILE": stop})


if __name__ == "__main__":
    mode, HORA_TRAIN, HORA_CKPT = sys.argv[1:4]
    if not fmnist_small.available():
        print(f"FAIL: {fmnist_small.FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as work:
        idx = fmnist_small.make_idx(work, 256, 256)
        failures = {"sigterm": sigterm, "file": file}[mode](work, BASE + ["--data", idx])
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
