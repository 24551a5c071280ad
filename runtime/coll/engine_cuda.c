/* engine_cuda.c - the device data engine: kernels/cuda (k_cuda_*) and
 * cudaMemcpyAsync behind the engine ops table (engine.h).
 *
 * Each thread that moves device data for the runtime (the coordinator, an
 * application thread in a direct collective) gets its own non-blocking
 * stream on the runtime's device, created at first use: the two never wait
 * for each other, nor for the application's legacy default stream. An op
 * returns once its stream has finished it (cudaStreamSynchronize), because
 * the algorithms post their positions right after and the peers then read
 * what it wrote; inside batch_begin .. batch_end (the fusion buffer's
 * packing) ops are only queued, and batch_end waits once. */
#include <pthread.h>
#include <stddef.h>

#include "base/status.h"
#include "coll/engine.h"

#ifdef HORA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "coll/engine_k.h"
#include "k_cuda.h"

_Static_assert(sizeof(struct coll_copy) == sizeof(k_cuda_copy_t) &&
                   offsetof(struct coll_copy, dst) == offsetof(k_cuda_copy_t, dst) &&
                   offsetof(struct coll_copy, src) == offsetof(k_cuda_copy_t, src) &&
                   offsetof(struct coll_copy, bytes) == offsetof(k_cuda_copy_t, bytes),
               "coll_copy and k_cuda_copy_t must agree");

#define ENGINE_CUDA_MAX_STREAMS 64

static struct {
    pthread_mutex_t lock;
    const struct mem_dev *dev; /* NULL: stopped */
    unsigned generation;       /* bumped at every stop: older thread streams are gone */
    cudaStream_t streams[ENGINE_CUDA_MAX_STREAMS];
    int stream_count;
} engine_cuda = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local cudaStream_t engine_cuda_tl_stream;
static _Thread_local unsigned engine_cuda_tl_generation;
static _Thread_local int engine_cuda_tl_batch;

/* This thread's stream (created at its first use since start). */
static hora_status_t engine_cuda_stream(cudaStream_t *out)
{
    hora_status_t status = HORA_OK;
    pthread_mutex_lock(&engine_cuda.lock);
    if (!engine_cuda.dev) {
        status = status_fail(HORA_ERR_NOT_INITIALIZED, "device engine: the runtime is not initialized");
    } else if (!engine_cuda_tl_stream || engine_cuda_tl_generation != engine_cuda.generation) {
        cudaStream_t s;
        cudaError_t e;
        if ((status = mem_dev_use(engine_cuda.dev)) < 0) {
        } else if (engine_cuda.stream_count == ENGINE_CUDA_MAX_STREAMS) {
            status = status_fail(HORA_ERR_NO_MEMORY, "device engine: more than %d threads moved device data",
                                 ENGINE_CUDA_MAX_STREAMS);
        } else if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) {
            status = mem_dev_fail(e, "cudaStreamCreateWithFlags(the runtime's communication stream)");
        } else {
            engine_cuda.streams[engine_cuda.stream_count++] = s;
            engine_cuda_tl_stream = s;
            engine_cuda_tl_generation = engine_cuda.generation;
        }
    }
    pthread_mutex_unlock(&engine_cuda.lock);
    if (status == HORA_OK) *out = engine_cuda_tl_stream;
    return status;
}

/* After queueing an op: its failure, or (outside a batch) wait for it. */
static hora_status_t engine_cuda_finish(int err, const char *what, cudaStream_t s)
{
    if (err) return mem_dev_fail(err, "%s", what);
    if (engine_cuda_tl_batch) return HORA_OK;
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return mem_dev_fail(e, "%s (cudaStreamSynchronize)", what);
    return HORA_OK;
}

static hora_status_t engine_cuda_reduce(void *dst, const void *const *srcs, int n, size_t count, hora_dtype_t dtype,
                                        hora_op_t op, int64_t divisor)
{
    cudaStream_t s = NULL;
    if (count == 0) return HORA_OK;
    if (op == COLL_OP_BOR) return status_fail(HORA_ERR_UNSUPPORTED, "device engine: no bitwise OR (host only)");
    if (n < 1 || n > K_CUDA_MAX_SRCS)
        return status_fail(HORA_ERR_UNSUPPORTED, "device engine: a reduction of %d buffers (at most %d)", n,
                           K_CUDA_MAX_SRCS);
    HORA_CHECK(engine_cuda_stream(&s));
    int err = k_cuda_reduce_n(dst, srcs, n, count, (k_dtype_t)dtype, coll_engine_k_op(op), divisor, s);
    return engine_cuda_finish(err, "k_cuda_reduce_n", s);
}

/* HORA_REPRODUCIBLE=exact has no device kernel yet: coll.c refuses the mode
 * for device buffers reduced on the device before any group opens; this
 * slot only says so if it is ever reached. */
