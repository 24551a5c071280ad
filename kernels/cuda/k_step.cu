/*
 * k_step.cu - the training-step kernels of the cuda backend (k_cuda_step.h):
 * softmax cross-entropy, the input step (uint8 NHWC -> normalised f16/bf16,
 * channels padded), the loss scaler's finite check and unscale, and the
 * mixed-precision SGD step. The arithmetic is k_step.h's and k_elem.h's,
 * which k_step_twin.c runs on the CPU in the same order.
 *
 * The element-wise kernels (finite check, unscale, SGD) have k_unary.cu's
 * shape: a grid-stride loop over vectors where every pointer is at a
 * 16-byte boundary at the same element (k_layout_of), then the scalar head
 * and tail, bytewise where a pointer is not aligned to its element size.
 * The SGD vector is 4 elements (16 bytes of param and momentum, 8 or 16 of
 * gradient and copy). The input step runs a thread per pixel; softmax
 * cross-entropy a warp per row, then one block that adds the rows' losses
 * in row order (as the cpu backend does) and finds the first bad label.
 */
#include <limits.h>

#include "k_cuda_step.h"
#include "k_device.cuh"
#include "k_step.h"

namespace
{

const unsigned k_full_mask = 0xFFFFFFFFu;

/* Index of scalar element e (< head + the tail's length) of a layout. */
__device__ __forceinline__ size_t k_step_scalar_index(size_t e, size_t head, size_t tail)
{
    return e < head ? e : tail + (e - head);
}

/* ---- finite check and unscale ------------------------------------------------------ */

struct k_step_check_params {
    const unsigned char *src;
    unsigned char *dst; /* unscale only */
    int32_t *flag;
    size_t count, head, vecs;
    int bytewise;
    float factor;
};

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_step_nonfinite_kernel(const __grid_constant__ k_step_check_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int hit = 0;
    for (size_t v = tid; v < p.vecs; v += stride) {
        k_vec x;
        k_vec_load<16>(x, p.src + (p.head + v * V) * S);
#pragma unroll
        for (int k = 0; k < V; k++) hit |= k_step_nonfinite_raw(k_vec_get<S>(x, k), DT);
    }
    const size_t tail = p.head + p.vecs * V, scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride)
        hit |= k_step_nonfinite_raw(k_elem_get<S>(p.src + k_step_scalar_index(e, p.head, tail) * S, p.bytewise), DT);
    if (hit) *p.flag = 1; /* every writer stores the same value */
}

template <int DT> __device__ __forceinline__ uint64_t k_step_unscale_elem(uint64_t raw, float factor)
{
    if constexpr (DT == K_DTYPE_F16)
        return k_elem_f16_scale(raw, factor, 0.0);
    else if constexpr (DT == K_DTYPE_BF16)
        return k_elem_bf16_scale(raw, factor, 0.0);
    else
        return k_elem_f32_scale(raw, factor, 0.0);
}

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_step_unscale_kernel(const __grid_constant__ k_step_check_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float factor = p.factor;
    int hit = 0;
    for (size_t v = tid; v < p.vecs; v += stride) {
        const size_t at = (p.head + v * V) * S;
        k_vec x, out = {};
        k_vec_load<16>(x, p.src + at);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const uint64_t raw = k_vec_get<S>(x, k);
            hit |= k_step_nonfinite_raw(raw, DT);
            k_vec_set<S>(out, k, k_step_unscale_elem<DT>(raw, factor));
        }
        k_vec_store<16>(p.dst + at, out);
    }
    const size_t tail = p.head + p.vecs * V, scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride) {
        const size_t at = k_step_scalar_index(e, p.head, tail) * S;
        const uint64_t raw = k_elem_get<S>(p.src + at, p.bytewise);
        hit |= k_step_nonfinite_raw(raw, DT);
        k_elem_put<S>(p.dst + at, k_step_unscale_elem<DT>(raw, factor), p.bytewise);
    }
    if (hit) *p.flag = 1;
}

typedef void (*k_step_check_fn)(k_step_check_params);

/* ---- SGD step ------------------------------------------------------------------------- */

