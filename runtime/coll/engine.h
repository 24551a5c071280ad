/* engine.h - the data engine of a memory kind: the reductions and copies
 * the collectives run on their buffers. The host engine (engine_host.c) is
 * kernels/cpu; a device engine (kernels/cuda on a communication stream)
 * fills the same table for device memory. ring.c, oneshot.c, coll.c and the
 * coordinator's fusion (coord/coord_exec.c) touch buffer contents only
 * through an engine, never with memcpy or a k_* call of their own, so the
 * same algorithms can run on every memory kind (the buffers the runtime
 * allocates itself, staging, the ring's receive buffers, the fusion buffer,
 * are host memory until the device engine brings its own allocation).
 *
 * Every slot returns a status (a device engine's calls can fail); the host
 * engine's never do. Buffers of one call may be exactly equal (dst == src)
 * but must not partly overlap. */
#ifndef HORA_COLL_ENGINE_H
#define HORA_COLL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"

struct coll_engine_ops {
    /* dst[i] = (srcs[0][i] op ... op srcs[n-1][i]) / divisor (divisor 1: no
     * division), combined in source order; f16/bf16 accumulate in fp32 and
     * round once (kernels' k_reduce_n). op is SUM, MIN, MAX or PROD (AVG is
     * SUM with divisor = ranks). */
    hora_status_t (*reduce)(void *dst, const void *const *srcs, int n, size_t count, hora_dtype_t dtype,
                            hora_op_t op, int64_t divisor);
    /* dst[i] = src[i] * factor (k_scale's rounding and saturation). */
    hora_status_t (*scale)(void *dst, const void *src, size_t count, hora_dtype_t dtype, double factor);
    /* Convert count elements (k_cast). */
    hora_status_t (*cast)(void *dst, hora_dtype_t dst_dtype, const void *src, hora_dtype_t src_dtype,
                          size_t count);
    hora_status_t (*copy)(void *dst, const void *src, size_t bytes);
    hora_status_t (*zero)(void *dst, size_t bytes);
};

/* The engine of a memory kind; NULL where none is built in. */
const struct coll_engine_ops *coll_engine_for(hora_memory_t memory);

#endif
