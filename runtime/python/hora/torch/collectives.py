"""The horovod.torch operations past the core ones, over the same requests
(mpi_ops.py): join (the direct hora_join), barrier, reducescatter (plain,
grouped, async, autograd), alltoall with splits, and sparse allreduce as
Horovod does it (allgathers of indices and values).
"""
import ctypes

import torch

import hora as _h
from hora import lib as _lib
from . import device as _device
from .mpi_ops import (Adasum, Average, HorovodInternalError, Sum, _HORA_OPS, _Pending, _auto_name, _check_tensor,
                      _need_function, _need_init, _ptr, _reduce_submit, _register, _request_result, _set_of,
                      _handles, _set_size_rank, _shape, _submit_error, allgather, allgather_async,
                      global_process_set, grouped_allgather, synchronize)


# ---- join, barrier ----------------------------------------------------------

def join(device=-1):
    """Blocking: this rank has no more data; it contributes zeros to the
    allreduces other ranks still submit until every rank has joined (any other
    collective submitted meanwhile fails with HorovodInternalError on the
    ranks that submitted it, as in Horovod). Returns the rank that joined last."""
    _need_init()
    last = ctypes.c_int(-1)
    st = _lib.hora_join(ctypes.byref(last))  # releases the GIL
    if st != _h.OK:
        raise HorovodInternalError("hora_join: %s: %s" % (_h.status_string(st), _h.last_error()))
    return last.value




def barrier(process_set=global_process_set):
    """Returns once every rank (of process_set) has called it: a negotiated
    request (hora_barrier_async), ordered by the coordinator with the other requests.
    One name for every barrier, as Horovod's ("barrier.noname"): a barrier
    blocks, so a rank has one in flight at a time, and ranks whose earlier
    calls differed (a barrier refused after a join) still agree."""
    ps = _set_of(process_set, "barrier")
    _need_init()
    _need_function("hora_barrier_async", "barrier")
    name = "barrier.noname"
    req = ctypes.c_void_p()
    nameb = name.encode()
    opts = _h.Opts.make(process_set=ps.process_set_id)
    st = _lib.hora_barrier_async(nameb, ctypes.byref(opts), ctypes.byref(req))
    if st != _h.OK:
        raise _submit_error(st, "barrier", name)
    synchronize(_register(_Pending([req], [nameb], lambda: None)))


# ---- reducescatter -----------------------------------------------------------

def _reducescatter_check(tensor, op, what):
    dtype = _check_tensor(tensor, what)
    if op == Adasum:
        raise NotImplementedError("hora.torch.%s: op Adasum combines whole vectors and is an allreduce only "
                                  "(as in Horovod); use Average or Sum" % what)
    if op not in _HORA_OPS:
        raise ValueError("hora.torch.%s: unknown op %r" % (what, op))
    if tensor.dim() == 0:
        raise ValueError("hora.torch.%s: reducescatter needs a tensor of at least one dimension" % what)
    return dtype


def _reducescatter_output(src, ps):
    """This rank's rows of a reduce-scatter of src over ps: the first d0 % n
    members get one row more (hora_shard's split, libhora's and Horovod's)."""
    off, cnt = ctypes.c_size_t(), ctypes.c_size_t()
    n, r = _set_size_rank(ps)
    _lib.hora_shard(src.shape[0], n, r, ctypes.byref(off), ctypes.byref(cnt))
    return torch.empty((cnt.value,) + tuple(src.shape[1:]), dtype=src.dtype)


def _reducescatter_start(tensor, name, op, prescale_factor, postscale_factor, what, ps):
    dtype = _reducescatter_check(tensor, op, what)
    if _device.placement([tensor], what, False):  # CUDA tensors: through host memory
        return _device.stage(lambda h: _reducescatter_start(h[0], name, op, prescale_factor, postscale_factor,
                                                            what, ps), [tensor], False, True, _handles)
    _need_function("hora_reducescatter_async", what)
    name = _auto_name("reducescatter", name, ps)
    src = tensor.detach().contiguous()
    out = _reducescatter_output(src, ps)
    req, nameb = _reduce_submit(_lib.hora_reducescatter_async, name, src, out, src, dtype, op, prescale_factor,
                                postscale_factor, what, ps)
    return _register(_Pending([req], [tensor, src, out, nameb], lambda: out))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """op over ranks of tensor (same shape on every rank), split along the
    first dimension; synchronize returns this rank's rows."""
    ps = _set_of(process_set, "reducescatter_async")
    return _reducescatter_start(tensor, name, op, prescale_factor, postscale_factor, "reducescatter_async", ps)


def _reducescatter_grad_scale(grad, op, prescale_factor, postscale_factor, ps):
    # Horovod's: Sum multiplies by the number of ranks, Average leaves the
    # gradient as it is, and both scales apply.
    if op == Sum:
        grad = grad * _set_size_rank(ps)[0]
    if prescale_factor != 1.0:
        grad = grad * prescale_factor
    if postscale_factor != 1.0:
        grad = grad * postscale_factor
    return grad


