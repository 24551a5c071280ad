"""fault_job.py - the fault harness: one job of a fault test under mpirun
(tests/runtime/faults/faults.py and outcome.py: test_faults;
tests/runtime/device/run_gpu.py: test_gpu_coll). Each rank writes its report
(KEY=VALUE lines, tests/common/report.h) to DIR/rankR, DIR named by an
environment variable (TEST_FAULTS_DIR unless told); the job runs in a
session of its own, killed whole past its time limit; the drivers read the
reports with fnum and look for the job's pools with hora_pools."""
import os
import shutil
import tempfile
import time

import job  # tests/common/job.py


def read_reports(folder, nranks):
    """Each rank's report as a dict (the first value of a key wins); an empty
    one for a rank that wrote none."""
    reports = {}
    for r in range(nranks):
        rep = {}
        try:
            with open(os.path.join(folder, "rank%d" % r)) as f:
                for line in f:
                    key, _, value = line.rstrip("\n").partition("=")
                    rep.setdefault(key, value)
        except OSError:
            pass
        reports[r] = rep
    return reports


def fnum(rep, key, default=-1.0):
    """A report's value as a float; default where missing or not a number."""
    try:
        return float(rep.get(key, default))
    except ValueError:
        return default


def hora_pools(pids):
    """/dev/shm entries of hora pools created by these processes."""
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    return [n for n in names if any(n.startswith("hora-%s-" % p) for p in pids)]


def run_job(cmd, nranks, extra_env, limit, prefix, dir_var="TEST_FAULTS_DIR"):
    """Runs cmd with dir_var set to a fresh folder; returns
    (returncode, output, wall seconds, timed out, time.time() when it ended,
    reports). Open MPI 4.1's shared-memory BTL (vader) leaves its segment
    files behind, at random, whenever a job ends abnormally (MPI_Abort too);
    they go into that folder, removed with it."""
    folder = tempfile.mkdtemp(prefix=prefix)
    mpi_shm = os.path.join(folder, "vader")
    os.mkdir(mpi_shm)
    env = dict(os.environ, OMPI_MCA_btl_vader_backing_directory=mpi_shm, **extra_env)
    env[dir_var] = folder
    returncode, out, wall, timed_out = job.run_session(cmd, env, limit)
    end_real = time.time()
    reports = read_reports(folder, nranks)
    shutil.rmtree(folder, ignore_errors=True)
    return returncode, out, wall, timed_out, end_real, reports
