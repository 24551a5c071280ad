#!/usr/bin/env python3
"""libhora's bootstraps and elastic worlds with real processes (README.md).

    elastic.py MODE TEST_ELASTIC HORA_RUN MPIRUN

Modes: world-mpi, world-store, world-store-2hosts (exact collectives on the
world each bootstrap gives); lost-worker (1 host x 3, rank 1 SIGKILLs itself),
lost-host (2 hosts x 2, host 1's hora-run SIGKILLed with its workers),
newcomer (a host arrives mid-run and is taken in at a step boundary). Each
elastic mode checks that every survivor finishes every step with exact sums,
that the re-form is logged once with the right sizes, and prints how long the
survivors took from the kill to their first step on the new world.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def env(**extra):
    e = dict(os.environ)
    e.update(MPI_ENV)
    e.update(extra)
    return e


class Host:
    """One hora-run (a 'host'), its output in a file."""

    def __init__(self, hora_run, args, out_dir, name, extra_env=None, netns=None):
        self.log = os.path.join(out_dir, name + ".log")
        self.fh = open(self.log, "w")
        where = ["ip", "netns", "exec", netns] if netns else []
        self.p = subprocess.Popen(where + [hora_run] + args, stdout=self.fh, stderr=subprocess.STDOUT,
                                  env=env(**(extra_env or {})), start_new_session=True)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def wait_for(self, pattern, timeout):
        end = time.time() + timeout
        while time.time() < end:
            m = re.search(pattern, self.text())
            if m:
                return m
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        fail(f"'{pattern}' not seen in {self.log} within {timeout} s:\n{self.text()}")

    def finish(self, timeout):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            fail(f"{self.log}: hora-run did not end within {timeout} s:\n{self.text()}")
        self.fh.close()
        return rc


def check_done(text, steps, size, ranks_here):
    """Every rank of the final world here says it did every step, exactly."""
    done = re.findall(r"rank (\d+) of (\d+): (\d+) steps done, generation (\d+), (\d+) re-forms, (\d+) failures", text)
    got = sorted(int(d[0]) for d in done)
    check(got == sorted(ranks_here), f"ranks done {got}, expected {sorted(ranks_here)}:\n{text}")
    for r, n, s, g, reforms, failures in done:
        check(int(n) == size and int(s) == steps and int(failures) == 0,
              f"rank {r}: size {n} steps {s} failures {failures}, expected size {size}, {steps} steps:\n{text}")
    return done


def mode_world_mpi(t, hora_run, mpirun, out):
    r = subprocess.run([mpirun, "--oversubscribe", "-np", "3", t, "world", "mpi"], env=env(), capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0, f"mpirun exit {r.returncode}:\n{r.stdout}{r.stderr}")
    check(len(re.findall(r"bootstrap mpi, generation 0", r.stdout)) == 3, r.stdout)


def mode_world_store(t, hora_run, mpirun, out):
    h = Host(hora_run, ["--nproc-per-node", "3", t, "world", "store"], out, "h0")
    check(h.finish(120) == 0, f"hora-run failed:\n{h.text()}")
    check(len(re.findall(r"of 3: bootstrap store, generation 0, host 0 of 1, transport shm", h.text())) == 3, h.text())


def start_hosts(hora_run, out, count, nproc, cmd, nnodes, extra=(), extra_env=None):
    port = free_port()
    hosts = []
    for i in range(count):
        hosts.append(Host(hora_run, ["--nproc-per-node", str(nproc), "--nnodes", nnodes, "--rdzv",
                                     f"127.0.0.1:{port}"] + list(extra) + cmd, out, f"h{i}", extra_env))
        if i == 0:
            time.sleep(0.2)  # the first runs the store
    return hosts, port


def mode_world_store_2hosts(t, hora_run, mpirun, out):
    hosts, _ = start_hosts(hora_run, out, 2, 2, [t, "world", "store"], "2")
    for h in hosts:
        check(h.finish(120) == 0, f"hora-run failed:\n{h.text()}")
    text = hosts[0].text() + hosts[1].text()
    check(len(re.findall(r"of 4: bootstrap store, generation 0, host [01] of 2, transport ucx", text)) == 4, text)


ELASTIC = ["--elastic", "--max-restarts", "20", "--heartbeat-timeout", "2"]


def resume_times(text, kill_time):
    return [float(x) - kill_time for x in re.findall(r"resumed at (\d+\.\d+)", text)]


def mode_lost_worker(t, hora_run, mpirun, out):
    steps = 400
    h = Host(hora_run, ["--nproc-per-node", "3"] + ELASTIC + [t, "steps", str(steps), "1", "150"], out, "h0")
    check(h.finish(120) == 0, f"hora-run failed:\n{h.text()}")
    text = h.text()
    # The reason is the failed call's message, which carries hora-run's verdict
    # (a negotiated request's names the request first).
    check(re.search(r"world 3 -> 2 at step 150 \(.*generation 0: rank 1 \(local rank 1 on host 0, pid \d+\) was "
                    r"killed by signal 9", text), f"no re-form line 'world 3 -> 2 at step 150':\n{text}")
    check_done(text, steps, 2, [0, 1])
    kill = float(re.search(r"SIGKILL at step 150 at (\d+\.\d+)", text).group(1))
    times = resume_times(text, kill)
    check(len(times) == 2, f"resume times {times}:\n{text}")
    print(f"lost-worker: kill -> both survivors on the 2-rank world: {max(times):.3f} s")


def mode_lost_host(t, hora_run, mpirun, out):
    steps = 800
    hosts, _ = start_hosts(hora_run, out, 2, 2, [t, "steps", str(steps)], "1:2", ELASTIC, {"ELASTIC_STEP_MS": "2"})
    hosts[0].wait_for(r"generation 0: host 0 of 2", 60)
    hosts[0].wait_for(r"rank 0: step 200", 60)  # steps are running on 4 ranks
    kill = time.time()
    os.kill(hosts[1].p.pid, signal.SIGKILL)  # hora-run; its workers die with it (PR_SET_PDEATHSIG)
    m = hosts[0].wait_for(r"world 4 -> 2 at step (\d+) \((.*)\)", 30)
    check("generation 0: host 1 lost" in m.group(2), f"the re-form does not say host 1 was lost: {m.group(0)}")
    check(hosts[0].finish(120) == 0, f"host 0's hora-run failed:\n{hosts[0].text()}")
    hosts[1].finish(30)
    text = hosts[0].text()
    check_done(text, steps, 2, [0, 1])
    times = resume_times(text, kill)
    check(len(times) == 2, f"resume times {times}:\n{text}")
    print(f"lost-host: kill of host 1 -> host 0's 2 ranks on the new world: {max(times):.3f} s "
          f"(re-formed at step {m.group(1)} of {steps})")


def mode_newcomer(t, hora_run, mpirun, out):
    steps = 800
    port = free_port()
    args = ["--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv", f"127.0.0.1:{port}"] + ELASTIC
    h0 = Host(hora_run, args + [t, "steps", str(steps)], out, "h0", {"ELASTIC_STEP_MS": "2"})
    h0.wait_for(r"generation 0: host 0 of 1", 60)
    h0.wait_for(r"rank 0: step 100", 60)
    h1 = Host(hora_run, args + [t, "steps", str(steps)], out, "h1", {"ELASTIC_STEP_MS": "2"})
    m = h0.wait_for(r"world 2 -> 4 at step (\d+) \(hosts joined\)", 60)
    check(int(m.group(1)) > 0, m.group(0))
    for h in (h0, h1):
        check(h.finish(120) == 0, f"hora-run failed:\n{h.text()}")
    check_done(h0.text(), steps, 4, [0, 1])
    check_done(h1.text(), steps, 4, [2, 3])
    print(f"newcomer: taken in at step {m.group(1)}; 4 ranks finished {steps} steps")


def mode_netns_lost_host(t, hora_run, mpirun, out):
    """lost-host across two network namespaces of tools/netns-cluster (run by
    tests/env/netns-run, HORA_NETNS_PREFIX set): UCX over the veth link, the
    store on host 0's address; host 1's hora-run SIGKILLed with its workers."""
    prefix = os.environ.get("HORA_NETNS_PREFIX", "hora")
    steps, port = 800, free_port()
    args = ["--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv", f"10.213.0.1:{port}", "--join-timeout", "20"] + ELASTIC
    cmd = [t, "steps", str(steps)]
    h0 = Host(hora_run, args + cmd, out, "h0", {"ELASTIC_STEP_MS": "2"}, f"{prefix}-h0")
    h0.wait_for(r"rendezvous store for job", 20)
    h1 = Host(hora_run, args + cmd, out, "h1", {"ELASTIC_STEP_MS": "2"}, f"{prefix}-h1")
    h0.wait_for(r"generation 0: host 0 of 2", 60)
    h0.wait_for(r"rank 0: step 200", 60)
    kill = time.time()
    os.kill(h1.p.pid, signal.SIGKILL)  # hora-run ('ip netns exec' execs it); its workers die with it
    m = h0.wait_for(r"world 4 -> 2 at step (\d+) \((.*)\)", 30)
    check("generation 0: host 1 lost" in m.group(2), f"the re-form does not say host 1 was lost: {m.group(0)}")
    check(h0.finish(120) == 0, f"host 0's hora-run failed:\n{h0.text()}")
    h1.finish(30)
    text = h0.text()
    check_done(text, steps, 2, [0, 1])
    times = resume_times(text, kill)
    check(len(times) == 2, f"resume times {times}:\n{text}")
    print(f"netns lost-host: kill of host 1 -> host 0's 2 ranks on the new world: {max(times):.3f} s "
          f"(re-formed at step {m.group(1)} of {steps})")


def mode_rdzv_unreachable(t, hora_run, mpirun, out):
    """A worker whose store is not there: hora_init fails within the join
    timeout with the address (no hora-run: its environment by hand)."""
    port = free_port()
    e = env(HORA_RDZV=f"127.0.0.1:{port}", HORA_JOB_ID="j", HORA_RANK="0", HORA_SIZE="2", HORA_NODE_RANK="0",
            HORA_GENERATION="0", HORA_JOIN_TIMEOUT_S="2")
    start = time.time()
    r = subprocess.run([t, "world", "store"], env=e, capture_output=True, text=True, timeout=60)
    took = time.time() - start
    text = r.stdout + r.stderr
    check(r.returncode != 0, f"hora_init succeeded without a store:\n{text}")
    check(f"cannot reach the rendezvous store at 127.0.0.1:{port} within 2 s" in text, text)
    check(took < 6, f"took {took:.1f} s, the join timeout is 2 s")
    print(f"rdzv-unreachable: failed after {took:.2f} s: {text.strip().splitlines()[-1]}")


def mode_worker_absent(t, hora_run, mpirun, out):
    """A worker that never calls hora_init: the others' bootstrap ends within
    the join timeout naming it, and hora-run ends the job."""
    start = time.time()
    h = Host(hora_run, ["--nproc-per-node", "3", "--stop-grace", "1", "--join-timeout", "2", t, "world", "store"], out,
             "h0", {"ELASTIC_ABSENT_RANK": "2"})
    rc = h.finish(60)
    took = time.time() - start
    text = h.text()
    check(rc == 1, f"hora-run exit {rc}, expected 1:\n{text}")
    check(re.search(r"bootstrap: rank [01] waited 2 s for (rank 2's|the .* gathered by rank 0)", text),
          f"no message naming the absent rank:\n{text}")
    check(took < 10, f"took {took:.1f} s, the join timeout is 2 s")
    print(f"worker-absent: job ended after {took:.2f} s")


MODES = {"world-mpi": mode_world_mpi, "world-store": mode_world_store, "world-store-2hosts": mode_world_store_2hosts,
         "lost-worker": mode_lost_worker, "lost-host": mode_lost_host, "newcomer": mode_newcomer,
         "netns-lost-host": mode_netns_lost_host, "rdzv-unreachable": mode_rdzv_unreachable,
         "worker-absent": mode_worker_absent}


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "mpirun":
        # tests/env/netns-run's driver form: mpirun TEST_ELASTIC MODE, then its
        # mpirun arguments (unused: hora-run needs no mpirun). hora-run is in
        # the same build tree.
        t = os.path.abspath(sys.argv[2])
        build = t[: -len("tests/runtime/elastic/test_elastic")]
        sys.argv = [sys.argv[0], sys.argv[3], t, os.path.join(build, "tools/hora_run/hora-run"), "mpirun"]
    if len(sys.argv) != 5 or sys.argv[1] not in MODES:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(prefix="hora-elastic-") as out:
        MODES[sys.argv[1]](sys.argv[2], sys.argv[3], sys.argv[4], out)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