struct k_step_sgd_params {
    float *param;
    const unsigned char *grad;
    float *buf;        /* NULL when momentum == 0 */
    unsigned char *lp; /* NULL without a copy */
    size_t count, head, vecs;
    int bytewise;
    k_step_sgd_t a;
};

#define K_STEP_SGD_V 4

/* GD: the gradient's dtype; LD: the copy's, K_DTYPE_COUNT for none. */
template <int GD, int LD>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_step_sgd_kernel(const __grid_constant__ k_step_sgd_params p)
{
    constexpr int GS = k_dtype_bytes<GD>::value, LS = LD == K_DTYPE_COUNT ? 4 : k_dtype_bytes<LD>::value;
    constexpr int V = K_STEP_SGD_V;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const k_step_sgd_t a = p.a;
    const int with_buf = a.momentum != 0.0f;
    unsigned char *param = (unsigned char *)p.param, *buf = (unsigned char *)p.buf;

    for (size_t v = tid; v < p.vecs; v += stride) {
        const size_t i = p.head + v * V;
        k_vec P, G, M = {}, L = {};
        k_vec_load<16>(P, param + i * 4);
        k_vec_load<V * GS>(G, p.grad + i * GS);
        if (with_buf) k_vec_load<16>(M, buf + i * 4);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float m = k_num_f32_from_bits(M.w[k]);
            const float x = k_step_sgd_elem(k_num_f32_from_bits(P.w[k]), k_elem_to_f32(k_vec_get<GS>(G, k), GD), &m, a);
            P.w[k] = k_num_f32_bits(x);
            M.w[k] = k_num_f32_bits(m);
            if constexpr (LD != K_DTYPE_COUNT) k_vec_set<LS>(L, k, k_elem_from_f32(x, LD));
        }
        k_vec_store<16>(param + i * 4, P);
        if (with_buf) k_vec_store<16>(buf + i * 4, M);
        if constexpr (LD != K_DTYPE_COUNT) k_vec_store<V * LS>(p.lp + i * LS, L);
    }
    const size_t tail = p.head + p.vecs * V, scalars = p.head + (p.count - tail);
    for (size_t e = tid; e < scalars; e += stride) {
        const size_t i = k_step_scalar_index(e, p.head, tail);
        float m = with_buf ? k_num_f32_from_bits((uint32_t)k_elem_get<4>(buf + i * 4, p.bytewise)) : 0.0f;
        const float x = k_step_sgd_elem(k_num_f32_from_bits((uint32_t)k_elem_get<4>(param + i * 4, p.bytewise)),
                                        k_elem_to_f32(k_elem_get<GS>(p.grad + i * GS, p.bytewise), GD), &m, a);
        k_elem_put<4>(param + i * 4, k_num_f32_bits(x), p.bytewise);
        if (with_buf) k_elem_put<4>(buf + i * 4, k_num_f32_bits(m), p.bytewise);
        if constexpr (LD != K_DTYPE_COUNT) k_elem_put<LS>(p.lp + i * LS, k_elem_from_f32(x, LD), p.bytewise);
    }
}

typedef void (*k_step_sgd_fn)(k_step_sgd_params);

#define K_STEP_SGD_ROW(GD)                                                                                           \
    {                                                                                                                \
        k_step_sgd_kernel<GD, K_DTYPE_F32>, k_step_sgd_kernel<GD, K_DTYPE_F16>, k_step_sgd_kernel<GD, K_DTYPE_BF16>, \
            k_step_sgd_kernel<GD, K_DTYPE_COUNT>                                                                     \
    }
/* [grad dtype][copy dtype: f32, f16, bf16, none] */
const k_step_sgd_fn k_step_sgd_kernels[3][4] = {K_STEP_SGD_ROW(K_DTYPE_F32), K_STEP_SGD_ROW(K_DTYPE_F16),
                                                K_STEP_SGD_ROW(K_DTYPE_BF16)};
#undef K_STEP_SGD_ROW

/* ---- input step ------------------------------------------------------------------------- */

