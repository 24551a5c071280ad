"""DistributedOptimizer, as horovod.torch.optimizer: a hook on each
parameter's gradient accumulator submits an async all-reduce of the gradient
(libhora request, named after the parameter) as soon as backward produced it;
step() waits for them all, then runs the wrapped optimizer's step.

groups (Horovod's): an int splits the parameters, in rank 0's order, into
that many groups; a list of parameter lists names the groups (the parameters
left out are a group each). A group's gradients go as one grouped allreduce
(negotiated together) once backward produced all of them. Sparse gradients
take Horovod's sparse path (sparse_allreduce_async: allgathers of indices and
values) unless sparse_as_dense, which all-reduces them dense."""
import os
import warnings
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from . import collectives as _coll
from .compression import Compression
from .functions import broadcast_object


def _split_list(items, n):
    """items in n chunks of near-equal length (Horovod's split_list)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _named_parameters(param_groups, named_parameters):
    """The (name, parameter) pairs of an optimizer's parameters: the user's,
    checked as Horovod checks them, or made up from the groups."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%s.%s" % (i, j), v)
                            for i, group in enumerate(param_groups)
                            for j, v in enumerate(group["params"])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually "
                         "produced by model.named_parameters().")
    names = [k for k, _ in named_parameters]
    dups = sorted({k for k in names if names.count(k) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: %s" %
                         ", ".join(dups))
    all_ids = {id(v) for g in param_groups for v in g["params"]}
    named_ids = {id(v) for _, v in named_parameters}
    if len(all_ids - named_ids):
        raise ValueError("named_parameters was specified, but one or more model parameters were not "
                         "named. Python object ids: %s" % ", ".join(str(i) for i in sorted(all_ids - named_ids)))
    return named_parameters


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=_ops.Average,
                 gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=_ops.global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = _named_parameters(self.param_groups, named_parameters)
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in seen:
                            raise ValueError("A parameter can only appear once in groups.")
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        # A rank outside process_set neither reduces nor waits (Horovod's).
        if self.process_set.included() and (_ops.size() > 1 or os.environ.get("HOROVOD_ELASTIC") == "1"):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
            # Every rank forms the same groups: in rank 0's order of the parameters (a collective).
            order = broadcast_object([self._parameter_names.get(p) for p in p_list], root_rank=0,
                                     process_set=self.process_set)
            p_list = sorted(p_list, key=lambda p: order.index(self._parameter_names.get(p)))
            if isinstance(self._groups, list):
                ids = {id(p) for p in p_list}
                p_groups, grouped = [], set()
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in ids])
                    grouped.update(id(p) for p in p_groups[-1])
                p_groups += [[p] for p in p_list if id(p) not in grouped]
            else:
                p_groups = _split_list(p_list, self._groups)
            for group in (tuple(g) for g in p_groups):
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The AccumulateGrad node of p: its hook runs once p.grad holds the new gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _scales(self):
        if self.op == _ops.Average:
            # Averaging split around the reduction: x / f summed, then * f / size.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Not computed here (a dynamic graph), maybe elsewhere: zeros take part.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return _coll.sparse_allreduce_async(tensor, name=name, op=self.op,
                                                   process_set=self.process_set), None
            tensor = tensor.to_dense()  # p.grad stays sparse; synchronize makes the result sparse again
        compressed, ctx = self._compression.compress(tensor)
        pre, post = self._scales()
        handle = _ops.allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                       postscale_factor=post, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, ps):
        name = self._parameter_names.get(ps[0])
        tensors = []
        for p in ps:
            g = p.grad
            if g.is_sparse:
                if not self.sparse_as_dense:
                    raise ValueError("hora.torch.DistributedOptimizer: parameter %s has a sparse gradient in a "
                                     "group; grouped allreduces take dense tensors (pass sparse_as_dense=True, "
                                     "or leave it out of groups)" % self._parameter_names.get(p))
                g = g.to_dense()
            tensors.append(g)
        compressed, ctxs = zip(*[self._compression.compress(t) for t in tensors])
        pre, post = self._scales()
        handle = _ops.grouped_allreduce_async_(list(compressed), name=name, op=self.op, prescale_factor=pre,
                                               postscale_factor=post, process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times before call to "
                        "step(). Increase backward_passes_per_step to accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for gp in group:  # the members' placeholders from earlier hooks
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _set_grad(self, p, output, ctx):
        out = self._compression.decompress(output, ctx)
        if p.grad.is_sparse:
            if not out.is_sparse:  # sparse_as_dense: back to sparse for the update
                out = out.to_sparse()
            p.grad.zero_().add_(out)
        elif out.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(out)

    def synchronize(self):
        """Wait for every gradient's all-reduce (submitting those that backward did not)."""
        if not self.process_set.included():
            self._synchronized = True
            return
        completed = set()
        for key in self._handles:
            completed.update(key) if isinstance(key, tuple) else completed.add(key)
        for p in self._requires_update - completed:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, _) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for key, (handle, ctx) in self._handles.items():
                if isinstance(key, tuple):  # a group
                    outputs = _ops.synchronize(handle)
                    for gp, output, gctx in zip(key, outputs, ctx):
                        self._allreduce_delay[gp] = self.backward_passes_per_step
                        self._set_grad(gp, output, gctx)
                    if self._group_counts.get(key):
                        self._group_counts[key] = 0
                else:
                    # A sparse allreduce's handle is a function returning the result.
                    output = handle() if callable(handle) else _ops.synchronize(handle)
                    self._allreduce_delay[key] = self.backward_passes_per_step
                    if self._groups is not None and self._group_counts.get(self._p_to_group.get(key)):
                        self._group_counts[self._p_to_group[key]] = 0
                    self._set_grad(key, output, ctx)
        finally:
            self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Inside it step() does not synchronize (call synchronize() yourself before)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def _hora_plain_step(self, closure=None):
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=_ops.Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=_ops.global_process_set):
    """Wrap a torch optimizer: gradients are all-reduced (op, default Average)
    across ranks during backward, and step() waits for them. groups: an int
    (that many grouped allreduces) or a list of parameter lists."""
    process_set = _ops._set_of(process_set, "DistributedOptimizer")
    if op == _ops.Adasum:
        _ops._check_adasum("DistributedOptimizer")
        if _ops.size() > 1:
            # Adasum combines each rank's update, not its gradient (adasum_optimizer.py).
            from .adasum_optimizer import adasum_optimizer
            return adasum_optimizer(optimizer, named_parameters, compression, backward_passes_per_step,
                                    process_set)
    if op != _ops.Average and gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.",
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, process_set)
