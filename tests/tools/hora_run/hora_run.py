#!/usr/bin/env python3
"""hora_run.py - hora-run (tools/hora_run) with real processes: ranks and
environment, two hosts on one machine, rendezvous failures, restarts, a lost
host, a signal, bad options, --elastic (README.md).

    hora_run.py MODE HORA_RUN
    hora_run.py mpirun HORA_RUN netns ...   (tests/env/netns-run's driver form)
    hora_run.py elastic-worker PLAN         (a worker of the elastic modes)

Workers are `sh -c` scripts that write their environment to a file named by
generation and rank in a fresh folder, which the test then reads; each
mode asserts exit statuses, messages and, where a bound is promised, the
time it took. The elastic modes' workers are this file (elastic_worker): they
speak the store's protocol (runtime/boot/README.md) themselves, as libhora's
store bootstrap does, to read their place in the next generation and to post
a generation's failure. Exit 0 when every check held, 1 otherwise (each
failure printed).
"""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

FAILURES = []

# A worker: its environment into DIR/env.<generation>.<rank>, written whole
# then renamed (the test never reads half a file).
ENV_WORKER = ('f="$OUT/env.$HORA_GENERATION.$HORA_RANK"; '
              'env | grep -E "^(HORA_|RANK=|WORLD_SIZE=|LOCAL_RANK=|LOCAL_WORLD_SIZE=|MASTER_)" > "$f.tmp"; '
              'echo "PID=$$" >> "$f.tmp"; mv "$f.tmp" "$f"')


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Host:
    """One hora-run, its stderr read line by line with the time each came."""

    def __init__(self, hora_run, args, out_dir, env=None):
        e = dict(os.environ, OUT=out_dir, **(env or {}))
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([hora_run] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=e, start_new_session=True)
        self.lines = []  # (seconds since start, line)
        self.out = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.out_reader = threading.Thread(target=lambda: self.out.extend(self.proc.stdout), daemon=True)
        self.out_reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
            check(False, f"hora-run ended within {timeout} s (killed)")
        self.reader.join(5)
        self.out_reader.join(5)
        self.elapsed = time.monotonic() - self.t0
        return rc

    def stderr(self):
        return "\n".join(line for _, line in self.lines)

    def when(self, pattern, timeout):
        """Seconds since start of the first stderr line matching pattern, waiting up to timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, line in list(self.lines):
                if re.search(pattern, line):
                    return t
            time.sleep(0.02)
        return None

    def show(self, name):
        for t, line in self.lines:
            print(f"  [{name} {t:6.2f}] {line}")


def read_envs(out_dir, generation):
    envs = {}
    for name in os.listdir(out_dir):
        m = re.fullmatch(r"env\.(\d+)\.(\d+)", name)
        if m and int(m.group(1)) == generation:
            with open(os.path.join(out_dir, name)) as f:
                envs[int(m.group(2))] = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    return envs


def wait_files(out_dir, generation, count, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if len(read_envs(out_dir, generation)) >= count:
            return True
        time.sleep(0.05)
    return False


def running(pid):
    """Whether pid is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end and any(running(p) for p in pids):
        time.sleep(0.05)
    return not any(running(p) for p in pids)


def check_world(envs, size, node_count, nprocs, job, rdzv, generation):
    """Every rank 0..size-1 once, with consistent local, node and torchrun variables."""
    check(sorted(envs) == list(range(size)), f"ranks {sorted(envs)} are 0..{size - 1}")
    node_of = {}
    for r, e in sorted(envs.items()):
        what = f"rank {r}: "
        check(e.get("HORA_RANK") == str(r) and e.get("RANK") == str(r), what + "HORA_RANK and RANK")
        check(e.get("HORA_SIZE") == str(size) and e.get("WORLD_SIZE") == str(size), what + f"HORA_SIZE, WORLD_SIZE {size}")
        node = int(e.get("HORA_NODE_RANK", -1))
        node_of.setdefault(node, []).append(r)
        k = nprocs[node] if 0 <= node < len(nprocs) else -1
        check(e.get("HORA_LOCAL_SIZE") == str(k) and e.get("LOCAL_WORLD_SIZE") == str(k), what + f"local size {k}")
        base = sum(nprocs[:node])
        check(e.get("HORA_LOCAL_RANK") == str(r - base) and e.get("LOCAL_RANK") == str(r - base),
              what + f"local rank {r - base} (node {node}, ranks from {base})")
        check(e.get("HORA_NODE_COUNT") == str(node_count), what + f"HORA_NODE_COUNT {node_count}")
        check(e.get("HORA_JOB_ID") == job, what + f"HORA_JOB_ID {job}")
        check(e.get("HORA_GENERATION") == str(generation), what + f"HORA_GENERATION {generation}")
        check(e.get("HORA_RDZV") == rdzv, what + f"HORA_RDZV {e.get('HORA_RDZV')} is {rdzv}")
        check(f"{e.get('MASTER_ADDR')}:{e.get('MASTER_PORT')}" == rdzv, what + "MASTER_ADDR:MASTER_PORT")
    check(sorted(node_of) == list(range(node_count)), f"node ranks {sorted(node_of)} are 0..{node_count - 1}")
    pids = [e.get("PID") for e in envs.values()]
    check(len(set(pids)) == len(pids), "one process per rank")


def store_address(host):
    host.when(r"rendezvous store for job '.*' at ", 10)
    for _, line in host.lines:
        m = re.search(r"rendezvous store for job '.*' at (\S+)$", line)
        if m:
            return m.group(1)
    return None


def start_pair(hora_run, out, args, worker):
    """Two hora-run with the same --rdzv on this machine: a runs the store, b connects."""
    rdzv = f"127.0.0.1:{free_port()}"
    common = args + ["--rdzv", rdzv, "sh", "-c", worker]
    a = Host(hora_run, common, out)
    check(a.when("rendezvous store", 10) is not None, "host a runs the store")
    return a, Host(hora_run, common, out), rdzv


def mode_one_host(hora_run, out):
    h = Host(hora_run, ["--nproc-per-node", "3", "--job-id", "one", "sh", "-c", ENV_WORKER], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 0, f"exit 0 (got {rc})")
    rdzv = store_address(h)
    check(rdzv is not None and rdzv.startswith("127.0.0.1:"), f"the store on 127.0.0.1, port printed: {rdzv}")
    envs = read_envs(out, 0)
    check_world(envs, 3, 1, [3], "one", rdzv, 0)
    for r, e in sorted(envs.items()):
        check(e.get("HORA_JOIN_TIMEOUT_S") == "60", f"rank {r}: HORA_JOIN_TIMEOUT_S 60 (--join-timeout's default)")
        check(not any(k in e for k in ["HORA_ELASTIC", "HORA_WORKER_ID", "HORA_ELASTIC_GRACE_S"]),
              f"rank {r}: no --elastic variable without --elastic")