class _ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, ps):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, ps
        return synchronize(_reducescatter_start(tensor, name, op, prescale_factor, postscale_factor,
                                                "reducescatter", ps))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _reducescatter_grad_scale(grad_output, ctx.op, ctx.pre, ctx.post, ctx.ps)
        return allgather(grad, process_set=ctx.ps), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """op over ranks of tensor, split along the first dimension: this rank's
    rows (the first d0 % size ranks get one more). Differentiable."""
    ps = _set_of(process_set, "reducescatter")
    if compression is None:
        from .compression import Compression
        compression = Compression.none
    compressed, cctx = compression.compress(tensor)
    out = _ReducescatterFn.apply(compressed, name, op, prescale_factor, postscale_factor, ps)
    return compression.decompress(out, cctx)


def _grouped_reducescatter_start(tensors, name, op, prescale_factor, postscale_factor, what, ps):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("hora.torch.%s: no tensors" % what)
    dtypes = {_reducescatter_check(t, op, what) for t in tensors}
    if len(dtypes) != 1:
        raise ValueError("hora.torch.%s: the tensors of a group must have one dtype (got %s)" %
                         (what, ", ".join(sorted({str(t.dtype) for t in tensors}))))
    dtype = dtypes.pop()
    if _device.placement(tensors, what, False):  # CUDA tensors: through host memory
        return _device.stage(lambda h: _grouped_reducescatter_start(h, name, op, prescale_factor, postscale_factor,
                                                                    what, ps), tensors, False, False, _handles)
    _need_function("hora_grouped_reducescatter_async", what)
    base = _auto_name("grouped_reducescatter", name, ps)
    n = len(tensors)
    srcs = [t.detach().contiguous() for t in tensors]
    outs = [_reducescatter_output(s, ps) for s in srcs]
    names = [("%s_%d_of_%d" % (base, i + 1, n)).encode() for i in range(n)]
    c_names = (ctypes.c_char_p * n)(*names)
    c_send = (ctypes.c_void_p * n)(*[_ptr(s) for s in srcs])
    c_recv = (ctypes.c_void_p * n)(*[_ptr(o) for o in outs])
    c_counts = (ctypes.c_size_t * n)(*[s.numel() for s in srcs])
    c_opts = (_h.Opts * n)(*[_h.Opts.make(prescale_factor, postscale_factor, _shape(s),
                                          process_set=ps.process_set_id) for s in srcs])
    c_reqs = (ctypes.c_void_p * n)()
    st = _lib.hora_grouped_reducescatter_async(n, c_names, c_send, c_recv, c_counts, dtype, _HORA_OPS[op],
                                               c_opts, c_reqs)
    if st != _h.OK:
        raise _submit_error(st, what, base)
    reqs = [ctypes.c_void_p(c_reqs[i]) for i in range(n)]
    return _register(_Pending(reqs, [tensors, srcs, outs, names, c_names], lambda: list(outs)))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor, negotiated as one group (members named
    <base>_<i>_of_<n>); synchronize returns the list of this rank's rows."""
    ps = _set_of(process_set, "grouped_reducescatter_async")
    return _grouped_reducescatter_start(tensors, name, op, prescale_factor, postscale_factor,
                                        "grouped_reducescatter_async", ps)