static hora_status_t engine_cuda_reduce_exact(void *dst, const void *const *srcs, int n, size_t count,
                                              hora_dtype_t dtype, int64_t divisor)
{
    (void)dst, (void)srcs, (void)n, (void)count, (void)dtype, (void)divisor;
    return status_fail(HORA_ERR_UNSUPPORTED,
                       "device engine: no exact (HORA_REPRODUCIBLE=exact) reduction on the device");
}

static hora_status_t engine_cuda_scale(void *dst, const void *src, size_t count, hora_dtype_t dtype, double factor)
{
    cudaStream_t s = NULL;
    if (count == 0) return HORA_OK;
    HORA_CHECK(engine_cuda_stream(&s));
    return engine_cuda_finish(k_cuda_scale(dst, src, count, (k_dtype_t)dtype, factor, s), "k_cuda_scale", s);
}

static hora_status_t engine_cuda_cast(void *dst, hora_dtype_t dst_dtype, const void *src, hora_dtype_t src_dtype,
                                      size_t count)
{
    cudaStream_t s = NULL;
    if (count == 0) return HORA_OK;
    HORA_CHECK(engine_cuda_stream(&s));
    int err = k_cuda_cast(dst, (k_dtype_t)dst_dtype, src, (k_dtype_t)src_dtype, count, s);
    return engine_cuda_finish(err, "k_cuda_cast", s);
}

/* Either side may be host memory (staging for the host transports). */
static hora_status_t engine_cuda_copy(void *dst, const void *src, size_t bytes)
{
    cudaStream_t s = NULL;
    if (bytes == 0 || dst == src) return HORA_OK;
    HORA_CHECK(engine_cuda_stream(&s));
    return engine_cuda_finish(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync", s);
}

static hora_status_t engine_cuda_zero(void *dst, size_t bytes)
{
    cudaStream_t s = NULL;
    if (bytes == 0) return HORA_OK;
    HORA_CHECK(engine_cuda_stream(&s));
    return engine_cuda_finish(cudaMemsetAsync(dst, 0, bytes, s), "cudaMemsetAsync", s);
}

static hora_status_t engine_cuda_copy_many(const struct coll_copy *copies, int n)
{
    cudaStream_t s = NULL;
    if (n == 0) return HORA_OK;
    HORA_CHECK(engine_cuda_stream(&s));
    return engine_cuda_finish(k_cuda_copy_batch((const k_cuda_copy_t *)copies, n, s), "k_cuda_copy_batch", s);
}

static void engine_cuda_batch_begin(void) { engine_cuda_tl_batch = 1; }

static hora_status_t engine_cuda_batch_end(void)
{
    cudaStream_t s = NULL;
    engine_cuda_tl_batch = 0;
    HORA_CHECK(engine_cuda_stream(&s));
    return engine_cuda_finish(0, "the device engine's batch", s);
}

static hora_status_t engine_cuda_event_wait(void *event)
{
    if (!event) return HORA_OK;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    if (e != cudaSuccess) return mem_dev_fail(e, "cudaEventSynchronize(a request's ready event)");
    return HORA_OK;
}

static const struct coll_engine_ops coll_engine_cuda_ops = {
    .reduce = engine_cuda_reduce,
    .reduce_exact = engine_cuda_reduce_exact,
    .scale = engine_cuda_scale,
    .cast = engine_cuda_cast,
    .copy = engine_cuda_copy,
    .zero = engine_cuda_zero,
    .copy_many = engine_cuda_copy_many,
    .batch_begin = engine_cuda_batch_begin,
    .batch_end = engine_cuda_batch_end,
    .event_wait = engine_cuda_event_wait,
};

hora_status_t coll_engine_cuda_start(const struct mem_dev *dev)
{
    if (!mem_dev_on(dev)) return HORA_OK;
    pthread_mutex_lock(&engine_cuda.lock);
    engine_cuda.dev = dev;
    pthread_mutex_unlock(&engine_cuda.lock);
    return HORA_OK;
}

void coll_engine_cuda_stop(void)
{
    pthread_mutex_lock(&engine_cuda.lock);
    if (engine_cuda.dev) {
        for (int i = 0; i < engine_cuda.stream_count; i++) cudaStreamDestroy(engine_cuda.streams[i]);
        engine_cuda.stream_count = 0;
        engine_cuda.generation++;
        engine_cuda.dev = NULL;
    }
    pthread_mutex_unlock(&engine_cuda.lock);
}

const struct coll_engine_ops *coll_engine_cuda(void)
{
    pthread_mutex_lock(&engine_cuda.lock);
    const struct coll_engine_ops *ops = engine_cuda.dev ? &coll_engine_cuda_ops : NULL;
    pthread_mutex_unlock(&engine_cuda.lock);
    return ops;
}

#else /* no CUDA in this build */

hora_status_t coll_engine_cuda_start(const struct mem_dev *dev)
{
    (void)dev;
    return HORA_OK;
}

void coll_engine_cuda_stop(void) {}

const struct coll_engine_ops *coll_engine_cuda(void) { return NULL; }

#endif