def two_hosts(hora_run, out, k0, k1):
    port = free_port()
    rdzv = f"127.0.0.1:{port}"
    common = ["--nnodes", "2:2", "--rdzv", rdzv, "--job-id", "two", "--join-timeout", "20"]
    a = Host(hora_run, ["--nproc-per-node", str(k0)] + common + ["sh", "-c", ENV_WORKER], out)
    time.sleep(0.2)
    b = Host(hora_run, ["--nproc-per-node", str(k1)] + common + ["sh", "-c", ENV_WORKER], out)
    ra, rb = a.wait(30), b.wait(30)
    a.show("a")
    b.show("b")
    check(ra == 0 and rb == 0, f"both hosts exit 0 (got {ra}, {rb})")
    check(store_address(a) == rdzv, "host a runs the store at --rdzv")
    check("rendezvous store" not in b.stderr(), "host b connects to it")
    envs = read_envs(out, 0)
    # Which host is node 0 is the order they joined in; ranks follow the node order.
    node0_k = int(envs[0]["HORA_LOCAL_SIZE"]) if 0 in envs else k0
    nprocs = [node0_k, k0 + k1 - node0_k]
    check(sorted(nprocs) == sorted([k0, k1]), f"node 0 has one host's K ({nprocs})")
    check_world(envs, k0 + k1, 2, nprocs, "two", rdzv, 0)


def mode_two_hosts(hora_run, out):
    two_hosts(hora_run, out, 2, 2)


def mode_two_hosts_uneven(hora_run, out):
    two_hosts(hora_run, out, 1, 3)


def mode_unreachable(hora_run, out):
    # 192.0.2.1 (TEST-NET-1) is never this machine's: hora-run must connect, and cannot.
    port = free_port()
    h = Host(hora_run, ["--nproc-per-node", "1", "--rdzv", f"192.0.2.1:{port}", "--join-timeout", "2", "true"], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 3, f"exit 3 (got {rc})")
    check(f"cannot reach the rendezvous store at 192.0.2.1:{port} within 2 s" in h.stderr(), "the message names the address and the timeout")
    check(2.0 <= h.elapsed < 3.5, f"gave up after {h.elapsed:.2f} s (join timeout 2 s)")
    print(f"unreachable store, --join-timeout 2: {h.elapsed:.2f} s")


def mode_never_arrives(hora_run, out):
    h = Host(hora_run, ["--nproc-per-node", "2", "--nnodes", "2:2", "--join-timeout", "2", "sh", "-c", ENV_WORKER], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 3, f"exit 3 (got {rc})")
    check("generation 0: 1 of 2 hosts joined within 2 s" in h.stderr(), "the message says 1 of 2 joined")
    check(2.0 <= h.elapsed < 3.5, f"gave up after {h.elapsed:.2f} s (join timeout 2 s)")
    check(not read_envs(out, 0), "no worker started")
    print(f"second host never arrives, --join-timeout 2: {h.elapsed:.2f} s")


def mode_wrong_job(hora_run, out):
    port = free_port()
    rdzv = f"127.0.0.1:{port}"
    a = Host(hora_run, ["--nproc-per-node", "1", "--nnodes", "2:2", "--rdzv", rdzv, "--job-id", "alpha",
                        "--join-timeout", "2.5", "sh", "-c", ENV_WORKER], out)
    check(a.when("rendezvous store", 10) is not None, "host a runs the store")
    b = Host(hora_run, ["--nproc-per-node", "1", "--nnodes", "2:2", "--rdzv", rdzv, "--job-id", "beta",
                        "--join-timeout", "4", "sh", "-c", ENV_WORKER], out)
    rb = b.wait(30)
    b.show("b")
    check(rb == 3, f"host b (another job id) exits 3 (got {rb})")
    check("refused job id 'beta': it serves job 'alpha'" in b.stderr(), "the message names both job ids")
    check(b.elapsed < 1.5, f"refused after {b.elapsed:.2f} s (not at the join timeout)")
    ra = a.wait(30)
    a.show("a")
    check(ra == 3 and "1 of 2 hosts joined" in a.stderr(), f"host a still waits alone and times out (exit {ra})")


RESTART_WORKER = ('if [ "$HORA_RANK" = 1 ] && [ ! -e "$OUT/failed-once" ]; then touch "$OUT/failed-once"; exit 1; fi; '
                  + ENV_WORKER)


def mode_restart(hora_run, out):
    h = Host(hora_run, ["--nproc-per-node", "3", "--max-restarts", "1", "sh", "-c", RESTART_WORKER], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 0, f"exit 0 after one restart (got {rc})")
    check(re.search(r"generation 0 failed: rank 1 \(local rank 1 on host 0, pid \d+\) exited with status 1; "
                    r"restarting \(restart 1 of 1\)", h.stderr()) is not None, "the failure and the restart are named")
    check_world(read_envs(out, 1), 3, 1, [3], "hora", store_address(h), 1)


def mode_no_restart(hora_run, out):
    h = Host(hora_run, ["--nproc-per-node", "3", "sh", "-c", RESTART_WORKER + '; exec sleep 30'], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 1, f"exit 1 (got {rc})")
    check(re.search(r"generation 0 failed: rank 1 \(local rank 1 on host 0, pid \d+\) exited with status 1; "
                    r"no restarts left \(--max-restarts 0\)", h.stderr()) is not None, "the message names the worker and its status")
    check(h.elapsed < 5, f"the other workers (sleeping) were stopped: {h.elapsed:.2f} s")
    check(not read_envs(out, 1), "no generation 1")
    # A worker killed by a signal.
    h = Host(hora_run, ["--nproc-per-node", "2", "sh", "-c", '[ "$HORA_RANK" = 0 ] && kill -9 $$; exec sleep 30'], out)
    rc = h.wait(30)
    h.show("host")
    check(rc == 1 and re.search(r"rank 0 \(local rank 0 on host 0, pid \d+\) was killed by signal 9", h.stderr()),
          f"a worker killed by SIGKILL is named (exit {rc})")


