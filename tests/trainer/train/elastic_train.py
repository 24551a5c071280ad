#!/usr/bin/env python3
"""hora-train --elastic end to end (trainer/README.md, "Elastic training"):
real processes under hora-run --elastic on one host, real SIGKILLs.

usage: elastic_train.py MODE HORA_TRAIN HORA_RUN HORA_CKPT

  refuse     the flags' refusals (exit 2: --min-ranks or --commit-every-steps
             without --elastic, --min-ranks 2 without --checkpoint-dir), and
             --elastic in a world that cannot re-form: under mpirun -np 2 and
             under hora-run without --elastic, every rank ends non-zero with
             the message naming hora-run --elastic
  lost       hora-run --nproc-per-node 3 --elastic, a commit every 3 steps;
             worker 0.2 SIGKILLed once rank 0 printed step SEEN: hora-run
             exits 0, rank 0 prints `world 3 -> 2 at step K (rank 2 lost: ...
             killed by signal 9 ...)` with K a commit (a multiple of 3) no more
             than 3 steps before the last step printed (a step is printed
             before its all-reduce is collected), every step after K is
             printed once, the run ends at its planned step, and its final
             checkpoint is bitwise the one of a 3-rank run to K resumed on 2
             ranks (mpirun; --keep-global-batch, --reproducible)
  lost-host  2 hosts x 2 workers (two hora-runs on loopback), a commit every
             2 steps; host 1's hora-run SIGKILLed (its workers die with it)
             once rank 0 printed a step drawn from a printed seed: `world 4 ->
             2 at step K (ranks 2, 3 lost: ... host 1 lost ...)`, the same
             checks as lost, and the final checkpoint bitwise a 4-rank run to K
             resumed on 2 ranks (the loss curve goes on from the commit);
             netns-lost-host: the same across two network namespaces of
             tools/netns-cluster (tests/env/netns-run's driver form:
             elastic_train.py mpirun HORA_TRAIN netns-lost-host ...)
  newcomer   2 workers under one hora-run, a second hora-run with 1 worker
             started once step SEEN is printed: `world 2 -> 3 at step K (hosts
             joined)`, both hora-runs exit 0, and the final checkpoint is
             bitwise a 2-rank run to K resumed on 3 ranks
  min-ranks  2 workers, --min-ranks 2: worker 0.1 SIGKILLed; the survivor
             writes the checkpoint of the commit it continues from, says
             `below --min-ranks 2`, and hora-run exits 1; that checkpoint
             verifies and --resume auto on 2 ranks continues from it

The time from the kill to the first step of the re-formed world is printed.
"""
import os, random, re, signal, subprocess, sys, tempfile, time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fmnist_small  # noqa: E402
from job import free_port  # noqa: E402

SEEN = 5
BASE = ["--model", "resnet8", "--batch", "16", "--threads", "1", "--overlap", "off", "--precision", "fp32",
        "--progress", "lines", "--print-every", "1", "--epochs", "3", "--reproducible"]
# The worker's shell writes its pid under its worker id, then becomes hora-train (exec keeps the pid).
WRAP = 'echo $$ > "$PID_DIR/pid.$HORA_WORKER_ID"; exec "$@"'
STEP = re.compile(r"^epoch \d+/\d+ step (\d+) ")


def env_with(extra=None):
    e = dict(os.environ)
    e["OMPI_MCA_btl_vader_backing_directory"] = tempfile.gettempdir()
    e.update(extra or {})
    return e


def hora_run_cmd(nproc, args, extra=()):
    return [HORA_RUN, "--nproc-per-node", str(nproc), "--elastic", "--max-restarts", "100", *extra, "sh", "-c", WRAP,
            "sh", HORA_TRAIN, "--elastic"] + args


