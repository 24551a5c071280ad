/*
 * k_layout.h - the index arithmetic of k_cuda_layout.h's copies, shared by
 * the kernels (k_layout.cu) and the twins (k_layout_twin.c). Private to
 * kernels/cuda.
 */
#ifndef K_LAYOUT_H
#define K_LAYOUT_H

#include "k_elem.h"

/* Element j of the destination: the source element it comes from, or -1
 * for channels-last padding (a zero). */
K_HD int64_t k_layout_source(size_t j, size_t c, size_t c_stored, size_t hw, int to_channels_last)
{
    if (to_channels_last) {
        const size_t s = j / (hw * c_stored), r = j % (hw * c_stored), i = r / c_stored, k = r % c_stored;
        return k < c ? (int64_t)((s * c + k) * hw + i) : -1;
    }
    const size_t s = j / (c * hw), r = j % (c * hw), k = r / hw, i = r % hw;
    return (int64_t)((s * hw + i) * c_stored + k);
}

/* Elements the destination has. */
K_HD size_t k_layout_count(size_t n, size_t c, size_t c_stored, size_t hw, int to_channels_last)
{
    return n * hw * (to_channels_last ? c_stored : c);
}

/* Element raw of src_dtype as dst_dtype: k_cast's conversion, or the same
 * bits (NaN payloads too) when the dtypes are equal. */
K_HD uint64_t k_layout_convert(uint64_t raw, int src_dtype, int dst_dtype)
{
    return src_dtype == dst_dtype ? raw : k_elem_cast(raw, src_dtype, dst_dtype);
}

/* The float dtypes these copies take. */
K_HD int k_layout_dtype_ok(int dtype) { return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16; }

#endif