def mode_two_hosts_restart(hora_run, out):
    a, b, rdzv = start_pair(hora_run, out, ["--nproc-per-node", "2", "--nnodes", "1:2", "--max-restarts", "1",
                                            "--settle-time", "3", "--join-timeout", "20"], RESTART_WORKER)
    ra, rb = a.wait(40), b.wait(40)
    a.show("a")
    b.show("b")
    check(ra == 0 and rb == 0, f"both hosts exit 0 after one restart (got {ra}, {rb})")
    check_world(read_envs(out, 1), 4, 2, [2, 2], "hora", rdzv, 1)
    t_fail = a.when(r"generation 0 failed: rank 1 .* exited with status 1; restarting", 1)
    t_gen1 = a.when(r"generation 1: host \d of 2", 1)
    check(t_fail is not None and t_gen1 is not None, "host a names the failure and joins generation 1")
    if t_fail is not None and t_gen1 is not None:
        # Both hosts were expected: the round closes when both are in, not at the settle time (3 s).
        print(f"failure to generation 1 of 2 hosts: {t_gen1 - t_fail:.2f} s")
        check(t_gen1 - t_fail < 2.0, f"re-formed in {t_gen1 - t_fail:.2f} s, before the settle time")


def mode_below_min(hora_run, out):
    # --nnodes 2:2, one host SIGKILLed: the survivor has a restart left but
    # cannot re-form without a second host; it ends after the join timeout.
    a, b, _ = start_pair(hora_run, out, ["--nproc-per-node", "1", "--nnodes", "2:2", "--max-restarts", "1",
                                         "--heartbeat-timeout", "1", "--join-timeout", "2"], LOST_WORKER)
    check(wait_files(out, 0, 2, 20), "2 workers of generation 0 started")
    os.kill(b.proc.pid, signal.SIGKILL)
    b.wait(10)
    ra = a.wait(30)
    a.show("a")
    check(ra == 3, f"exit 3 (got {ra})")
    check(re.search(r"generation 0 failed: host \d lost", a.stderr()) is not None, "the lost host is named")
    check("generation 1: 1 of 2 hosts joined within 2 s" in a.stderr(), "below MIN: 1 of 2 hosts in generation 1")
    check(not read_envs(out, 1), "no worker of generation 1 started")


def mode_store_lost(hora_run, out):
    # The host that runs the store is SIGKILLed: the other cannot go on
    # without the store and ends (exit 1) within a second, its workers stopped.
    a, b, rdzv = start_pair(hora_run, out, ["--nproc-per-node", "2", "--nnodes", "2:2", "--max-restarts", "3"],
                            LOST_WORKER)
    check(wait_files(out, 0, 4, 20), "4 workers of generation 0 started")
    envs = read_envs(out, 0)
    t = time.monotonic()
    os.kill(a.proc.pid, signal.SIGKILL)
    a.wait(10)
    rb = b.wait(20)
    dt = time.monotonic() - t
    b.show("b")
    check(rb == 1, f"host b exits 1 (got {rb})")
    check(re.search(rf"generation 0: lost the connection to the rendezvous store at {rdzv}: .*; workers stopped",
                    b.stderr()) is not None, "the message names the store")
    check(dt < 2, f"host b ended {dt:.2f} s after the store's host died")
    pids = [int(e["PID"]) for e in envs.values()]
    check(wait_gone(pids, 2), f"no worker left 2 s later ({[p for p in pids if running(p)]})")


LATE_WORKER = (ENV_WORKER + '; if [ "$HORA_GENERATION" = 0 ]; then '
               'while [ ! -e "$OUT/go" ]; do sleep 0.05; done; '
               'if [ "$HORA_RANK" = 0 ] && [ -e "$OUT/fail" ]; then exit 1; fi; fi')


def mode_late_host(hora_run, out):
    # A host that comes after the round closed waits while generation 0 runs
    # without it; it is taken in when generation 0 fails and re-forms.
    port = free_port()
    rdzv = f"127.0.0.1:{port}"
    common = ["--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv", rdzv, "--max-restarts", "1",
              "--settle-time", "0.3", "--join-timeout", "20", "sh", "-c", LATE_WORKER]
    open(os.path.join(out, "fail"), "w").close()
    a = Host(hora_run, common, out)
    check(wait_files(out, 0, 2, 20), "generation 0 started with host a alone")
    b = Host(hora_run, common, out)
    check(b.when(r"generation 0 runs without this host; waiting for generation 1", 10) is not None,
          "host b waits for generation 1")
    time.sleep(0.5)
    check(b.proc.poll() is None and not read_envs(out, 1), "host b still waits while generation 0 runs")
    open(os.path.join(out, "go"), "w").close()
    ra, rb = a.wait(40), b.wait(40)
    a.show("a")
    b.show("b")
    check(ra == 0 and rb == 0, f"both exit 0 (got {ra}, {rb})")
    check_world(read_envs(out, 1), 4, 2, [2, 2], "hora", rdzv, 1)
    # The same, but generation 0 ends well: the late host has nothing to join.
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    a = Host(hora_run, common, out)
    check(wait_files(out, 0, 2, 20), "generation 0 started with host a alone")
    b = Host(hora_run, common, out)
    check(b.when(r"waiting for generation 1", 10) is not None, "host b waits for generation 1")
    open(os.path.join(out, "go"), "w").close()
    ra, rb = a.wait(40), b.wait(40)
    a.show("a")
    b.show("b")
    check(ra == 0, f"host a exits 0 (got {ra})")
    check(rb == 3 and "generation 0 finished the job before this host joined" in b.stderr(),
          f"host b says the job is over, exit 3 (got {rb})")
    check(b.elapsed < 10, f"host b ended {b.elapsed:.2f} s after it started, not at its join timeout")


LOST_WORKER = ENV_WORKER + '; if [ "$HORA_GENERATION" = 0 ]; then exec sleep 60; fi'


def mode_lost_host(hora_run, out):
    a, b, rdzv = start_pair(hora_run, out, ["--nproc-per-node", "2", "--nnodes", "1:2", "--max-restarts", "1",
                                            "--heartbeat-timeout", "2", "--settle-time", "3", "--join-timeout", "20"],
                            LOST_WORKER)
    check(wait_files(out, 0, 4, 20), "4 workers of generation 0 started")
    envs = read_envs(out, 0)
    check_world(envs, 4, 2, [2, 2], "hora", rdzv, 0)
    b.when(r"generation 0: host \d of 2", 5)
    m = re.search(r"generation 0: host (\d) of 2", b.stderr())
    check(m is not None, "host b says which host it is")
    b_node = m.group(1) if m else "1"
    b_pids = [int(e["PID"]) for e in envs.values() if e["HORA_NODE_RANK"] == b_node]
    check(len(b_pids) == 2, f"host b's workers: {b_pids}")
    t_kill = time.monotonic()
    os.kill(b.proc.pid, signal.SIGKILL)
    b.wait(10)
    # Its workers die with it (PR_SET_PDEATHSIG).
    check(wait_gone(b_pids, 2), "the killed host's workers are gone within 2 s")
    t_lost = a.when(r"generation 0 failed: host \d lost: no heartbeat", 15)
    check(t_lost is not None, "host a names the lost host")
    if t_lost is not None:
        detect = t_lost - (t_kill - a.t0)
        print(f"lost host noticed {detect:.2f} s after the SIGKILL (--heartbeat-timeout 2, beats every 1 s)")
        # A beat every 1 s, peers read every 0.5 s: noticed between the
        # timeout - 1 s and the timeout + 1 s after the kill; 1.5 s more for a
        # loaded machine.
        check(1 <= detect <= 2 + 2.5, f"noticed within heartbeat timeout + 2.5 s: {detect:.2f} s")
    ra = a.wait(40)
    a.show("a")
    b.show("b (killed)")
    check(ra == 0, f"host a finishes alone, exit 0 (got {ra})")
    check("generation 1: host 0 of 1, ranks 0-1 of 2" in a.stderr(), "generation 1 is one host")
    check_world(read_envs(out, 1), 2, 1, [2], "hora", rdzv, 1)
    print(f"kill to job end on the survivor: {a.elapsed - (t_kill - a.t0):.2f} s (settle time 3 s)")


