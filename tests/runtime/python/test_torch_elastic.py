"""hvd.elastic (hora/torch/elastic.py) under mpirun, where the world cannot
re-form (hora_elastic() 0): TorchState's commit/restore round trip is
bit-exact (model parameters and BN buffers, the optimizer's momentum and
step counts, user attributes changed in place), and training on from the
restored state repeats the lost steps bit for bit; sync() makes a rank whose
state differs equal to rank 0's, and takes the state from the lowest rank
that has one when rank 0's is new (a newcomer's); run() retries the
function after a real collective failure (a mismatched allreduce,
HorovodInternalError on every rank) from the last commit, through
shutdown and init (a DistributedOptimizer whose gradients were laid out in
shared blocks keeps working), with the reset callbacks run once per reset;
an error raised on one rank alone resets every rank (its shutdown fails
the others' pending collective); HostsUpdatedInterrupt resets without a rollback; any other exception passes
through; ElasticSampler splits what is left of an epoch over the ranks."""
import copy

from common import check, equal, hvd, raises, run
import torch

LR = 0.125


def data(step, n=4):
    """Inputs from (rank, step): a different batch on every rank."""
    r = hvd.rank()
    return torch.arange(n * 3, dtype=torch.float32).view(n, 3) * 0.25 - r + 0.5 * step


def net():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def trainer(model, momentum=0.9):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum, weight_decay=0.01)
    return hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())


def step(model, opt, s):
    opt.zero_grad()
    model(data(s)).pow(2).mean().backward()
    opt.step()


def snapshot(state):
    """Copies of everything a TorchState keeps, to compare bit for bit."""
    return ({k: v.clone() for k, v in state.model.state_dict().items()},
            copy.deepcopy(state.optimizer.state_dict()), copy.deepcopy(state.losses), state.epoch)


def same(got, want, what):
    model, opt, losses, epoch = got
    model_w, opt_w, losses_w, epoch_w = want
    check(model.keys() == model_w.keys(), "%s: model keys" % what)
    for k in model_w:
        equal(model[k], model_w[k], "%s: model %s" % (what, k))
    check(len(opt["state"]) == len(opt_w["state"]) > 0, "%s: optimizer state entries" % what)
    for pid, entry in opt_w["state"].items():
        for key, value in entry.items():
            if torch.is_tensor(value):
                equal(opt["state"][pid][key], value, "%s: optimizer %s.%s" % (what, pid, key))
            else:
                check(opt["state"][pid][key] == value, "%s: optimizer %s.%s" % (what, pid, key))
    check(opt["param_groups"] == opt_w["param_groups"], "%s: param groups" % what)
    check(losses == losses_w and epoch == epoch_w, "%s: attributes %r %r, want %r %r" %
          (what, losses, epoch, losses_w, epoch_w))


def differs(got, want):
    return any(not torch.equal(got[0][k], want[0][k]) for k in want[0]) or got[2] != want[2]


def commit_restore_round_trip():
    model = net()
    opt = trainer(model)
    state = hvd.elastic.TorchState(model, opt, losses=[], epoch=0)
    for s in range(2):
        step(model, opt, s)
        state.losses.append(float(s))
    state.epoch = 3
    state.commit()
    committed = snapshot(state)
    later = []
    for s in range(2, 4):
        step(model, opt, s)
        later.append({k: v.clone() for k, v in model.state_dict().items()})
    state.losses.append(99.0)  # in place: restore undoes it too
    state.epoch = 4
    check(differs(snapshot(state), committed), "round trip: training after the commit changed nothing")
    state.restore()
    same(snapshot(state), committed, "after restore")
    # Training on from the restored state repeats the two steps bit for bit
    # (momentum and BN statistics came back with the parameters).
    for i, s in enumerate(range(2, 4)):
        step(model, opt, s)
        for k, v in later[i].items():
            equal(model.state_dict()[k], v, "step %d again: %s" % (s, k))
    # Restore twice: the saved copy is not the live one.
    state.restore()
    same(snapshot(state), committed, "after a second restore")


