/* engine.h - the data engine of a memory kind: the reductions and copies
 * the collectives run on their buffers. The host engine (engine_host.c) is
 * kernels/cpu; the device engine (engine_cuda.c: kernels/cuda on a
 * communication stream per thread) fills the same table for device memory. ring.c, oneshot.c, coll.c and the
 * coordinator's fusion (coord/coord_exec.c) touch buffer contents only
 * through an engine, never with memcpy or a k_* call of their own, so the
 * same algorithms can run on every memory kind (the buffers the runtime
 * allocates itself, staging, the ring's receive buffers, the fusion buffer,
 * are in the pool of the memory kind).
 *
 * Every slot returns a status (a device engine's calls can fail); the host
 * engine's never do. Buffers of one call may be exactly equal (dst == src)
 * but must not partly overlap. An op has finished writing when it returns
 * (the algorithms post their positions right after), except between
 * batch_begin and batch_end: there the device engine only queues the ops on
 * the thread's stream, and batch_end waits for them all. */
#ifndef HORA_COLL_ENGINE_H
#define HORA_COLL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "mem/mem_dev.h"

struct coll_copy {
    void *dst;
    const void *src;
    size_t bytes;
};

struct coll_engine_ops {
    /* dst[i] = (srcs[0][i] op ... op srcs[n-1][i]) / divisor (divisor 1: no
     * division), combined in source order; f16/bf16 accumulate in fp32 and
     * round once (kernels' k_reduce_n). op is SUM, MIN, MAX or PROD (AVG is
     * SUM with divisor = ranks). The host engine also takes COLL_OP_BOR on
     * HORA_DTYPE_I64 (the coordinator's agreement, coll_allreduce_bits). */
    hora_status_t (*reduce)(void *dst, const void *const *srcs, int n, size_t count, hora_dtype_t dtype, hora_op_t op,
                            int64_t divisor);
    /* dst[i] = the exact sum of srcs[0][i] .. srcs[n-1][i] rounded once
     * (f32/f16/bf16; other dtypes: reduce's SUM), then / divisor as reduce
     * does: the bits depend only on the multiset of inputs (k_reduce_n_exact;
     * HORA_REPRODUCIBLE=exact). The device engine returns
     * HORA_ERR_UNSUPPORTED. */
    hora_status_t (*reduce_exact)(void *dst, const void *const *srcs, int n, size_t count, hora_dtype_t dtype,
                                  int64_t divisor);
    /* dst[i] = src[i] * factor (k_scale: integers truncate toward zero and saturate). */
    hora_status_t (*scale)(void *dst, const void *src, size_t count, hora_dtype_t dtype, double factor);
    /* Convert count elements (k_cast). */
    hora_status_t (*cast)(void *dst, hora_dtype_t dst_dtype, const void *src, hora_dtype_t src_dtype, size_t count);
    hora_status_t (*copy)(void *dst, const void *src, size_t bytes);
    hora_status_t (*zero)(void *dst, size_t bytes);
    /* Many copies at once (the fusion buffer's packing): one launch on a device. */
    hora_status_t (*copy_many)(const struct coll_copy *copies, int n);
    void (*batch_begin)(void);
    hora_status_t (*batch_end)(void); /* the first failure of the batch */
    /* Block until the data an event stands for is written (a cudaEvent_t
     * recorded by the producer; the host engine has nothing to wait for). */
    hora_status_t (*event_wait)(void *event);
};

/* The engine of a memory kind (engine.c); NULL where none is available
 * (device memory without device support: coll_engine_cuda_start not called). */
const struct coll_engine_ops *coll_engine_for(hora_memory_t memory);

/* Not a user op: the bitwise OR of 64-bit words, for the coordinator's
 * agreement on its bit vectors (coll_allreduce_bits); host engine only. */
#define COLL_OP_BOR ((hora_op_t)HORA_OP_COUNT)

/* The host engine (engine_host.c): always there. */
const struct coll_engine_ops *coll_engine_host(void);

/* The device engine (engine_cuda.c) serves dev from coll_init to coll_close:
 * each thread that uses it gets a stream of its own on dev's device, all
 * destroyed at stop. Without device support start does nothing. */
hora_status_t coll_engine_cuda_start(const struct mem_dev *dev);
void coll_engine_cuda_stop(void);
const struct coll_engine_ops *coll_engine_cuda(void);

#endif
