/*
 * k_cuda_layout.h - channels-first <-> channels-last copies with a dtype
 * conversion, on the device (k_cuda_*) and their CPU twins (k_twin_*):
 * what the cuda backend needs to move PyTorch-layout (OIHW) weights into
 * cuDNN's KRSC and the weight gradients back, and activations between NCHW
 * and NHWC.
 *
 * Shapes: n outer items (samples, or a filter's output channels), c
 * channels, hw inner positions (H*W, or the filter's R*S), the
 * channels-last side storing c_stored >= c channels (the padding written
 * as zeros, and skipped when read back):
 *   to_channels_last    dst[(s*hw + i)*c_stored + k] = src[(s*c + k)*hw + i]
 *   from_channels_last  dst[(s*c + k)*hw + i]        = src[(s*hw + i)*c_stored + k]
 * dtypes f32, f16, bf16; the conversion is k_cuda_cast's (round to nearest
 * even), the same bits in kernel and twin (kernels/cuda/k_layout.h holds
 * the index arithmetic both use). dst and src must not overlap. Returns 0,
 * K_CUDA_ERR_INVALID_VALUE for a bad dtype or c > c_stored, else the
 * launch's cudaError_t; asynchronous on stream.
 */
#ifndef K_CUDA_LAYOUT_H
#define K_CUDA_LAYOUT_H

#include <stddef.h>

#include "k_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

K_CUDA_API int k_cuda_to_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n,
                                       size_t c, size_t c_stored, size_t hw, void *stream);
K_CUDA_API int k_cuda_from_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n,
                                         size_t c, size_t c_stored, size_t hw, void *stream);

K_TWIN_API int k_twin_to_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n,
                                       size_t c, size_t c_stored, size_t hw);
K_TWIN_API int k_twin_from_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n,
                                         size_t c, size_t c_stored, size_t hw);

#ifdef __cplusplus
}
#endif

#endif
