"""hora.torch.DistributedOptimizer's zero-copy gradients: after the first
step every dense gradient is a view into shared memory (hvd.is_shared), the
views lie back to back in the order backward made them (each at an
ALIGN_BYTES multiple), later steps copy no gradient (the optimizer's
_hora_copies stays put) and their fused all-reduces run in place (rank 0's
timeline says "zero-copy"); zero_grad keeps the views under set_to_none True
and False; a gradient set to None (module.zero_grad) or replaced is copied
into its view and param.grad points back to it; groups lie together; the
parameters end equal to one process training on the concatenated batch."""
import json
import os
import shutil
import tempfile

from common import check, equal, hvd, run
import torch
from hora import ALIGN_BYTES

from test_torch_optimizer import STEPS, batch, compare, loss_fn, make_model, reference


def _train(zero, groups=None, timeline=None, predivide=1.0):
    """STEPS steps; zero(model, opt, step) clears the gradients. Returns the
    model, the optimizer and its copy count after each step."""
    r = hvd.rank()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), groups=groups,
                                   gradient_predivide_factor=predivide)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    copies = []
    for step in range(STEPS):
        zero(model, opt, step)
        if timeline and step == STEPS - 1:
            hvd.start_timeline(timeline)
        loss_fn(model, *batch(r, step)).backward()
        opt.step()
        if timeline and step == STEPS - 1:
            hvd.stop_timeline()
        copies.append(opt._hora_copies)
    return model, opt, copies


def _check_views(model, opt, what):
    params = list(model.parameters())
    check(all(p.grad is not None and hvd.is_shared(p.grad) for p in params), "%s: every grad is shared" % what)
    check(all(p.grad is opt._hora_views.get(p) for p in params), "%s: every grad is its view" % what)
    # Back to back in backprop order (the last layer's first), each at an ALIGN_BYTES multiple.
    order = opt._hora_order
    check(set(order) == set(params), "%s: the layout holds every parameter" % what)
    at = order[0].grad.data_ptr()
    for p in order:
        check(p.grad.data_ptr() == at, "%s: %s's view at offset %d" % (what, opt._parameter_names[p],
                                                                       p.grad.data_ptr() - at))
        at += -(-p.grad.numel() * p.grad.element_size() // ALIGN_BYTES) * ALIGN_BYTES
    return order


def _zero_paths(path):
    """The paths (zero-copy, fusion-buffer) of the ALLREDUCE spans of a stopped timeline."""
    with open(path) as f:
        events = json.load(f)
    return [e["args"]["path"] for e in events if e["ph"] == "B" and e["name"] == "ALLREDUCE"]


def test_views_no_copy():
    d = hvd.broadcast_object(tempfile.mkdtemp(prefix="hora-zc-") if hvd.rank() == 0 else None, name="zc.dir")
    tl = os.path.join(d, "tl.json")
    for set_to_none in (True, False):
        what = "opt.zero_grad(set_to_none=%s)" % set_to_none
        model, opt, copies = _train(lambda m, o, s: o.zero_grad(set_to_none=set_to_none), timeline=tl)
        order = _check_views(model, opt, what)
        names = [opt._parameter_names[p] for p in order]
        check(names == ["2.bias", "2.weight", "0.bias", "0.weight"], "%s: layout %s" % (what, names))
        check(copies == [0] * STEPS, "%s: no gradient copied (%s)" % (what, copies))
        compare(model, reference(1), what, 1e-6)
        if hvd.rank() == 0:
            paths = _zero_paths(tl)
            check(paths and all(p == "zero-copy" for p in paths), "%s: the last step's paths %s" % (what, paths))
    hvd.barrier()
    if hvd.rank() == 0:
        shutil.rmtree(d)


def test_set_to_none_module():
    # model.zero_grad(set_to_none=True) drops the views: each gradient is copied once and points back.
    model, opt, copies = _train(lambda m, o, s: m.zero_grad(set_to_none=True))
    _check_views(model, opt, "model.zero_grad(set_to_none=True)")
    n = len(list(model.parameters()))
    check(copies == [0] + [n * s for s in range(1, STEPS)], "model.zero_grad: %d copies a step (%s)" % (n, copies))
    compare(model, reference(1), "model.zero_grad(set_to_none=True)", 1e-6)

    def replace(m, o, step):  # the user's own tensors (zeros) in place of the views
        o.zero_grad()
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
    model, opt, copies = _train(replace, predivide=2.0)
    _check_views(model, opt, "param.grad replaced")
    check(copies == [0] + [n * s for s in range(1, STEPS)], "param.grad replaced: %s" % (copies,))
    compare(model, reference(1), "param.grad replaced", 1e-6)


def test_groups():
    groups = lambda m: [[m[0].weight, m[2].weight]]  # noqa: E731
    r = hvd.rank()
    model = make_model()
    base = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters(), groups=groups(model))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(STEPS):
        opt.zero_grad()
        loss_fn(model, *batch(r, step)).backward()
        opt.step()
    order = _check_views(model, opt, "groups")
    names = [opt._parameter_names[p] for p in order]
    i = names.index("0.weight")
    check(names[i - 1:i + 1] == ["2.weight", "0.weight"] or names[i:i + 2] == ["0.weight", "2.weight"],
          "groups: the group's members lie together (%s)" % names)
    check(opt._hora_copies == 0, "groups: no gradient copied (%d)" % opt._hora_copies)
    compare(model, reference(1), "groups", 1e-6)


def test_sparse_keeps_its_path():
    # An embedding's sparse gradient is not laid out; the dense ones are.
    r = hvd.rank()
    torch.manual_seed(7)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    lin = torch.nn.Linear(3, 1)
    params = list(emb.parameters()) + list(lin.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                   named_parameters=list(emb.named_parameters(prefix="emb")) +
                                   list(lin.named_parameters(prefix="lin")))
    hvd.broadcast_parameters({"w": emb.weight, "lw": lin.weight, "lb": lin.bias}, root_rank=0)
    for step in range(3):
        opt.zero_grad()
        idx = torch.tensor([(r + step) % 10, (2 * r + 1) % 10])
        lin(emb(idx)).sum().backward()
        opt.step()
    check(emb.weight not in opt._hora_views and emb.weight.grad.is_sparse, "sparse: the embedding keeps its path")
    check(lin.weight in opt._hora_views and hvd.is_shared(lin.weight.grad), "sparse: the linear layer is laid out")
    every = hvd.allgather(emb.weight.data.reshape(1, -1))
    check(bool((every == emb.weight.data.reshape(1, -1)).all()), "sparse: the embedding identical on every rank")


if __name__ == "__main__":
    run([test_views_no_copy, test_set_to_none_module, test_groups, test_sparse_keeps_its_path])
