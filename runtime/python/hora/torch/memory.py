"""Tensors in memory the runtime shares between the ranks of a host.

hora_mem_alloc memory is mapped by every rank on the host, so an all-reduce
of tensors that lie in it, fused into one response in the order they lie,
reads and writes them in place: no copy into a fusion buffer and back
(libhora's zero-copy path, hora.h: HORA_ALIGN_BYTES). Horovod has no such
call; it is hora's, for programs that own their gradient buffers.
"""
import ctypes
import math
import weakref

import torch

import hora as _h
from hora import lib as _lib
from . import mpi_ops as _ops

ALIGN_BYTES = _h.ALIGN_BYTES


def _free(ptr, generation):
    # Only into the runtime that gave it: after hora_shutdown the pool is
    # gone, and a later hora_init's pool may lie at the same address.
    if generation == _ops._generation and _lib.hora_initialized():
        _lib.hora_mem_free(ptr)


def shared_tensors(shapes, dtype=torch.float32):
    """Zero-filled CPU tensors of the given shapes, in one block of shared
    memory, each starting at the first multiple of ALIGN_BYTES after the
    previous one ends, in the order given.

    In-place all-reduces of them (allreduce_async_, grouped_allreduce_async_)
    that the runtime fuses into one response in that order run where they
    lie: list a gradient set in backprop order, or all-reduce it as one group.
    Anything else works on them as on any tensor. The block is freed when the
    last of the tensors and their views is gone. shutdown() unmaps it: none of
    them may be touched after that."""
    return _shared_block(shapes, dtype)[1]


def _shared_block(shapes, dtype):
    """shared_tensors' block: (the whole block as one uint8 tensor, gaps
    included, and the tensors in it)."""
    if not _lib.hora_initialized():
        raise ValueError("hora.torch.shared_tensors: hora.torch is not initialized; call init() first")
    places, total, item = _places(shapes, dtype)
    ptr = ctypes.c_void_p()
    st = _lib.hora_mem_alloc(max(total, 1), ctypes.byref(ptr))
    if st != _h.OK:
        err = MemoryError if st == _h.ERR_NO_MEMORY else _ops.HorovodInternalError
        raise err("hora.torch.shared_tensors(%d bytes): %s: %s" % (total, _h.status_string(st), _h.last_error()))
    block = (ctypes.c_ubyte * max(total, 1)).from_address(ptr.value)
    weakref.finalize(block, _free, ptr.value, _ops._generation)
    ctypes.memset(ptr, 0, max(total, 1))
    flat = torch.frombuffer(block, dtype=torch.uint8)  # keeps block (and so the memory) alive
    return flat, _views(flat, places, item, dtype)


def _places(shapes, dtype):
    """Where each tensor of a block starts (bytes), each at the first multiple
    of ALIGN_BYTES after the previous one ends: ([(offset, shape)], the
    block's bytes, the element size)."""
    _ops._hora_dtype(torch.empty(0, dtype=dtype))  # a dtype libhora moves
    item = torch.empty(0, dtype=dtype).element_size()
    places, total = [], 0
    for shape in shapes:
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError("hora.torch.shared_tensors: negative dimension in %r" % (shape,))
        total = -(-total // ALIGN_BYTES) * ALIGN_BYTES
        places.append((total, shape))
        total += math.prod(shape) * item
    return places, total, item


def _views(flat, places, item, dtype):
    return [flat[off:off + math.prod(shape) * item].view(dtype).view(shape) for off, shape in places]


def _device_block(shapes, dtype, device):
    """_shared_block's layout in one zeroed block of device memory (torch's
    allocator): the DistributedOptimizer's gradients of a CUDA model, whose
    neighbouring views libhora fuses into one device response."""
    places, total, item = _places(shapes, dtype)
    flat = torch.zeros(max(total, 1), dtype=torch.uint8, device=device)
    return flat, _views(flat, places, item, dtype)


def is_shared(tensor):
    """True when the tensor's data lies in shared memory (shared_tensors)."""
    return bool(_lib.hora_mem_is_shared(ctypes.c_void_p(tensor.data_ptr())))
