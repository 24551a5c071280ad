"""CUDA tensors in hora.torch.

Every collective takes CUDA tensors. Where libhora moves device memory
itself (hora_cuda_device() >= 0: a CUDA build on a job where every rank has
a GPU), all-reduces, grouped all-reduces and broadcasts on the global set
go to it as device requests (HORA_MEMORY_CUDA): the request waits for the
work queued so far on the tensor's current stream (libhora records an event
on it at submission), and synchronize() orders later work on that stream
after the result (hora_stream_wait: the stream waits on a flag the
coordinator sets) and returns without waiting on the host. Everything else
(allgather, reducescatter, alltoall, sparse, op Adasum, process sets, a
libhora without device support) is staged: the tensors are copied to host
memory, the host collective runs, and synchronize() copies the result back.

libhora runs on one device per rank, chosen at hvd.init(): when torch has
not touched CUDA yet, hora.torch asks for the host-local rank's device
(HORA_CUDA_DEVICE=local, which makes it current), so Horovod's
`hvd.init(); torch.cuda.set_device(hvd.local_rank())` agrees with it.

Without host synchronisation, a device request that fails after
synchronize() returned is reported by the next synchronize() (or shutdown)
as a HorovodInternalError naming it; until it completes its tensors stay
referenced here.
"""
import ctypes
import os

import torch

import hora as _h
from hora import lib as _lib

_runtime_device = None  # hora_cuda_device() of the running runtime (None: not asked yet)
_deferred = []  # (name, requests, kept objects) completing on the device after synchronize()


def pick_device_before_init():
    """The HORA_CUDA_DEVICE to start libhora with, or None to leave the
    environment alone: local when torch can see a GPU but has not set one up
    (the user has not chosen), unless the user said which."""
    if "HORA_CUDA_DEVICE" in os.environ or os.environ.get("HORA_CUDA") == "0":
        return None
    try:
        if torch.cuda.is_initialized() or not torch.cuda.is_available():
            return None
    except Exception:  # a torch without CUDA support
        return None
    return "local"


def reset():
    """hora_shutdown ran: a later hvd.init() may choose again."""
    global _runtime_device
    _runtime_device = None


def runtime_device():
    global _runtime_device
    if _runtime_device is None:
        _runtime_device = _lib.hora_cuda_device() if _lib.hora_initialized() else -1
    return _runtime_device


def placement(tensors, what, direct):
    """None for CPU tensors; "cuda" when libhora takes them on its device
    (direct: the operation and process set allow it); "stage" when they go
    through host memory. Refuses other devices and a mix of devices."""
    devices = {t.device for t in tensors}
    if all(d.type == "cpu" for d in devices):
        return None
    others = sorted({d.type for d in devices} - {"cpu", "cuda"})
    if others:
        raise NotImplementedError("hora.torch.%s: %s tensors are not supported (CPU and CUDA tensors only)" %
                                  (what, others[0]))
    if len(devices) != 1:
        raise ValueError("hora.torch.%s: the tensors lie on different devices (%s); one request takes tensors of "
                         "one device" % (what, ", ".join(sorted(str(d) for d in devices))))
    device = devices.pop()
    runtime = runtime_device()
    if not direct or runtime < 0 or any(t.numel() == 0 for t in tensors):
        return "stage"
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index != runtime:
        raise ValueError("hora.torch.%s: the tensor is on cuda:%d but libhora uses cuda:%d, the device chosen at "
                         "hvd.init() (the host-local rank's when torch had not touched CUDA before, else the "
                         "current one); call torch.cuda.set_device(hvd.local_rank()) and keep the model there, "
                         "or set the device before hvd.init()" % (what, index, runtime))
    return "cuda"


def stream_of(tensor):
    """The current stream of tensor's device, as a cudaStream_t."""
    return ctypes.c_void_p(torch.cuda.current_stream(tensor.device).cuda_stream)


def set_cuda(opts, tensor):
    """Make opts (hora.Opts) a device request on tensor's current stream."""
    opts.memory = _h.MEMORY_CUDA
    opts.device = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
    opts.stream = stream_of(tensor).value
    return opts


def failure_text(req, status, otherwise=""):
    """A failed request's status and libhora's message about it (otherwise
    when it has none)."""
    msg = _lib.hora_request_error(req)
    return "%s: %s" % (_h.status_string(status), msg.decode(errors="replace") if msg else otherwise)


def _request_failure(req):
    done = ctypes.c_int(0)
    st = _lib.hora_test(req, ctypes.byref(done))
    if not done.value:
        return None, False
    return (None if st == _h.OK else failure_text(req, st)), True


def order_after(reqs, tensor):
    """The current stream of tensor's device waits for reqs (no host wait
    where the device can). Returns the first failure known now, or None."""
    stream = stream_of(tensor)
    for r in reqs:
        error, done = _request_failure(r)
        if error is not None:
            return error
        if done:
            continue
        st = _lib.hora_stream_wait(r, stream)
        if st != _h.OK:  # it waited on the host and the request failed
            return failure_text(r, st, _h.last_error())
    return None


def defer(name, reqs, keep):
    """Requests that complete on the device after synchronize(): freed, and
    their failure raised, by a later reap()."""
    _deferred.append((name, list(reqs), keep))


def reap(error_type, wait=False):
    """Free the deferred requests that completed (every one with wait); raise
    error_type for the first that failed."""
    global _deferred
    left, failure = [], None
    for name, reqs, keep in _deferred:
        pending = []
        for r in reqs:
            if wait:
                st = _lib.hora_wait(r)
                error, done = (None if st == _h.OK else failure_text(r, st)), True
            else:
                error, done = _request_failure(r)
            if not done:
                pending.append(r)
                continue
            if error is not None and failure is None:
                failure = "hora.torch: the device collective '%s' failed after synchronize() returned: %s" % (
                    name, error)
            _lib.hora_request_free(r)
        if pending:
            left.append((name, pending, keep))
    _deferred = left
    if failure is not None:
        raise error_type(failure)


def stage(start, tensors, in_place, single, handles, move=None):
    """Run start(host_tensors), which submits a host collective and returns
    its handle (a key of handles, whose value is its _Pending), on host
    copies of tensors, and make its finish hand the result back on the
    device: copied into tensors when in_place (tensors[0] when single, else
    the list), else moved there (a tensor, or a list or tuple of them; move,
    given, does that instead). Returns the handle."""
    device = tensors[0].device
    hosts = [t.detach().to("cpu") for t in tensors]
    h = start(hosts)
    p = handles[h]
    host_finish = p.finish

    def to_device(out):
        if isinstance(out, torch.Tensor):
            return out.to(device)
        if isinstance(out, (list, tuple)):
            return type(out)(to_device(o) for o in out)
        return out

    def finish():
        out = host_finish()
        if not in_place:
            return move(out, device) if move else to_device(out)
        with torch.no_grad():
            for t, host in zip(tensors, hosts):
                t.copy_(host)
        return tensors[0] if single else list(tensors)

    p.finish = finish
    p.keep = [p.keep, tensors, hosts]
    return h
