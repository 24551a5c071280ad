/*
 * k_unary.cu - k_cuda_scale (pre/post-scaling of gradients) and
 * k_cuda_cast (dtype conversions): one source, one destination, k_elem.h's
 * per-element functions.
 *
 * The same shape as k_reduce.cu: a grid-stride loop over vectors where
 * source and destination are both at a vector boundary at the same
 * element, then the scalar head and tail. A scale vector is 16 bytes of
 * each; a cast vector is V = 16 / (the larger element size) elements, so
 * the wider side moves 16 bytes and the narrower one 16 * narrow / wide
 * (f32 -> f16: 16-byte loads, 8-byte stores).
 */
#include "k_device.cuh"

namespace
{

struct k_unary_params {
    const unsigned char *src;
    unsigned char *dst;
    size_t count, head, vecs;
    int bytewise;
    float f32;  /* k_scale: (float)factor */
    double f64; /* k_scale: factor */
};

/* ---- scale ------------------------------------------------------------------- */

template <int DT> __device__ __forceinline__ uint64_t k_scale_elem(uint64_t raw, float f32, double f64)
{
    if constexpr (DT == K_DTYPE_F32)
        return k_elem_f32_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_F16)
        return k_elem_f16_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_BF16)
        return k_elem_bf16_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_F64)
        return k_elem_f64_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_I32)
        return k_elem_i32_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_I64)
        return k_elem_i64_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_I8)
        return k_elem_i8_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_I16)
        return k_elem_i16_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_U16)
        return k_elem_u16_scale(raw, f32, f64);
    else if constexpr (DT == K_DTYPE_BOOL)
        return k_elem_bool_scale(raw, f32, f64);
    else
        return k_elem_u8_scale(raw, f32, f64);
}

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_scale_kernel(const __grid_constant__ k_unary_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float f32 = p.f32;
    const double f64 = p.f64;

    for (size_t v = tid; v < p.vecs; v += stride) {
        const size_t at = (p.head + v * V) * S;
        k_vec x, out = {};
        k_vec_load<16>(x, p.src + at);
#pragma unroll
        for (int k = 0; k < V; k++) k_vec_set<S>(out, k, k_scale_elem<DT>(k_vec_get<S>(x, k), f32, f64));
        k_vec_store<16>(p.dst + at, out);
    }
    const size_t tail = p.head + p.vecs * V;
    const size_t scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride) {
        const size_t at = (e < p.head ? e : tail + (e - p.head)) * S;
        k_elem_put<S>(p.dst + at, k_scale_elem<DT>(k_elem_get<S>(p.src + at, p.bytewise), f32, f64), p.bytewise);
    }
}

typedef void (*k_unary_fn)(k_unary_params);

const k_unary_fn k_scale_kernels[K_DTYPE_COUNT] = {
    k_scale_kernel<K_DTYPE_F32>, k_scale_kernel<K_DTYPE_F16>, k_scale_kernel<K_DTYPE_BF16>, k_scale_kernel<K_DTYPE_F64>,
    k_scale_kernel<K_DTYPE_I32>, k_scale_kernel<K_DTYPE_I64>, k_scale_kernel<K_DTYPE_U8>,   k_scale_kernel<K_DTYPE_I8>,
    k_scale_kernel<K_DTYPE_I16>, k_scale_kernel<K_DTYPE_U16>, k_scale_kernel<K_DTYPE_BOOL>,
};

/* ---- cast ------------------------------------------------------------------- */

template <int SD, int DD> struct k_cast_shape {
    static constexpr int SS = k_dtype_bytes<SD>::value, DS = k_dtype_bytes<DD>::value;
    static constexpr int V = 16 / (SS > DS ? SS : DS);
};

template <int SD, int DD>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_cast_kernel(const __grid_constant__ k_unary_params p)
{
    typedef k_cast_shape<SD, DD> C;
    constexpr int SS = C::SS, DS = C::DS, V = C::V;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    for (size_t v = tid; v < p.vecs; v += stride) {
        const size_t i = p.head + v * V;
        k_vec x, out = {};
        k_vec_load<V * SS>(x, p.src + i * SS);
#pragma unroll
        for (int k = 0; k < V; k++) k_vec_set<DS>(out, k, k_elem_cast(k_vec_get<SS>(x, k), SD, DD));
        k_vec_store<V * DS>(p.dst + i * DS, out);
    }
    const size_t tail = p.head + p.vecs * V;
    const size_t scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride) {
        const size_t i = e < p.head ? e : tail + (e - p.head);
        k_elem_put<DS>(p.dst + i * DS, k_elem_cast(k_elem_get<SS>(p.src + i * SS, p.bytewise), SD, DD), p.bytewise);
    }
}

