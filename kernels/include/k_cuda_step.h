/*
 * k_cuda_step.h - the training-step kernels of the cuda backend (softmax
 * cross-entropy, the input step, the loss scaler's finite check and
 * unscale, the mixed-precision SGD step) and their CPU twins.
 *
 * Conventions are k_cuda.h's: plain C, streams as void * (cudaStream_t),
 * errors as the int of a cudaError_t, K_CUDA_ERR_INVALID_VALUE for
 * arguments outside the contract (nothing queued, nothing written). Data
 * pointers are device pointers; the small arrays of parameters (mean, std)
 * are HOST arrays, read before the call returns. The k_twin_* functions
 * (libhora-kernels-twin.a, for the tests; see k_cuda.h) are the same
 * contracts on host memory, synchronous, computed by the same per-element
 * functions (kernels/cuda/k_step.h) in the kernels' order: a kernel's
 * output equals its twin's bit for bit (NaN payloads aside: GPU
 * arithmetic returns the canonical NaN), except softmax cross-entropy,
 * where CUDA's and libm's double exp / log may differ in the last bit
 * (see there).
 *
 * Dtypes are k_dtype_t (k_cpu.h); the cast f32 <-> f16/bf16 is
 * k_cuda_cast (k_cuda.h).
 */
#ifndef K_CUDA_STEP_H
#define K_CUDA_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "k_cuda.h" /* K_CUDA_API, K_TWIN_API, K_CUDA_ERR_INVALID_VALUE, k_dtype_t */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Softmax cross-entropy with label smoothing and the loss scale, as the cpu
 * backend's softmax_xent (trainer/backends/backend.h) computes it: over the n rows of
 * k f32 logits (n, k; row-major, plain) with i32 labels (n),
 *   *loss = mean over rows of (1 - s) (-log p[label]) + s mean_j(-log p_j)
 *           (f32, unscaled),
 *   dlogits[i][j] = grad_scale * (p_ij - (1 - s) [j == label_i] - s / k) / n
 *           in dlogits_dtype (f32, f16 or bf16), computed in double and
 *           rounded once (to f16/bf16 as k_cast rounds a double).
 * Sums in double with the row maximum subtracted. Each row is reduced by 32
 * lanes (k_step.h), so the sums' order differs from the cpu backend's
 * sequential one: results agree with it to a few ulps of double before the
 * final rounding (tests/kernels/cuda/test_twin_step.c states the bound).
 *
 * A label outside [0, k) is reported, not undefined: that row's dlogits are
 * NaN, *loss is NaN, and *label_error (an int32 in device memory, written by
 * the call's last kernel) is 1 + the index of the first such row; it is 0
 * when every label is in range. The caller reads it back with the loss.
 * workspace: K_CUDA_XENT_WORKSPACE_BYTES(n) bytes of device memory (8-byte
 * aligned) the call may use until it completes.
 * n >= 1, k >= 1, 0 <= label_smoothing <= 1, grad_scale > 0 and finite,
 * every pointer aligned to its element size (workspace to 8 bytes), else
 * K_CUDA_ERR_INVALID_VALUE. Two kernels on stream.
 *
 * The twin (host memory, workspace not needed) gives the kernel's bits
 * except where CUDA's double exp/log and libm's differ (by an ulp of
 * double, rarely: the rounded results then differ by at most an ulp of
 * their dtype, or, where exp(z - lse) and its target nearly cancel, by an
 * absolute 2^-40 * grad_scale / n).
 */
#define K_CUDA_XENT_WORKSPACE_BYTES(n) ((size_t)(n) * sizeof(double))
K_CUDA_API int k_cuda_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                                   float grad_scale, float *loss, void *dlogits, k_dtype_t dlogits_dtype,
                                   void *workspace, int32_t *label_error, void *stream);

/*
 * The input step: a batch of pixel_count uint8 pixels of src_channels
 * channels (NHWC, so pixel_count = n * h * w) -> dst, NHWC with
 * dst_channels channels in dst_dtype (f16, bf16, or f32 for an f32 model):
 *   dst[p][c] = round((src[p][c] / 255.0f - mean[c]) / std[c])  c < src_channels
 *               (src[p][c] / 255.0f where std[c] is not > 0)
 *   dst[p][c] = +0                                           otherwise (padding)
 * in fp32, in exactly that order, rounded once to the dtype: the data
 * pipeline's normalisation (trainer/data/augment.h's tr_aug_store, which
 * writes f16 with k_f32_to_f16), bit for bit. Made for channels 3 -> 4 or 8
 * (tensor-core convolutions want a multiple of 4 or 8).
 * 1 <= src_channels <= dst_channels <= 8; mean and std are HOST arrays of
 * src_channels floats. Any alignment (8 / 16-byte stores where dst allows).
 * pixel_count == 0 queues nothing.
 */
