#!/usr/bin/env python3
"""One outcome at random moments (issue 31, "one outcome everywhere"): runs
test_faults under mpirun once per moment, each time with the last rank (the
victim) SIGSTOPped (and continued after HORA_TIMEOUT_S + 0.5 s, long enough
for its peers to time out) or SIGKILLed
at a random moment of iteration 3 of a 64 MiB all-reduce or of a fused
many-tensor all-reduce (tests/runtime/faults/test_faults.c: modes sigstop, kill,
sigstop-fused, kill-fused; TEST_FAULTS_DELAY_S), and checks that the ranks
ended with one outcome.

usage: outcome.py MPIRUN TEST_FAULTS NP MOMENTS SEED [MPIRUN_ARGS...]

OUTCOME_JOBS (environment, default 1): moments run that many jobs at a
time. The transport comes from the environment (HORA_DISABLE_SHM=1
HORA_DISABLE_UCX=1: the mpi fallback). MPIRUN_ARGS go to mpirun before the
program (tests/env/netns-run passes its --host list this way).

"One outcome", exactly: every rank that is alive at the end (under SIGSTOP
the victim too, once continued; under SIGKILL the survivors) reports the
same first failed iteration and the same status for it, that status is an
error (no rank returns HORA_OK for an operation another rank failed), and for
the fused all-reduce every request of that iteration has the same status on
every rank. A run where no rank failed (the signal came after the last
iteration) would prove nothing: it counts as a failure. Moments are drawn
from SEED (printed, with each moment's delay) so that a failing one can be
replayed. Prints one line per moment and a summary; exit 0 when every moment
kept one outcome, 1 otherwise.
"""
import concurrent.futures
import os
import random
import sys
import time

# the test kit (tests/common)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fault_job  # noqa: E402

MPIRUN, PROGRAM, NP, MOMENTS, SEED = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
MPIRUN_ARGS = sys.argv[6:]
VICTIM = NP - 1
TIMEOUT_S = os.environ.get("HORA_TIMEOUT_S", "1")
STOP_S = float(TIMEOUT_S) + 0.5
# The signal lands this far into iteration 3: up to about one operation's
# time on the slowest transport here (64 MiB over TCP loopback, 3 ranks).
MAX_DELAY_S = float(os.environ.get("OUTCOME_MAX_DELAY_S", "0.4"))
JOB_LIMIT_S = 60
# Moments run this many jobs at a time (OUTCOME_JOBS): each job's ranks mostly
# sleep or wait (stopped victim, HORA_TIMEOUT_S), so two overlap well.
JOBS = int(os.environ.get("OUTCOME_JOBS", "1"))


def run_moment(mode, delay):
    env = {"TEST_FAULTS_DELAY_S": "%.4f" % delay, "HORA_TIMEOUT_S": TIMEOUT_S, "TEST_FAULTS_STOP_S": "%.3f" % STOP_S}
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(NP)]
    if mode.startswith("kill"):
        cmd.append("--enable-recovery")
    for key in ("TEST_FAULTS_DIR", "TEST_FAULTS_DELAY_S", "TEST_FAULTS_STOP_S", "HORA_TIMEOUT_S"):
        cmd += ["-x", key]
    cmd += MPIRUN_ARGS + [PROGRAM, mode]
    _, out, wall, timed_out, _, reports = fault_job.run_job(cmd, NP, env, JOB_LIMIT_S, "hora-outcome-")
    return reports, out, wall, timed_out


def judge(mode, reports, timed_out):
    """The reasons this moment broke the rule ([] when it kept it)."""
    why = []
    if timed_out:
        why.append("the job did not end within %d s" % JOB_LIMIT_S)
    alive = [r for r in range(NP) if not (mode.startswith("kill") and r == VICTIM)]
    outcomes = {}
    for r in alive:
        rep = reports[r]
        if "setup" in rep:
            why.append("rank %d: %s" % (r, rep["setup"]))
        outcomes[r] = (rep.get("iteration"), rep.get("status"), rep.get("statuses", ""))
        if rep.get("status") in (None, "HORA_OK") or rep.get("iteration") in (None, "-1"):
            why.append("rank %d: no failure reported (%s)" % (r, rep.get("message", "no report")))
    if len(set(outcomes.values())) > 1:
        why.append("outcomes differ: " + "; ".join("rank %d: #%s %s %s" % ((r,) + o) for r, o in outcomes.items()))
    if mode.startswith("kill") and "status" in reports[VICTIM]:
        why.append("the victim reported a status: it should have been killed")
    return why


def main():
    rng = random.Random(SEED)
    modes = ["sigstop", "kill", "sigstop-fused", "kill-fused"]
    moments = [(i, modes[i % len(modes)], rng.uniform(0.0, MAX_DELAY_S)) for i in range(MOMENTS)]
    print("outcome: np %d, %d moments, seed %d, delays up to %.3f s, HORA_TIMEOUT_S=%s, %d job(s) at a time" %
          (NP, MOMENTS, SEED, MAX_DELAY_S, TIMEOUT_S, JOBS), flush=True)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = pool.map(lambda m: run_moment(m[1], m[2]), moments)
        broken, counts, walls = 0, {}, []
        for (i, mode, delay), (reports, out, wall, timed_out) in zip(moments, results):
            walls.append(wall)
            why = judge(mode, reports, timed_out)
            alive = [r for r in range(NP) if not (mode.startswith("kill") and r == VICTIM)]
            seen = ", ".join("%d:#%s %s%s" % (r, reports[r].get("iteration"), reports[r].get("status"),
                                              (" " + reports[r]["statuses"]) if "statuses" in reports[r] else "")
                             for r in alive)
            key = (mode, "ok" if not why else "BROKEN")
            counts[key] = counts.get(key, 0) + 1
            print("moment %2d %-13s delay %.4f s: %s (%.1f s) [%s]" % (i, mode, delay, "one outcome" if not why
                                                                      else "BROKEN", wall, seen), flush=True)
            if why:
                broken += 1
                for w in why:
                    print("    " + w)
                print("    ---- job output (tail) ----")
                for line in out.splitlines()[-15:]:
                    print("    " + line)
    walls.sort()
    print("outcome: %d of %d moments kept one outcome (%s); jobs %.1f-%.1f s (median %.1f), %.0f s in all" %
          (MOMENTS - broken, MOMENTS, ", ".join("%s %s: %d" % (k[0], k[1], v) for k, v in sorted(counts.items())),
           walls[0], walls[-1], walls[len(walls) // 2], time.monotonic() - t0))
    return 1 if broken else 0

if __name__ == "__main__":
    sys.exit(main())
