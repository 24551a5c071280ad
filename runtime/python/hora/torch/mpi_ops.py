"""The horovod.torch operations over libhora's async API.

Every collective is a libhora request (hora_*_async, then hora_wait/hora_test
in synchronize/poll; hora_request_result for allgather and alltoall, whose
results libhora allocates). This file and collectives.py (join, barrier,
reducescatter, alltoall, sparse allreduce) only map torch tensors to buffers
(a reducescatter's output sized as hora_shard splits the first dimension),
keep them (and any contiguous copy) alive until the request completes, and
name unnamed requests deterministically ("allreduce.noname.N", a counter per
operation, so ranks that call in the same order agree). What Horovod itself
does in Python (sparse allreduce as two allgathers, the autograd functions)
they do the same way.
"""
import ctypes
import itertools
import os
import threading

import torch

import hora as _h
from hora import lib as _lib
from . import device as _device

# Horovod's op constants (same values as horovod.torch).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_HORA_OPS = {Average: _h.OP_AVG, Sum: _h.OP_SUM, Min: _h.OP_MIN, Max: _h.OP_MAX, Product: _h.OP_PROD}
if _h.OP_ADASUM >= 0:
    _HORA_OPS[Adasum] = _h.OP_ADASUM


def _check_adasum(what):
    """op Adasum needs a libhora that has it (HORA_OP_ADASUM)."""
    if Adasum not in _HORA_OPS:
        raise NotImplementedError("hora.torch.%s: op Adasum: the loaded libhora (%s) has no HORA_OP_ADASUM; rebuild "
                                  "it from this tree" % (what, _h.library_path))


class HorovodInternalError(RuntimeError):
    """A collective failed in the runtime (mismatch across ranks, a peer gone,
    shutdown); the message is libhora's."""


# torch dtype -> hora dtype name. Adding a dtype libhora gains is one line.
_TORCH_TO_HORA = [
    (torch.float32, "f32"),
    (torch.float16, "f16"),
    (torch.bfloat16, "bf16"),
    (torch.float64, "f64"),
    (torch.int32, "i32"),
    (torch.int64, "i64"),
    (torch.uint8, "u8"),
    (torch.int8, "i8"),
    (torch.int16, "i16"),
    (torch.bool, "bool"),
]
_DTYPES = {t: _h.dtypes[n] for t, n in _TORCH_TO_HORA if n in _h.dtypes}


def _hora_dtype(tensor):
    try:
        return _DTYPES[tensor.dtype]
    except KeyError:
        raise TypeError("hora.torch: tensors of dtype %s are not supported by libhora (supported: %s)" %
                        (tensor.dtype, ", ".join(str(t) for t in _DTYPES))) from None