def sync_from_rank_0():
    model = net()
    opt = trainer(model)
    state = hvd.elastic.TorchState(model, opt, losses=[1.5], epoch=2)
    step(model, opt, 0)
    state.commit()
    if hvd.rank() != 0:  # this rank's state differs from rank 0's
        with torch.no_grad():
            for p in model.parameters():
                p.add_(hvd.rank() + 1.0)
            model[1].running_mean.fill_(-3.0)
        for entry in opt.state.values():
            entry["momentum_buffer"].mul_(5.0)
        opt.param_groups[0]["lr"] = 9.0
        state.losses.append(7.0)
        state.epoch = 11
    mine = snapshot(state)
    root = hvd.broadcast_object(mine, root_rank=0, name="test.sync.root_snapshot")
    state.sync()
    same(snapshot(state), root, "after sync")
    state.restore()  # sync saved what it received
    same(snapshot(state), root, "restore after sync")
    if hvd.rank() != 0:
        check(differs(mine, root), "sync: rank %d's state did not differ" % hvd.rank())


def sync_from_lowest_with_state():
    """Rank 0 is a newcomer (a fresh state, never committed or synced); the
    others have trained and committed: they are the source."""
    model = net()
    opt = trainer(model)
    state = hvd.elastic.TorchState(model, opt, losses=[], epoch=0)
    for s in range(2):
        step(model, opt, s)
    state.losses.append(0.25)
    state.epoch = 5
    state.commit()
    trained = snapshot(state)
    if hvd.rank() == 0:
        model = net()
        opt = trainer(model)
        state = hvd.elastic.TorchState(model, opt, losses=[], epoch=0)
    source = hvd.broadcast_object(snapshot(state), root_rank=1, name="test.sync.source_snapshot")
    state.sync()
    same(snapshot(state), source, "sync into a newcomer")
    if hvd.rank() == 1:  # the source keeps its state (BN statistics are each rank's own)
        same(snapshot(state), trained, "the source after the sync")
    # Every rank has state now: the next sync comes from rank 0.
    if hvd.rank() == 0:
        state.epoch = 6
        state.commit()
    check(hvd.elastic._sync_root(state._has_state) == 0, "after a sync every rank has state")


class Mismatch:
    """A real collective failure on every rank: shapes that differ."""

    @staticmethod
    def fail():
        hvd.allreduce(torch.zeros(hvd.rank() + 1), name="test.elastic.mismatch")


def run_retries_after_internal_error():
    model = net()
    opt = trainer(model)
    state = hvd.elastic.TorchState(model, opt, losses=[], epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(("a", hvd.size())), lambda: resets.append("b")])
    calls, seen, weights = [], [], {}

    @hvd.elastic.run
    def train(state, last):
        calls.append(state.epoch)
        for s in range(state.epoch, last):
            step(state.model, state.optimizer, s)
            weights.setdefault(s, []).append({k: v.clone() for k, v in state.model.state_dict().items()})
            state.losses.append(float(s))
            state.epoch = s + 1
            if s == 2 and len(calls) == 1:
                seen.append(snapshot(state))
                Mismatch.fail()  # raises HorovodInternalError on every rank; s 2 is not committed
            state.commit()
        return "done %d" % state.epoch

    got = train(state, 5)
    check(got == "done 5", "run returned %r" % got)
    check(calls == [0, 2], "run called the function at epochs %r, want [0, 2]" % calls)
    check(resets == [("a", hvd.size()), "b"], "reset callbacks %r" % resets)
    check(state.losses == [0.0, 1.0, 2.0, 3.0, 4.0], "losses %r" % state.losses)
    check(seen and seen[0][2] == [0.0, 1.0, 2.0], "before the failure %r" % (seen[0][2] if seen else None))
    # Step 2 ran twice (once lost to the failure), from the same committed
    # parameters: the same parameters both times, after the runtime was
    # restarted. (The sync after the reset gave every rank rank 0's BN
    # statistics, each rank's own before: only rank 0's stay the same.)
    check(len(weights[2]) == 2, "step 2 ran %d times" % len(weights[2]))
    params = {k for k, _ in state.model.named_parameters()}
    for k, v in weights[2][0].items():
        if k in params or hvd.rank() == 0:
            equal(weights[2][1][k], v, "step 2 redone: %s" % k)
    check(hvd.is_initialized(), "initialized after run")
    # Every rank took part in the retried steps: their weights agree.
    w = state.model.state_dict()["0.weight"]
    equal(hvd.broadcast(w, root_rank=0, name="test.elastic.final"), w, "weights agree after run")