struct k_step_input_params {
    unsigned char *dst;
    const uint8_t *src;
    size_t pixels;
    int src_channels, dst_channels;
    int vector;   /* f16/bf16: dst_channels * 2 is 8 or 16 and dst is aligned to it */
    int bytewise; /* dst is not even aligned to its element size */
    float mean[K_CUDA_INPUT_MAX_CHANNELS], std[K_CUDA_INPUT_MAX_CHANNELS];
};

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_step_input_kernel(const __grid_constant__ k_step_input_params p)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int sc = p.src_channels, dc = p.dst_channels;
    if constexpr (DT == K_DTYPE_F32) {
        /* f32 (an f32 model): element stores, up to 32 bytes a pixel. */
        for (size_t px = tid; px < p.pixels; px += stride) {
            const uint8_t *s = p.src + px * (size_t)sc;
            unsigned char *d = p.dst + px * (size_t)dc * 4;
#pragma unroll
            for (int c = 0; c < K_CUDA_INPUT_MAX_CHANNELS; c++)
                if (c < dc)
                    k_elem_put<4>(d + 4 * c, c < sc ? k_num_f32_bits(k_step_input_value(s[c], p.mean[c], p.std[c])) : 0,
                                  p.bytewise);
        }
    } else {
        for (size_t px = tid; px < p.pixels; px += stride) {
            const uint8_t *s = p.src + px * (size_t)sc;
            unsigned char *d = p.dst + px * (size_t)dc * 2;
            k_vec out = {};
#pragma unroll
            for (int c = 0; c < K_CUDA_INPUT_MAX_CHANNELS; c++)
                if (c < sc) k_vec_set<2>(out, c, k_elem_from_f32(k_step_input_value(s[c], p.mean[c], p.std[c]), DT));
            if (p.vector && dc == 8) {
                k_vec_store<16>(d, out);
            } else if (p.vector) {
                k_vec_store<8>(d, out);
            } else {
                for (int c = 0; c < dc; c++) k_elem_put<2>(d + 2 * c, k_vec_get<2>(out, c), p.bytewise);
            }
        }
    }
}

typedef void (*k_step_input_fn)(k_step_input_params);

/* ---- softmax cross-entropy ---------------------------------------------------------------- */

struct k_step_xent_params {
    const float *logits;
    const int32_t *labels;
    unsigned char *dlogits;
    double *row_loss;
    float *loss;
    int32_t *label_error;
    int n, k;
    double s, scale;
};

/* The butterfly of k_step.h, then lane 0's value everywhere (max is not
 * symmetric for +-0, so lanes could otherwise disagree). */
__device__ __forceinline__ double k_step_warp_sum(double v)
{
#pragma unroll
    for (int o = K_STEP_XENT_LANES / 2; o >= 1; o /= 2) v = v + __shfl_xor_sync(k_full_mask, v, o);
    return __shfl_sync(k_full_mask, v, 0);
}

__device__ __forceinline__ double k_step_warp_max(double v)
{
#pragma unroll
    for (int o = K_STEP_XENT_LANES / 2; o >= 1; o /= 2) v = k_train_xent_max(v, __shfl_xor_sync(k_full_mask, v, o));
    return __shfl_sync(k_full_mask, v, 0);
}

/* One warp per row (rows grid-strided by warps: uniform per warp). The
 * minimum of 4 blocks per SM (at most 64 registers) is there for ptxas:
 * with the default bound it spilled 16 bytes around the slow paths of the
 * double division and exp in the f16 instance, with this bound none. */
