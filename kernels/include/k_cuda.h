/*
 * k_cuda.h - hora's CUDA kernels (the device data engine's reductions,
 * scaling, casts and batched copies) and their CPU twins.
 *
 * Plain C, no CUDA header needed: streams are passed as void * (a
 * cudaStream_t; NULL is the legacy default stream) and errors as the int
 * value of a cudaError_t.
 *
 *  - k_cuda_*: in libhora-kernels-cuda.so (kernels_cuda_dep; built only
 *    when CUDA is). Asynchronous on the stream; pointers are device
 *    pointers (or anything the device can address through UVA), the
 *    arrays of pointers and of copies are HOST arrays, read before the call
 *    returns (the caller may free or reuse them at once).
 *  - k_twin_*: in libhora-kernels-twin.a (kernels_twin_dep), a static
 *    library built with or without CUDA for the tests, and in no installed
 *    library. The same computation on the CPU, written with the very
 *    per-element functions the kernels run (kernels/cuda/k_elem.h), so a kernel's output can be checked bit for
 *    bit against its twin; each twin gives the bits of the matching k_cpu.h
 *    function (k_reduce_n, k_scale, k_cast), NaN payloads aside.
 *
 * Layer rule: kernels/ includes nothing from runtime/ or trainer/.
 */
#ifndef K_CUDA_H
#define K_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "k_cpu.h" /* k_dtype_t, k_op_t, K_API */

#ifdef __cplusplus
extern "C" {
#endif

/* The device functions are exported by libhora-kernels-cuda.so: K_API
 * under the name its symbol check (tests/common/check_symbols.py) looks
 * for. The twins are K_TWIN_API, nothing: libhora-kernels-twin.a is
 * static and linked only by the tests, so neither shared library carries
 * them (their symbol checks fail if one does). */
#define K_CUDA_API K_API
#define K_TWIN_API

/* One copy of k_cuda_copy_batch: bytes bytes from src to dst. */
typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} k_cuda_copy_t;

/* Most sources k_cuda_reduce_n folds in one pass. */
#define K_CUDA_MAX_SRCS 64

/* What every function here returns for arguments outside its contract (n
 * out of range, divisor < 1, an unknown dtype or op): the value of
 * cudaErrorInvalidValue. The twins return it too. */
#define K_CUDA_ERR_INVALID_VALUE 1

/*
 * All return 0 on success, else the cudaError_t value (int) of the failed
 * launch or call (K_CUDA_ERR_INVALID_VALUE for bad arguments, nothing
 * queued); asynchronous on stream (cudaStream_t; NULL = legacy default
 * stream). An error of an earlier asynchronous operation on the device may
 * surface here too (CUDA's sticky errors). count == 0 (n == 0 copies)
 * queues nothing and returns 0, whatever the pointers.
 *
 * Pointers need the alignment of their element type only (f32: 4 bytes...)
 * for speed: buffers whose addresses agree modulo 16 get 16-byte vector
 * loads and stores between a scalar head and tail; others run element by
 * element, and a pointer not even aligned to its element size byte by
 * byte (correct, slow).
 */

/* As k_reduce_n of k_cpu.h: dst[i] = (srcs[0][i] op ... op srcs[n-1][i]) /
 * divisor, sources in order; f16/bf16 accumulate in fp32 in source order
 * and round once; f32/f64 fold in their own type; integers wrap (SUM,
 * PROD) and divide truncating; divisor > 1 divides at the end (fp32 for
 * f32/f16/bf16), for every op. MIN/MAX: the first NaN in source order
 * wins. n == 1 with divisor 1 is a byte copy (dst == srcs[0]: nothing).
 * dst may equal any source exactly (no partial overlap).
 * 1 <= n <= K_CUDA_MAX_SRCS; srcs is a HOST array of device pointers. */
K_CUDA_API int k_cuda_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                               int64_t divisor, void *stream);

/* As k_scale: dst[i] = src[i] * factor; floats in fp32 by (float)factor
 * (f64 in fp64), integers in double, truncated toward zero and saturated
 * (NaN -> 0). dst may be src. */
K_CUDA_API int k_cuda_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor, void *stream);

/* As k_cast: every float result rounded once to nearest even, float ->
 * integer rounds to nearest even and saturates (NaN -> 0), integer ->
 * integer saturates. dst_dtype == src_dtype is a byte copy. dst and src
 * must not overlap (dst == src with equal dtypes: nothing to do). */
K_CUDA_API int k_cuda_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count,
                           void *stream);

/* copies[i].bytes bytes from copies[i].src to copies[i].dst for i < n, in
 * one launch per K_CUDA_COPY_BATCH_MAX copies (so n may be thousands); any
 * byte counts and alignments (16-byte vectors where dst and src agree
 * modulo 16, narrower words where they agree modulo 8, 4 or 2, else
 * bytes). copies is a HOST array. Regions must not overlap each other's
 * destinations (a copy onto itself, dst == src, is harmless). */
#define K_CUDA_COPY_BATCH_MAX 1024
K_CUDA_API int k_cuda_copy_batch(const k_cuda_copy_t *copies, int n, void *stream);

/* cudaGetErrorString of err (0 gives "no error"). */
K_CUDA_API const char *k_cuda_error_string(int err);

/*
 * CPU twins: the same contracts, synchronous, minus the stream; 0 or
 * K_CUDA_ERR_INVALID_VALUE. Each calls kernels/cuda/k_elem.h's element
 * functions in the order the kernel does, element by element (any
 * alignment). Made for tests (they are not fast); they agree bit for bit
 * with k_reduce_n / k_scale / k_cast, NaN payloads of arithmetic on NaNs
 * aside (a result is a NaN exactly when theirs is).
 */
K_TWIN_API int k_twin_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                               int64_t divisor);
K_TWIN_API int k_twin_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor);
K_TWIN_API int k_twin_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count);
K_TWIN_API int k_twin_copy_batch(const k_cuda_copy_t *copies, int n);

#ifdef __cplusplus
}
#endif
#endif /* K_CUDA_H */
