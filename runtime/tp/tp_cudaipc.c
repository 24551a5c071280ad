/* tp_cudaipc.c - device buffers of the ranks of one host, through CUDA IPC.
 *
 * Every rank's device pool is opened by its host peers at init (mem_dev.c:
 * cudaIpcGetMemHandle / cudaIpcOpenMemHandle), so the algorithms reduce
 * straight from a neighbour's device buffer, as over shm from its host
 * buffer: the one-shot path reads every peer's shard with one kernel
 * (k_cuda_reduce_n over the peers' pointers) and writes the result into all
 * of them. Progress, descriptors and the one-outcome agreement are shm's
 * protocol (tp_shm.c), on a control-block set of their own in the host pools.
 *
 * Ordering is on the host. The device engine (coll/engine_cuda.c) returns
 * from a reduction or copy only after its stream has finished it, and only
 * then does the algorithm post its position; a peer that sees the position
 * launches work reading that memory after the writes completed. No kernel
 * ever waits for another process: processes sharing one GPU are
 * time-sliced, and a spinning kernel would hold the GPU the peer it waits
 * for needs. */
#include "base/status.h"
#include "tp/tp.h"
#include "tp/tp_shm.h"

/* The peer's device pool is open here, and its host pool (the control
 * blocks) is mapped. */
static bool tp_cudaipc_can_connect(const struct tp_env *env, int peer)
{
    const struct topo *t = env->topo;
    return !env->disable[TP_KIND_CUDAIPC] && mem_dev_on(env->dev) && env->pool->peer_count == t->host_size &&
           t->host_of[peer] == t->host_index && mem_dev_peer(env->dev, t->host_rank_of[peer], 0) != NULL;
}

static hora_status_t tp_cudaipc_connect(struct tp *tp)
{
    HORA_CHECK(mem_dev_use(tp->env->dev));
    return tp_shm_connect_set(tp, TP_SHM_SET_DEVICE);
}

static bool tp_cudaipc_mem_local_offset(struct tp *tp, const void *ptr, size_t bytes, uint64_t *offset)
{
    return mem_dev_offset(tp->env->dev, ptr, bytes, offset);
}

static void *tp_cudaipc_mem_peer_ptr(struct tp *tp, int peer, uint64_t offset)
{
    return mem_dev_peer(tp->env->dev, tp->env->topo->host_rank_of[peer], offset);
}

const struct tp_ops tp_cudaipc_ops = {
    .name = "cudaipc",
    .caps = TP_CAP_PEER_MEMORY | TP_CAP_HOST_LOCAL,
    .memory_kinds = 1u << HORA_MEMORY_CUDA,
    .can_connect = tp_cudaipc_can_connect,
    .connect = tp_cudaipc_connect,
    .close = tp_shm_close,
    .isend = tp_unsupported_isend,
    .irecv = tp_unsupported_irecv,
    .wait = tp_unsupported_wait,
    .mem_publish = tp_shm_mem_publish,
    .mem_desc = tp_shm_mem_desc,
    .mem_post = tp_shm_mem_post,
    .mem_wait = tp_shm_mem_wait,
    .mem_local_offset = tp_cudaipc_mem_local_offset,
    .mem_peer_ptr = tp_cudaipc_mem_peer_ptr,
    .mem_op_begin = tp_shm_mem_op_begin,
    .mem_op_end = tp_shm_mem_op_end,
    .mem_op_check = tp_shm_mem_op_check,
    .small_bytes = 0,
    .mem_small_post = tp_unsupported_mem_small_post,
    .mem_small_wait = tp_unsupported_mem_small_wait,
};
