#!/usr/bin/env python3
"""Fault-injection tests of the runtime: runs test_faults MODE under mpirun,
times the job and checks what every rank reported (tests/runtime/faults/test_faults.c
describes the modes and the report).

usage: faults.py MPIRUN TEST_FAULTS NP MODE

Every mode asserts: the job ends within its bound (mpirun is killed and the
test fails otherwise), every rank reports the expected failure with the
expected message, each rank's call ended within its bound, and no hora pool
of the job's processes is left in /dev/shm. Prints one summary line with
the measured times (FAULTS_VERBOSE=1: also every report and the job's
output). Exit 0 pass, 1 fail (also shm-* modes where a
private tmpfs cannot be mounted over /dev/shm: unshare -m needs root).
"""
import os
import re
import subprocess
import sys
import time

# the test kit (tests/common)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fault_job  # noqa: E402
from fault_job import fnum, hora_pools  # noqa: E402

MPIRUN, PROGRAM, NP, MODE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
VICTIM = NP - 1
REASON = "test_faults: corrupt record 42 (injected)"

# mode: (job time limit s, extra environment, mpirun options, private /dev/shm MiB)
MODES = {
    "sigstop": (40, {"HORA_TIMEOUT_S": "1"}, [], 0),
    "abort": (20, {}, [], 0),
    "abort-async": (20, {}, [], 0),
    "sigstop-small": (40, {"HORA_TIMEOUT_S": "1"}, [], 0),
    "kill": (20, {"HORA_TIMEOUT_S": "10"}, ["--enable-recovery"], 0),
    "kill-small": (20, {"HORA_TIMEOUT_S": "10"}, ["--enable-recovery"], 0),
    "shutdown": (20, {}, [], 0),
    "shutdown-async": (20, {}, [], 0),
    "stall": (30, {"HORA_STALL_CHECK_S": "1", "HORA_STALL_SHUTDOWN_S": "2"}, [], 0),
    "shm-small": (20, {"OMPI_MCA_btl": "self,tcp"}, [], 64),
    "shm-stage": (20, {"OMPI_MCA_btl": "self,tcp", "HORA_FUSION_THRESHOLD": "4M"}, [], 64),
}

failures = []
END_REAL = 0.0  # time.time() when mpirun returned


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def status_is(r, rep, want):
    """Checks that rank r reported status want; returns its message ('' when none)."""
    msg = rep.get("message", "")
    check(rep.get("status") == want, "rank %d: status %s, expected %s (%s)" % (r, rep.get("status"), want, msg))
    return msg


def private_shm_works():
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /dev/shm"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout.strip()


def run():
    limit, extra_env, options, shm_mib = MODES[MODE]
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(NP)] + options + [PROGRAM, MODE]
    if shm_mib:
        ok, why = private_shm_works()
        if not ok:
            # Only a missing GPU may skip: this needs root and mount namespaces, as CI has.
            print("faults np%d %s: FAIL: cannot mount a private tmpfs over /dev/shm (unshare -m; needs root): %s"
                  % (NP, MODE, why or "no message"))
            sys.exit(1)
        # exec: the job runs in a mount namespace that has a small /dev/shm of its own.
        cmd = ["unshare", "-m", "sh", "-c",
               'mount -t tmpfs -o size=%dM tmpfs /dev/shm && exec "$@"' % shm_mib, "sh"] + cmd
    print("$", " ".join("%s=%s" % kv for kv in extra_env.items()), " ".join(cmd), flush=True)
    global END_REAL
    returncode, out, wall, timed_out, END_REAL, reports = fault_job.run_job(cmd, NP, extra_env, limit,
                                                                            "hora-faults-")
    return returncode, wall, timed_out, out, reports, limit


