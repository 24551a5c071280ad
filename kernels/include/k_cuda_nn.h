/*
 * k_cuda_nn.h - the memory-bound layer kernels of the cuda backend (batch
 * norm with fused relu and add+relu, max and global average pooling, relu,
 * add) and their CPU twins.
 *
 * Conventions are k_cuda.h's: plain C, streams as void * (cudaStream_t),
 * errors as the int of a cudaError_t, K_CUDA_ERR_INVALID_VALUE for
 * arguments outside the contract (nothing queued, nothing written). All
 * data pointers are device pointers (the twins': host pointers), each
 * aligned to its element size. Activations are NHWC (channels innermost)
 * in dtype f32, f16 or bf16, computed in fp32 and rounded once; gamma,
 * beta and every statistic are f32.
 *
 * The k_twin_* functions (libhora-kernels-twin.a, for the tests; see
 * k_cuda.h) are the same contracts on host memory, synchronous, computed
 * by the per-element functions of kernels/cuda/k_nn.h in the kernels'
 * order, the reductions in the same blocked order: a kernel's output
 * equals its twin's bit for bit (NaN payloads aside).
 *
 * Accuracy (what tests/kernels/cuda/test_twin_nn.c checks against a
 * double-precision reference). A batch-norm reduction cuts the m = rows
 * values of a channel into chunks of K_CUDA_BN_CHUNK rows; a chunk is
 * summed in fp32 by 8 lanes of 16 rows and a tree of 3 levels (no value
 * goes through more than 18 fp32 additions), the forward's variance around
 * the chunk's own mean (a second fp32 pass over values kept in registers,
 * with the correction term of the corrected two-pass algorithm), and the
 * chunks are merged in double. With u = 2^-24 and B = 32:
 *   |mean - exact|    <= B u mean(|x - mean|) + u |mean|
 *   |var - exact|     <= B u (var + (B u mean(|x|))^2)
 *   |dbeta - exact|   <= B u sum |g|
 *   |dgamma - exact|  <= B u sum |g xhat|   (xhat from the saved mean / invstd)
 * (dgamma / dbeta then rounded once more to grad_dtype; invstd and the
 * running variance follow from var with one rounding each),
 * and each element-wise result is its fp32 formula (at most four
 * roundings) rounded once to dtype. Global average pooling adds the h w
 * values in fp32 in order: |y - exact| <= (h w + 1) u mean(|x|) before the
 * final rounding. The max pool is exact.
 */
#ifndef K_CUDA_NN_H
#define K_CUDA_NN_H

#include <stddef.h>
#include <stdint.h>

#include "k_cuda.h" /* K_CUDA_API, K_TWIN_API, K_CUDA_ERR_INVALID_VALUE, k_dtype_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Rows (NHW positions) per chunk of the batch-norm reductions. */
#define K_CUDA_BN_CHUNK 128
/* Device workspace of k_cuda_bn_* for `rows` rows of c channels (8-byte
 * aligned): three floats per chunk and channel, and four per channel. */
#define K_CUDA_BN_WORKSPACE_BYTES(rows, c) \
    ((((size_t)(rows) + K_CUDA_BN_CHUNK - 1) / K_CUDA_BN_CHUNK * 3 + 4) * (size_t)(c) * sizeof(float))

/*
 * Batch norm, training forward over x (rows = n * h * w rows of c
 * channels, NHWC): per channel the batch mean and biased variance over the
 * rows (see Accuracy), then
 *   y = gamma (x - mean) invstd + beta     [+ residual]  [relu]
 * in fp32 ((x - mean) * scale + beta with scale = gamma * invstd, invstd =
 * 1 / sqrt(var + epsilon) in double rounded to fp32), the residual (NULL:
 * none; else of x's shape and dtype, widened) added before the relu
 * (relu != 0: y = relu(.), NaN kept), rounded once to dtype. save_mean and
 * save_invstd (c floats each) get the mean and invstd for
 * k_cuda_bn_backward; running_mean / running_var (c floats) are updated as
 * trainer/backends/cpu/cpu_bn.c does: running = (1 - momentum) running + momentum
 * batch, in double, the variance unbiased by m / (m - 1).
 * rows >= 2, c >= 1, epsilon > 0, 0 <= momentum <= 1, workspace of
 * K_CUDA_BN_WORKSPACE_BYTES(rows, c) bytes (usable by the call until it
 * completes). y may be x or residual exactly. Three kernels on stream.
 */
K_CUDA_API int k_cuda_bn_forward_train(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows,
                                       int c, const float *gamma, const float *beta, float *running_mean,
                                       float *running_var, float momentum, float epsilon, int relu, float *save_mean,
                                       float *save_invstd, void *workspace, void *stream);

/* Batch norm, inference: as the training forward with mean = running_mean,
 * invstd = 1 / sqrt(running_var + epsilon) (double, rounded to fp32);
 * nothing updated. rows >= 1; workspace as above. Two kernels. */
K_CUDA_API int k_cuda_bn_forward_infer(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows,
                                       int c, const float *gamma, const float *beta, const float *running_mean,
                                       const float *running_var, float epsilon, int relu, void *workspace,
                                       void *stream);