class Job:
    """A hora-run whose output is read line by line, each with its time."""

    def __init__(self, cmd, env):
        print("$", " ".join(cmd), flush=True)
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []  # (time, line)

    def until(self, pattern, deadline):
        for line in self.p.stdout:
            self.lines.append((time.monotonic(), line))
            if re.search(pattern, line) or time.monotonic() > deadline:
                return True
        return False

    def finish(self, timeout=180):
        for line in self.p.stdout:
            self.lines.append((time.monotonic(), line))
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            code = "timeout"
        text = "".join(line for _, line in self.lines)
        print(text, flush=True)
        return code, text


def run(cmd, env=None, timeout=300):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=env_with(env))
    return p


def mpirun(np, args):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np), HORA_TRAIN] + args


def kill_worker(work, worker):
    with open(os.path.join(work, "pid." + worker)) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    return time.monotonic()


def steps_after(job, t):
    return [(tt, int(m.group(1))) for tt, line in job.lines if tt >= t and (m := STEP.match(line))]


def reference(work, tag, np0, k, np1, args, end_args):
    """np0 ranks to step k with a checkpoint, then --resume auto on np1 ranks: the final checkpoint's path."""
    d = os.path.join(work, "ref-" + tag)
    p = run(mpirun(np0, args + ["--steps", str(k), "--checkpoint-dir", d]))
    if p.returncode != 0:
        print(p.stdout)
        return None
    p = run(mpirun(np1, args + end_args + ["--checkpoint-dir", d, "--resume", "auto"]))
    print("\n".join(line for line in p.stdout.splitlines() if "resum" in line or line.startswith("training:")))
    return d if p.returncode == 0 else None


def same_as_reference(work, tag, np0, k, np1, args, end_args, d, steps):
    """The elastic run's final checkpoint (in d) bitwise that of np0 ranks to
    step k, then --resume auto on np1 ranks to steps: [] or the failure."""
    ref = reference(work, tag, np0, k, np1, args, end_args)
    if not ref:
        return ["the reference runs failed"]
    return diff_equal(tag, ckpt(ref, steps), ckpt(d, steps))