def main():
    rc, wall, timed_out, out, reports, limit = run()
    check(not timed_out, "the job did not end within %d s (killed)" % limit)
    pids = [rep["pid"] for rep in reports.values() if "pid" in rep]
    check(len(pids) == NP, "only %d of %d ranks started (no pid in their report)" % (len(pids), NP))
    left = hora_pools(pids)
    check(not left, "hora pools left in /dev/shm: %s" % ", ".join(left))
    peers = [r for r in range(NP) if r != VICTIM]
    times = []

    if MODE in ("sigstop", "sigstop-small"):
        its = {reports[r].get("iteration") for r in range(NP)}
        for r in range(NP):
            rep = reports[r]
            status_is(r, rep, "HORA_ERR_TIMEOUT")
            check("HORA_TIMEOUT_S" in rep.get("message", ""), "rank %d: message does not say why: %s"
                  % (r, rep.get("message")))
            check(rep.get("agree") == "1", "rank %d: the ranks disagree: %s" % (r, rep.get("all")))
            check(rep.get("exit") == "3", "rank %d: did not finish (exit %s)" % (r, rep.get("exit")))
            check(rep.get("shutdown_status") == "HORA_OK" and fnum(rep, "shutdown_s", 99) < 5,
                  "rank %d: hora_shutdown after the failure: %s in %s s" % (r, rep.get("shutdown_status"),
                                                                            rep.get("shutdown_s")))
            times.append("rank %d %s s" % (r, rep.get("call_s")))
        check(len(its) == 1 and "-1" not in its, "ranks failed different iterations (or none): %s" % sorted(its))
        deciders = [r for r in range(NP) if "failed on rank" not in reports[r].get("message", "")]
        check(len(deciders) == 1, "expected exactly one rank to decide the failure, got %s" % deciders)
    elif MODE in ("abort", "abort-async"):
        v = reports[VICTIM]
        check(v.get("exit") == "1", "victim: no hora_abort report (exit %s)" % v.get("exit"))
        check(fnum(v, "abort_s", 99) < 3, "victim: hora_abort took %s s" % v.get("abort_s"))
        abort_at = fnum(v, "abort_at", 0)
        for r in peers:
            rep = reports[r]
            status_is(r, rep, "HORA_ERR_CORRUPT")  # the victim's
            want = "rank %d aborted: %s" % (VICTIM, REASON)
            check(want in rep.get("message", ""), "rank %d: message '%s' lacks '%s'" % (r, rep.get("message"), want))
            late = fnum(rep, "fail_at", 1e30) - abort_at
            check(late < 2.0, "rank %d: failed %.2f s after the abort" % (r, late))
            times.append("rank %d %.3f s after the abort" % (r, late))
            if MODE == "abort-async":
                check(rep.get("failed_requests") == "4" and rep.get("same_failure") == "1",
                      "rank %d: %s of 4 pending requests failed (same failure: %s)"
                      % (r, rep.get("failed_requests"), rep.get("same_failure")))
                check(rep.get("late_status") == "HORA_ERR_CORRUPT" and want in rep.get("late_message", ""),
                      "rank %d: a request after the abort: %s: %s" % (r, rep.get("late_status"),
                                                                      rep.get("late_message")))
                check(fnum(rep, "late_s", 99) < 1, "rank %d: the late request took %s s" % (r, rep.get("late_s")))
        check(rc != 0, "mpirun returned 0 although every rank exited non-zero")
        after = END_REAL - abort_at
        check(after < 10, "mpirun returned %.1f s after the abort" % after)
        times.append("mpirun exited %.2f s after the abort" % after)
    elif MODE in ("kill", "kill-small"):
        its = {reports[r].get("iteration") for r in peers}
        for r in peers:
            rep = reports[r]
            status_is(r, rep, "HORA_ERR_TRANSPORT")
            check(re.search(r"rank %d \(pid \d+\) died" % VICTIM, rep.get("message", "")) is not None,
                  "rank %d: message does not name the dead rank %d: %s" % (r, VICTIM, rep.get("message")))
            check(fnum(rep, "call_s", 99) < 3, "rank %d: its all-reduce took %s s to fail" % (r, rep.get("call_s")))
            times.append("rank %d %s s" % (r, rep.get("call_s")))
        check(len(its) == 1 and "-1" not in its and None not in its,
              "survivors failed different iterations (or none): %s" % sorted(map(str, its)))
        check("status" not in reports[VICTIM], "the victim reported a status: it should have been killed")
        for r in peers:  # mpirun --enable-recovery returns 0 here: the reports say how each rank ended
            check(reports[r].get("exit") == "1" and fnum(reports[r], "abort_s", 99) < 3,
                  "rank %d: no exit after hora_abort (exit %s, hora_abort took %s s)"
                  % (r, reports[r].get("exit"), reports[r].get("abort_s")))
    elif MODE in ("shutdown", "shutdown-async"):
        v = reports[VICTIM]
        shutdown_at = fnum(v, "shutdown_at", 0)
        for r in range(NP):
            rep = reports[r]
            check(rep.get("exit") == "3" and fnum(rep, "shutdown_s", 99) < 5,
                  "rank %d: hora_shutdown: %s in %s s (exit %s)" % (r, rep.get("shutdown_status"),
                                                                   rep.get("shutdown_s"), rep.get("exit")))
        for r in peers:
            rep = reports[r]
            msg = status_is(r, rep, "HORA_ERR_SHUTDOWN")
            want = ("rank %d called hora_shutdown" % VICTIM) if MODE == "shutdown" else "called hora_shutdown"
            check(want in msg, "rank %d: message '%s' lacks '%s'" % (r, msg, want))
            late = fnum(rep, "fail_at", 1e30) - shutdown_at
            check(late < 2.0, "rank %d: failed %.2f s after the victim's hora_shutdown" % (r, late))
            times.append("rank %d %.3f s after the shutdown" % (r, late))
    elif MODE == "stall":
        for r in range(NP):
            rep = reports[r]
            msg = status_is(r, rep, "HORA_ERR_SHUTDOWN")
            check("stall inspector" in msg and "HORA_STALL_SHUTDOWN_S" in msg and
                  ("missing ranks: %d" % VICTIM) in msg, "rank %d: message does not explain the stall: %s" % (r, msg))
            check(fnum(rep, "call_s", 99) < 8, "rank %d: its request took %s s to fail" % (r, rep.get("call_s")))
            check(rep.get("exit") == "3" and fnum(rep, "shutdown_s", 99) < 5,
                  "rank %d: hora_shutdown after the stall: %s in %s s" % (r, rep.get("shutdown_status"),
                                                                         rep.get("shutdown_s")))
            times.append("rank %d %s s" % (r, rep.get("call_s")))
    elif MODE == "shm-small":
        for r in range(NP):
            rep = reports[r]
            msg = status_is(r, rep, "HORA_ERR_NO_MEMORY")  # hora_init's status
            for word in ("/dev/shm", "HORA_SHM_POOL_BYTES", "HORA_FUSION_THRESHOLD", "size="):
                check(word in msg, "rank %d: the message does not mention %s: %s" % (r, word, msg))
    elif MODE == "shm-stage":
        for r in range(NP):
            rep = reports[r]
            msg = status_is(r, rep, "HORA_ERR_NO_MEMORY")
            check("staging" in msg and "/dev/shm" in msg, "rank %d: the message does not explain: %s" % (r, msg))
            check("hora_mem_alloc(" not in msg, "rank %d: the message blames hora_mem_alloc: %s" % (r, msg))
            check(rep.get("agree") == "1", "rank %d: the ranks disagree: %s" % (r, rep.get("all")))
            check(rep.get("exit") == "3", "rank %d: did not finish (exit %s)" % (r, rep.get("exit")))

    for r in range(NP):
        if "setup" in reports[r]:
            failures.append("rank %d: %s" % (r, reports[r]["setup"]))
    # Sanitizer builds: a report from any rank fails the test.
    for pattern in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer"):
        check(pattern not in out, "the job output has '%s' (see below)" % pattern)
    verdict = "FAIL" if failures else "ok"
    print("faults np%d %s: %s: job ended in %.1f s (mpirun exit %s)%s" %
          (NP, MODE, verdict, wall, rc, "; " + ", ".join(times) if times else ""))
    if failures or os.environ.get("FAULTS_VERBOSE"):
        for f in failures:
            print("  FAIL: " + f)
        for r in range(NP):
            print("  rank %d report: %s" % (r, reports[r]))
        print("---- job output ----")
        print(out[-6000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
