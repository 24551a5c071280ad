/*
 * k_layout.cu - k_cuda_to_channels_last / k_cuda_from_channels_last: one
 * thread per destination element (grid-stride), its source through
 * k_layout.h and its conversion through k_elem.h, as the twin does. Reads
 * gather across channels, writes are contiguous; the copies run once per
 * step per weight tensor, so simplicity wins over a tiled transpose.
 */
#include "k_cuda_layout.h"
#include "k_device.cuh"
#include "k_layout.h"

namespace
{

struct k_layout_params {
    unsigned char *dst;
    const unsigned char *src;
    size_t count, c, c_stored, hw;
    int src_dtype, dst_dtype, to_channels_last;
};

__device__ __forceinline__ uint64_t k_layout_load(const unsigned char *p, int size)
{
    return size == 4 ? *reinterpret_cast<const uint32_t *>(p) : *reinterpret_cast<const uint16_t *>(p);
}

__global__ void __launch_bounds__(K_CUDA_THREADS) k_layout_kernel(const __grid_constant__ k_layout_params p)
{
    const int ss = p.src_dtype == K_DTYPE_F32 ? 4 : 2, ds = p.dst_dtype == K_DTYPE_F32 ? 4 : 2;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < p.count; j += (size_t)gridDim.x * blockDim.x) {
        const int64_t from = k_layout_source(j, p.c, p.c_stored, p.hw, p.to_channels_last);
        uint64_t raw = 0;
        if (from >= 0) raw = k_layout_convert(k_layout_load(p.src + (size_t)from * ss, ss), p.src_dtype, p.dst_dtype);
        if (ds == 4)
            *reinterpret_cast<uint32_t *>(p.dst + j * 4) = (uint32_t)raw;
        else
            *reinterpret_cast<uint16_t *>(p.dst + j * 2) = (uint16_t)raw;
    }
}

int k_layout_launch(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                    size_t c_stored, size_t hw, void *stream, int to_channels_last)
{
    if (!k_layout_dtype_ok(dst_dtype) || !k_layout_dtype_ok(src_dtype) || c > c_stored ||
        (uintptr_t)dst % k_dtype_size(dst_dtype) || (uintptr_t)src % k_dtype_size(src_dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    const size_t count = k_layout_count(n, c, c_stored, hw, to_channels_last);
    if (count == 0) return 0;
    unsigned blocks;
    cudaError_t err = k_cuda_blocks(count, &blocks);
    if (err != cudaSuccess) return (int)err;
    const k_layout_params p = {
        (unsigned char *)dst, (const unsigned char *)src, count, c, c_stored, hw, (int)src_dtype, (int)dst_dtype,
        to_channels_last};
    return (int)k_cuda_launch(k_layout_kernel, blocks, p, (cudaStream_t)stream);
}

} // namespace

int k_cuda_to_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                            size_t c_stored, size_t hw, void *stream)
{
    return k_layout_launch(dst, dst_dtype, src, src_dtype, n, c, c_stored, hw, stream, 1);
}

int k_cuda_from_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                              size_t c_stored, size_t hw, void *stream)
{
    return k_layout_launch(dst, dst_dtype, src, src_dtype, n, c, c_stored, hw, stream, 0);
}
