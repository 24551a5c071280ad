"""hvd.elastic under hora-run --elastic, with real processes:

    test_torch_elastic_run.py kill HORA_RUN PYTHON
        one hora-run of 3 workers; worker 0.2 SIGKILLs itself before the
        allreduce of step 7. The two survivors get HorovodInternalError
        (HORA_ERR_PEER_LOST), roll back to the last commit (after step 5),
        re-form as a world of 2 in the same processes and finish the 12
        steps, redoing step 6 with 2 ranks.
    test_torch_elastic_run.py lost-host HORA_RUN PYTHON
        two hora-runs of 2 workers (--nnodes 1:2, UCX between them); the
        test SIGKILLs host 1's hora-run, its workers with it, once step 6 is
        done. Host 0's workers get HorovodInternalError within about the
        heartbeat timeout, roll back to their last commit and finish as a
        world of 2.
    test_torch_elastic_run.py newcomer HORA_RUN PYTHON
        one hora-run of 2 workers (--nnodes 1:2); a second hora-run of 2
        arrives mid-run. The next commit raises HostsUpdatedInterrupt on both
        ranks; they re-form (hora_elastic_reform) as a world of 4 with the
        newcomers, whose fresh state (other weights, no momentum, no history)
        the sync replaces by rank 0's, without a rollback; all four finish.
    test_torch_elastic_run.py retry HORA_RUN PYTHON
        one hora-run of 2 workers and failures without a loss: a mismatched
        allreduce at step 3 (HorovodInternalError on both ranks), then an
        error the last rank raises alone at step 5 (its reset fails the
        other's pending allreduce). Each time both ranks roll back to the
        last commit and hvd.elastic.run ends the generation on purpose
        (hora_elastic_reform: libhora joins no next generation after a plain
        shutdown); the same two processes finish in generation 2.
    test_torch_elastic_run.py worker PLAN OUT     (each worker, under hora-run)

The training is exact: a float64 Linear model trained by SGD with momentum
through DistributedOptimizer(op=Sum) on inputs from (step, rank), so the
summed gradient of a step is known for each world size and every value is a
dyadic rational that float64 holds exactly. Every worker that finishes
checks, bit for bit, that its weights are those of steps 0..N-1 applied once
each with the world size its history attribute (kept in the TorchState)
records for each step, that those sizes are what the plan makes (3 before
the last commit and 2 after; 4 and 2 for lost-host; 2 before the interrupt's
commit and 4 after),
how often and from which step the function was called, the reset callbacks,
the sizes and the generation (1; 2 for retry). Each writes its verdict to OUT; the test
wants every hora-run to exit 0, a verdict from every worker that should
finish, none from the killed one, and rank 0's line "hora.torch.elastic:
world A -> B". It prints the time from the kill to the first step done after
the re-form, or the step at which the newcomers were taken in.
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time

PLANS = {
    # steps, commit every, step where the victim dies, the victim, seconds per step
    "kill": dict(steps=12, commit=2, kill=7, victim="0.2", pause=0.0),
    "newcomer": dict(steps=40, commit=2, kill=None, victim=None, pause=0.15),
    "retry": dict(steps=8, commit=2, kill=None, victim=None, pause=0.0),
    "lost-host": dict(steps=40, commit=2, kill=None, victim=None, pause=0.15),
}
# The retry plan's failures without a loss, each the first time its step comes:
# a mismatched allreduce on every rank, then an error that the last rank raises alone.
RETRY_ERRORS = {3: "mismatch", 5: "alone"}
LR = 1.0 / 16
MOMENTUM = 0.5
W0 = [0.5, -1.0, 0.25, 2.0]


def inputs(step, rank):
    return [float(step + 1 + rank), float(2 * rank - step), 0.5 * step, 1.0]


def expected_weights(sizes):
    """SGD with momentum (torch's order: buf = m * buf + g; w -= lr * buf) on
    the summed gradients, replayed in Python floats (exact here)."""
    w, buf = list(W0), None
    for step, size in enumerate(sizes):
        g = [sum(inputs(step, r)[i] for r in range(size)) for i in range(4)]
        buf = g if buf is None else [MOMENTUM * b + gi for b, gi in zip(buf, g)]
        w = [wi - LR * b for wi, b in zip(w, buf)]
    return w


def worker(name, out):
    import torch
    import hora.torch as hvd

    plan = PLANS[name]
    wid = os.environ["HORA_WORKER_ID"]
    newcomer = os.environ.get("HORA_GENERATION") != "0"
    hvd.init()
    first_size = hvd.size()
    model = torch.nn.Linear(4, 1, bias=False).double()
    with torch.no_grad():  # a newcomer's own weights are not the job's: the sync must replace them
        model.weight.copy_(torch.tensor([[9.0, 9.0, 9.0, 9.0] if newcomer else W0], dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    state = hvd.elastic.TorchState(model, opt, step=0, history=[])
    resets, calls, resumed, failed = [], [], [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        while state.step < plan["steps"]:
            s = state.step
            if wid == plan["victim"] and s == plan["kill"]:
                with open(os.path.join(out, "kill_time"), "w") as f:
                    f.write("%.6f\n" % time.time())
                os.kill(os.getpid(), signal.SIGKILL)
            if name == "retry" and RETRY_ERRORS.get(s) and s not in failed:
                failed.append(s)
                if RETRY_ERRORS[s] == "mismatch":
                    hvd.allreduce(torch.zeros(hvd.rank() + 1), name="elastic.test.mismatch")
                elif hvd.rank() == hvd.size() - 1:
                    raise hvd.HorovodInternalError("raised by rank %d alone" % hvd.rank())
            time.sleep(plan["pause"])
            opt.zero_grad()
            model(torch.tensor([inputs(s, hvd.rank())], dtype=torch.float64)).sum().backward()
            opt.step()
            state.history.append([s, hvd.size()])
            state.step += 1
            if hvd.rank() == 0:
                if resets and not resumed:
                    resumed.append(time.time())
                print("elastic test: step %d done by %d ranks" % (s, hvd.size()), flush=True)
            if state.step % plan["commit"] == 0:
                state.commit()

    train(state)
    failures = []
    sizes = [n for _, n in state.history]
    if [s for s, _ in state.history] != list(range(plan["steps"])):
        failures.append("history %r: want steps 0..%d once each" % (state.history, plan["steps"] - 1))
    got = model.weight.detach()[0].tolist()
    if got != expected_weights(sizes):
        failures.append("weights %r, want %r (sizes %r)" % (got, expected_weights(sizes), sizes))
    if name == "kill":
        k = plan["kill"] - 1 - (plan["kill"] - 1) % plan["commit"]  # the step count at the last commit
        want = dict(sizes=[3] * k + [2] * (plan["steps"] - k), calls=[0, k], resets=[2], first=3, size=2)
    elif name == "retry":  # each failure goes back to the commit before it: steps 2 and 4
        k = None
        want = dict(sizes=[2] * plan["steps"], calls=[0, 2, 4], resets=[2, 2], first=2, size=2)
    elif name == "lost-host":  # back to the last commit before the loss, whenever it came
        k = sizes.index(2) if 2 in sizes else -1
        if not (0 < k < plan["steps"] and k % plan["commit"] == 0):
            failures.append("world of 2 from step %d: want a commit after the first" % k)
        want = dict(sizes=[4] * k + [2] * (plan["steps"] - k), calls=[0, k], resets=[2], first=4, size=2)
    else:
        k = sizes.index(4) if 4 in sizes else -1
        if not (0 < k < plan["steps"] and k % plan["commit"] == 0):
            failures.append("newcomers taken in at step %d: want a commit after the first" % k)
        want = dict(sizes=[2] * k + [4] * (plan["steps"] - k), calls=[k] if newcomer else [0, k],
                    resets=[] if newcomer else [4], first=4 if newcomer else 2, size=4)
    for what, value in (("sizes", sizes), ("calls", calls), ("resets", resets), ("first", first_size),
                        ("size", hvd.size())):
        if value != want[what]:
            failures.append("%s %r, want %r" % (what, value, want[what]))
    generation = hvd.elastic._elastic_function("hora_generation")
    want_generation = 2 if name == "retry" else 1
    if generation is None or generation() != want_generation:
        failures.append("generation %s, want %d" % (None if generation is None else generation(), want_generation))
    verdict = {"worker": wid, "rank": hvd.rank(), "failures": failures, "taken_in": k}
    if resumed:
        verdict["resumed"] = resumed[0]
    with open(os.path.join(out, "verdict." + wid), "w") as f:
        json.dump(verdict, f)
    hvd.shutdown()
    return 0


def main(name, hora_run, python):
    # tests/runtime/elastic/elastic.py's Host (one hora-run, its output in a
    # file) and start_hosts (hora-runs sharing a store on loopback).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "elastic"))
    from elastic import Host, free_port, start_hosts

    plan = PLANS[name]
    out = tempfile.mkdtemp(prefix="hora-elastic-%s-" % name)
    worker_cmd = [python, os.path.abspath(__file__), "worker", name, out]
    common = ["--elastic", "--max-restarts", "5", "--join-timeout", "30", "--heartbeat-timeout", "2"]
    t0 = time.monotonic()
    bad = []
    if name in ("kill", "retry"):
        k = 3 if name == "kill" else 2
        print("$ hora-run --nproc-per-node %d %s %s" % (k, " ".join(common), " ".join(worker_cmd)), flush=True)
        hosts = [Host(hora_run, ["--nproc-per-node", str(k)] + common + worker_cmd, out, "host0")]
        finishers = ["0.0", "0.1"]
        world = "world 3 -> 2" if name == "kill" else "world 2 -> 2 in generation 2"
    elif name == "lost-host":
        hosts, port = start_hosts(hora_run, out, 2, 2, common + worker_cmd, "1:2")
        print("$ hora-run --nproc-per-node 2 --nnodes 1:2 --rdzv 127.0.0.1:%d %s %s  (twice)" %
              (port, " ".join(common), " ".join(worker_cmd)), flush=True)
        hosts[0].wait_for(r"generation 0: host 0 of 2", 60)
        hosts[0].wait_for(r"elastic test: step 6 done by 4 ranks", 60)
        with open(os.path.join(out, "kill_time"), "w") as f:
            f.write("%.6f\n" % time.time())
        os.kill(hosts[1].p.pid, signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
        finishers, world = ["0.0", "0.1"], "world 4 -> 2"
    else:
        args = ["--nproc-per-node", "2", "--nnodes", "1:2", "--rdzv", "127.0.0.1:%d" % free_port()] + common
        print("$ hora-run %s %s  (twice)" % (" ".join(args), " ".join(worker_cmd)), flush=True)
        hosts = [Host(hora_run, args + worker_cmd, out, "host0")]
        hosts[0].wait_for(r"elastic test: step 3 done", 60)
        hosts.append(Host(hora_run, args + worker_cmd, out, "host1"))
        finishers, world = ["0.0", "0.1", "1.0", "1.1"], "world 2 -> 4"
    codes = [h.finish(120) for h in hosts]
    for i, h in enumerate(hosts):
        print("---- host %d (exit %s)\n%s" % (i, codes[i], h.text()), flush=True)
        want = -signal.SIGKILL if name == "lost-host" and i == 1 else 0
        if codes[i] != want:
            bad.append("hora-run of host %d: exit %s, want %d" % (i, codes[i], want))
    verdicts = {}
    for entry in sorted(os.listdir(out)):
        if entry.startswith("verdict."):
            with open(os.path.join(out, entry)) as f:
                verdicts[entry[8:]] = json.load(f)
    if sorted(verdicts) != finishers:
        bad.append("verdicts from %s, want %s" % (sorted(verdicts), finishers))
    for wid, v in sorted(verdicts.items()):
        bad += ["worker %s (rank %d): %s" % (wid, v["rank"], f) for f in v["failures"]]
    if not any(("hora.torch.elastic: " + world) in h.text() for h in hosts):
        bad.append("no 'hora.torch.elastic: %s' line" % world)
    if name in ("kill", "lost-host"):
        try:
            with open(os.path.join(out, "kill_time")) as f:
                killed = float(f.read())
            resumed = [v["resumed"] for v in verdicts.values() if "resumed" in v]
            if resumed:
                print("kill to the first step done after the re-form: %.2f s" % (resumed[0] - killed))
        except OSError:
            bad.append("worker %s never reached step %s" % (plan["victim"], plan["kill"]))
    elif name == "newcomer":
        print("newcomers taken in after step %s" % sorted({v["taken_in"] - 1 for v in verdicts.values()}))
    for b in bad:
        print("FAIL " + b, flush=True)
    print("%s: %s in %.1f s" % (name, "FAIL" if bad else "ok", time.monotonic() - t0), flush=True)
    if bad:
        print("the workers' files are kept in " + out)
    else:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker" and sys.argv[2] in PLANS:
        sys.exit(worker(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 4 or sys.argv[1] not in PLANS:
        sys.exit("usage: %s kill|lost-host|newcomer|retry HORA_RUN PYTHON | worker PLAN OUT" % sys.argv[0])
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
