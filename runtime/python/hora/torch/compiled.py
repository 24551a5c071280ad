"""torch.compile (torch >= 2): hora.torch's public calls run outside dynamo's
graphs. Each one ends in a ctypes call into libhora, which dynamo cannot
trace; left alone it traces the Python around it, then breaks the graph at
the first ctypes call with a warning per call site. Marked with
torch.compiler.disable, a call is one clean graph break: the compiled code
before it runs, the call runs eagerly (autograd included), the compiled
code after it resumes. Under torch 1.x (no torch.compile) nothing changes.

The DistributedOptimizer's hooks run in the autograd engine, outside any
compiled frame, and call mpi_ops directly: they are not wrapped, so eager
code pays nothing for this."""
import torch

# The names of __init__.py's public functions that reach libhora.
NAMES = ("init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "cross_rank",
         "cross_size", "is_homogeneous", "start_timeline", "stop_timeline",
         "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
         "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
         "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
         "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "poll", "synchronize",
         "reducescatter", "reducescatter_async", "grouped_reducescatter", "grouped_reducescatter_async",
         "alltoall", "alltoall_async", "barrier", "sparse_allreduce_async", "join",
         "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object")


def _disable():
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "disable"):
        return compiler.disable  # torch >= 2.1
    dynamo = getattr(torch, "_dynamo", None)
    return getattr(dynamo, "disable", None)  # torch 2.0; None before


def outside_graphs(namespace):
    """Replace each of NAMES in namespace (a module's globals()) by the same
    function marked to run outside compiled graphs."""
    disable = _disable()
    if disable is None:
        return
    for name in NAMES:
        namespace[name] = disable(namespace[name])