def run_one_rank_fails():
    """A HorovodInternalError on the last rank alone: its reset (shutdown)
    fails the others' pending allreduce (HORA_ERR_SHUTDOWN), so every rank
    rolls back and calls again, as in Horovod."""
    state = hvd.elastic.ObjectState(n=0)
    calls = []

    @hvd.elastic.run
    def count(state):
        calls.append(state.n)
        total = None
        for i in range(state.n, 4):
            if len(calls) == 1 and i == 2 and hvd.rank() == hvd.size() - 1:
                raise hvd.HorovodInternalError("this rank alone")
            total = hvd.allreduce(torch.tensor([state.n + hvd.rank()]), name="test.one.%d" % i, op=hvd.Sum)
            state.n += 1
            state.commit()
        return total

    total = count(state)
    check(calls == [0, 2], "one rank failed: calls %r, want [0, 2]" % calls)
    want = 3 * hvd.size() + hvd.size() * (hvd.size() - 1) // 2
    check(state.n == 4 and int(total.item()) == want, "one rank failed: n %d, total %s, want 4, %d" %
          (state.n, total, want))


def run_hosts_updated_without_rollback():
    state = hvd.elastic.ObjectState(n=0, log=[])
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    calls = []

    @hvd.elastic.run
    def work(state):
        calls.append(state.n)
        state.n += 1
        state.log.append(hvd.rank())
        if len(calls) == 1:
            raise hvd.elastic.HostsUpdatedInterrupt(False)  # not committed, and not rolled back
        return state.n

    check(work(state) == 2, "HostsUpdatedInterrupt: result %r" % state.n)
    check(calls == [0, 1], "HostsUpdatedInterrupt: calls %r" % calls)
    check(resets == [hvd.size()], "HostsUpdatedInterrupt: resets %r" % resets)
    # The sync after the reset sent rank 0's values.
    check(state.log == [0, hvd.rank()], "HostsUpdatedInterrupt: log %r" % state.log)


def run_passes_other_errors():
    state = hvd.elastic.ObjectState(n=0)

    @hvd.elastic.run
    def bad(state):
        state.n += 1
        raise KeyError("not an elastic event")

    raises(KeyError, lambda: bad(state), "other exceptions pass through run", "not an elastic event")
    check(state.n == 1, "called once: %d" % state.n)
    check(hvd.is_initialized(), "no reset for other exceptions")


def commit_under_mpirun():
    check(not hvd.elastic._can_reform(), "mpirun: the world cannot re-form")
    state = hvd.elastic.ObjectState(x=1)
    for _ in range(3):
        state.commit()  # asks for hosts (none): never raises here
    check(state.x == 1, "commit")


def elastic_sampler():
    dataset = list(range(11))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
    state = hvd.elastic.TorchState(sampler=sampler, epoch=0)
    import random
    order = list(range(11))
    random.Random(3).shuffle(order)
    n = -(-11 // hvd.size())
    mine = list(sampler)
    want = (order * 2)[:n * hvd.size()][hvd.rank()::hvd.size()]
    check(mine == want and len(sampler) == n, "sampler: %r, want %r" % (mine, want))
    sampler.record_batch(0, 2)  # 2 samples on each rank
    state.commit()
    sampler.set_epoch(1)
    state.restore()
    check(sampler.epoch == 0 and sampler.processed_num == 2 * hvd.size(), "sampler restored %r" % sampler.state_dict())
    left = order[2 * hvd.size():]
    n = -(-len(left) // hvd.size())
    want = (left * 2)[:n * hvd.size()][hvd.rank()::hvd.size()]
    check(list(sampler) == want, "sampler after restore: %r, want %r" % (list(sampler), want))
    everyone = hvd.allgather_object(list(sampler), name="test.sampler.all")
    check(set(sum(everyone, [])) == set(left), "the ranks together cover what is left")


def refusals():
    raises(TypeError, lambda: hvd.elastic.TorchState(None, None, 5), "TorchState takes keywords after the optimizer")
    check(issubclass(hvd.elastic.HorovodInternalError, RuntimeError) and
          hvd.elastic.HorovodInternalError is hvd.HorovodInternalError, "one HorovodInternalError")
    check(hvd.elastic.HostsUpdatedInterrupt(True).skip_sync, "skip_sync")


run([commit_restore_round_trip, sync_from_rank_0, sync_from_lowest_with_state, run_retries_after_internal_error,
     run_one_rank_fails, run_hosts_updated_without_rollback, run_passes_other_errors, commit_under_mpirun, elastic_sampler, refusals])
