/*
 * k_reduce.cu - k_cuda_reduce_n: n device buffers folded element-wise in
 * one pass (the one-shot all-reduce over the peers' buffers, AVG's
 * division included), each input element loaded once and each output
 * stored once.
 *
 * One kernel per dtype x op (the op a template constant, so k_elem.h's
 * switch folds away): a grid-stride loop over 16-byte vectors where every
 * pointer sits at a vector boundary at the same element (k_layout_of),
 * then the scalar head and tail (every element, when the pointers are not
 * aligned alike). The per-element arithmetic is k_elem.h's, in the twin's
 * order: load source 0, fold sources 1..n-1 left to right, finish (divide,
 * narrow). Sources are loaded four at a time before they are folded, so a
 * thread keeps four 16-byte loads in flight.
 *
 * The source pointers travel in the kernel's parameters
 * (__grid_constant__: read from the constant bank by source index, never
 * copied to local memory).
 */
#include "k_device.cuh"

namespace
{

struct k_reduce_params {
    const unsigned char *srcs[K_CUDA_MAX_SRCS];
    unsigned char *dst;
    size_t count; /* elements */
    size_t head;  /* scalar elements before the vectors */
    size_t vecs;  /* 16-byte vectors after them, then the scalar tail */
    int n;        /* 1 .. K_CUDA_MAX_SRCS */
    int bytewise; /* a pointer not aligned to the element size */
    k_elem_div_t div;
};

/* Per dtype: the accumulator and k_elem.h's load / combine / finish. */
template <int DT> struct k_red;
#define K_RED(t, DT, acc_t)                                                                                            \
    template <> struct k_red<DT> {                                                                                     \
        typedef acc_t acc;                                                                                             \
        static __device__ __forceinline__ acc load(uint64_t raw) { return k_elem_##t##_load(raw); }                    \
        static __device__ __forceinline__ acc combine(acc a, acc b, int op) { return k_elem_##t##_combine(a, b, op); } \
        static __device__ __forceinline__ uint64_t finish(acc a, const k_elem_div_t &div)                              \
        {                                                                                                              \
            return k_elem_##t##_finish(a, div);                                                                        \
        }                                                                                                              \
    };
K_ELEM_DTYPES(K_RED)
#undef K_RED

/* acc[k] = combine(acc[k], element k of x) for the V elements of a vector. */
template <int DT, int OP, int S, int V>
__device__ __forceinline__ void k_reduce_fold(typename k_red<DT>::acc (&acc)[V], const k_vec &x)
{
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = k_red<DT>::combine(acc[k], k_red<DT>::load(k_vec_get<S>(x, k)), OP);
}

template <int DT, int OP>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_reduce_kernel(const __grid_constant__ k_reduce_params p)
{
    typedef k_red<DT> T;
    typedef typename T::acc acc_t;
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int n = p.n;

    for (size_t v = tid; v < p.vecs; v += stride) {
        const size_t at = (p.head + v * V) * S;
        k_vec x0, x1, x2, x3;
        acc_t acc[V];
        k_vec_load<16>(x0, p.srcs[0] + at);
#pragma unroll
        for (int k = 0; k < V; k++) acc[k] = T::load(k_vec_get<S>(x0, k));
        int j = 1;
        for (; j + 4 <= n; j += 4) {
            k_vec_load<16>(x0, p.srcs[j] + at);
            k_vec_load<16>(x1, p.srcs[j + 1] + at);
            k_vec_load<16>(x2, p.srcs[j + 2] + at);
            k_vec_load<16>(x3, p.srcs[j + 3] + at);
            k_reduce_fold<DT, OP, S, V>(acc, x0);
            k_reduce_fold<DT, OP, S, V>(acc, x1);
            k_reduce_fold<DT, OP, S, V>(acc, x2);
            k_reduce_fold<DT, OP, S, V>(acc, x3);
        }
        for (; j < n; j++) {
            k_vec_load<16>(x0, p.srcs[j] + at);
            k_reduce_fold<DT, OP, S, V>(acc, x0);
        }
        k_vec out = {};
#pragma unroll
        for (int k = 0; k < V; k++) k_vec_set<S>(out, k, T::finish(acc[k], p.div));
        k_vec_store<16>(p.dst + at, out);
    }

    /* The scalar elements: [0, head) and [head + vecs * V, count). */
    const size_t tail = p.head + p.vecs * V;
    const size_t scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride) {
        const size_t at = (e < p.head ? e : tail + (e - p.head)) * S;
        acc_t acc = T::load(k_elem_get<S>(p.srcs[0] + at, p.bytewise));
        for (int j = 1; j < n; j++) acc = T::combine(acc, T::load(k_elem_get<S>(p.srcs[j] + at, p.bytewise)), OP);
        k_elem_put<S>(p.dst + at, T::finish(acc, p.div), p.bytewise);
    }
}

typedef void (*k_reduce_fn)(k_reduce_params);

#define K_REDUCE_ROW(DT)                                                                             \
    {                                                                                                \
        k_reduce_kernel<DT, K_OP_SUM>, k_reduce_kernel<DT, K_OP_MIN>, k_reduce_kernel<DT, K_OP_MAX>, \
            k_reduce_kernel<DT, K_OP_PROD>                                                           \
    }
const k_reduce_fn k_reduce_kernels[K_DTYPE_COUNT][K_OP_COUNT] = {
    K_REDUCE_ROW(K_DTYPE_F32), K_REDUCE_ROW(K_DTYPE_F16), K_REDUCE_ROW(K_DTYPE_BF16), K_REDUCE_ROW(K_DTYPE_F64),
    K_REDUCE_ROW(K_DTYPE_I32), K_REDUCE_ROW(K_DTYPE_I64), K_REDUCE_ROW(K_DTYPE_U8),   K_REDUCE_ROW(K_DTYPE_I8),
    K_REDUCE_ROW(K_DTYPE_I16), K_REDUCE_ROW(K_DTYPE_U16), K_REDUCE_ROW(K_DTYPE_BOOL),
};
#undef K_REDUCE_ROW

} // namespace

int k_cuda_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                    int64_t divisor, void *stream)
{
    if (n < 1 || n > K_CUDA_MAX_SRCS || divisor < 1 || (unsigned)dtype >= K_DTYPE_COUNT || (unsigned)op >= K_OP_COUNT)
        return cudaErrorInvalidValue;
    if (count == 0) return cudaSuccess;
    if (!srcs) return cudaErrorInvalidValue;
    const size_t size = k_dtype_size(dtype);
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 1 && divisor == 1 && dtype != K_DTYPE_BOOL) {
        /* k_reduce_n's definition: the bytes unchanged (bool runs the
         * kernel, which writes every truth value as 0 or 1). */
        if (dst == srcs[0]) return cudaSuccess;
        return cudaMemcpyAsync(dst, srcs[0], count * size, cudaMemcpyDefault, s);
    }

    k_reduce_params p;
    const void *ptrs[K_CUDA_MAX_SRCS + 1];
    size_t sizes[K_CUDA_MAX_SRCS + 1];
    for (int j = 0; j < K_CUDA_MAX_SRCS; j++) p.srcs[j] = j < n ? (const unsigned char *)srcs[j] : NULL;
    for (int j = 0; j < n; j++) ptrs[j] = srcs[j], sizes[j] = size;
    ptrs[n] = dst, sizes[n] = size;
    const k_layout lay = k_layout_of(ptrs, sizes, n + 1, count, 16 / size);
    p.dst = (unsigned char *)dst;
    p.count = count;
    p.head = lay.head;
    p.vecs = lay.vecs;
    p.n = n;
    p.bytewise = lay.bytewise;
    p.div = k_elem_div_init(divisor);

    const size_t scalars = count - lay.vecs * (16 / size);
    unsigned blocks;
    cudaError_t err = k_cuda_blocks(lay.vecs > scalars ? lay.vecs : scalars, &blocks);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(k_reduce_kernels[dtype][op], blocks, p, s);
}