def diff_equal(tag, a, b):
    d = subprocess.run([HORA_CKPT, "diff", a, b], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = d.stdout.strip().splitlines()[-1] if d.stdout.strip() else ""
    if d.returncode != 0 or last != "equal":
        print(d.stdout)
        return [f"{tag}: the elastic run's final checkpoint and the reference's differ ({last})"]
    print(f"{tag}: the elastic run's final checkpoint is bitwise the reference's", flush=True)
    return []


def ckpt(d, step):
    return os.path.join(d, f"ckpt-{step:010d}.hckpt")


def refuse(work, data):
    failures = []
    for args, words in [(["--min-ranks", "2"], "--min-ranks is for --elastic runs"),
                        (["--commit-every-steps", "2"], "--commit-every-steps is for --elastic runs"),
                        (["--elastic", "--min-ranks", "2"], "--min-ranks 2 writes a checkpoint into --checkpoint-dir")]:
        p = run([HORA_TRAIN, "--synthetic"] + args, timeout=60)
        if p.returncode != 2 or words not in p.stdout:
            failures.append(f"{args}: exit {p.returncode}, output {p.stdout!r}")
    want = "--elastic needs a world that can re-form: start hora-train under `hora-run --elastic`"
    t0 = time.monotonic()
    p = run(mpirun(2, ["--synthetic", "--model", "resnet8", "--steps", "2", "--elastic"]), timeout=120)
    if p.returncode == 0 or want not in p.stdout or "started by an MPI launcher" not in p.stdout:
        failures.append(f"--elastic under mpirun: exit {p.returncode}, output {p.stdout!r}")
    print(f"--elastic under mpirun: refused in {time.monotonic() - t0:.1f} s", flush=True)
    cmd = [HORA_RUN, "--nproc-per-node", "2", HORA_TRAIN, "--synthetic", "--model", "resnet8", "--steps", "2",
           "--elastic"]
    p = run(cmd, timeout=120)
    if p.returncode == 0 or want not in p.stdout or "hora-run without --elastic" not in p.stdout:
        failures.append(f"--elastic under hora-run without --elastic: exit {p.returncode}, output {p.stdout!r}")
    return failures


def reform_line(text, old_size, lost, reason, failures):
    """Rank 0's `world OLD -> 2 at step K (LOST lost: generation 0: ...)`
    line, whose reason must contain reason: K, or None (failures says why)."""
    m = re.search(rf"^hora-train: world {old_size} -> 2 at step (\d+) \({lost} lost: generation 0: (.*)\); "
                  r"generation 1 continues from rank 0's commit of that step", text, flags=re.M)
    if not m:
        failures.append(f"no 'world {old_size} -> 2 at step K ({lost} lost: ...)' line from rank 0")
        return None
    if reason not in m.group(2):
        failures.append(f"the reason does not say {reason!r}: {m.group(2)!r}")
    return int(m.group(1))


def check_resumed(job, text, k, every, steps, failures):
    """After rank 0's re-form line (at step k, the commit it went on from):
    k is a commit close behind the last step printed before the line, every
    step after k is printed once up to the planned one, and the run ends
    there on 2 ranks. Appends to failures; returns (the line's time, the
    last step printed before it, the steps printed after it)."""
    t_line = [t for t, printed in job.lines if re.match(rf"hora-train: world \d+ -> 2 at step {k} \(", printed)][0]
    last_before = max(s for t, s in steps_after(job, 0) if t < t_line)
    after = steps_after(job, t_line)
    # A step's line comes before its gradients' all-reduce is collected (at
    # the next step or the commit): the last step printed may be one the
    # world never finished, so up to `every` steps are trained again.
    if k % every or not last_before - every <= k <= last_before:
        failures.append(f"resumed at step {k}: not a commit (every {every}) within {every} steps of the last "
                        f"step printed before the re-form ({last_before})")
    resumed = [s for t, s in after if s > k]
    if resumed != list(range(k + 1, steps + 1)):
        failures.append(f"after the re-form at {k}: steps {resumed}, not {k + 1}..{steps} once each")
    if not re.search(rf"^training: {steps} steps .* over 2 ranks", text, flags=re.M):
        failures.append(f"the run did not end at step {steps} on 2 ranks")
    return t_line, last_before, after


def lost(work, data):
    failures = []
    steps, every = 30, 3
    d = os.path.join(work, "elastic")
    args = BASE + ["--data", data, "--keep-global-batch", "--steps", str(steps)]
    job = Job(hora_run_cmd(3, args + ["--commit-every-steps", str(every), "--checkpoint-dir", d]),
              env_with({"PID_DIR": work}))
    if not job.until(rf"^epoch \d+/\d+ step {SEEN} ", time.monotonic() + 120):
        job.p.kill()
        return ["rank 0 never printed step %d" % SEEN]
    t_kill = kill_worker(work, "0.2")
    code, text = job.finish()
    if code != 0:
        failures.append(f"hora-run exited {code}, not 0")
    k = reform_line(text, 3, "rank 2", "killed by signal 9", failures)
    if k is None:
        return failures
    t_line, last_before, after = check_resumed(job, text, k, every, steps, failures)
    first = [t for t, s in after if s == k + 1]
    if first:
        print(f"lost: killed once step {SEEN} was printed, the last printed before the re-form {last_before}; "
              f"re-formed at step {k}; {first[0] - t_kill:.2f} s from the kill to step {k + 1} printed", flush=True)
    if failures:
        return failures
    return same_as_reference(work, "lost", 3, k, 2, BASE + ["--data", data],
                             ["--keep-global-batch", "--steps", str(steps)], d, steps)


def lost_host(work, data, netns=None):
    failures = []
    steps, every = 30, 2
    seed = int(time.time() * 1000) % 100000
    at = random.Random(seed).randint(SEEN, 12)  # the step after which host 1 dies
    print(f"lost-host: seed {seed}: host 1 SIGKILLed once rank 0 printed step {at}", flush=True)
    d = os.path.join(work, "elastic")
    args = BASE + ["--data", data, "--keep-global-batch", "--steps", str(steps), "--commit-every-steps", str(every),
                   "--checkpoint-dir", d]
    store = "10.213.0.1" if netns else "127.0.0.1"
    rdzv = ["--nnodes", "1:2", "--rdzv", f"{store}:{free_port()}", "--join-timeout", "60", "--heartbeat-timeout", "2"]
    env = env_with({"PID_DIR": work})
    # netns: each host in its network namespace of tools/netns-cluster ('ip netns exec' execs hora-run).
    where = [["ip", "netns", "exec", f"{netns}-h{i}"] if netns else [] for i in range(2)]
    hosts = [Job(where[0] + hora_run_cmd(2, args, rdzv), env)]
    time.sleep(0.3)  # the first runs the store and is host 0 (ranks 0 and 1)
    hosts.append(Job(where[1] + hora_run_cmd(2, args, rdzv), env))
    if not hosts[0].until(rf"^epoch \d+/\d+ step {at} ", time.monotonic() + 120):
        for h in hosts:
            h.p.kill()
        return ["rank 0 never printed step %d" % at]
    t_kill = time.monotonic()
    hosts[1].p.kill()  # its hora-run; its workers die with it (PR_SET_PDEATHSIG)
    code, text = hosts[0].finish()
    hosts[1].finish()
    if code != 0:
        failures.append(f"host 0's hora-run exited {code}, not 0")
    k = reform_line(text, 4, "ranks 2, 3", "host 1 lost", failures)
    if k is None:
        return failures
    t_line, last_before, after = check_resumed(hosts[0], text, k, every, steps, failures)
    # The loss curve goes on from the commit (the checkpoint comparison
    # below proves it bit for bit): the losses around the re-form.
    loss = {}
    for t, line in hosts[0].lines:
        lm = re.match(r"^epoch \d+/\d+ step (\d+) .* loss ([0-9.]+)", line)
        if lm:
            loss.setdefault("after" if t > t_line else "before", []).append((int(lm.group(1)), float(lm.group(2))))
    first = [t for t, s in after if s == k + 1]
    if first:
        print(f"lost-host: re-formed at step {k} (last printed before: {last_before}); "
              f"{first[0] - t_kill:.2f} s from the kill to step {k + 1} printed; loss at steps "
              f"{loss.get('before', [])[-2:]} before, {loss.get('after', [])[:2]} after", flush=True)
    if failures:
        return failures
    return same_as_reference(work, "lost-host", 4, k, 2, BASE + ["--data", data],
                             ["--keep-global-batch", "--steps", str(steps)], d, steps)


def newcomer(work, data):
    failures = []
    steps = 40
    d = os.path.join(work, "elastic")
    args = BASE + ["--data", data, "--steps", str(steps), "--checkpoint-dir", d]
    rdzv = ["--nnodes", "1:2", "--rdzv", f"127.0.0.1:{free_port()}", "--join-timeout", "60"]
    env = env_with({"PID_DIR": work})
    first = Job(hora_run_cmd(2, args, rdzv), env)
    if not first.until(rf"^epoch \d+/\d+ step {SEEN} ", time.monotonic() + 120):
        first.p.kill()
        return ["rank 0 never printed step %d" % SEEN]
    t_join = time.monotonic()
    second = Job(hora_run_cmd(1, args, rdzv), env)
    code, text = first.finish()
    code2, text2 = second.finish()
    if code != 0 or code2 != 0:
        failures.append(f"the hora-runs exited {code} and {code2}, not 0")
    m = re.search(r"^hora-train: world 2 -> 3 at step (\d+) \(hosts joined\); generation 1 continues", text,
                  flags=re.M)
    if not m:
        return failures + ["no 'world 2 -> 3 at step K (hosts joined)' line from rank 0"]
    k = int(m.group(1))
    if not re.search(rf"^training: {steps} steps .* over 3 ranks", text, flags=re.M):
        failures.append(f"the run did not end at step {steps} on 3 ranks")
    t_line = [t for t, line in first.lines if m.group(0) in line][0]
    after = [s for t, s in steps_after(first, t_line)]
    print(f"newcomer: started after step {SEEN}; taken in at step {k}, {t_line - t_join:.2f} s later; "
          f"steps after: {after[:3]}...", flush=True)
    if failures:
        return failures
    return same_as_reference(work, "newcomer", 2, k, 3, BASE + ["--data", data], ["--steps", str(steps)], d, steps)


def min_ranks(work, data):
    failures = []
    d = os.path.join(work, "elastic")
    args = BASE + ["--data", data, "--keep-global-batch", "--steps", "40", "--min-ranks", "2", "--checkpoint-dir", d]
    # --join-timeout: a host whose workers all ended keeps the store for hosts that may still come (hora-run
    # waits that long for them): here none will.
    job = Job(hora_run_cmd(2, args, ["--join-timeout", "5"]), env_with({"PID_DIR": work}))
    if not job.until(rf"^epoch \d+/\d+ step {SEEN} ", time.monotonic() + 120):
        job.p.kill()
        return ["rank 0 never printed step %d" % SEEN]
    kill_worker(work, "0.1")
    code, text = job.finish()
    if code != 1:
        failures.append(f"hora-run exited {code}, not 1")
    m = re.search(r"^hora-train: world 2 -> 1 at step (\d+) \(rank 1 lost: ", text, flags=re.M)
    if not m:
        return failures + ["no 'world 2 -> 1 at step K (rank 1 lost: ...)' line"]
    k = int(m.group(1))
    if not re.search(rf"^hora-train: rank 0: the world re-formed with 1 rank, below --min-ranks 2: stopped at step "
                     rf"{k}; resume with --resume auto on at least 2 ranks$", text, flags=re.M):
        failures.append("no 'below --min-ranks 2: stopped at step K' line")
    if re.search(r"^training: ", text, flags=re.M):
        failures.append("the run below --min-ranks went on training")
    latest = open(os.path.join(d, "latest")).read().strip()
    if latest != os.path.basename(ckpt(d, k)):
        failures.append(f"latest names {latest}, not step {k}'s checkpoint")
    v = subprocess.run([HORA_CKPT, "verify", ckpt(d, k)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if v.returncode != 0:
        failures.append(f"hora-ckpt verify of step {k}'s checkpoint failed: {v.stdout}")
    p = run(mpirun(2, BASE + ["--data", data, "--keep-global-batch", "--steps", str(k + 2), "--checkpoint-dir", d,
                              "--resume", "auto"]))
    if p.returncode != 0 or f"resuming from {ckpt(d, k)}" not in p.stdout:
        print(p.stdout)
        failures.append(f"--resume auto on 2 ranks did not continue from step {k}'s checkpoint")
    return failures


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "mpirun":
        # tests/env/netns-run's driver form: mpirun HORA_TRAIN MODE, then its
        # mpirun arguments (unused); hora-run and hora-ckpt are in the same
        # build tree, the namespaces' prefix in HORA_NETNS_PREFIX.
        train = os.path.abspath(sys.argv[2])
        build = train[: -len("trainer/hora-train")]
        sys.argv = [sys.argv[0], sys.argv[3], train, build + "tools/hora_run/hora-run", build + "hora-ckpt"]
    mode, HORA_TRAIN, HORA_RUN, HORA_CKPT = sys.argv[1:5]
    if not fmnist_small.available():
        print(f"FAIL: {fmnist_small.FMNIST} missing (Debian package dataset-fashion-mnist; tools/setup installs it)")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as work:
        idx = fmnist_small.make_idx(work, 768, 256)
        modes = {"refuse": refuse, "lost": lost, "lost-host": lost_host, "newcomer": newcomer, "min-ranks": min_ranks,
                 "netns-lost-host": lambda w, d: lost_host(w, d, os.environ.get("HORA_NETNS_PREFIX", "hora"))}
        failures = modes[mode](work, idx)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