def mode_netns(hora_run, out):
    """Two hosts in two network namespaces of tools/netns-cluster (run by
    tests/env/netns-run, HORA_NETNS_PREFIX set): host 0 binds --rdzv on its
    own address and runs the store, host 1 cannot bind it and connects over
    the veth link; then host 1 is SIGKILLed and host 0 finishes alone."""
    prefix = os.environ.get("HORA_NETNS_PREFIX", "hora")
    port = free_port()
    rdzv = f"10.213.0.1:{port}"
    common = ["--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv", rdzv, "--max-restarts", "1", "--settle-time", "5",
              "--heartbeat-timeout", "2", "--join-timeout", "20", "sh", "-c", LOST_WORKER]
    ns = lambda i: ["ip", "netns", "exec", f"{prefix}-h{i}"]
    a = Host(ns(0)[0], ns(0)[1:] + [hora_run] + common, out)
    check(a.when(f"rendezvous store for job 'hora' at {rdzv}", 10) is not None, "host 0 runs the store at --rdzv")
    b = Host(ns(1)[0], ns(1)[1:] + [hora_run] + common, out)
    check(wait_files(out, 0, 4, 20), "4 workers of generation 0 started")
    check("rendezvous store" not in b.stderr(), "host 1 connects to it")
    check_world(read_envs(out, 0), 4, 2, [2, 2], "hora", rdzv, 0)
    t_kill = time.monotonic()
    os.killpg(b.proc.pid, signal.SIGKILL)
    b.wait(10)
    ra = a.wait(40)
    a.show("h0")
    b.show("h1 (killed)")
    t_lost = a.when(r"host 1 lost: no heartbeat", 1)
    check(t_lost is not None, "host 0 names host 1 lost")
    if t_lost is not None:
        print(f"lost host noticed across namespaces {t_lost - (t_kill - a.t0):.2f} s after the SIGKILL")
    check(ra == 0, f"host 0 finishes alone, exit 0 (got {ra})")
    check_world(read_envs(out, 1), 2, 1, [2], "hora", rdzv, 1)


def mode_prefix_output(hora_run, out):
    # 3 workers write 300 numbered lines each to stdout at once, one line to
    # stderr, a 10000-byte line (longer than hora-run's line buffer) and a
    # last line without a newline.
    worker = ('i=0; while [ $i -lt 300 ]; do echo "line $HORA_RANK $i"; i=$((i+1)); done; '
              'echo "err $HORA_RANK" >&2; head -c 10000 /dev/zero | tr "\\0" "x"; echo; printf "end $HORA_RANK"')
    h = Host(hora_run, ["--nproc-per-node", "3", "--prefix-output", "sh", "-c", worker], out)
    rc = h.wait(30)
    check(rc == 0, f"exit 0 (got {rc})")
    lines = "".join(h.out).split("\n")
    per_rank = {r: [] for r in range(3)}
    bad = [line for line in lines if line and not re.fullmatch(r"\[rank [0-2]\] .*", line)]
    check(not bad, f"every stdout line is prefixed with its rank ({len(bad)} not: {bad[:3]})")
    for line in lines:
        m = re.fullmatch(r"\[rank ([0-2])\] (.*)", line)
        if m:
            per_rank[int(m.group(1))].append(m.group(2))
    for r, got in per_rank.items():
        numbered = [x for x in got if x.startswith("line ")]
        check(numbered == [f"line {r} {i}" for i in range(300)], f"rank {r}: its 300 lines whole and in order")
        xs = "".join(x for x in got if set(x) == {"x"})
        check(xs == "x" * 10000, f"rank {r}: the 10000-byte line arrives whole in pieces ({len(xs)} bytes)")
        check(got and got[-1] == f"end {r}", f"rank {r}: the last line without a newline is forwarded")
    err = [line for _, line in h.lines if line.startswith("[rank")]
    check(sorted(err) == [f"[rank {r}] err {r}" for r in range(3)], f"stderr lines prefixed: {err}")


def mode_signal(hora_run, out):
    worker = ENV_WORKER + '; trap "echo term > $OUT/term.$HORA_RANK; exit 0" TERM; while :; do sleep 0.05; done'
    h = Host(hora_run, ["--nproc-per-node", "2", "sh", "-c", worker], out)
    check(wait_files(out, 0, 2, 20), "2 workers started")
    t = time.monotonic()
    os.kill(h.proc.pid, signal.SIGTERM)
    rc = h.wait(20)
    h.show("host")
    dt = time.monotonic() - t
    check(rc == 128 + signal.SIGTERM, f"exit 143 (got {rc})")
    check(all(os.path.exists(os.path.join(out, f"term.{r}")) for r in range(2)), "each worker got SIGTERM")
    check(dt < 3, f"ended {dt:.2f} s after the signal")
    # A signal while hora-run retries to reach the store, and while it waits
    # for more hosts: both end at once, not at the 30 s join timeout.
    for what, args in [("reaching an unreachable store", ["--rdzv", f"192.0.2.1:{free_port()}"]),
                       ("waiting for a second host", ["--nnodes", "2:2"])]:
        h = Host(hora_run, ["--nproc-per-node", "1", "--join-timeout", "30"] + args + ["true"], out)
        time.sleep(0.5)
        t = time.monotonic()
        os.kill(h.proc.pid, signal.SIGTERM)
        rc = h.wait(20)
        dt = time.monotonic() - t
        check(rc == 128 + signal.SIGTERM and dt < 1.5, f"SIGTERM {what}: exit {rc} after {dt:.2f} s")


