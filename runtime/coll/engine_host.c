/* engine_host.c - the host data engine: kernels/cpu behind the engine ops
 * table (engine.h). */
#include <string.h>

#include "coll/engine.h"
#include "coll/engine_k.h"
#include "k_cpu.h"

static hora_status_t engine_host_reduce(void *dst, const void *const *srcs, int n, size_t count, hora_dtype_t dtype,
                                        hora_op_t op, int64_t divisor)
{
    if (op == COLL_OP_BOR) {
        /* Words, not numbers: no kernel, and in place is fine (each word's
         * inputs are read before it is written). */
        uint64_t *out = dst;
        for (size_t i = 0; i < count; i++) {
            uint64_t word = 0;
            for (int k = 0; k < n; k++) word |= ((const uint64_t *)srcs[k])[i];
            out[i] = word;
        }
        return HORA_OK;
    }
    k_reduce_n(dst, srcs, n, count, (k_dtype_t)dtype, coll_engine_k_op(op), divisor);
    return HORA_OK;
}

static hora_status_t engine_host_reduce_exact(void *dst, const void *const *srcs, int n, size_t count,
                                              hora_dtype_t dtype, int64_t divisor)
{
    k_reduce_n_exact(dst, srcs, n, count, (k_dtype_t)dtype, divisor);
    return HORA_OK;
}

static hora_status_t engine_host_scale(void *dst, const void *src, size_t count, hora_dtype_t dtype, double factor)
{
    k_scale(dst, src, count, (k_dtype_t)dtype, factor);
    return HORA_OK;
}

static hora_status_t engine_host_cast(void *dst, hora_dtype_t dst_dtype, const void *src, hora_dtype_t src_dtype,
                                      size_t count)
{
    k_cast(dst, (k_dtype_t)dst_dtype, src, (k_dtype_t)src_dtype, count);
    return HORA_OK;
}

static hora_status_t engine_host_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src) memcpy(dst, src, bytes);
    return HORA_OK;
}

static hora_status_t engine_host_zero(void *dst, size_t bytes)
{
    if (bytes) memset(dst, 0, bytes);
    return HORA_OK;
}

static hora_status_t engine_host_copy_many(const struct coll_copy *copies, int n)
{
    for (int i = 0; i < n; i++) engine_host_copy(copies[i].dst, copies[i].src, copies[i].bytes);
    return HORA_OK;
}

static void engine_host_batch_begin(void) {}
static hora_status_t engine_host_batch_end(void) { return HORA_OK; }

static hora_status_t engine_host_event_wait(void *event)
{
    (void)event;
    return HORA_OK;
}

static const struct coll_engine_ops engine_host_ops = {
    .reduce = engine_host_reduce,
    .reduce_exact = engine_host_reduce_exact,
    .scale = engine_host_scale,
    .cast = engine_host_cast,
    .copy = engine_host_copy,
    .zero = engine_host_zero,
    .copy_many = engine_host_copy_many,
    .batch_begin = engine_host_batch_begin,
    .batch_end = engine_host_batch_end,
    .event_wait = engine_host_event_wait,
};

const struct coll_engine_ops *coll_engine_host(void) { return &engine_host_ops; }