/* Equal dtypes are a byte copy (cudaMemcpyAsync): no kernel; except
 * bool -> bool, which normalises every byte to 0 or 1. */
template <int SD, int DD> constexpr k_unary_fn k_cast_entry()
{
    if constexpr (SD == DD && SD != K_DTYPE_BOOL)
        return nullptr;
    else
        return k_cast_kernel<SD, DD>;
}

#define K_CAST_ROW(SD)                                                                                         \
    {                                                                                                          \
        k_cast_entry<SD, K_DTYPE_F32>(), k_cast_entry<SD, K_DTYPE_F16>(), k_cast_entry<SD, K_DTYPE_BF16>(),    \
            k_cast_entry<SD, K_DTYPE_F64>(), k_cast_entry<SD, K_DTYPE_I32>(), k_cast_entry<SD, K_DTYPE_I64>(), \
            k_cast_entry<SD, K_DTYPE_U8>(), k_cast_entry<SD, K_DTYPE_I8>(), k_cast_entry<SD, K_DTYPE_I16>(),   \
            k_cast_entry<SD, K_DTYPE_U16>(), k_cast_entry<SD, K_DTYPE_BOOL>()                                  \
    }
const k_unary_fn k_cast_kernels[K_DTYPE_COUNT][K_DTYPE_COUNT] = {
    K_CAST_ROW(K_DTYPE_F32), K_CAST_ROW(K_DTYPE_F16), K_CAST_ROW(K_DTYPE_BF16), K_CAST_ROW(K_DTYPE_F64),
    K_CAST_ROW(K_DTYPE_I32), K_CAST_ROW(K_DTYPE_I64), K_CAST_ROW(K_DTYPE_U8),   K_CAST_ROW(K_DTYPE_I8),
    K_CAST_ROW(K_DTYPE_I16), K_CAST_ROW(K_DTYPE_U16), K_CAST_ROW(K_DTYPE_BOOL),
};
#undef K_CAST_ROW

/* Vector width (elements) of each cast pair, for the host's layout. */
size_t k_cast_vector(size_t src_size, size_t dst_size) { return 16 / (src_size > dst_size ? src_size : dst_size); }

cudaError_t k_unary_launch(k_unary_fn kernel, void *dst, size_t dst_size, const void *src, size_t src_size,
                           size_t count, size_t V, float f32, double f64, cudaStream_t stream)
{
    const void *ptrs[2] = {src, dst};
    const size_t sizes[2] = {src_size, dst_size};
    const k_layout lay = k_layout_of(ptrs, sizes, 2, count, V);
    k_unary_params p;
    p.src = (const unsigned char *)src;
    p.dst = (unsigned char *)dst;
    p.count = count;
    p.head = lay.head;
    p.vecs = lay.vecs;
    p.bytewise = lay.bytewise;
    p.f32 = f32;
    p.f64 = f64;
    const size_t scalars = count - lay.vecs * V;
    unsigned blocks;
    cudaError_t err = k_cuda_blocks(lay.vecs > scalars ? lay.vecs : scalars, &blocks);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(kernel, blocks, p, stream);
}

} // namespace

int k_cuda_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor, void *stream)
{
    if ((unsigned)dtype >= K_DTYPE_COUNT) return cudaErrorInvalidValue;
    if (count == 0) return cudaSuccess;
    const size_t size = k_dtype_size(dtype);
    return k_unary_launch(k_scale_kernels[dtype], dst, size, src, size, count, 16 / size, (float)factor, factor,
                          (cudaStream_t)stream);
}

int k_cuda_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count, void *stream)
{
    if ((unsigned)dst_dtype >= K_DTYPE_COUNT || (unsigned)src_dtype >= K_DTYPE_COUNT) return cudaErrorInvalidValue;
    if (count == 0) return cudaSuccess;
    const size_t src_size = k_dtype_size(src_dtype), dst_size = k_dtype_size(dst_dtype);
    if (dst_dtype == src_dtype && dst_dtype != K_DTYPE_BOOL) {
        if (dst == src) return cudaSuccess;
        return cudaMemcpyAsync(dst, src, count * src_size, cudaMemcpyDefault, (cudaStream_t)stream);
    }
    return k_unary_launch(k_cast_kernels[src_dtype][dst_dtype], dst, dst_size, src, src_size, count,
                          k_cast_vector(src_size, dst_size), 0.0f, 0.0, (cudaStream_t)stream);
}
