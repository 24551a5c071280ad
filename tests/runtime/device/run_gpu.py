#!/usr/bin/env python3
"""The test_gpu_coll cases that need more than `mpirun ... test_gpu_coll MODE`:

usage: run_gpu.py MPIRUN TEST_GPU_COLL NP CASE

  kill, kill-staged  mpirun --enable-recovery ... test_gpu_coll kill[-staged]: the
                 last rank SIGKILLs itself 0.5 s into a loop of 64 MiB device
                 all-reduces (gpu_kill.c). Every survivor must fail with
                 HORA_ERR_TRANSPORT naming the dead rank, within 5 s of the kill
                 (its failing call under 5 s too: HORA_TIMEOUT_S is 10 here, so
                 a runtime that only times out fails this), then hora_abort
                 (under 3 s) and exit 1; the job ends within 90 s; no hora pool
                 of the job is left in /dev/shm. Read from every rank's report
                 (mpirun --enable-recovery exits 0 whatever the ranks do).
  mixed          test_gpu_coll all with the GPUs hidden from rank 0 only
                 (TEST_GPU_HIDE_RANK=0): every rank must fail (not skip, not
                 pass) and rank 0 say it has no usable GPU.
  expect-skip    test_gpu_coll all with every GPU hidden (CUDA_VISIBLE_DEVICES
                 empty): mpirun must exit 77 (every rank skipped) with the SKIP
                 line; this case then passes (exit 0). It runs in suite mpi, on
                 machines with and without a GPU alike.

Exit 0 pass, 1 fail, 77 skip (kill and mixed, where no rank has a GPU).
RUN_GPU_VERBOSE=1 prints every report and the job's output also on success.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fault_job  # noqa: E402  (the fault harness: tests/common/fault_job.py)
from fault_job import fnum, hora_pools  # noqa: E402

MPIRUN, PROGRAM, NP, CASE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
VICTIM = NP - 1
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def run(cmd, extra_env, limit, prefix):
    """Runs cmd in its own session (fault_job.run_job, TEST_GPU_DIR for the
    reports); kills it after limit s. (rc, output, wall s, timed out, reports)"""
    print("$", " ".join("%s='%s'" % kv for kv in extra_env.items()), " ".join(cmd), flush=True)
    rc, out, wall, timed_out, _, reports = fault_job.run_job(cmd, NP, extra_env, limit, prefix, "TEST_GPU_DIR")
    return rc, out, wall, timed_out, reports


def finish(verdict_line, out, reports=None):
    verdict = "FAIL" if failures else "ok"
    print("gpu coll np%d %s: %s: %s" % (NP, CASE, verdict, verdict_line))
    if failures or os.environ.get("RUN_GPU_VERBOSE"):
        for f in failures:
            print("  FAIL: " + f)
        for r, rep in sorted((reports or {}).items()):
            print("  rank %d report: %s" % (r, rep))
        print("---- job output ----")
        print(out[-8000:])
    return 1 if failures else 0


def case_kill():
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(NP), "--enable-recovery", PROGRAM, CASE]
    rc, out, wall, timed_out, reports = run(cmd, {"HORA_TIMEOUT_S": "10"}, 90, "hora-gpu-kill-")
    if all("skip" in rep for rep in reports.values()) and not timed_out:
        print("gpu coll np%d %s: SKIP: %s" % (NP, CASE, reports[0]["skip"]))
        return 77
    check(not timed_out, "the job did not end within 90 s (killed): a survivor hangs")
    pids = [rep["pid"] for rep in reports.values() if "pid" in rep]
    check(len(pids) == NP, "only %d of %d ranks started (no pid in their report)" % (len(pids), NP))
    for r in range(NP):
        if "setup" in reports[r]:
            failures.append("rank %d: %s" % (r, reports[r]["setup"]))
        if "skip" in reports[r]:
            failures.append("rank %d skipped (%s) but not every rank did" % (r, reports[r]["skip"]))
    v = reports[VICTIM]
    kill_at = fnum(v, "kill_at", 0)
    check(kill_at > 0, "the victim (rank %d) did not reach its kill" % VICTIM)
    check("status" not in v, "the victim reported a status (%s): it should have been killed" % v.get("status"))
    times = []
    for r in range(NP):
        if r == VICTIM:
            continue
        rep = reports[r]
        msg = rep.get("message", "")
        check(rep.get("status") == "HORA_ERR_TRANSPORT",
              "rank %d: status %s, expected HORA_ERR_TRANSPORT (%s)" % (r, rep.get("status"), msg))
        check(re.search(r"\brank %d\b" % VICTIM, msg) is not None,
              "rank %d: the message does not name the dead rank %d: %s" % (r, VICTIM, msg))
        late = fnum(rep, "fail_at", 1e30) - kill_at
        check(late < 5, "rank %d: failed %.2f s after the kill (at most 5 s)" % (r, late))
        check(fnum(rep, "call_s", 99) < 5, "rank %d: its failing all-reduce took %s s" % (r, rep.get("call_s")))
        check(rep.get("exit") == "1" and fnum(rep, "abort_s", 99) < 3,
              "rank %d: no exit after hora_abort (exit %s, hora_abort took %s s)"
              % (r, rep.get("exit"), rep.get("abort_s")))
        if "fail_at" in rep:
            times.append("rank %d failed %.2f s after the kill (iteration %s)" % (r, late, rep.get("iteration")))
    left = hora_pools(pids)
    check(not left, "hora pools left in /dev/shm: %s" % ", ".join(left))
    for pattern in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        check(pattern not in out, "the job output has '%s'" % pattern)
    return finish("job ended in %.1f s (mpirun exit %s); %s" % (wall, rc, ", ".join(times)), out, reports)


def case_mixed():
    cmd = [MPIRUN, "--oversubscribe", "-np", str(NP), PROGRAM, "all"]
    rc, out, wall, timed_out, _ = run(cmd, {"TEST_GPU_HIDE_RANK": "0"}, 120, "hora-gpu-mixed-")
    if rc == 77 and "SKIP: no usable GPU on any" in out:
        print("gpu coll np%d %s: SKIP: no GPU on this machine" % (NP, CASE))
        return 77
    check(not timed_out, "the job did not end within 120 s (killed)")
    check(rc not in (0, 77), "mpirun exited %d: a job where rank 0 has no GPU must fail" % rc)
    check("rank 0 FAIL: no usable GPU" in out, "rank 0 did not say it has no usable GPU")
    check("have a usable GPU and the others not" in out, "no message that only some ranks have a GPU")
    return finish("mpirun exited %d in %.1f s" % (rc, wall), out)


def case_expect_skip():
    cmd = [MPIRUN, "--oversubscribe", "-np", str(NP), PROGRAM, "all"]
    rc, out, wall, timed_out, _ = run(cmd, {"CUDA_VISIBLE_DEVICES": ""}, 120, "hora-gpu-skip-")
    check(not timed_out, "the job did not end within 120 s (killed)")
    check(rc == 77, "mpirun exited %d, expected 77 (every rank skipped)" % rc)
    check("SKIP: no usable GPU on any of the %d ranks" % NP in out, "no SKIP line from rank 0")
    check("FAIL" not in out, "a rank reported a failure")
    return finish("mpirun exited %d in %.1f s" % (rc, wall), out)


CASES = {"kill": case_kill, "kill-staged": case_kill, "mixed": case_mixed, "expect-skip": case_expect_skip}

if __name__ == "__main__":
    if CASE not in CASES:
        print("run_gpu.py: unknown case '%s' (one of %s)" % (CASE, ", ".join(sorted(CASES))))
        sys.exit(2)
    sys.exit(CASES[CASE]())
