"""hora.torch - Horovod's PyTorch API (horovod.torch) over libhora.

    import hora.torch as hvd      # instead of: import horovod.torch as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Run under mpirun like any Horovod program. CPU tensors only; what it does
not do (CUDA tensors; op=Adasum on a world size that is not a power of
two, on a process set, or in a reducescatter) raises NotImplementedError
saying so. op=Adasum is libhora's HORA_OP_ADASUM, and
DistributedOptimizer(op=Adasum) is Horovod's Adasum optimizer
(adasum_optimizer.py). hora's own additions: shared_tensors, tensors
in memory the ranks of a host share, whose fused all-reduces need no copy;
preemption (preempt_watch, check_preempted, request_preempt, Preempted:
a catchable exception on every rank at the same step, preempt.py).
hvd.elastic is Horovod's elastic API (run, TorchState, ElasticSampler,
HostsUpdatedInterrupt) over libhora's elastic worlds (hora-run --elastic).
"""
from .compression import Compression
from .mpi_ops import (Average, Sum, Adasum, Min, Max, Product, HorovodInternalError, ProcessSet,
                      global_process_set, add_process_set, remove_process_set,
                      init, shutdown, is_initialized, rank, size, local_rank, local_size, cross_rank,
                      cross_size, is_homogeneous, mpi_threads_supported, mpi_enabled, mpi_built,
                      gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
                      start_timeline, stop_timeline,
                      allreduce, allreduce_, allreduce_async, allreduce_async_,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                      allgather, allgather_async, grouped_allgather, grouped_allgather_async,
                      broadcast, broadcast_, broadcast_async, broadcast_async_,
                      poll, synchronize)
from .collectives import (reducescatter, reducescatter_async, grouped_reducescatter, grouped_reducescatter_async,
                          alltoall, alltoall_async, barrier, sparse_allreduce_async, join)
from .functions import broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object
from .optimizer import DistributedOptimizer
from .memory import shared_tensors, is_shared
from .sync_batch_norm import SyncBatchNorm
from .preempt import Preempted, preempt_watch, request_preempt, check_preempted
from . import elastic

# torch.compile: each public call is one graph break, not a trace into ctypes (compiled.py).
from .compiled import outside_graphs as _outside_graphs  # noqa: E402

_outside_graphs(globals())
