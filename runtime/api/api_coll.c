/* api_coll.c - the public direct collectives (hora.h): the runtime must be
 * up, and the buffers' memory kind is found here (device pointers are
 * detected: cudaPointerGetAttributes); the rest (arguments, staging,
 * algorithms) is coll/'s, on the user's channels. */
#include "api/api.h"
#include "base/status.h"
#include "hora.h"

/* Where a call's buffers live: all on the device or all on the host. */
static hora_status_t api_coll_memory(const char *what, const void *a, const void *b, hora_memory_t *memory)
{
    const hora_memory_t ka = mem_dev_kind_of(&hora_rt.dev, a), kb = b ? mem_dev_kind_of(&hora_rt.dev, b) : ka;
    if (a && b && ka != kb)
        return status_fail(HORA_ERR_INVALID_ARG, "%s: one buffer is in device memory and the other in host memory",
                           what);
    *memory = a ? ka : kb;
    return HORA_OK;
}

void hora_shard(size_t count, int size, int rank, size_t *offset, size_t *shard_count)
{
    coll_shard(count, size, rank, offset, shard_count);
}

hora_status_t hora_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    hora_memory_t memory = HORA_MEMORY_HOST;
    HORA_CHECK(api_check_initialized("hora_allreduce"));
    HORA_CHECK(api_coll_memory("hora_allreduce", send, recv, &memory));
    return coll_allreduce(&hora_rt.coll, COLL_PURPOSE_USER, memory, send, recv, count, dtype, op, NULL);
}

hora_status_t hora_reduce_scatter(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    hora_memory_t memory = HORA_MEMORY_HOST;
    HORA_CHECK(api_check_initialized("hora_reduce_scatter"));
    HORA_CHECK(api_coll_memory("hora_reduce_scatter", send, recv, &memory));
    return coll_reduce_scatter(&hora_rt.coll, COLL_PURPOSE_USER, memory, send, recv, count, dtype, op);
}

hora_status_t hora_allgatherv(const void *send, void *recv, const size_t *counts, hora_dtype_t dtype)
{
    hora_memory_t memory = HORA_MEMORY_HOST;
    HORA_CHECK(api_check_initialized("hora_allgatherv"));
    HORA_CHECK(api_coll_memory("hora_allgatherv", send, recv, &memory));
    return coll_allgatherv(&hora_rt.coll, COLL_PURPOSE_USER, memory, send, recv, counts, dtype);
}

hora_status_t hora_broadcast(void *buf, size_t count, hora_dtype_t dtype, int root)
{
    hora_memory_t memory = HORA_MEMORY_HOST;
    HORA_CHECK(api_check_initialized("hora_broadcast"));
    HORA_CHECK(api_coll_memory("hora_broadcast", buf, NULL, &memory));
    return coll_broadcast(&hora_rt.coll, COLL_PURPOSE_USER, memory, buf, count, dtype, root);
}

hora_status_t hora_barrier(void)
{
    /* One byte all-reduced: every rank must have arrived for it to finish. */
    uint8_t token = 1;
    HORA_CHECK(api_check_initialized("hora_barrier"));
    return coll_allreduce(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, &token, &token, 1, HORA_DTYPE_U8,
                          HORA_OP_MAX, NULL);
}