template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS, 4)
    k_step_xent_rows_kernel(const __grid_constant__ k_step_xent_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value;
    const int lane = threadIdx.x % K_STEP_XENT_LANES;
    const size_t warps = (size_t)gridDim.x * blockDim.x / K_STEP_XENT_LANES;
    const int n = p.n, k = p.k;
    for (size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / K_STEP_XENT_LANES; row < (size_t)n;
         row += warps) {
        const float *z = p.logits + row * (size_t)k;
        unsigned char *g = p.dlogits + row * (size_t)k * S;
        const int32_t label = p.labels[row];
        if (label < 0 || label >= k) {
            const uint64_t nan_out = k_elem_from_f64(NAN, DT);
            for (int j = lane; j < k; j += K_STEP_XENT_LANES) k_elem_put<S>(g + (size_t)j * S, nan_out, 0);
            if (lane == 0) p.row_loss[row] = NAN;
            continue;
        }
        double m = -INFINITY;
        for (int j = lane; j < k; j += K_STEP_XENT_LANES) m = k_train_xent_max(m, z[j]);
        const double max = k_step_warp_max(m);
        double sum = 0.0, sum_z = 0.0;
        for (int j = lane; j < k; j += K_STEP_XENT_LANES) {
            const float zj = z[j];
            sum += k_train_xent_exp_term(zj, max);
            sum_z += zj;
        }
        sum = k_step_warp_sum(sum);
        sum_z = k_step_warp_sum(sum_z);
        const double lse = k_train_xent_lse(max, sum);
        const double s_k = p.s / k;
        if (lane == 0) p.row_loss[row] = k_train_xent_row_loss(lse, z[label], sum_z, k, p.s);
        for (int j = lane; j < k; j += K_STEP_XENT_LANES)
            k_elem_put<S>(g + (size_t)j * S,
                          k_elem_from_f64(k_train_xent_grad(z[j], lse, j == label, s_k, p.s, n, p.scale), DT), 0);
    }
}

/* One block: the rows' losses added in row order by thread 0 (staged
 * through shared memory by the block), the first bad label by all. */
#define K_STEP_XENT_CHUNK 1024
__global__ void __launch_bounds__(K_CUDA_THREADS) k_step_xent_loss_kernel(const __grid_constant__ k_step_xent_params p)
{
    __shared__ double rows[K_STEP_XENT_CHUNK];
    __shared__ int bad;
    if (threadIdx.x == 0) bad = INT_MAX;
    __syncthreads();
    double total = 0.0;
    for (int base = 0; base < p.n; base += K_STEP_XENT_CHUNK) {
        const int count = p.n - base < K_STEP_XENT_CHUNK ? p.n - base : K_STEP_XENT_CHUNK;
        for (int i = threadIdx.x; i < count; i += blockDim.x) {
            rows[i] = p.row_loss[base + i];
            const int32_t label = p.labels[base + i];
            if (label < 0 || label >= p.k) atomicMin(&bad, base + i);
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (int i = 0; i < count; i++) total += rows[i];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *p.loss = (float)(total / p.n);
        *p.label_error = bad == INT_MAX ? 0 : bad + 1;
    }
}

typedef void (*k_step_xent_fn)(k_step_xent_params);

/* ---- host helpers ---------------------------------------------------------------------------- */

int k_step_half_or_f32(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16;
}

/* Blocks for a layout's work (the larger of its vector and scalar counts). */
cudaError_t k_step_layout_blocks(const k_layout &lay, size_t count, size_t V, unsigned *blocks)
{
    const size_t scalars = count - lay.vecs * V;
    return k_cuda_blocks(lay.vecs > scalars ? lay.vecs : scalars, blocks);
}

int k_step_aligned(const void *ptr, size_t align) { return (uintptr_t)ptr % align == 0; }

cudaError_t k_step_check_launch(k_step_check_fn kernel, void *dst, const void *src, size_t size, size_t count,
                                float factor, int32_t *flag, cudaStream_t stream)
{
    const void *ptrs[2] = {src, dst};
    const size_t sizes[2] = {size, size};
    const k_layout lay = k_layout_of(ptrs, sizes, dst ? 2 : 1, count, 16 / size);
    k_step_check_params p;
    p.src = (const unsigned char *)src;
    p.dst = (unsigned char *)dst;
    p.flag = flag;
    p.count = count;
    p.head = lay.head;
    p.vecs = lay.vecs;
    p.bytewise = lay.bytewise;
    p.factor = factor;
    unsigned blocks;
    cudaError_t err = k_step_layout_blocks(lay, count, 16 / size, &blocks);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(kernel, blocks, p, stream);
}

} // namespace

