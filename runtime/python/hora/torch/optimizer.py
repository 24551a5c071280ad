"""DistributedOptimizer, as horovod.torch.optimizer: a hook on each
parameter's gradient accumulator submits an async all-reduce of the gradient
(libhora request, named after the parameter) as soon as backward produced it;
step() waits for them all, then runs the wrapped optimizer's step.

groups (Horovod's): an int splits the parameters, in rank 0's order, into
that many groups; a list of parameter lists names the groups (the parameters
left out are a group each). A group's gradients go as one grouped allreduce
(negotiated together) once backward produced all of them. Sparse gradients
take Horovod's sparse path (sparse_allreduce_async: allgathers of indices and
values) unless sparse_as_dense, which all-reduces them dense.

Zero copy (hora's): the first step runs as above and notes the order in which
the gradients went to the runtime (the order backward made them; a group's
members together, in the group's order). After it, the dense gradients move
into one block of shared memory per dtype (memory.py), laid out in that order,
each at an ALIGN_BYTES multiple, and param.grad becomes a view into it: backward
accumulates into the views, and the runtime fuses the in-place all-reduces of
neighbouring views into one response that runs where they lie (no copy in or
out). zero_grad zeroes the views in place whatever set_to_none says (as DDP's
gradient_as_bucket_view); where param.grad was set to None (module.zero_grad)
or replaced anyway, the gradient is copied into its view once and param.grad
points back to it (counted in _hora_copies). The gradients of a CUDA model
that libhora takes on its device (device.py) get one block of device memory
per dtype the same way. Sparse gradients, compression other than none,
staged CUDA tensors and elastic jobs (HOROVOD_ELASTIC or HORA_ELASTIC) keep the
path above. The end of the runtime (shutdown, an elastic reset) releases the
views, and the next runtime's first step lays the gradients out again."""
import atexit
import os
import warnings
import weakref
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from . import collectives as _coll
from .compression import Compression
from .functions import broadcast_object
from . import device as _device
from . import preempt as _preempt
from .memory import _device_block, _shared_block


# Optimizers with gradients in shared blocks. At exit their parameters let go
# of the views: a view's memory is held by a Python object, and an autograd
# node that a thread-local of torch frees after the interpreter ended must not
# reach it (it would wait forever for the GIL).
_laid_out = weakref.WeakSet()


@atexit.register
def _release_views():
    for opt in list(_laid_out):
        opt._hora_release()


def _relay_after_end():
    """Before the runtime ends (shutdown, an elastic reset), which unmaps the
    blocks: the gradients let go of their views, and the next runtime's first
    step lays them out again."""
    for opt in list(_laid_out):
        opt._hora_release()
        opt._hora_seq = []
        _laid_out.discard(opt)


_ops._before_end.append(_relay_after_end)


def _elastic_env():
    """Horovod's HOROVOD_ELASTIC, or hora-run --elastic's HORA_ELASTIC: the
    world may grow from one rank, and its runtime ends at each reset."""
    return os.environ.get("HOROVOD_ELASTIC") == "1" or os.environ.get("HORA_ELASTIC") == "1"


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
        # Zero copy: parameter -> its gradient's view into a block; the blocks
        # (whole, as uint8); the submission order of the first step (None once
        # laid out); the parameters in submission order (late ones in it);
        # gradients copied into their views since (a debug counter).
        self._hora_views = {}
        self._hora_blocks = []
        zero_copy = compression is Compression.none and not _elastic_env()
        self._hora_seq = [] if zero_copy else None
        self._hora_order = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        self._hora_copies = 0
        # A rank outside process_set neither reduces nor waits (Horovod's).
        if self.process_set.included() and (_ops.size() > 1 or _elastic_env()):
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
                    if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1: the cheaper hook
                        p.register_post_accumulate_grad_hook(self._make_hook(p))
                        continue
                    # The AccumulateGrad node of p: its hook runs once p.grad holds the new gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _scales(self):
        if self.op == _ops.Average:
            # Averaging split around the reduction: x / f summed, then * f / size.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _hora_point(self, p, view):
        """True once p.grad is view: a gradient set to None (zeros take part)
        or replaced is copied into it. False for a sparse one (its own path)."""
        g = p.grad
        if g is view:
            return True
        if g is None:
            view.zero_()
        elif g.is_sparse or g.shape != view.shape or g.dtype != view.dtype or g.device != view.device:
            return False
        else:
            view.copy_(g)
        p.grad = view
        self._hora_copies += 1
        return True

    def _hora_lay_out(self):
        """After the first step: the dense CPU gradients into shared blocks (CUDA
        ones libhora takes on its device into device blocks), in the order they
        went to the runtime, and param.grad to views of them."""
        seq, self._hora_seq = self._hora_seq, None
        placed, laid, by_dtype = set(), [], {}
        for p in seq:
            g = p.grad
            if (p in placed or g is None or g.is_sparse or g.requires_grad or g.dtype not in _ops._DTYPES
                    or g.shape != p.shape):
                continue
            direct = self.process_set.process_set_id == 0 and self.op != _ops.Adasum
            if g.device.type != "cpu" and _device.placement([g], "DistributedOptimizer", direct) != "cuda":
                continue
            placed.add(p)
            laid.append(p)
            by_dtype.setdefault((g.dtype, g.device), []).append(p)
        for (dtype, device), ps in by_dtype.items():
            shapes = [p.shape for p in ps]
            flat, views = _shared_block(shapes, dtype) if device.type == "cpu" else _device_block(shapes, dtype,
                                                                                                 device)
            self._hora_blocks.append(flat)
            for p, v in zip(ps, views):
                v.copy_(p.grad)
                p.grad = v
                self._hora_views[p] = v
        self._hora_order = laid + [p for p in self._hora_order if p not in self._hora_views]
        _laid_out.add(self)

    def _hora_release(self):
        for p, view in self._hora_views.items():
            if p.grad is view:
                p.grad = None
        self._hora_views.clear()
        self._hora_blocks.clear()

    def _allreduce_grad_async(self, p):
        view = self._hora_views.get(p)
        if view is not None and self._hora_point(p, view):
            pre, post = self._scales()
            return _ops.allreduce_async_(view, name=self._parameter_names.get(p), op=self.op, prescale_factor=pre,
                                         postscale_factor=post, process_set=self.process_set), None
        if p.grad is None:
            # Not computed here (a dynamic graph), maybe elsewhere: zeros take part.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if self._hora_seq is not None:
            self._hora_seq.append(p)
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
        if self._hora_seq is not None:
            self._hora_seq.extend(ps)
        for p in ps:
            view = self._hora_views.get(p)
            if view is not None and self._hora_point(p, view):
                tensors.append(view)
                continue
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
        for p in self._hora_order:  # in layout order: neighbours fuse in place
            if p in self._requires_update and p not in completed:
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
        if self._hora_seq:
            self._hora_lay_out()
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
        loss = super(self.__class__, self).step(closure)
        _preempt.after_step(self)  # hvd.preempt_watch: raises Preempted on every rank after this step
        return loss

    def _hora_plain_step(self, closure=None):
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        # The Adasum optimizer shares this method and has no views.
        if not getattr(self, "_hora_views", None):
            return super(self.__class__, self).zero_grad(*args, **kwargs)
        # The views stay (zeroed in place) whatever set_to_none says; the others as asked.
        for p in self._hora_views:
            p.grad = None
        try:
            super(self.__class__, self).zero_grad(*args, **kwargs)
        finally:
            for flat in self._hora_blocks:
                flat.zero_()
            for p, view in self._hora_views.items():
                p.grad = view


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
