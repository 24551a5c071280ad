/* engine_host.c - the host data engine: kernels/cpu behind the engine ops
 * table (engine.h). */
#include <string.h>

#include "coll/engine.h"
#include "k_cpu.h"

_Static_assert((int)HORA_DTYPE_F32 == (int)K_DTYPE_F32 && (int)HORA_DTYPE_F16 == (int)K_DTYPE_F16 &&
                   (int)HORA_DTYPE_BF16 == (int)K_DTYPE_BF16 && (int)HORA_DTYPE_F64 == (int)K_DTYPE_F64 &&
                   (int)HORA_DTYPE_I32 == (int)K_DTYPE_I32 && (int)HORA_DTYPE_I64 == (int)K_DTYPE_I64 &&
                   (int)HORA_DTYPE_U8 == (int)K_DTYPE_U8 && (int)HORA_DTYPE_I8 == (int)K_DTYPE_I8 &&
                   (int)HORA_DTYPE_I16 == (int)K_DTYPE_I16 && (int)HORA_DTYPE_U16 == (int)K_DTYPE_U16 &&
                   (int)HORA_DTYPE_BOOL == (int)K_DTYPE_BOOL && (int)HORA_DTYPE_COUNT == (int)K_DTYPE_COUNT,
               "hora and kernel dtypes must agree");

int coll_engine_k_op(hora_op_t op)
{
    switch (op) {
    case HORA_OP_MIN: return K_OP_MIN;
    case HORA_OP_MAX: return K_OP_MAX;
    case HORA_OP_PROD: return K_OP_PROD;
    default: return K_OP_SUM; /* SUM, and AVG's sum */
    }
}

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
    k_reduce_n(dst, srcs, n, count, (k_dtype_t)dtype, (k_op_t)coll_engine_k_op(op), divisor);
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

static const struct coll_engine_ops coll_engine_host = {
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

const struct coll_engine_ops *coll_engine_for(hora_memory_t memory)
{
    if (memory == HORA_MEMORY_HOST) return &coll_engine_host;
    return memory == HORA_MEMORY_CUDA ? coll_engine_cuda() : NULL;
}