class _GroupedReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, ps, *tensors):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, ps
        return tuple(synchronize(_grouped_reducescatter_start(tensors, name, op, prescale_factor,
                                                              postscale_factor, "grouped_reducescatter", ps)))

    @staticmethod
    def backward(ctx, *grads):
        grads = [_reducescatter_grad_scale(g, ctx.op, ctx.pre, ctx.post, ctx.ps) for g in grads]
        return (None, None, None, None, None) + tuple(grouped_allgather(grads, process_set=ctx.ps))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor, negotiated as one group. Differentiable."""
    ps = _set_of(process_set, "grouped_reducescatter")
    if compression is None:
        from .compression import Compression
        compression = Compression.none
    pairs = [compression.compress(t) for t in tensors]
    out = _GroupedReducescatterFn.apply(name, op, prescale_factor, postscale_factor, ps, *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(out, pairs)]


# ---- alltoall ----------------------------------------------------------------

def _alltoall_start(tensor, splits, name, what, ps):
    dtype = _check_tensor(tensor, what)
    if _device.placement([tensor], what, False):  # CUDA tensors: through host memory; the splits stay put
        return _device.stage(lambda h: _alltoall_start(h[0], splits, name, what, ps), [tensor], False, True,
                             _handles, move=lambda out, device: (out[0].to(device), out[1]))
    _need_function("hora_alltoall_async", what)
    if tensor.dim() == 0:
        raise ValueError("hora.torch.%s: alltoall needs a tensor of at least one dimension" % what)
    n = _set_size_rank(ps)[0]
    src = tensor.detach().contiguous()
    c_splits = None
    splits_device = torch.device("cpu")
    if splits is not None:
        # As Horovod: a list is taken as int32; a tensor must hold int32, one
        # entry per rank, none negative, summing to at most the first dimension
        # (rows past the sum are not sent).
        if isinstance(splits, torch.Tensor):
            splits_device = splits.device
            if splits.dtype != torch.int32:
                raise ValueError("hora.torch.%s: alltoall expects splits to contain 32-bit integer elements "
                                 "(got %s)" % (what, splits.dtype))
            if splits.dim() > 1:
                raise ValueError("hora.torch.%s: alltoall expects a 1-D splits tensor" % what)
            rows = [int(v) for v in splits.cpu().tolist()]
        else:
            rows = [int(v) for v in torch.tensor(splits, dtype=torch.int32).reshape(-1).tolist()]
        if len(rows) != n:
            raise ValueError("hora.torch.%s: %d entries in splits, not the number of ranks (%d)" %
                             (what, len(rows), n))
        if any(v < 0 for v in rows):
            raise ValueError("hora.torch.%s: splits must not be negative (got %s)" % (what, rows))
        if sum(rows) > src.shape[0]:
            raise ValueError("hora.torch.%s: the sum of splits (%d) is greater than the first dimension of "
                             "the tensor (%d)" % (what, sum(rows), src.shape[0]))
        if sum(rows) < src.shape[0]:
            src = src.narrow(0, 0, sum(rows))
        c_splits = (ctypes.c_size_t * n)(*rows)
    name = _auto_name("alltoall", name, ps)
    shape = _shape(src)
    row = 1
    for d in shape[1:]:
        row *= d
    opts = _h.Opts.make(shape=shape, process_set=ps.process_set_id)
    req = ctypes.c_void_p()
    nameb = name.encode()
    st = _lib.hora_alltoall_async(nameb, _ptr(src), src.numel(), dtype, c_splits, ctypes.byref(opts),
                                  ctypes.byref(req))
    if st != _h.OK:
        raise _submit_error(st, what, name)

    def finish():
        data, total, counts = _request_result(req, name)
        # libhora counts elements; Horovod's received_splits are rows.
        received = [counts[q] // row if row else 0 for q in range(n)]
        out = torch.empty((sum(received),) + tuple(shape[1:]), dtype=src.dtype)
        nbytes = total * src.element_size()
        if nbytes:
            ctypes.memmove(out.data_ptr(), data.value, nbytes)
        return out, torch.tensor(received, dtype=torch.int32, device=splits_device)

    return _register(_Pending([req], [tensor, src, c_splits, nameb], finish))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatter the first-dimension slices of tensor to the ranks (splits[i]
    rows to rank i; None: an equal split) and gather what every rank sent this
    one; synchronize returns (output, received_splits)."""
    ps = _set_of(process_set, "alltoall_async")
    return _alltoall_start(tensor, splits, name, "alltoall_async", ps)


class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, ps):
        output, received_splits = synchronize(_alltoall_start(tensor, splits, name, "alltoall", ps))
        ctx.recvsplits, ctx.ps = received_splits, ps
        ctx.rows = tensor.shape[0]
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        # The rows this rank received go back where they came from.
        grad, _ = alltoall(grad_output, splits=ctx.recvsplits, process_set=ctx.ps)
        if grad.shape[0] < ctx.rows:  # rows past the sum of splits were not sent: no gradient
            grad = torch.cat([grad, grad.new_zeros((ctx.rows - grad.shape[0],) + tuple(grad.shape[1:]))])
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """alltoall_async, waited for: the output, and received_splits (int32, rows
    from each rank) when splits was given. Differentiable."""
    ps = _set_of(process_set, "alltoall")
    return _AlltoallFn.apply(tensor, splits, name, ps)


# ---- sparse allreduce (Horovod's: allgathers of indices and values) ---------

# torch >= 2 warns at every sparse_coo_tensor that leaves check_invariants implicit; the
# gathered indices are the ranks' own valid ones for the same size, so it is off, as before.
_SPARSE_KW = {"check_invariants": False} if int(torch.__version__.split(".")[0]) >= 2 else {}


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse tensor's op (Average or Sum) over ranks, as Horovod does it:
    allgathers of its indices and of its values (duplicates add up when the
    result is coalesced). Returns a function that waits and returns the sparse
    result."""
    ps = _set_of(process_set, "sparse_allreduce_async")
    name = _auto_name("sparse_allreduce", name, ps)
    if op not in (Average, Sum):
        raise ValueError("hora.torch.sparse_allreduce_async: op must be Average or Sum (got %r)" % (op,))
    t = tensor
    # allgather concatenates along the first dimension: indices travel as (nnz, ndim).
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(), name="%s.indices" % name,
                                     process_set=ps)
    values_handle = allgather_async(t._values(), name="%s.values" % name, process_set=ps)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / _set_size_rank(ps)[0]
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(), **_SPARSE_KW)

    return handle