#define K_CUDA_INPUT_MAX_CHANNELS 8
K_CUDA_API int k_cuda_input_normalize(void *dst, k_dtype_t dst_dtype, int dst_channels, const uint8_t *src,
                                      int src_channels, size_t pixel_count, const float *mean, const float *std,
                                      void *stream);

/*
 * The loss scaler's finite check: sets *flag (an int32 in device memory) to
 * 1 if any of the count elements of src (f32, f16, bf16 or f64) is +-inf or
 * a NaN, and leaves it as it is otherwise, so that one flag (zeroed by the
 * caller, e.g. cudaMemsetAsync, once per step) can collect several tensors
 * and be read back once. The test is k_nonfinite's (exponent bits, no
 * floating-point operation): *flag ends 1 exactly when k_nonfinite would
 * return 1 for one of the tensors. The integer dtypes hold no such values:
 * nothing read, nothing written. count == 0 queues nothing; an out-of-range
 * dtype is K_CUDA_ERR_INVALID_VALUE.
 */
K_CUDA_API int k_cuda_nonfinite(const void *src, k_dtype_t dtype, size_t count, int32_t *flag, void *stream);

/*
 * The unscale with the same check in one pass: dst[i] = src[i] * factor
 * (f32, f16 or bf16: widened exactly, one fp32 multiply, rounded once to
 * the dtype: k_unscale_nonfinite's bits) and *flag set to 1 when an input
 * element was non-finite (left as it is otherwise, as k_cuda_nonfinite).
 * dst may be exactly src. count == 0 queues nothing; another dtype is
 * K_CUDA_ERR_INVALID_VALUE.
 */
K_CUDA_API int k_cuda_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor,
                                        int32_t *flag, void *stream);

/*
 * The mixed-precision SGD / Nesterov step: k_sgd_step_mixed's contract
 * (k_cpu.h), every element computed with the same fp32 operations in the
 * same order (one rounding each, no FMA), on device memory: param (f32
 * master), grad (grad_dtype f32, f16 or bf16, times grad_scale), momentum_buf
 * (f32; not read or written, and may be NULL, when momentum == 0) and, when
 * param_lp is not NULL, the new param rounded to lp_dtype (f32, f16, bf16)
 * in the same pass. The arrays must not overlap. Any alignment (16-byte
 * vectors where every pointer allows at the same element). count == 0
 * queues nothing; a dtype outside those lists, or momentum != 0 with a NULL
 * momentum_buf, is K_CUDA_ERR_INVALID_VALUE.
 */
K_CUDA_API int k_cuda_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad,
                                     k_dtype_t grad_dtype, float grad_scale, float *momentum_buf, size_t count,
                                     float lr, float momentum, float weight_decay, int nesterov, void *stream);

/* ---- the CPU twins: host memory, synchronous, 0 or K_CUDA_ERR_INVALID_VALUE ---- */

/* *label_error is a host int32 here; no workspace. */
K_TWIN_API int k_twin_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                                   float grad_scale, float *loss, void *dlogits, k_dtype_t dlogits_dtype,
                                   int32_t *label_error);
K_TWIN_API int k_twin_input_normalize(void *dst, k_dtype_t dst_dtype, int dst_channels, const uint8_t *src,
                                      int src_channels, size_t pixel_count, const float *mean, const float *std);
K_TWIN_API int k_twin_nonfinite(const void *src, k_dtype_t dtype, size_t count, int32_t *flag);
K_TWIN_API int k_twin_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor,
                                        int32_t *flag);
K_TWIN_API int k_twin_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad,
                                     k_dtype_t grad_dtype, float grad_scale, float *momentum_buf, size_t count,
                                     float lr, float momentum, float weight_decay, int nesterov);

#ifdef __cplusplus
}
#endif
#endif /* K_CUDA_STEP_H */