def mode_options(hora_run, out):
    r = subprocess.run([hora_run, "--help"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0 and "--nproc-per-node" in r.stdout and "--max-restarts" in r.stdout, "--help")
    check(all(w in r.stdout for w in ["--elastic", "HORA_WORKER_ID", "gen<G>/assign/<worker", "--max-restarts large"]),
          "--help describes --elastic")
    bad = [([], "--nproc-per-node is required"),
           (["--nproc-per-node", "0", "true"], "--nproc-per-node '0'"),
           (["--nproc-per-node", "2"], "no command to run"),
           (["--nproc-per-node", "2", "--nnodes", "3:2", "true"], "--nnodes '3:2'"),
           (["--nproc-per-node", "2", "--rdzv", "localhost", "true"], "--rdzv 'localhost'"),
           (["--nproc-per-node", "2", "--join-timeout", "0", "true"], "--join-timeout '0'"),
           (["--nproc-per-node", "2", "--bogus", "true"], "'--bogus' is not known"),
           (["--nproc-per-node", "2", "no-such-command-hora"], "command 'no-such-command-hora' not found")]
    for args, want in bad:
        r = subprocess.run([hora_run] + args, capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and want in r.stderr, f"{' '.join(args) or '(none)'}: exit 2 and '{want}' "
              f"(got {r.returncode}: {r.stderr.strip()})")


# --elastic: workers that outlive a generation. They are this file run as
# `hora_run.py elastic-worker PLAN`, with a client of the store's protocol.

OP_HELLO, OP_SET, OP_GET, OP_ADD = 1, 2, 3, 4
OP_OK, OP_NOT_FOUND, OP_ERROR = 0x80, 0x81, 0x82


class Store:
    """A client of the rendezvous store (runtime/boot/README.md: one frame
    each way per request; integers big-endian)."""

    def __init__(self, address, job_id):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self._call(OP_HELLO, b"", job_id.encode(), 1)

    def _read(self, count):
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the store closed the connection")
            data += chunk
        return data

    def _call(self, op, key, value=b"", arg=0):
        body = struct.pack(">BHIq", op, len(key), len(value), arg) + key + value
        self.sock.sendall(struct.pack(">I", len(body)) + body)
        body = self._read(struct.unpack(">I", self._read(4))[0])
        op, klen, vlen, arg = struct.unpack(">BHIq", body[:15])
        value = body[15 + klen:15 + klen + vlen]
        if op == OP_ERROR:
            raise RuntimeError("store: " + value.decode())
        return op, arg, value

    def get(self, key, wait_s):
        """The value of key (text), waiting up to wait_s on the server; None when it did not come."""
        op, _, value = self._call(OP_GET, key.encode(), arg=int(wait_s * 1000))
        return value.decode() if op == OP_OK else None

    def set(self, key, value):
        self._call(OP_SET, key.encode(), value.encode())

    def add(self, key, delta):
        return self._call(OP_ADD, key.encode(), arg=delta)[1]


def post_hosts_updated(store, generation, node_count):
    """End generation G on purpose, as libhora's hora_elastic_reform does
    (the keys of hora-run's post_failure)."""
    if store.add(f"gen{generation}/fail", 1) != 1:
        return
    waiting = store.add(f"gen{generation + 1}/join", 0)
    store.set(f"gen{generation + 1}/expect", str(node_count + waiting))
    store.set(f"gen{generation}/over", "failed")
    store.set(f"gen{generation}/failed", f"hosts updated: {waiting} host(s) waiting to join")


PLACE_FIELDS = ["rank", "size", "local_rank", "local_size", "node_rank", "node_count"]


def elastic_worker(plan):
    """One worker: write what it knows of each generation it is in to
    $OUT/ew.<worker id>.<generation>, act on PLAN there, and wait for its
    place in the next generation (gen<G+1>/assign/<worker id>).

    PLAN lose-rank-1: in generation 0, rank 1 exits 1 (the others wait);
         in any later generation everyone exits 0.
    PLAN lose-single: in generation 0, the worker of a host of one worker
         exits 1; the others go on to generation 1 and exit 0 there.
    PLAN wait: wait for generation 1, then exit 0.
    PLAN newcomer: in generation 0, rank 0 waits until a host counted itself
         into generation 1's join and then posts the failure of generation 0
         as hora_elastic_reform would; everyone goes on to generation 1 and
         exits 0 there.
    PLAN crowd: the same, once two hosts counted themselves in.
    PLAN room: in generation 0, the worker of a host of one worker waits
         for the file $OUT/go and exits 1. In a later generation, everyone
         exits 0 once the world has 4 ranks; before, rank 0 waits for a host
         in the next generation's join and ends this one (as newcomer)."""
    e = os.environ
    wid, generation = e["HORA_WORKER_ID"], int(e["HORA_GENERATION"])
    store = Store(e["HORA_RDZV"], e["HORA_JOB_ID"])
    place = {f: e["HORA_" + f.upper()] for f in PLACE_FIELDS}
    source = "env"
    while True:
        record = {"PID": os.getpid(), "PPID": os.getppid(), "SOURCE": source, "GENERATION": generation}
        record.update({f.upper(): place[f] for f in PLACE_FIELDS})
        for name in ["HORA_ELASTIC", "HORA_WORKER_ID", "HORA_JOIN_TIMEOUT_S", "HORA_ELASTIC_GRACE_S"]:
            record[name] = e.get(name, "")
        record["ASSIGN"] = store.get(f"gen{generation}/assign/{wid}", 0) or ""
        if generation > 0:
            record["FAILED"] = store.get(f"gen{generation - 1}/failed", 0) or ""
        path = os.path.join(e["OUT"], f"ew.{wid}.{generation}")
        with open(path + ".tmp", "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in record.items()))
        os.rename(path + ".tmp", path)
        waiting = 0  # end this generation once this many hosts wait for the next one
        if generation > 0:
            if plan != "room" or place["size"] == "4":
                return 0
            waiting = 1
        elif (plan == "lose-rank-1" and place["rank"] == "1") or (plan == "lose-single" and place["local_size"] == "1"):
            time.sleep(0.3)
            return 1
        elif plan == "room" and place["local_size"] == "1":
            while not os.path.exists(os.path.join(e["OUT"], "go")):
                time.sleep(0.05)
            return 1
        elif plan in ("newcomer", "crowd"):
            waiting = 1 if plan == "newcomer" else 2
        if waiting and place["rank"] == "0":
            end = time.monotonic() + 20
            while store.add(f"gen{generation + 1}/join", 0) < waiting and time.monotonic() < end:
                time.sleep(0.05)
            post_hosts_updated(store, generation, int(place["node_count"]))
        text = store.get(f"gen{generation + 1}/assign/{wid}", 20)
        if text is None:
            print(f"worker {wid}: no assignment for generation {generation + 1} within 20 s", file=sys.stderr)
            return 3
        place = dict(field.split("=", 1) for field in text.split())
        generation += 1
        source = "assign"


def read_elastic(out_dir):
    """{(worker id, generation): record} of every elastic worker."""
    records = {}
    for name in os.listdir(out_dir):
        m = re.fullmatch(r"ew\.(\d+\.\d+)\.(\d+)", name)
        if m:
            with open(os.path.join(out_dir, name)) as f:
                records[(m.group(1), int(m.group(2)))] = dict(line.rstrip("\n").split("=", 1) for line in f)
    return records


def assign_text(rank, size, local_rank, local_size, node_rank, node_count):
    return (f"rank={rank} size={size} local_rank={local_rank} local_size={local_size} node_rank={node_rank} "
            f"node_count={node_count}")


def check_place(rec, what, *place):
    """A worker's record: its place as the fields it read, exactly, and the assignment key the same."""
    want = assign_text(*place)
    got = assign_text(*[rec.get(f.upper()) for f in PLACE_FIELDS])
    check(got == want, f"{what}: {got} (want {want})")
    check(rec.get("ASSIGN") == want, f"{what}: gen{rec.get('GENERATION')}/assign/<id> is '{rec.get('ASSIGN')}'")


def elastic_host(hora_run, out, args, plan):
    return Host(hora_run, args + ["--elastic", sys.executable, os.path.abspath(__file__), "elastic-worker", plan], out)


def wait_records(out, generation, count, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sum(1 for (_, g) in read_elastic(out) if g == generation) >= count:
            return True
        time.sleep(0.05)
    return False


def wait_all(hosts, timeout):
    """Each host's exit status, in order, once all ended; their stderr shown."""
    codes = [h.wait(timeout) for h in hosts.values()]
    for name, h in hosts.items():
        h.show(name)
    return codes


def mode_elastic_one_host(hora_run, out):
    # 3 workers, rank 1 exits 1 in generation 0: ranks 0 and 2 stay the same
    # processes and take ranks 0 and 1 of 2 in generation 1.
    h = elastic_host(hora_run, out, ["--nproc-per-node", "3", "--max-restarts", "5", "--join-timeout", "7",
                                     "--heartbeat-timeout", "2"], "lose-rank-1")
    rc = h.wait(30)
    h.show("host")
    check(rc == 0, f"exit 0 (got {rc})")
    recs = read_elastic(out)
    check(sorted(recs) == [("0.0", 0), ("0.0", 1), ("0.1", 0), ("0.2", 0), ("0.2", 1)],
          f"workers 0.0, 0.1, 0.2 in generation 0, 0.0 and 0.2 in generation 1: {sorted(recs)}")
    for slot in range(3):
        r = recs.get((f"0.{slot}", 0), {})
        check_place(r, f"worker 0.{slot}, generation 0", slot, 3, slot, 3, 0, 1)
        check(r.get("SOURCE") == "env" and r.get("HORA_ELASTIC") == "1" and r.get("HORA_WORKER_ID") == f"0.{slot}",
              f"worker 0.{slot}: HORA_ELASTIC=1, HORA_WORKER_ID=0.{slot}")
        check(r.get("HORA_JOIN_TIMEOUT_S") == "7" and r.get("HORA_ELASTIC_GRACE_S") == "4",
              f"worker 0.{slot}: HORA_JOIN_TIMEOUT_S=7, HORA_ELASTIC_GRACE_S=4 (heartbeat timeout + 2): "
              f"{r.get('HORA_JOIN_TIMEOUT_S')}, {r.get('HORA_ELASTIC_GRACE_S')}")
    for slot, rank in [(0, 0), (2, 1)]:
        r0, r1 = recs.get((f"0.{slot}", 0), {}), recs.get((f"0.{slot}", 1), {})
        check(r1.get("SOURCE") == "assign", f"worker 0.{slot} read generation 1 from the store")
        check_place(r1, f"worker 0.{slot}, generation 1", rank, 2, rank, 2, 0, 1)
        check(r0.get("PID") and r0.get("PID") == r1.get("PID"), f"worker 0.{slot}: the same process ({r0.get('PID')}, "
              f"{r1.get('PID')})")
        check(re.fullmatch(r"rank 1 \(local rank 1 on host 0, pid \d+\) exited with status 1", r1.get("FAILED", "")),
              f"worker 0.{slot} reads generation 0's failure: {r1.get('FAILED')}")
    check(re.search(r"generation 0 failed: rank 1 \(local rank 1 on host 0, pid \d+\) exited with status 1; "
                    r"re-forming with the 2 live workers of this host \(restart 1 of 5\)", h.stderr()) is not None,
          "the failure and the re-forming are named")
    check("generation 1: host 0 of 1, ranks 0-1 of 2" in h.stderr(), "generation 1: ranks 0-1 of 2")
    check(h.elapsed < 10, f"done in {h.elapsed:.2f} s")


def mode_elastic_lost_host(hora_run, out):
    # Two hosts x 2 workers; host b (hora-run and workers) SIGKILLed: host a's
    # workers, the same processes, take ranks 0-1 of 2 after the heartbeat timeout.
    common = ["--nproc-per-node", "2", "--nnodes", "1:2", "--max-restarts", "5", "--heartbeat-timeout", "1",
              "--settle-time", "5", "--join-timeout", "10", "--rdzv", f"127.0.0.1:{free_port()}"]
    a = elastic_host(hora_run, out, common, "wait")
    check(a.when("rendezvous store", 10) is not None, "host a runs the store")
    b = elastic_host(hora_run, out, common, "wait")
    check(wait_records(out, 0, 4, 15), "4 workers in generation 0")
    recs = read_elastic(out)
    mine = lambda host: sorted(wid for (wid, g), r in recs.items() if g == 0 and r["PPID"] == str(host.proc.pid))
    a_ids, b_ids = mine(a), mine(b)
    check(len(a_ids) == 2 and len(b_ids) == 2, f"2 workers each: a {a_ids}, b {b_ids}")
    for wid in a_ids + b_ids:
        r = recs[(wid, 0)]
        node = int(r["NODE_RANK"])
        check_place(r, f"worker {wid}, generation 0", 2 * node + int(wid[-1]), 4, int(wid[-1]), 2, node, 2)
    b_pids = [int(recs[(wid, 0)]["PID"]) for wid in b_ids]
    t_kill = time.monotonic()
    os.killpg(b.proc.pid, signal.SIGKILL)
    for pid in b_pids:  # the host's workers with it (each leads a group of its own)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone with hora-run (PR_SET_PDEATHSIG)
    b.wait(10)
    ra = a.wait(20)
    a.show("a")
    b.show("b (killed)")
    check(ra == 0, f"host a finishes, exit 0 (got {ra})")
    recs = read_elastic(out)
    check(sorted(wid for (wid, g) in recs if g == 1) == a_ids, "generation 1: host a's workers only")
    for local, wid in enumerate(a_ids):
        r0, r1 = recs.get((wid, 0), {}), recs.get((wid, 1), {})
        check_place(r1, f"worker {wid}, generation 1", local, 2, local, 2, 0, 1)
        check(r0.get("PID") == r1.get("PID"), f"worker {wid}: the same process")
        check(re.fullmatch(r"host [01] lost: no heartbeat for .*", r1.get("FAILED", "")),
              f"worker {wid} reads the failure: {r1.get('FAILED')}")
    t_gen1 = a.when(r"generation 1: host 0 of 1, ranks 0-1 of 2", 1)
    check(t_gen1 is not None, "host a forms generation 1 alone")
    if t_gen1 is not None:
        # Detected within the heartbeat timeout + 1 s (+ 1.5 s for a loaded
        # machine); generation 1 expects 1 host and closes at once.
        dt = t_gen1 - (t_kill - a.t0)
        print(f"SIGKILL of host b to generation 1 formed on host a: {dt:.2f} s (--heartbeat-timeout 1)")
        check(dt <= 1 + 1 + 1.5, f"re-formed {dt:.2f} s after the kill")


def mode_elastic_newcomer(hora_run, out):
    # Host a runs generation 0 alone; host b arrives and waits; a's rank 0
    # sees it in gen1/join and ends generation 0 (hora_elastic_reform's
    # keys): b's workers start in generation 1 and a's read places of 4.
    common = ["--nproc-per-node", "2", "--nnodes", "1:2", "--max-restarts", "5", "--settle-time", "0.3",
              "--join-timeout", "10", "--heartbeat-timeout", "2"]
    rdzv = f"127.0.0.1:{free_port()}"
    a = elastic_host(hora_run, out, common + ["--rdzv", rdzv], "newcomer")
    check(wait_records(out, 0, 2, 15), "generation 0 started with host a alone")
    b = elastic_host(hora_run, out, common + ["--rdzv", rdzv], "newcomer")
    ra, rb = a.wait(20), b.wait(20)
    a.show("a")
    b.show("b")
    check(ra == 0 and rb == 0, f"both exit 0 (got {ra}, {rb})")
    check(b.when(r"generation 0 runs without this host; waiting for generation 1", 1) is not None,
          "host b waited for generation 1")
    recs = read_elastic(out)
    check(sorted(recs) == [("0.0", 0), ("0.0", 1), ("0.1", 0), ("0.1", 1), ("1.0", 1), ("1.1", 1)],
          f"a's workers (host 0) in generations 0 and 1, b's (host 1) in generation 1: {sorted(recs)}")
    for slot in range(2):
        r0, r1, rb1 = recs.get((f"0.{slot}", 0), {}), recs.get((f"0.{slot}", 1), {}), recs.get((f"1.{slot}", 1), {})
        check_place(r0, f"worker 0.{slot}, generation 0", slot, 2, slot, 2, 0, 1)
        # Host a came first: node 0 in generation 1 too, the newcomer after it.
        check_place(r1, f"worker 0.{slot}, generation 1 (read from the store)", slot, 4, slot, 2, 0, 2)
        check(r1.get("SOURCE") == "assign" and r0.get("PID") == r1.get("PID"), f"worker 0.{slot}: the same process")
        check(r1.get("FAILED") == "hosts updated: 1 host(s) waiting to join", f"the failure: {r1.get('FAILED')}")
        check_place(rb1, f"newcomer 1.{slot}, generation 1 (its environment)", 2 + slot, 4, slot, 2, 1, 2)
        check(rb1.get("SOURCE") == "env", f"newcomer 1.{slot} started with HORA_GENERATION=1")
    check(re.search(r"generation 0 failed: hosts updated: 1 host\(s\) waiting to join; re-forming with the 2 live "
                    r"workers", a.stderr()) is not None, "host a names the re-forming")


def mode_elastic_full(hora_run, out):
    # --nnodes 1:2, host a alone in generation 0; hosts c and d arrive and
    # count themselves into generation 1 (there is room for one). a's rank 0
    # ends generation 0 once both wait: generation 1 takes a (the same
    # process) and the newcomer that came first; the other is left out,
    # does not count itself in while generation 1 runs full, and exits 3
    # when generation 1 finishes the job.
    rdzv = f"127.0.0.1:{free_port()}"
    common = ["--nproc-per-node", "1", "--nnodes", "1:2", "--max-restarts", "5", "--settle-time", "0.3",
              "--join-timeout", "10", "--heartbeat-timeout", "2", "--rdzv", rdzv]
    a = elastic_host(hora_run, out, common, "crowd")
    check(wait_records(out, 0, 1, 15), "generation 0: host a alone")
    c = elastic_host(hora_run, out, common, "crowd")
    check(c.when("waiting for generation 1", 10) is not None, "host c waits for generation 1")
    d = elastic_host(hora_run, out, common, "crowd")
    ra, rc, rd = wait_all({"a": a, "c": c, "d": d}, 20)
    check(ra == 0 and rc == 0, f"hosts a and c exit 0 (got {ra}, {rc})")
    check(rd == 3 and "generation 1 finished the job before this host joined" in d.stderr(),
          f"host d, left out of generation 1, says the job is over: exit 3 (got {rd})")
    check(re.search(r"generation 1 runs without this host and has its --nnodes MAX hosts", d.stderr()) is not None,
          "host d waited for generation 1 without counting itself in")
    check("this is host 0 of the job" in a.stderr() and "this is host 1 of the job" in c.stderr() and
          "this is host 2 of the job" in d.stderr(), "hosts a, c, d are hosts 0, 1, 2 of the job")
    recs = read_elastic(out)
    check(sorted(recs) == [("0.0", 0), ("0.0", 1), ("1.0", 1)], f"host 0 in generations 0 and 1, host 1 in "
          f"generation 1, host 2 nowhere: {sorted(recs)}")
    check_place(recs.get(("0.0", 1), {}), "worker 0.0, generation 1", 0, 2, 0, 1, 0, 2)
    check(recs.get(("0.0", 0), {}).get("PID") == recs.get(("0.0", 1), {}).get("PID"), "worker 0.0: the same process")
    check_place(recs.get(("1.0", 1), {}), "worker 1.0, generation 1", 1, 2, 0, 1, 1, 2)
    check(recs.get(("0.0", 1), {}).get("FAILED") == "hosts updated: 2 host(s) waiting to join",
          f"the failure: {recs.get(('0.0', 1), {}).get('FAILED')}")


def mode_elastic_room(hora_run, out):
    # Hosts a (2 workers) and b (1) fill --nnodes 1:2; host c arrives and
    # waits without counting itself in (the workers would end the
    # generation for nothing). b's worker exits 1 and b leaves: a re-forms,
    # c is taken in (in generation 1, or in 2 after a's rank 0 sees it
    # waiting), and a's workers, the same processes, end with places 0-1 of 4.
    rdzv = f"127.0.0.1:{free_port()}"
    common = ["--nnodes", "1:2", "--max-restarts", "5", "--settle-time", "5", "--join-timeout", "10",
              "--heartbeat-timeout", "2", "--rdzv", rdzv]
    a = elastic_host(hora_run, out, ["--nproc-per-node", "2"] + common, "room")
    check(a.when("rendezvous store", 10) is not None, "host a runs the store")
    b = elastic_host(hora_run, out, ["--nproc-per-node", "1"] + common, "room")
    check(wait_records(out, 0, 3, 15), "generation 0: hosts a and b, 3 workers")
    c = elastic_host(hora_run, out, ["--nproc-per-node", "2"] + common, "room")
    check(c.when(r"generation 0 runs without this host and has its --nnodes MAX hosts", 10) is not None,
          "host c waits for generation 0 to end")
    store = Store(rdzv, "hora")
    time.sleep(0.3)
    check(store.add("gen1/join", 0) == 0, "host c did not count itself into generation 1's join")
    check(all(h.proc.poll() is None for h in (a, b, c)), "every host still runs")
    open(os.path.join(out, "go"), "w").close()
    ra, rb, rc = wait_all({"a": a, "b": b, "c": c}, 20)
    check(ra == 0 and rc == 0, f"hosts a and c exit 0 (got {ra}, {rc})")
    check(rb == 1 and "every worker exited or failed, this host leaves the job" in b.stderr(),
          f"host b leaves, exit 1 (got {rb})")
    recs = read_elastic(out)
    last = max(g for (_, g) in recs)
    check(last in (1, 2), f"the last generation is 1 or 2 ({last})")
    a_ids = sorted(wid for (wid, g), r in recs.items() if g == 0 and r["PPID"] == str(a.proc.pid))
    c_ids = sorted(wid for (wid, g), r in recs.items() if r["PPID"] == str(c.proc.pid))
    check(len(a_ids) == 2 and len(c_ids) == 2, f"a's workers {a_ids}, c's {c_ids}")
    for local, wid in enumerate(a_ids):
        check_place(recs.get((wid, last), {}), f"worker {wid}, generation {last}", local, 4, local, 2, 0, 2)
        check(recs.get((wid, 0), {}).get("PID") == recs.get((wid, last), {}).get("PID"), f"worker {wid}: the same "
              "process")
    for local, wid in enumerate(c_ids):
        check_place(recs.get((wid, last), {}), f"newcomer {wid}, generation {last}", 2 + local, 4, local, 2, 1, 2)


def elastic_host_empty(hora_run, out, k_store, k_other):
    # The only worker of one host fails: that host has no live worker and
    # leaves (exit 1, named); the other host's two workers re-form as ranks
    # 0-1 of 2 and finish. When the host that leaves runs the store, it
    # keeps it until the job ends.
    rdzv = f"127.0.0.1:{free_port()}"
    common = ["--nnodes", "1:2", "--max-restarts", "5", "--settle-time", "5", "--join-timeout", "10",
              "--heartbeat-timeout", "2", "--rdzv", rdzv]
    a = elastic_host(hora_run, out, ["--nproc-per-node", str(k_store)] + common, "lose-single")
    check(a.when("rendezvous store", 10) is not None, "host a runs the store")
    b = elastic_host(hora_run, out, ["--nproc-per-node", str(k_other)] + common, "lose-single")
    ra, rb = a.wait(20), b.wait(20)
    a.show("a")
    b.show("b")
    # The host that stays (two workers), the one that leaves (one).
    (stay, rs, _), (empty, re_, _) = sorted([(a, ra, k_store), (b, rb, k_other)], key=lambda x: -x[2])
    check(rs == 0, f"the host with two workers finishes, exit 0 (got {rs})")
    check(re_ == 1, f"the host with one worker exits 1 (got {re_})")
    check(re.search(r"generation 0 failed: rank \d \(local rank 0 on host \d, pid \d+\) exited with status 1; "
                    r"host \d: every worker exited or failed, this host leaves the job", empty.stderr()) is not None,
          "it says it has no live worker and leaves")
    if empty is a:
        check("keeps the rendezvous store for the others until the job ends" in a.stderr()
              and "generation 1 finished the job; the rendezvous store goes away" in a.stderr(),
              "the store's host keeps the store until generation 1 finished the job")
    recs = read_elastic(out)
    ids = sorted(wid for (wid, g), r in recs.items() if g == 0 and r["PPID"] == str(stay.proc.pid))
    check(len(ids) == 2 and sorted((w, g) for (w, g) in recs if w in ids) == [(ids[0], 0), (ids[0], 1),
          (ids[1], 0), (ids[1], 1)], f"the 2 workers in generations 0 and 1: {sorted(recs)}")
    for local, wid in enumerate(ids):
        check_place(recs.get((wid, 1), {}), f"worker {wid}, generation 1", local, 2, local, 2, 0, 1)
    t_gen1 = stay.when(r"generation 1: host 0 of 1, ranks 0-1 of 2", 1)
    check(t_gen1 is not None and stay.elapsed < 5,
          f"generation 1 expected one host and closed before the settle time (5 s): done in {stay.elapsed:.2f} s")


def mode_elastic_host_empty(hora_run, out):
    elastic_host_empty(hora_run, out, 2, 1)


def mode_elastic_store_host_empty(hora_run, out):
    elastic_host_empty(hora_run, out, 1, 2)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "mpirun":
        # tests/env/netns-run's driver form: mpirun HORA_RUN MODE, then its
        # mpirun arguments (unused: hora-run needs no mpirun).
        sys.argv = [sys.argv[0], sys.argv[3], sys.argv[2]]
    if len(sys.argv) == 3 and sys.argv[1] == "elastic-worker":
        return elastic_worker(sys.argv[2])
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    mode, hora_run = sys.argv[1], os.path.abspath(sys.argv[2])
    out = tempfile.mkdtemp(prefix="hora-run-test.")
    try:
        globals()["mode_" + mode.replace("-", "_")](hora_run, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"{mode}: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
