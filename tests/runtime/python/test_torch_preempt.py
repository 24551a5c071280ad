"""hora.torch's preemption (hora/torch/preempt.py) under mpirun: with no
request nothing is raised; steps that differ raise HorovodInternalError on
every rank; HORA_PREEMPT_FILE appearing makes check_preempted raise
Preempted on every rank at the same step (rank 0 named: every rank sees the
file); a real SIGTERM that rank 0 sends itself before the third step makes
DistributedOptimizer.step() raise Preempted on every rank after that step's
update (the weights are the reference's after 3 steps, the process lives),
and every rank writes a file in the except block, which rank 0 then finds
for every rank with the agreed step. The SIGTERM case is last: a request is
never withdrawn."""
import os
import signal
import tempfile

# Before hvd.init reads the settings: a file name the ranks of this job share.
JOB = os.environ.get("OMPI_MCA_ess_base_jobid") or os.environ.get("PMIX_NAMESPACE") or str(os.getppid())
WORK = os.path.join(tempfile.gettempdir(), "hora-preempt-test-" + JOB)
os.makedirs(WORK, exist_ok=True)
STOP = os.path.join(WORK, "stop")
os.environ["HORA_PREEMPT_FILE"] = STOP

from common import check, equal, hvd, raises, run  # noqa: E402
import torch  # noqa: E402

LR = 0.25


def batch(step):
    # loss = sum(model(x)) has gradient sum(x) whatever the weights: small integers, exact averages at np 2.
    r = hvd.rank()
    return torch.tensor([[r + step + 1.0, 2.0 * r - step, 3.0, float(step % 2)]])


def reference_weight(w0, steps):
    w = w0.clone()
    for s in range(steps):
        g = sum(torch.tensor([[r + s + 1.0, 2.0 * r - s, 3.0, float(s % 2)]]) for r in range(hvd.size())) / hvd.size()
        w -= LR * g
    return w


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -1.0, 0.25, 2.0]]))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    return model, opt


def train_step(model, opt, step):
    opt.zero_grad()
    model(batch(step)).sum().backward()
    opt.step()


def no_request():
    hvd.preempt_watch()  # SIGTERM watched from here on, and every optimizer step agrees
    model, opt = model_and_optimizer()
    w0 = model.weight.detach().clone()
    for s in range(3):
        train_step(model, opt, s)  # must not raise
    equal(model.weight.detach(), reference_weight(w0, 3), "weights after 3 steps with no request")
    for s in range(3):
        hvd.check_preempted(s)
    raises(hvd.HorovodInternalError, lambda: hvd.check_preempted(10 + hvd.rank()), "steps that differ",
           contains="different steps")
    hvd.check_preempted(11)  # the runtime goes on


def file_appears():
    if hvd.rank() == hvd.size() - 1:
        open(STOP, "w").close()
    hvd.barrier()  # every rank sees it at the next check
    try:
        hvd.check_preempted(2)
        check(False, "check_preempted(2) with HORA_PREEMPT_FILE present did not raise")
    except hvd.Preempted as p:
        check(p.step == 2 and p.rank == 0 and p.causes == ["HORA_PREEMPT_FILE"],
              "file: Preempted step %d rank %d causes %s, expected 2, 0, ['HORA_PREEMPT_FILE']" %
              (p.step, p.rank, p.causes))
    hvd.barrier()
    if hvd.rank() == hvd.size() - 1:
        os.unlink(STOP)
    hvd.barrier()
    hvd.check_preempted(3)  # gone: no stop


def sigterm_in_optimizer():
    model, opt = model_and_optimizer()
    w0 = model.weight.detach().clone()
    caught = None
    try:
        for s in range(10):
            if s == 2 and hvd.rank() == 0:
                os.kill(os.getpid(), signal.SIGTERM)  # during the third step: stop after it
            train_step(model, opt, s)
    except hvd.Preempted as p:
        caught = p
        # What a script does here: save, on every rank its own file.
        with open(os.path.join(WORK, "saved.%d" % hvd.rank()), "w") as f:
            f.write("%d\n" % p.step)
    check(caught is not None, "SIGTERM on rank 0: no Preempted raised in 10 steps")
    if caught is None:
        return
    check(caught.step == 3 and caught.rank == 0 and caught.causes == ["SIGTERM"],
          "SIGTERM: Preempted step %d rank %d causes %s, expected 3, 0, ['SIGTERM']" %
          (caught.step, caught.rank, caught.causes))
    check(isinstance(caught, Exception) and not isinstance(caught, hvd.HorovodInternalError),
          "Preempted is an Exception and not a HorovodInternalError")
    equal(model.weight.detach(), reference_weight(w0, 3), "weights at the exception: the third step's update done")
    hvd.barrier()
    if hvd.rank() == 0:
        for r in range(hvd.size()):
            path = os.path.join(WORK, "saved.%d" % r)
            got = open(path).read().strip() if os.path.exists(path) else None
            check(got == "3", "rank %d's file in its except block: %r, expected '3'" % (r, got))
            if got is not None:
                os.unlink(path)
        os.rmdir(WORK)


run([no_request, file_appears, sigterm_in_optimizer])