int k_cuda_nonfinite(const void *src, k_dtype_t dtype, size_t count, int32_t *flag, void *stream)
{
    k_step_check_fn kernel;
    switch (dtype) {
    case K_DTYPE_F32: kernel = k_step_nonfinite_kernel<K_DTYPE_F32>; break;
    case K_DTYPE_F16: kernel = k_step_nonfinite_kernel<K_DTYPE_F16>; break;
    case K_DTYPE_BF16: kernel = k_step_nonfinite_kernel<K_DTYPE_BF16>; break;
    case K_DTYPE_F64: kernel = k_step_nonfinite_kernel<K_DTYPE_F64>; break;
    case K_DTYPE_I32:
    case K_DTYPE_I64:
    case K_DTYPE_U8:
    case K_DTYPE_I8:
    case K_DTYPE_I16:
    case K_DTYPE_U16:
    case K_DTYPE_BOOL: return cudaSuccess; /* no inf or NaN to find */
    default: return cudaErrorInvalidValue;
    }
    if (count == 0) return cudaSuccess;
    if (!src || !flag || !k_step_aligned(flag, sizeof(int32_t))) return cudaErrorInvalidValue;
    return k_step_check_launch(kernel, NULL, src, k_dtype_size(dtype), count, 0.0f, flag, (cudaStream_t)stream);
}

int k_cuda_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor, int32_t *flag,
                             void *stream)
{
    k_step_check_fn kernel;
    switch (dtype) {
    case K_DTYPE_F32: kernel = k_step_unscale_kernel<K_DTYPE_F32>; break;
    case K_DTYPE_F16: kernel = k_step_unscale_kernel<K_DTYPE_F16>; break;
    case K_DTYPE_BF16: kernel = k_step_unscale_kernel<K_DTYPE_BF16>; break;
    default: return cudaErrorInvalidValue;
    }
    if (count == 0) return cudaSuccess;
    if (!dst || !src || !flag || !k_step_aligned(flag, sizeof(int32_t))) return cudaErrorInvalidValue;
    return k_step_check_launch(kernel, dst, src, k_dtype_size(dtype), count, factor, flag, (cudaStream_t)stream);
}

int k_cuda_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad, k_dtype_t grad_dtype,
                          float grad_scale, float *momentum_buf, size_t count, float lr, float momentum,
                          float weight_decay, int nesterov, void *stream)
{
    if (!k_step_half_or_f32(grad_dtype) || (param_lp && !k_step_half_or_f32(lp_dtype))) return cudaErrorInvalidValue;
    if (count == 0) return cudaSuccess;
    if (!param || !grad || (momentum != 0.0f && !momentum_buf)) return cudaErrorInvalidValue;
    const int with_buf = momentum != 0.0f;
    const void *ptrs[4] = {param, grad, NULL, NULL};
    size_t sizes[4] = {4, k_dtype_size(grad_dtype), 4, 4};
    int n_ptrs = 2;
    if (with_buf) ptrs[n_ptrs++] = momentum_buf;
    if (param_lp) {
        ptrs[n_ptrs] = param_lp;
        sizes[n_ptrs++] = k_dtype_size(lp_dtype);
    }
    const k_layout lay = k_layout_of(ptrs, sizes, n_ptrs, count, K_STEP_SGD_V);
    k_step_sgd_params p;
    p.param = param;
    p.grad = (const unsigned char *)grad;
    p.buf = with_buf ? momentum_buf : NULL;
    p.lp = (unsigned char *)param_lp;
    p.count = count;
    p.head = lay.head;
    p.vecs = lay.vecs;
    p.bytewise = lay.bytewise;
    p.a.lr = lr;
    p.a.momentum = momentum;
    p.a.weight_decay = weight_decay;
    p.a.grad_scale = grad_scale;
    p.a.nesterov = nesterov != 0;
    const int g = grad_dtype == K_DTYPE_F32 ? 0 : grad_dtype == K_DTYPE_F16 ? 1 : 2;
    const int l = !param_lp ? 3 : lp_dtype == K_DTYPE_F32 ? 0 : lp_dtype == K_DTYPE_F16 ? 1 : 2;
    unsigned blocks;
    cudaError_t err = k_step_layout_blocks(lay, count, K_STEP_SGD_V, &blocks);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(k_step_sgd_kernels[g][l], blocks, p, (cudaStream_t)stream);
}