def _check_tensor(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("hora.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.is_sparse:
        # Horovod's refusal too (a ValueError): sparse tensors have their own path.
        raise ValueError("hora.torch.%s: sparse tensors are not supported here (use sparse_allreduce_async, "
                         "which allgathers indices and values as Horovod does, or .to_dense())" % what)
    if not (tensor.is_cpu or tensor.is_cuda):
        raise NotImplementedError("hora.torch.%s: %s tensors are not supported (CPU and CUDA tensors only)" %
                                  (what, tensor.device.type))
    return _hora_dtype(tensor)


def _need_function(cname, what):
    if cname in _h.missing:
        raise NotImplementedError("hora.torch.%s: the loaded libhora (%s) has no %s; rebuild it from this tree" %
                                  (what, _h.library_path, cname))


# ---- process sets ------------------------------------------------------------

class ProcessSet:
    """Horovod's ProcessSet: world ranks (sorted), and process_set_id once it
    was added (hvd.init(process_sets=[...]) or hvd.add_process_set), which
    makes it a libhora process set (hora_process_set_create): a coordinator
    of its own for its members. Pass it as process_set= to any collective."""
    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process ranks (hora.torch takes no "
                             "MPI communicator objects)")
        if any(not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks")
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def _info(self):
        n, r = ctypes.c_int(), ctypes.c_int()
        st = _lib.hora_process_set_info(self.process_set_id, ctypes.byref(n), ctypes.byref(r), None, 0)
        if st != _h.OK:
            raise ValueError("hora.torch: %s: %s" % (self, _h.last_error()))
        return n.value, r.value

    def size(self):
        """The number of ranks, None before the set was added."""
        if self.process_set_id is None:
            return None
        return size() if self.process_set_id == 0 else self._info()[0]

    def rank(self):
        """This rank's place among the members (-1 outside), None before the
        set was added. Collectives still name ranks by hvd.rank() (a
        broadcast's root_rank); this serves to read an allgather's result."""
        if self.process_set_id is None:
            return None
        return rank() if self.process_set_id == 0 else self._info()[1]

    def included(self):
        """Whether this rank is a member (None without ranks)."""
        if self.ranks is None:
            return None
        return rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=None)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _set_of(process_set, what):
    """The ProcessSet a collective runs on (None: the global one), which must
    have been added."""
    ps = global_process_set if process_set is None else process_set
    if not isinstance(ps, ProcessSet):
        raise ValueError("hora.torch.%s: process_set must be a hvd.ProcessSet (got %s)" %
                         (what, type(ps).__name__))
    if ps.process_set_id is None:
        raise ValueError("hora.torch.%s: %s has not been added (hvd.add_process_set, or hvd.init(process_sets=...))"
                         % (what, ps))
    return ps


def _set_size_rank(ps):
    if ps.process_set_id == 0:
        return size(), rank()
    return ps._info()


def add_process_set(process_set):
    """Make a process set (collective over every rank, all passing the same
    ranks) and return it, its process_set_id set. A set with the same ranks
    that exists already: ValueError."""
    _need_init()
    _need_function("hora_process_set_create", "add_process_set")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    key = tuple(process_set.ranks)
    if key in _sets_by_ranks or key == tuple(global_process_set.ranks):
        raise ValueError("Attempted to add a duplicate process set: %s" % process_set)
    ranks = (ctypes.c_int * max(len(key), 1))(*key)
    sid = ctypes.c_int(-1)
    st = _lib.hora_process_set_create(ranks, len(key), ctypes.byref(sid))
    if st != _h.OK:
        raise _submit_error(st, "add_process_set", str(list(key)))
    process_set.process_set_id = sid.value
    _sets_by_ranks[key] = process_set
    return process_set


def remove_process_set(process_set):
    """Free a process set (collective over every rank): True when it was
    removed, False for the global set or a set not added."""
    sid = getattr(process_set, "process_set_id", None)
    if sid is None or sid == 0:
        return False
    _need_function("hora_process_set_free", "remove_process_set")
    process_set._invalidate()
    _sets_by_ranks.pop(tuple(process_set.ranks), None)
    return _lib.hora_process_set_free(sid) == _h.OK


_sets_by_ranks = {}


# ---- init and topology -----------------------------------------------------

_registered_atexit = False


_generation = 0  # hora_shutdown calls so far: which runtime a shared block belongs to


def init(comm=None, process_sets=None):
    """Start libhora (collective). A second call while running does nothing."""
    global _registered_atexit
    if comm is not None:
        raise NotImplementedError("hora.torch.init: a custom communicator is not supported (hora runs on "
                                  "MPI_COMM_WORLD)")
    if _lib.hora_initialized():
        return
    choice = _device.pick_device_before_init()  # libhora's device: the local rank's unless torch chose one
    if choice is not None:
        os.environ["HORA_CUDA_DEVICE"] = choice
    try:
        st = _lib.hora_init()
    finally:
        if choice is not None:
            del os.environ["HORA_CUDA_DEVICE"]
    if st not in (_h.OK, _h.ERR_ALREADY_INITIALIZED):
        raise HorovodInternalError("hora_init failed: %s: %s" % (_h.status_string(st), _h.last_error()))
    global_process_set.ranks = list(range(_lib.hora_size()))
    # A stall warning on rank 0 shows this process's Python stack (hora/stacks.py).
    _h.stacks.register(_lib)
    # Horovod's process_sets: a list of ProcessSet (or rank lists), or
    # "dynamic" (sets added later, which hora always allows).
    if process_sets and process_sets != "dynamic":
        for ps in process_sets:
            add_process_set(ps)
    if not _registered_atexit:
        import atexit
        atexit.register(shutdown)
        _registered_atexit = True


# Called before the runtime ends (the DistributedOptimizer lets go of its
# gradients' views into shared blocks, which the end unmaps).
_before_end = []


def shutdown():
    """Stop libhora (collective); pending requests fail with HORA_ERR_SHUTDOWN."""
    st, deferred_error = _end(_lib.hora_shutdown)
    if st not in (_h.OK, _h.ERR_NOT_INITIALIZED):
        raise HorovodInternalError("hora_shutdown failed: %s: %s" % (_h.status_string(st), _h.last_error()))
    if deferred_error is not None:
        raise deferred_error


def _end(end):
    """End the runtime with end (hora_shutdown, or elastic.py's
    hora_elastic_reform) and forget what lived in it: (end's status, or OK
    when not initialized; a device request's failure to raise, or None)."""
    if not _lib.hora_initialized():
        return _h.OK, None
    global _generation
    with _lock:
        pending = list(_handles.values())
        _handles.clear()
    deferred_error = None
    try:
        _device.reap(HorovodInternalError, wait=True)  # device requests synchronize() returned early
    except HorovodInternalError as e:
        deferred_error = e
    for f in _before_end:
        f()
    _generation += 1  # shared_tensors' blocks die with this runtime
    st = end()
    _h.stacks.unregister(_lib)  # before the interpreter ends (atexit runs this)
    for p in pending:
        p.free()
    for ps in _sets_by_ranks.values():  # hora_shutdown freed them
        ps._invalidate()
    _sets_by_ranks.clear()
    _device.reset()
    with _lock:
        _name_counters.clear()  # nothing is in flight any more: names start again
    return st, deferred_error


def is_initialized():
    return bool(_lib.hora_initialized())


def _need_init():
    if not _lib.hora_initialized():
        raise ValueError("Horovod has not been initialized; use hvd.init().")


def _topo(f):
    _need_init()
    return f()


def rank():
    return _topo(_lib.hora_rank)


def size():
    return _topo(_lib.hora_size)


def local_rank():
    return _topo(_lib.hora_local_rank)


def local_size():
    return _topo(_lib.hora_local_size)


def cross_rank():
    return _topo(_lib.hora_node_rank)


def cross_size():
    return _topo(_lib.hora_node_count)


def is_homogeneous():
    return True


def mpi_threads_supported():
    return True


def mpi_enabled():
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True when the loaded libhora was built with CUDA (it moves device
    memory where every rank has a GPU; CUDA tensors work either way)."""
    return _h.build_info().get("cuda") == "1"


def rocm_built():
    return False


def _timeline_error(status, what):
    text = "hora.torch.%s: %s: %s" % (what, _h.status_string(status), _h.last_error())
    if status == _h.ERR_NOT_INITIALIZED:
        return ValueError("Horovod has not been initialized; use hvd.init(). (" + text + ")")
    if status == _h.ERR_INVALID_ARG:
        return ValueError(text)
    if status == _h.ERR_SYSTEM:
        return OSError(text)
    return HorovodInternalError(text)


def start_timeline(file_path, mark_cycles=False):
    """Start writing the timeline, a Chrome trace of every collective, to
    file_path (rank 0 writes it; call it on every rank, as with Horovod).
    Unlike Horovod, no setting has to allow it (HOROVOD_TIMELINE=DYNAMIC);
    HORA_TIMELINE names a file started at init instead. A running timeline
    is stopped first, its file complete; file_path may be that file again.
    mark_cycles adds a CYCLE_START instant at each coordinator cycle.
    ValueError before hvd.init() or for a bad path; OSError when rank 0
    cannot create the file."""
    _need_init()
    _need_function("hora_timeline_start", "start_timeline")
    status = _lib.hora_timeline_mark_cycles(1 if mark_cycles else 0)
    if status == _h.OK:
        status = _lib.hora_timeline_start(os.fsencode(os.fspath(file_path)))
    if status != _h.OK:
        raise _timeline_error(status, "start_timeline")


def stop_timeline():
    """Stop the running timeline: its file is a complete Chrome trace when
    this returns. Nothing happens when none runs."""
    _need_init()
    _need_function("hora_timeline_stop", "stop_timeline")
    status = _lib.hora_timeline_stop()
    if status != _h.OK:
        raise _timeline_error(status, "stop_timeline")


# ---- requests ----------------------------------------------------------------

_lock = threading.Lock()
_handles = {}
_handle_ids = itertools.count(1)
_name_counters = {}
_dummy = ctypes.create_string_buffer(64)  # a valid address for empty tensors


def _auto_name(kind, name, ps=None):
    """name, or <kind>.noname.N with a counter per operation and process set:
    names only have to agree among a set's members, whose coordinator alone
    sees them, and a rank's calls on other sets must not shift them."""
    if name is not None:
        return name
    key = (kind, ps.process_set_id if ps is not None else 0)
    with _lock:
        n = _name_counters.get(key, 0)
        _name_counters[key] = n + 1
    return "%s.noname.%d" % (kind, n)


def _ptr(tensor):
    return tensor.data_ptr() if tensor.numel() > 0 else ctypes.addressof(_dummy)


def _shape(tensor):
    return tuple(tensor.shape) if tensor.dim() > 0 else (1,)


class _Pending:
    """The requests of one handle and everything they use."""

    def __init__(self, reqs, keep, finish, cuda=None, name=None):
        self.reqs = reqs      # ctypes.c_void_p each
        self.keep = keep      # tensors, names: alive until the requests complete
        self.finish = finish  # () -> output, after every request succeeded
        self.cuda = cuda      # a tensor of a device request (its device's current stream waits), else None
        self.name = name

    def free(self):
        for r in self.reqs:
            if r:
                _lib.hora_request_free(r)
        self.reqs = []
        self.keep = None


def _register(p):
    with _lock:
        h = next(_handle_ids)
        _handles[h] = p
    return h


def _submit_error(status, what, name):
    msg = _h.last_error()
    text = "hora.torch.%s('%s'): %s: %s" % (what, name, _h.status_string(status), msg)
    if status == _h.ERR_NOT_INITIALIZED:
        return ValueError("Horovod has not been initialized; use hvd.init(). (" + text + ")")
    if status in (_h.ERR_DUPLICATE, _h.ERR_INVALID_ARG):
        return ValueError(text)
    if status == _h.ERR_UNSUPPORTED:
        return NotImplementedError(text)
    return HorovodInternalError(text)


def poll(handle):
    """True when the operation behind handle has completed (synchronize will not block)."""
    with _lock:
        p = _handles.get(handle)
    if p is None:
        raise ValueError("hora.torch.poll: unknown handle %r" % (handle,))
    done = ctypes.c_int(0)
    for r in p.reqs:
        _lib.hora_test(r, ctypes.byref(done))
        if not done.value:
            return False
    return True


def synchronize(handle):
    """Wait for the operation behind handle and return its output tensor."""
    with _lock:
        p = _handles.pop(handle, None)
    if p is None:
        raise ValueError("hora.torch.synchronize: unknown handle %r (already synchronized?)" % (handle,))
    if _device._deferred:
        _device.reap(HorovodInternalError)
    if p.cuda is not None:
        return _synchronize_on_device(p)
    try:
        error = None
        for r in p.reqs:
            st = _lib.hora_wait(r)  # releases the GIL
            if st != _h.OK and error is None:
                error = _device.failure_text(r, st)
        if error is not None:
            raise HorovodInternalError(error)
        return p.finish()
    finally:
        p.free()


def _synchronize_on_device(p):
    """A device request: later work on the current stream waits for it, the
    host does not (device.py); p's requests are freed by a later reap."""
    error = _device.order_after(p.reqs, p.cuda)
    if error is not None:
        p.free()
        raise HorovodInternalError(error)
    out = p.finish()
    _device.defer(p.name, p.reqs, p.keep)
    p.reqs, p.keep = [], None
    return out


# ---- allreduce ---------------------------------------------------------------

def _resolve_op(average, op, what):
    if op is not None and average is not None:
        raise ValueError("hora.torch.%s: the op parameter supersedes average; give only one" % what)
    if op is None:
        op = Average if average is None or average else Sum
    if op == Adasum:
        _check_adasum(what)
    if op not in _HORA_OPS:
        raise ValueError("hora.torch.%s: unknown op %r" % (what, op))
    return op


def _reduce_submit(cfn, name, send, recv, src, dtype, op, prescale_factor, postscale_factor, what, ps, cuda=False):
    """One hora_allreduce_async or hora_reducescatter_async call (cfn) of src's
    elements from send into recv (device memory when cuda); returns the
    request and the encoded name (which must stay alive with it). Raises as
    _submit_error says."""
    opts = _h.Opts.make(prescale_factor, postscale_factor, _shape(src), process_set=ps.process_set_id)
    if cuda:
        _device.set_cuda(opts, src)
    req = ctypes.c_void_p()
    nameb = name.encode()
    st = cfn(nameb, _ptr(send), _ptr(recv), src.numel(), dtype, _HORA_OPS[op], ctypes.byref(opts), ctypes.byref(req))
    if st != _h.OK:
        raise _submit_error(st, what, name)
    return req, nameb


def _allreduce_start(tensor, output, name, op, prescale_factor, postscale_factor, what, ps):
    """Submit one all-reduce of tensor into output (output is tensor: in place) on process set ps."""
    dtype = _check_tensor(tensor, what)
    where = tensor.is_cuda and _device.placement([tensor], what, ps.process_set_id == 0 and op != Adasum)
    if where == "stage":
        return _device.stage(lambda h: _allreduce_start(h[0], h[0] if output is tensor else None, name, op,
                                                        prescale_factor, postscale_factor, what, ps),
                             [tensor], output is tensor, True, _handles)
    name = _auto_name("allreduce", name, ps)
    src = tensor.detach().contiguous()
    copy_back = None
    if output is tensor:
        dst = src
        if src.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
            copy_back = tensor
        send = dst
    else:
        dst = torch.empty_like(src, memory_format=torch.contiguous_format)
        send = src
    req, nameb = _reduce_submit(_lib.hora_allreduce_async, name, send, dst, src, dtype, op, prescale_factor,
                                postscale_factor, what, ps, cuda=where == "cuda")

    def finish():
        if copy_back is not None:
            with torch.no_grad():
                copy_back.copy_(dst)
            return copy_back
        return tensor if output is tensor else dst

    return _register(_Pending([req], [tensor, src, dst, nameb], finish, src if where else None, name))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    ps = _set_of(process_set, "allreduce_async")
    op = _resolve_op(average, op, "allreduce_async")
    return _allreduce_start(tensor, None, name, op, prescale_factor, postscale_factor, "allreduce_async", ps)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    ps = _set_of(process_set, "allreduce_async_")
    op = _resolve_op(average, op, "allreduce_async_")
    return _allreduce_start(tensor, tensor, name, op, prescale_factor, postscale_factor, "allreduce_async_", ps)


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, ps):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, ps
        return synchronize(_allreduce_start(tensor, None, name, op, prescale_factor, postscale_factor,
                                            "allreduce", ps))

    @staticmethod
    def backward(ctx, grad_output):
        # d(op over ranks)/d(input) for Average/Sum: the same reduction of the gradients.
        return allreduce(grad_output, op=ctx.op, prescale_factor=ctx.pre, postscale_factor=ctx.post,
                         process_set=ctx.ps), None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """op over ranks of tensor (default Average); tensor is not modified. Differentiable."""
    ps = _set_of(process_set, "allreduce")
    op = _resolve_op(average, op, "allreduce")
    if compression is None:
        from .compression import Compression
        compression = Compression.none
    compressed, cctx = compression.compress(tensor)
    out = _AllreduceFn.apply(compressed, name, op, prescale_factor, postscale_factor, ps)
    return compression.decompress(out, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """In place: tensor receives op over ranks of tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                                        process_set))


# ---- grouped allreduce -------------------------------------------------------

def _grouped_start(tensors, in_place, name, op, prescale_factor, postscale_factor, what, ps):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("hora.torch.%s: no tensors" % what)
    dtypes = {_check_tensor(t, what) for t in tensors}
    if len(dtypes) != 1:
        raise ValueError("hora.torch.%s: the tensors of a group must have one dtype (got %s)" %
                         (what, ", ".join(sorted({str(t.dtype) for t in tensors}))))
    dtype = dtypes.pop()
    where = _device.placement(tensors, what, ps.process_set_id == 0 and op != Adasum)
    if where == "stage":
        return _device.stage(lambda h: _grouped_start(h, in_place, name, op, prescale_factor, postscale_factor,
                                                      what, ps), tensors, in_place, False, _handles)
    base = _auto_name("grouped_allreduce", name, ps)
    n = len(tensors)
    srcs, dsts, copy_backs = [], [], []
    for t in tensors:
        s = t.detach().contiguous()
        if in_place:
            d = s
            copy_backs.append(t if (s.data_ptr() != t.data_ptr() or not t.is_contiguous()) else None)
        else:
            d = torch.empty_like(s, memory_format=torch.contiguous_format)
            copy_backs.append(None)
        srcs.append(s)
        dsts.append(d)
    names = [("%s_%d_of_%d" % (base, i + 1, n)).encode() for i in range(n)]
    c_names = (ctypes.c_char_p * n)(*names)
    c_send = (ctypes.c_void_p * n)(*[_ptr(s) for s in srcs])
    c_recv = (ctypes.c_void_p * n)(*[_ptr(d) for d in dsts])
    c_counts = (ctypes.c_size_t * n)(*[s.numel() for s in srcs])
    c_reqs = (ctypes.c_void_p * n)()
    opts = _h.Opts.make(prescale_factor, postscale_factor, process_set=ps.process_set_id)
    if where:
        _device.set_cuda(opts, srcs[0])
    st = _lib.hora_grouped_allreduce_async(n, c_names, c_send, c_recv, c_counts, dtype, _HORA_OPS[op],
                                           ctypes.byref(opts), c_reqs)
    if st != _h.OK:
        raise _submit_error(st, what, base)
    reqs = [ctypes.c_void_p(c_reqs[i]) for i in range(n)]

    def finish():
        out = []
        for t, d, cb in zip(tensors, dsts, copy_backs):
            if cb is not None:
                with torch.no_grad():
                    cb.copy_(d)
                out.append(cb)
            elif in_place:
                out.append(t)
            else:
                out.append(d)
        return out

    return _register(_Pending(reqs, [tensors, srcs, dsts, names, c_names], finish, srcs[0] if where else None, base))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    ps = _set_of(process_set, "grouped_allreduce_async")
    op = _resolve_op(average, op, "grouped_allreduce_async")
    return _grouped_start(tensors, False, name, op, prescale_factor, postscale_factor,
                          "grouped_allreduce_async", ps)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    ps = _set_of(process_set, "grouped_allreduce_async_")
    op = _resolve_op(average, op, "grouped_allreduce_async_")
    return _grouped_start(tensors, True, name, op, prescale_factor, postscale_factor,
                          "grouped_allreduce_async_", ps)


class _GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, ps, *tensors):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, ps
        return tuple(synchronize(_grouped_start(tensors, False, name, op, prescale_factor, postscale_factor,
                                                "grouped_allreduce", ps)))

    @staticmethod
    def backward(ctx, *grads):
        g = grouped_allreduce(list(grads), op=ctx.op, prescale_factor=ctx.pre, postscale_factor=ctx.post,
                              process_set=ctx.ps)
        return (None, None, None, None, None) + tuple(g)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    ps = _set_of(process_set, "grouped_allreduce")
    op = _resolve_op(average, op, "grouped_allreduce")
    if compression is None:
        from .compression import Compression
        compression = Compression.none
    pairs = [compression.compress(t) for t in tensors]
    out = _GroupedAllreduceFn.apply(name, op, prescale_factor, postscale_factor, ps, *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(out, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


# ---- allgather ---------------------------------------------------------------

def _request_result(req, name):
    """A finished allgather's or alltoall's result: (address, elements, per-rank element counts)."""
    data = ctypes.c_void_p()
    total = ctypes.c_size_t()
    counts = ctypes.POINTER(ctypes.c_size_t)()
    st = _lib.hora_request_result(req, ctypes.byref(data), ctypes.byref(total), ctypes.byref(counts))
    if st != _h.OK:
        raise HorovodInternalError("hora_request_result('%s'): %s: %s" % (name, _h.status_string(st), _h.last_error()))
    return data, total.value, counts


def _allgather_start(tensor, name, what, ps):
    dtype = _check_tensor(tensor, what)
    if tensor.is_cuda and _device.placement([tensor], what, False):  # libhora allocates the result: via the host
        return _device.stage(lambda h: _allgather_start(h[0], name, what, ps), [tensor], False, True, _handles)
    name = _auto_name("allgather", name, ps)
    src = tensor.detach().contiguous()
    shape = _shape(src)
    opts = _h.Opts.make(shape=shape, process_set=ps.process_set_id)
    req = ctypes.c_void_p()
    nameb = name.encode()
    st = _lib.hora_allgather_async(nameb, _ptr(src), src.numel(), dtype, ctypes.byref(opts), ctypes.byref(req))
    if st != _h.OK:
        raise _submit_error(st, what, name)
    row = 1
    for d in shape[1:]:
        row *= d

    def finish():
        data, total, _ = _request_result(req, name)
        rows = total // row if row else 0
        out = torch.empty((rows,) + tuple(shape[1:]), dtype=src.dtype)
        nbytes = total * src.element_size()
        if nbytes:
            ctypes.memmove(out.data_ptr(), data.value, nbytes)
        return out

    return _register(_Pending([req], [tensor, src, nameb], finish))


def allgather_async(tensor, name=None, process_set=global_process_set):
    ps = _set_of(process_set, "allgather_async")
    return _allgather_start(tensor, name, "allgather_async", ps)


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, ps):
        ctx.dim = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.ps = ps
        return synchronize(_allgather_start(tensor, name, "allgather", ps))

    @staticmethod
    def backward(ctx, grad_output):
        # Every rank's output depends on this rank's rows: their gradient is
        # the average over ranks of the gradient of the gathered rows (Horovod's).
        grad = allreduce(grad_output, op=Average, process_set=ctx.ps)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ctx.ps)
        r = _set_size_rank(ctx.ps)[1]
        offset = int(dims[:r].sum().item()) if r else 0
        return grad.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation over ranks along the first dimension (which may differ per rank). Differentiable."""
    ps = _set_of(process_set, "allgather")
    return _AllgatherFn.apply(tensor, name, ps)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """One allgather request per tensor (named <base>_<i>_of_<n>); one handle
    whose synchronize returns the list of results."""
    ps = _set_of(process_set, "grouped_allgather_async")
    tensors = list(tensors)
    base = _auto_name("grouped_allgather", name, ps)
    parts = []
    try:
        for i, t in enumerate(tensors):
            h = _allgather_start(t, "%s_%d_of_%d" % (base, i + 1, len(tensors)), "grouped_allgather_async", ps)
            with _lock:
                parts.append(_handles.pop(h))
    except Exception:
        for p in parts:  # already submitted: wait for them (the peers submit them too) before freeing
            p.free()
        raise
    return _register(_Pending([r for p in parts for r in p.reqs], [p.keep for p in parts],
                              lambda: [p.finish() for p in parts]))


class _GroupedAllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, ps, *tensors):
        ctx.dims = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.ps = ps
        return tuple(synchronize(grouped_allgather_async(tensors, name, process_set=ps)))

    @staticmethod
    def backward(ctx, *grads):
        out = [None, None]
        r = _set_size_rank(ctx.ps)[1]
        for g, d in zip(grads, ctx.dims):
            g = allreduce(g, op=Average, process_set=ctx.ps)
            dims = allgather(torch.tensor([d], dtype=torch.int64), process_set=ctx.ps)
            offset = int(dims[:r].sum().item()) if r else 0
            out.append(g.narrow(0, offset, d))
        return tuple(out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor. Differentiable."""
    ps = _set_of(process_set, "grouped_allgather")
    return list(_GroupedAllgatherFn.apply(name, ps, *tensors))


# ---- broadcast ---------------------------------------------------------------

def _broadcast_start(tensor, output, root_rank, name, what, ps):
    dtype = _check_tensor(tensor, what)
    where = tensor.is_cuda and _device.placement([tensor], what, ps.process_set_id == 0)
    if where == "stage":
        return _device.stage(lambda h: _broadcast_start(h[0], h[0] if output is tensor else None, root_rank, name,
                                                        what, ps), [tensor], output is tensor, True, _handles)
    name = _auto_name("broadcast", name, ps)
    if output is tensor:
        buf = tensor.detach().contiguous()
        copy_back = tensor if (buf.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous()) else None
    else:
        buf = tensor.detach().clone(memory_format=torch.contiguous_format)
        copy_back = None
    opts = _h.Opts.make(shape=_shape(buf), process_set=ps.process_set_id)
    if where:
        _device.set_cuda(opts, buf)
    req = ctypes.c_void_p()
    nameb = name.encode()
    st = _lib.hora_broadcast_async(nameb, _ptr(buf), buf.numel(), dtype, int(root_rank), ctypes.byref(opts),
                                   ctypes.byref(req))
    if st != _h.OK:
        raise _submit_error(st, what, name)

    def finish():
        if copy_back is not None:
            with torch.no_grad():
                copy_back.copy_(buf)
            return copy_back
        return tensor if output is tensor else buf

    return _register(_Pending([req], [tensor, buf, nameb], finish, buf if where else None, name))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    ps = _set_of(process_set, "broadcast_async")
    return _broadcast_start(tensor, None, root_rank, name, "broadcast_async", ps)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    ps = _set_of(process_set, "broadcast_async_")
    return _broadcast_start(tensor, tensor, root_rank, name, "broadcast_async_", ps)


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, ps):
        ctx.root_rank, ctx.ps = root_rank, ps
        return synchronize(_broadcast_start(tensor, None, root_rank, name, "broadcast", ps))

    @staticmethod
    def backward(ctx, grad_output):
        # Only the root's input reaches the outputs.
        grad = allreduce(grad_output, op=Average, process_set=ctx.ps)
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """tensor of root_rank on every rank; tensor is not modified. Differentiable."""
    ps = _set_of(process_set, "broadcast")
    return _BroadcastFn.apply(tensor, root_rank, name, ps)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))
