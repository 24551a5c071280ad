"""hora.torch's process sets: add_process_set / remove_process_set /
init(process_sets=...), every collective with process_set=, a
DistributedOptimizer on a set, and the refusals, exactly: inputs are a
function of (rank, index), so each rank computes the expected result.
mpirun -np N python3 test_torch_sets.py   (N >= 2)"""
from common import check, equal, hvd, raises, run
import torch


def halves():
    n = hvd.size()
    return [q for q in range(n) if q % 2 == 0], [q for q in range(n) if q % 2 == 1]


def value(r, shape, k=0):
    return (torch.arange(torch.Size(shape).numel(), dtype=torch.float64).reshape(shape) + 100 * r + k)


def test_collectives_on_halves():
    r = hvd.rank()
    even_ranks, odd_ranks = halves()
    even = hvd.add_process_set(even_ranks)
    odd = hvd.add_process_set(hvd.ProcessSet(odd_ranks))
    mine, other = (even, odd) if r % 2 == 0 else (odd, even)
    members = mine.ranks
    check(mine.included() and not other.included(), "included(): %s / %s" % (mine, other))
    check(mine.size() == len(members) and mine.rank() == members.index(r),
          "size %s rank %s of %s" % (mine.size(), mine.rank(), mine))
    check(other.rank() == -1, "rank() outside the set: %s" % other.rank())
    # allreduce (the same unnamed names on both halves at once), grouped, in place
    s = hvd.allreduce(value(r, (4, 3)), op=hvd.Sum, process_set=mine)
    equal(s, sum(value(q, (4, 3)) for q in members), "allreduce on %s" % mine)
    a = hvd.allreduce(value(r, (5,)) * len(members), op=hvd.Average, process_set=mine)
    equal(a, sum(value(q, (5,)) for q in members), "average on %s" % mine)
    g = hvd.grouped_allreduce([value(r, (2,)), value(r, (3,), 7)], op=hvd.Sum, process_set=mine)
    equal(g[1], sum(value(q, (3,), 7) for q in members), "grouped allreduce on %s" % mine)
    t = value(r, (6,))
    hvd.allreduce_(t, op=hvd.Max, process_set=mine)
    equal(t, value(max(members), (6,)), "allreduce_ max on %s" % mine)
    # allgather: a first dimension per member; rows in the set's order
    ga = hvd.allgather(torch.full((r + 1, 2), float(r)), process_set=mine)
    equal(ga, torch.cat([torch.full((q + 1, 2), float(q)) for q in members]), "allgather on %s" % mine)
    # broadcast from the set's last member (a world rank, as Horovod)
    root = members[-1]
    b = hvd.broadcast(value(r, (3,)), root, process_set=mine)
    equal(b, value(root, (3,)), "broadcast from %d on %s" % (root, mine))
    raises(ValueError, lambda: hvd.broadcast(value(r, (3,)), other.ranks[0] if other.ranks else -1,
                                             process_set=mine), "broadcast from a rank outside the set",
           "not a member")
    # reducescatter: 2m+1 rows split over the members
    m = len(members)
    rs = hvd.reducescatter(value(r, (2 * m + 1, 2)), op=hvd.Sum, process_set=mine)
    full = sum(value(q, (2 * m + 1, 2)) for q in members)
    p = members.index(r)
    first = p * 2 + min(p, 1)
    equal(rs, full[first:first + 2 + (1 if p < 1 else 0)], "reducescatter on %s" % mine)
    # alltoall: member p sends p + j + 1 rows to member j
    x = torch.cat([torch.full((p + j + 1, 1), float(100 * r + j)) for j in range(m)])
    out, rsplits = hvd.alltoall(x, splits=[p + j + 1 for j in range(m)], process_set=mine)
    want = torch.cat([torch.full((j + p + 1, 1), float(100 * members[j] + p)) for j in range(m)])
    equal(out, want, "alltoall on %s" % mine)
    equal(rsplits, torch.tensor([j + p + 1 for j in range(m)], dtype=torch.int32), "received splits")
    hvd.barrier(process_set=mine)
    # broadcast_object / allgather_object on the set
    obj = hvd.broadcast_object({"from": r}, root_rank=members[0], process_set=mine)
    check(obj == {"from": members[0]}, "broadcast_object on %s: %s" % (mine, obj))
    objs = hvd.allgather_object(r * 3, process_set=mine)
    check(objs == [q * 3 for q in members], "allgather_object on %s: %s" % (mine, objs))
    # a set this rank is not in, an unadded one, a duplicate
    if other.ranks:
        raises(ValueError, lambda: hvd.allreduce(value(r, (2,)), process_set=other), "allreduce outside the set",
               "not a member")
    raises(ValueError, lambda: hvd.allreduce(value(r, (2,)), process_set=hvd.ProcessSet([0])),
           "an unadded set", "has not been added")
    raises(ValueError, lambda: hvd.add_process_set(even_ranks), "a duplicate set", "duplicate")
    # the world still works, then removal
    w = hvd.allreduce(value(r, (2,)), op=hvd.Sum)
    equal(w, sum(value(q, (2,)) for q in range(hvd.size())), "world allreduce beside the sets")
    check(hvd.remove_process_set(odd) and hvd.remove_process_set(even), "remove_process_set")
    check(not hvd.remove_process_set(even) and not hvd.remove_process_set(hvd.global_process_set),
          "removing twice / the global set returns False")
    raises(ValueError, lambda: hvd.allreduce(value(r, (2,)), process_set=even), "a removed set",
           "has not been added")


def test_optimizer_on_a_set():
    """Two sets of ranks train their own copy: each set's weights move by
    its own members' average gradient; ranks agree within a set only."""
    r = hvd.rank()
    even_ranks, odd_ranks = halves()
    sets = [hvd.add_process_set(even_ranks), hvd.add_process_set(odd_ranks)]
    mine = sets[r % 2]
    w = torch.nn.Parameter(torch.zeros(4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("w", w)],
                                   process_set=mine)
    for step in range(3):
        opt.zero_grad()
        (w * (r + 1 + step)).sum().backward()  # gradient r + 1 + step everywhere
        opt.step()
    mean = sum(q + 1 for q in mine.ranks) / len(mine.ranks)
    equal(w.detach(), torch.full((4,), -(3 * mean + 3)), "weights after 3 steps on %s" % mine)
    for s in sets:
        hvd.remove_process_set(s)


def test_static_sets():
    """hvd.init(process_sets=[...]) after a shutdown: the sets exist at once."""
    even_ranks, odd_ranks = halves()
    hvd.shutdown()
    sets = [hvd.ProcessSet(even_ranks), hvd.ProcessSet(odd_ranks)]
    hvd.init(process_sets=sets)
    r = hvd.rank()
    check(all(s.process_set_id for s in sets), "init(process_sets=...) ids: %s" % sets)
    mine = sets[r % 2]
    s = hvd.allreduce(torch.tensor([float(r)]), op=hvd.Sum, process_set=mine)
    equal(s, torch.tensor([float(sum(mine.ranks))]), "allreduce on a set made at init")


run([test_collectives_on_halves, test_optimizer_on_a_set, test_static_sets])
