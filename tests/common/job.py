"""job.py - run one test job (an mpirun, usually) in a session of its own,
killed whole (every rank, the launcher's daemons) past its time limit: for
the Python drivers of fault tests (tests/common/fault_job.py,
tests/runtime/device/run_gpu.py); and a free port for the hora-run drivers
(tests/tools/hora_run/hora_run.py, tests/runtime/elastic/elastic.py)."""
import os
import signal
import socket
import subprocess
import time


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on now (a rendezvous
    store's, for the hora-run drivers)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_session(cmd, env, limit):
    """Runs cmd with env in a new session, stdout and stderr together.
    Returns (returncode, output, wall seconds, timed out); on timeout the
    whole session is SIGKILLed and what it printed is still returned."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    return proc.returncode, out, time.monotonic() - t0, timed_out
