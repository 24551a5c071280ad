"""DistributedOptimizer, as horovod.torch.optimizer: a hook on each
parameter's gradient accumulator submits an async all-reduce of the gradient
(libhora request, named after the parameter) as soon as backward produced it;
step() waits for them all, then runs the wrapped optimizer's step."""
import warnings
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from .compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=_ops.Average,
                 gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=_ops.global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        if groups is not None:
            raise NotImplementedError("hora.torch.DistributedOptimizer: groups/num_groups are not supported "
                                      "yet (gradients are all-reduced one request each; libhora fuses them)")
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%s.%s" % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually "
                             "produced by model.named_parameters().")
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: %s" %
                             ", ".join(dups))
        all_ids = {id(v) for g in self.param_groups for v in g["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        if len(all_ids - named_ids):
            raise ValueError("named_parameters was specified, but one or more model parameters were not "
                             "named. Python object ids: %s" % ", ".join(str(i) for i in sorted(all_ids - named_ids)))
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
        if _ops.size() > 1:
            self._register_hooks()

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The AccumulateGrad node of p: its hook runs once p.grad holds the new gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                raise NotImplementedError("hora.torch.DistributedOptimizer: sparse gradients are not supported "
                                          "yet (the runtime has no sparse allreduce); pass sparse_as_dense=True")
            tensor = tensor.to_dense()
            p.grad = tensor
        compressed, ctx = self._compression.compress(tensor)
        if self.op == _ops.Average:
            # Averaging split around the reduction: x / f summed, then * f / size.
            pre, post = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        else:
            pre, post = 1.0, 1.0
        handle = _ops.allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                       postscale_factor=post)
        return handle, ctx, compressed

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times before call to "
                        "step(). Increase backward_passes_per_step to accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            entry = (None, None, None)
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                entry = self._allreduce_grad_async(p)
            self._handles[p] = entry
        return hook

    def synchronize(self):
        """Wait for every gradient's all-reduce (submitting those that backward did not)."""
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, _, _) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        # Wait in submission order of names so that every rank sees the same sequence.
        try:
            for p, (handle, ctx, compressed) in self._handles.items():
                output = _ops.synchronize(handle)
                self._allreduce_delay[p] = self.backward_passes_per_step
                out = self._compression.decompress(output, ctx)
                if out.data_ptr() != p.grad.data_ptr():
                    p.grad.copy_(out)
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
    across ranks during backward, and step() waits for them."""
    _ops._check_process_set(process_set, "DistributedOptimizer")
    if op == _ops.Adasum:
        raise NotImplementedError("hora.torch.DistributedOptimizer: op Adasum is not supported (libhora has no "
                                  "Adasum; use Average or Sum)")
    if op != _ops.Average and gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups:
        groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, process_set)