int k_cuda_input_normalize(void *dst, k_dtype_t dst_dtype, int dst_channels, const uint8_t *src, int src_channels,
                           size_t pixel_count, const float *mean, const float *std, void *stream)
{
    if (!k_step_half_or_f32(dst_dtype) || src_channels < 1 || dst_channels < src_channels ||
        dst_channels > K_CUDA_INPUT_MAX_CHANNELS)
        return cudaErrorInvalidValue;
    if (pixel_count == 0) return cudaSuccess;
    if (!dst || !src || !mean || !std) return cudaErrorInvalidValue;
    k_step_input_params p;
    memset(&p, 0, sizeof(p));
    p.dst = (unsigned char *)dst;
    p.src = src;
    p.pixels = pixel_count;
    p.src_channels = src_channels;
    p.dst_channels = dst_channels;
    const size_t size = dst_dtype == K_DTYPE_F32 ? 4 : 2, pixel_bytes = (size_t)dst_channels * size;
    p.vector = size == 2 && (pixel_bytes == 8 || pixel_bytes == 16) && k_step_aligned(dst, pixel_bytes);
    p.bytewise = !k_step_aligned(dst, size);
    for (int c = 0; c < src_channels; c++) {
        p.mean[c] = mean[c];
        p.std[c] = std[c];
    }
    unsigned blocks;
    cudaError_t err = k_cuda_blocks(pixel_count, &blocks);
    if (err != cudaSuccess) return err;
    const k_step_input_fn kernel = dst_dtype == K_DTYPE_F16    ? k_step_input_kernel<K_DTYPE_F16>
                                   : dst_dtype == K_DTYPE_BF16 ? k_step_input_kernel<K_DTYPE_BF16>
                                                               : k_step_input_kernel<K_DTYPE_F32>;
    return k_cuda_launch(kernel, blocks, p, (cudaStream_t)stream);
}

int k_cuda_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                        float grad_scale, float *loss, void *dlogits, k_dtype_t dlogits_dtype, void *workspace,
                        int32_t *label_error, void *stream)
{
    if (n < 1 || k < 1 || !(label_smoothing >= 0.0f && label_smoothing <= 1.0f) ||
        !(grad_scale > 0.0f && isfinite(grad_scale)) || !k_step_half_or_f32(dlogits_dtype) || !logits || !labels ||
        !loss || !dlogits || !workspace || !label_error)
        return cudaErrorInvalidValue;
    if (!k_step_aligned(logits, 4) || !k_step_aligned(labels, 4) || !k_step_aligned(loss, 4) ||
        !k_step_aligned(label_error, 4) || !k_step_aligned(workspace, 8) ||
        !k_step_aligned(dlogits, k_dtype_size(dlogits_dtype)))
        return cudaErrorInvalidValue;
    k_step_xent_params p;
    p.logits = logits;
    p.labels = labels;
    p.dlogits = (unsigned char *)dlogits;
    p.row_loss = (double *)workspace;
    p.loss = loss;
    p.label_error = label_error;
    p.n = n;
    p.k = k;
    p.s = label_smoothing;
    p.scale = grad_scale;
    const k_step_xent_fn rows = dlogits_dtype == K_DTYPE_F32   ? k_step_xent_rows_kernel<K_DTYPE_F32>
                                : dlogits_dtype == K_DTYPE_F16 ? k_step_xent_rows_kernel<K_DTYPE_F16>
                                                               : k_step_xent_rows_kernel<K_DTYPE_BF16>;
    unsigned blocks;
    cudaError_t err = k_cuda_blocks((size_t)n * K_STEP_XENT_LANES, &blocks);
    if (err != cudaSuccess) return err;
    err = k_cuda_launch(rows, blocks, p, (cudaStream_t)stream);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(k_step_xent_loss_kernel, 1, p, (cudaStream_t)stream);
}
