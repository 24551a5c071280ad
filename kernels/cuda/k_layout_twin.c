/*
 * k_layout_twin.c - the CPU twins of k_cuda_layout.h's copies: every
 * element through k_layout.h's index and k_elem.h's conversion, as the
 * kernel does it. In libhora-kernels-twin.a, the tests' static library.
 */
#include "k_cuda_layout.h"
#include "k_layout.h"

static int k_layout_twin(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                         size_t c_stored, size_t hw, int to_channels_last)
{
    if (!k_layout_dtype_ok(dst_dtype) || !k_layout_dtype_ok(src_dtype) || c > c_stored) return K_CUDA_ERR_INVALID_VALUE;
    const size_t ss = k_dtype_size(src_dtype), ds = k_dtype_size(dst_dtype);
    const size_t count = k_layout_count(n, c, c_stored, hw, to_channels_last);
    for (size_t j = 0; j < count; j++) {
        const int64_t from = k_layout_source(j, c, c_stored, hw, to_channels_last);
        uint64_t raw = 0;
        if (from >= 0) {
            memcpy(&raw, (const unsigned char *)src + (size_t)from * ss, ss); /* little endian */
            raw = k_layout_convert(raw, src_dtype, dst_dtype);
        }
        memcpy((unsigned char *)dst + j * ds, &raw, ds);
    }
    return 0;
}

int k_twin_to_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                            size_t c_stored, size_t hw)
{
    return k_layout_twin(dst, dst_dtype, src, src_dtype, n, c, c_stored, hw, 1);
}

int k_twin_from_channels_last(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t n, size_t c,
                              size_t c_stored, size_t hw)
{
    return k_layout_twin(dst, dst_dtype, src, src_dtype, n, c, c_stored, hw, 0);
}
