"""DistributedOptimizer(op=hvd.Adasum) on more than one rank, with Horovod's
semantics: Adasum is applied to what each rank's optimizer would change, not
to its gradients.

Once a parameter's gradient is complete (the last of backward_passes_per_step
backward passes), its hook keeps the parameter's value aside, runs the
wrapped optimizer's step on that parameter alone, turns the parameter into
that step's change (new value minus the kept one) and submits an in-place
op=Adasum allreduce of it (libhora's HORA_OP_ADASUM, named after the
parameter). step() waits for each and sets the parameter to the kept value
plus the combined change. The optimizer's own state (momentum, Adam's
moments) stays per rank, as in Horovod. Learning rates: Adasum of n equal
changes is one of them, of n orthogonal ones their sum, so a single worker's
rate is the starting point (Horovod's Adasum guide discusses scaling it).
World only: a process set is refused (as Horovod does); groups,
gradient_predivide_factor and sparse_as_dense do not apply (Horovod ignores
them too)."""
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from . import preempt as _preempt
from .optimizer import _DistributedOptimizer, _named_parameters


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        named_parameters = _named_parameters(self.param_groups, named_parameters)
        self._compression = compression
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self._kept = {p: torch.zeros_like(p, requires_grad=False) for _, p in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    # The optimizer's step reads p.grad even where backward did not reach p.
                    p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    # The same as the gradient optimizer's (both read backward_passes_per_step,
    # _allreduce_delay and _handles).
    set_backward_passes_per_step = _DistributedOptimizer.set_backward_passes_per_step
    zero_grad = _DistributedOptimizer.zero_grad

    def _submit(self, p):
        """The wrapped optimizer's step on p alone, p turned into its change,
        and the Adasum allreduce of that change submitted."""
        kept = self._kept[p]
        saved = [group["params"] for group in self.param_groups]
        try:
            for group in self.param_groups:
                group["params"] = [p] if any(p is q for q in group["params"]) else []
            with torch.no_grad():
                kept.copy_(p)
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, saved):
                group["params"] = params
        with torch.no_grad():
            p.sub_(kept)
        compressed, ctx = self._compression.compress(p.data)
        handle = _ops.allreduce_async_(compressed, name=self._parameter_names.get(p), op=_ops.Adasum)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None and self._allreduce_delay[p] <= 0:
                raise AssertionError("Gradients were computed more than backward_passes_per_step times before "
                                     "call to step(). Increase backward_passes_per_step to accumulate gradients "
                                     "locally.")
            self._allreduce_delay[p] -= 1
            self._handles[p] = self._submit(p) if self._allreduce_delay[p] == 0 else (None, None)
        return hook

    def synchronize(self):
        """Nothing to do before step(): the changes are combined there."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("hora.torch.DistributedOptimizer(op=Adasum): skip_synchronize() does not apply "
                             "(step() itself combines the ranks' updates, as in Horovod)")
        yield  # pragma: no cover

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):
            self._handles[p] = (None, None)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:  # step() before backward_passes_per_step passes, or no gradient here
                handle, ctx = self._submit(p)
            delta = self._compression.decompress(_ops.synchronize(handle), ctx)
            kept = self._kept[p]
            with torch.no_grad():
                kept.add_(delta)
                p.copy_(kept)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        _preempt.after_step(self)  # hvd.preempt_watch: raises Preempted on every rank after this step
        return loss


def adasum_optimizer(optimizer, named_parameters, compression, backward_passes_per_step, process_set):
    if process_set is not _ops.global_process_set and process_set.process_set_id != 0:
        raise NotImplementedError("hora.torch.DistributedOptimizer: op Adasum runs on the world, not on a "
                                  "process set (as in Horovod)")
    n = _ops.size()
    if n & (n - 1):
        raise NotImplementedError("hora.torch.DistributedOptimizer: op Adasum needs a power-of-two number of ranks "
                                  "(its pairs combine as a binary tree); this job has %d" % n)
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
