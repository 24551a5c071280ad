/* api_coll.c - the public direct collectives (hora.h): the runtime must be
 * up; the rest (arguments, staging, algorithms) is coll/'s, on the user's
 * channels and host memory. */
#include "api/api.h"
#include "base/status.h"
#include "hora.h"

void hora_shard(size_t count, int size, int rank, size_t *offset, size_t *shard_count)
{
    coll_shard(count, size, rank, offset, shard_count);
}

hora_status_t hora_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    HORA_CHECK(api_check_initialized("hora_allreduce"));
    return coll_allreduce(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, send, recv, count, dtype, op, NULL);
}

hora_status_t hora_reduce_scatter(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    HORA_CHECK(api_check_initialized("hora_reduce_scatter"));
    return coll_reduce_scatter(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, send, recv, count, dtype, op);
}

hora_status_t hora_allgatherv(const void *send, void *recv, const size_t *counts, hora_dtype_t dtype)
{
    HORA_CHECK(api_check_initialized("hora_allgatherv"));
    return coll_allgatherv(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, send, recv, counts, dtype);
}

hora_status_t hora_broadcast(void *buf, size_t count, hora_dtype_t dtype, int root)
{
    HORA_CHECK(api_check_initialized("hora_broadcast"));
    return coll_broadcast(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, buf, count, dtype, root);
}