/*
 * Batch norm, backward, from the forward's saved mean / invstd:
 *   g      = dy, or (y != NULL: the fused relu) dy where y > 0, else 0
 *   dbeta  = sum g,  dgamma = sum g xhat,  xhat = (x - mean) invstd   (fp32
 *            chunks merged in double, see Accuracy; written in grad_dtype:
 *            f32, f16 or bf16, rounded once)
 *   dx     = (g - dbeta / m - xhat dgamma / m) gamma invstd            (fp32)
 * y is the forward's output (with relu, or with residual + relu), dy the
 * gradient with respect to it; dresidual (NULL: not wanted; needs y) gets
 * g in dtype (the gradient of the residual branch of y = relu(bn(x) +
 * residual)). dx may be dy exactly; dresidual may be dy exactly (not dx).
 * rows >= 1; workspace as above. Three kernels.
 */
K_CUDA_API int k_cuda_bn_backward(void *dx, void *dresidual, const void *x, const void *dy, const void *y,
                                  k_dtype_t dtype, size_t rows, int c, const float *gamma, const float *save_mean,
                                  const float *save_invstd, void *dgamma, void *dbeta, k_dtype_t grad_dtype,
                                  void *workspace, void *stream);

/* The geometry of a max pool over NHWC x (n, h, w, c): square kernel,
 * stride, pad (PyTorch's nn.MaxPool2d limits: kernel >= 1, stride >= 1,
 * 0 <= 2 pad <= kernel, h + 2 pad >= kernel, w likewise, kernel^2 <= 255);
 * output (n, h_out, w_out, c), h_out = (h + 2 pad - kernel) / stride + 1. */
typedef struct {
    int n, h, w, c;
    int kernel, stride, pad;
} k_cuda_pool_t;

/* y = the maximum of each window (padding never wins; the first NaN wins,
 * then the first of equal maxima in (kh, kw) order); argmax (a byte per
 * output element, kh * kernel + kw) for the backward. Exact. */
K_CUDA_API int k_cuda_maxpool_forward(void *y, uint8_t *argmax, const void *x, k_dtype_t dtype,
                                      const k_cuda_pool_t *pool, void *stream);
/* dx[i] = the sum, in fp32 over the outputs whose argmax is i in (oh, ow)
 * order, of dy; rounded once (0 where none). Deterministic, no atomics. */
K_CUDA_API int k_cuda_maxpool_backward(void *dx, const void *dy, const uint8_t *argmax, k_dtype_t dtype,
                                       const k_cuda_pool_t *pool, void *stream);

/* Global average pool: y (n, c) = the sum of x's hw (= h * w) rows of each
 * sample in fp32, in order, / hw (fp32 division), rounded once; backward
 * dx (n, hw, c) = dy / hw, rounded once. n, hw, c >= 1. */
K_CUDA_API int k_cuda_avgpool_forward(void *y, const void *x, k_dtype_t dtype, int n, int hw, int c, void *stream);
K_CUDA_API int k_cuda_avgpool_backward(void *dx, const void *dy, k_dtype_t dtype, int n, int hw, int c, void *stream);

/* y = relu(x) (NaN kept, -0 -> +0); dx = dy where y > 0 else +0; y = a + b
 * in fp32 rounded once, then relu when relu != 0. Outputs may be an input
 * exactly. count == 0 queues nothing. */
K_CUDA_API int k_cuda_relu_forward(void *y, const void *x, k_dtype_t dtype, size_t count, void *stream);
K_CUDA_API int k_cuda_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count,
                                    void *stream);
K_CUDA_API int k_cuda_add_forward(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu,
                                  void *stream);

/* ---- the CPU twins: host memory, synchronous, 0 or K_CUDA_ERR_INVALID_VALUE;
 * the batch-norm twins need no workspace. ---- */
K_TWIN_API int k_twin_bn_forward_train(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows,
                                       int c, const float *gamma, const float *beta, float *running_mean,
                                       float *running_var, float momentum, float epsilon, int relu, float *save_mean,
                                       float *save_invstd);
K_TWIN_API int k_twin_bn_forward_infer(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows,
                                       int c, const float *gamma, const float *beta, const float *running_mean,
                                       const float *running_var, float epsilon, int relu);
K_TWIN_API int k_twin_bn_backward(void *dx, void *dresidual, const void *x, const void *dy, const void *y,
                                  k_dtype_t dtype, size_t rows, int c, const float *gamma, const float *save_mean,
                                  const float *save_invstd, void *dgamma, void *dbeta, k_dtype_t grad_dtype);
K_TWIN_API int k_twin_maxpool_forward(void *y, uint8_t *argmax, const void *x, k_dtype_t dtype,
                                      const k_cuda_pool_t *pool);
K_TWIN_API int k_twin_maxpool_backward(void *dx, const void *dy, const uint8_t *argmax, k_dtype_t dtype,
                                       const k_cuda_pool_t *pool);
K_TWIN_API int k_twin_avgpool_forward(void *y, const void *x, k_dtype_t dtype, int n, int hw, int c);
K_TWIN_API int k_twin_avgpool_backward(void *dx, const void *dy, k_dtype_t dtype, int n, int hw, int c);
K_TWIN_API int k_twin_relu_forward(void *y, const void *x, k_dtype_t dtype, size_t count);
K_TWIN_API int k_twin_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count);
K_TWIN_API int k_twin_add_forward(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu);

#ifdef __cplusplus
}
#endif
#endif /* K_CUDA_NN_H */
