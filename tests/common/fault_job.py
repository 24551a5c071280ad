"""fault_job.py - one job of tests/runtime/faults/test_faults under mpirun, for
faults.py and outcome.py: each rank writes its report (KEY=VALUE lines) to
TEST_FAULTS_DIR/rankR; the job runs in a session of its own, killed whole
past its time limit."""
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


def run_job(cmd, nranks, extra_env, limit, prefix):
    """Runs cmd with TEST_FAULTS_DIR set to a fresh folder; returns
    (returncode, output, wall seconds, timed out, time.time() when it ended,
    reports). Open MPI 4.1's shared-memory BTL (vader) leaves its segment
    files behind, at random, whenever a job ends abnormally (MPI_Abort too);
    they go into that folder, removed with it."""
    folder = tempfile.mkdtemp(prefix=prefix)
    mpi_shm = os.path.join(folder, "vader")
    os.mkdir(mpi_shm)
    env = dict(os.environ, TEST_FAULTS_DIR=folder, OMPI_MCA_btl_vader_backing_directory=mpi_shm, **extra_env)
    returncode, out, wall, timed_out = job.run_session(cmd, env, limit)
    end_real = time.time()
    reports = read_reports(folder, nranks)
    shutil.rmtree(folder, ignore_errors=True)
    return returncode, out, wall, timed_out, end_real, reports
