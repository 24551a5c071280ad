"""Model/optimizer/object broadcasts and allgather_object, as horovod.torch.functions.
Every transfer is a broadcast or allgather of mpi_ops (libhora requests)."""
import io
import pickle

import torch

from . import mpi_ops as _ops

try:
    import cloudpickle as _pickler
except ImportError:  # cloudpickle pickles lambdas and local classes; pickle the rest
    _pickler = pickle


def broadcast_parameters(params, root_rank, prefix="Parameter."):
    """Broadcast, in place, a model's state_dict() or named_parameters() (or a
    list of tensors / (name, tensor) pairs) from root_rank."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        try:
            params = list(params)  # a generator such as model.named_parameters()
        except TypeError:
            raise ValueError("broadcast_parameters: invalid params of type %s" % type(params).__name__) from None
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    handles = []
    for name, p in params:
        if p is None:
            continue
        handles.append(_ops.broadcast_async_(p, root_rank, None if name is None else prefix + str(name)))
    for h in handles:
        _ops.synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter."):
    """Make every rank's optimizer state (per-parameter state tensors and
    scalars, and the param groups' options) equal root_rank's."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()
    if len(state_dict["state"]) == 0:
        # A new optimizer has no state yet: create it with a step on zero
        # gradients, so every rank has the same tensors to receive into.
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = p.data.new(p.size()).zero_()
        step = getattr(optimizer, "_hora_plain_step", None)
        (step or optimizer.step)()
        state_dict = optimizer.state_dict()

    params = [p for g in optimizer.param_groups for p in g["params"]]
    tensors, scalars = [], {}
    for pid in sorted(state_dict["state"]):
        for key in sorted(state_dict["state"][pid]):
            value = state_dict["state"][pid][key]
            if torch.is_tensor(value):
                tensors.append(("%s%d.%s" % (prefix, pid, key), value))
            else:
                scalars[(pid, key)] = value
    options = [{k: v for k, v in g.items() if k != "params"} for g in state_dict["param_groups"]]
    # Options and scalar state travel pickled; the tensors in place.
    options, scalars = broadcast_object((options, scalars), root_rank, name=prefix + "optimizer.options")
    broadcast_parameters(tensors, root_rank, prefix="")
    for group, opts in zip(optimizer.param_groups, options):
        group.update(opts)
    for (pid, key), value in scalars.items():
        if pid < len(params):
            optimizer.state[params[pid]][key] = value


def broadcast_object(obj, root_rank=0, name=None, process_set=_ops.global_process_set):
    """obj of root_rank (pickled) on every rank."""
    name = _ops._auto_name("broadcast_object", name, process_set)
    if _ops.rank() == root_rank:
        buf = io.BytesIO()
        _pickler.dump(obj, buf)
        data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    _ops.broadcast_(length, root_rank, name=name + ".size", process_set=process_set)
    if _ops.rank() != root_rank:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    _ops.broadcast_(data, root_rank, name=name + ".data", process_set=process_set)
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=_ops.global_process_set):
    """A list of every rank's obj (pickled), in rank order."""
    name = _ops._auto_name("allgather_object", name, process_set)
    buf = io.BytesIO()
    _pickler.dump(obj, buf)
    data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
    sizes = _ops.allgather(torch.tensor([data.numel()], dtype=torch.int64), name=name + ".sizes",
                           process_set=process_set)
    gathered = _ops.allgather(data, name=name + ".data", process_set=process_set).numpy().tobytes()
    out, off = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[off:off + n]))
        off += n
    return out
