/*
 * k_nn.cu - the memory-bound layer kernels of the cuda backend
 * (k_cuda_nn.h): batch norm (training statistics, inference, backward,
 * with fused relu and add+relu), max pool with argmax, global average
 * pool, relu and add, on NHWC activations (f32, f16, bf16; fp32 inside).
 * The arithmetic and the blocked order of the reductions are k_nn.h's,
 * which k_nn_twin.c replays on the CPU, so every kernel equals its twin
 * bit for bit.
 *
 * Batch norm, training forward: (1) a stats kernel, one block per (chunk
 * of 128 rows, group of 32 channels): threadIdx % 32 is the channel (a
 * warp reads 32 consecutive channels of a row), threadIdx / 32 the row
 * lane; each thread keeps its 16 values in registers for the chunk's two
 * passes and the lanes are folded through shared memory; (2) a merge
 * kernel, a block per channel, merging the chunks in double and writing
 * the statistics; (3) the element-wise apply. The backward has the same
 * three steps (sums of g and g xhat; their merge; dx). No atomics: the
 * results do not depend on scheduling.
 *
 * The element-wise passes run on 16-byte vectors (V = 8 f16/bf16 or 4 f32
 * elements) where every pointer is 16-byte aligned and, for batch norm, c
 * is a multiple of V (a vector then lies in one row: its channels follow
 * from its index, advanced by the grid stride mod c / V, no division in the
 * loop); otherwise a warp walks 32 channels of a row at a time, one element
 * per thread. relu and add: vectors, then the elements after them.
 */
#include "k_cuda_nn.h"
#include "k_device.cuh"
#include "k_nn.h"

namespace
{

constexpr int k_warp = 32;
constexpr int k_rows_per_block = K_CUDA_THREADS / k_warp; /* 8 rows per pass of a block */

static_assert(K_NN_BN_CHUNK == K_CUDA_BN_CHUNK, "k_nn.h's chunk is k_cuda_nn.h's");
static_assert(K_NN_BN_LANES * K_NN_BN_CGROUP == K_CUDA_THREADS, "a stats block is 8 lanes x 32 channels");
static_assert(K_NN_MERGE_THREADS == K_CUDA_THREADS, "a merge block is K_CUDA_THREADS threads");

template <int DT> __device__ __forceinline__ float k_nn_get(const unsigned char *p, size_t i)
{
    constexpr int S = k_dtype_bytes<DT>::value;
    return k_nn_load((uint32_t)k_elem_get<S>(p + i * S, 0), DT);
}

template <int DT> __device__ __forceinline__ void k_nn_set(unsigned char *p, size_t i, float v)
{
    constexpr int S = k_dtype_bytes<DT>::value;
    k_elem_put<S>(p + i * S, k_nn_store(v, DT), 0);
}

/* The lane tree of a chunk over sh[lane][channel] (k_nn.h's order);
 * returns with lane 0 holding the chunk's value, all threads synchronised. */
__device__ __forceinline__ void k_nn_lane_tree(float (*sh)[K_NN_BN_CGROUP], int lane, int cx)
{
#pragma unroll
    for (int h = K_NN_BN_LANES / 2; h >= 1; h /= 2) {
        if (lane < h) sh[lane][cx] = sh[lane][cx] + sh[lane + h][cx];
        __syncthreads();
    }
}

/* ---- batch norm: statistics ---------------------------------------------------- */

struct k_nn_bn_params {
    const unsigned char *x, *res, *dy, *y;
    unsigned char *out, *dres; /* y (forward) or dx (backward); dresidual */
    size_t rows, chunks;
    int c, relu;
    const float *gamma, *beta, *mean, *invstd_or_scale;
    float *running_mean, *running_var, *save_mean, *save_invstd;
    float *ws;     /* chunk partials: [j][c][chunk] */
    float *consts; /* per channel: scale (forward), k1, k2, a (backward) */
    float momentum, epsilon;
    unsigned char *dgamma, *dbeta;
};

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_stats_kernel(const __grid_constant__ k_nn_bn_params p)
{
    __shared__ float sh_s[K_NN_BN_LANES][K_NN_BN_CGROUP], sh_d[K_NN_BN_LANES][K_NN_BN_CGROUP],
        sh_q[K_NN_BN_LANES][K_NN_BN_CGROUP];
    const int cx = threadIdx.x % K_NN_BN_CGROUP, lane = threadIdx.x / K_NN_BN_CGROUP;
    const int ch = blockIdx.y * K_NN_BN_CGROUP + cx;
    const size_t k = blockIdx.x;
    const int count = k_nn_chunk_count(p.rows, k);
    const bool on = ch < p.c;
    float v[K_NN_BN_PER_LANE];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < K_NN_BN_PER_LANE; i++) {
        const int r = lane + K_NN_BN_LANES * i;
        v[i] = 0.0f;
        if (on && r < count) {
            v[i] = k_nn_get<DT>(p.x, (k * K_NN_BN_CHUNK + (size_t)r) * (size_t)p.c + (size_t)ch);
            s = s + v[i];
        }
    }
    sh_s[lane][cx] = s;
    __syncthreads();
    k_nn_lane_tree(sh_s, lane, cx);
    const float mc = sh_s[0][cx] / (float)count;
    float d_sum = 0.0f, q_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < K_NN_BN_PER_LANE; i++)
        if (lane + K_NN_BN_LANES * i < count) {
            const float d = v[i] - mc;
            d_sum = d_sum + d;
            q_sum = q_sum + d * d;
        }
    sh_d[lane][cx] = d_sum;
    sh_q[lane][cx] = q_sum;
    __syncthreads();
    k_nn_lane_tree(sh_d, lane, cx);
    k_nn_lane_tree(sh_q, lane, cx);
    if (lane == 0 && on) {
        const size_t at = (size_t)ch * p.chunks + k, plane = (size_t)p.c * p.chunks;
        p.ws[at] = mc;
        p.ws[plane + at] = sh_d[0][cx];
        p.ws[2 * plane + at] = sh_q[0][cx];
    }
}

/* A block per channel: the chunks merged as k_nn.h says, then the
 * statistics, the running update and the apply's scale. */
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_merge_kernel(const __grid_constant__ k_nn_bn_params p)
{
    __shared__ double sh_n[K_NN_MERGE_THREADS], sh_mean[K_NN_MERGE_THREADS], sh_m2[K_NN_MERGE_THREADS];
    const int ch = blockIdx.x, t = threadIdx.x;
    const size_t plane = (size_t)p.c * p.chunks;
    const float *mc = p.ws + (size_t)ch * p.chunks;
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (size_t k = t; k < p.chunks; k += K_NN_MERGE_THREADS) {
        const int count = k_nn_chunk_count(p.rows, k);
        double mk, m2k;
        k_nn_chunk_moments(mc[k], mc[plane + k], mc[2 * plane + k], count, &mk, &m2k);
        k_nn_stat_merge(&n, &mean, &m2, (double)count, mk, m2k);
    }
    sh_n[t] = n, sh_mean[t] = mean, sh_m2[t] = m2;
    __syncthreads();
    for (int h = K_NN_MERGE_THREADS / 2; h >= 1; h /= 2) {
        if (t < h) k_nn_stat_merge(&sh_n[t], &sh_mean[t], &sh_m2[t], sh_n[t + h], sh_mean[t + h], sh_m2[t + h]);
        __syncthreads();
    }
    if (t == 0) {
        k_nn_bn_stats_t s = k_nn_bn_finish(sh_n[0], sh_mean[0], sh_m2[0], p.gamma[ch], p.running_mean[ch],
                                           p.running_var[ch], p.momentum, p.epsilon);
        p.save_mean[ch] = s.mean;
        p.save_invstd[ch] = s.invstd;
        p.consts[ch] = s.scale;
        p.running_mean[ch] = s.running_mean;
        p.running_var[ch] = s.running_var;
    }
}

/* Inference: scale per channel from the running variance. */
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_infer_prep_kernel(const __grid_constant__ k_nn_bn_params p)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < p.c) p.consts[ch] = k_nn_bn_infer_scale(p.gamma[ch], p.running_var[ch], p.epsilon);
}

/* f(i, ch) for every element i of the rows x c tensor p describes: a warp
 * per row, its lanes along the channels. */
template <typename F> __device__ __forceinline__ void k_nn_bn_each(const k_nn_bn_params &p, F f)
{
    const int cx = threadIdx.x % k_warp, ry = threadIdx.x / k_warp;
    for (size_t r = (size_t)blockIdx.x * k_rows_per_block + ry; r < p.rows; r += (size_t)gridDim.x * k_rows_per_block)
        for (int ch = cx; ch < p.c; ch += k_warp) f(r * (size_t)p.c + (size_t)ch, ch);
}

/* f(j, ch0) for every 16-byte vector j of that tensor, V = 16 / S elements,
 * used when c is a multiple of V and every pointer is 16-byte aligned:
 * vector j holds channels ch0 = (j mod c/V) * V .. + V - 1 of one row; the
 * thread's vector column advances by the grid stride mod c/V (no division
 * in the loop). */
template <int V, typename F> __device__ __forceinline__ void k_nn_bn_each_vec(const k_nn_bn_params &p, F f)
{
    const size_t vecs = p.rows * (size_t)(p.c / V), stride = (size_t)gridDim.x * blockDim.x;
    const unsigned vcols = (unsigned)(p.c / V), step = (unsigned)(stride % vcols);
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned vc = (unsigned)(j % vcols);
    for (; j < vecs; j += stride) {
        f(j, (int)vc * V);
        vc += step;
        if (vc >= vcols) vc -= vcols;
    }
}

/* y = bn(x) [+ res] [relu] with mean = p.mean, scale = p.consts. */
template <int DT, bool RES, bool RELU>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_apply_kernel(const __grid_constant__ k_nn_bn_params p)
{
    k_nn_bn_each(p, [&](size_t i, int ch) {
        const float res = RES ? k_nn_get<DT>(p.res, i) : 0.0f;
        k_nn_set<DT>(p.out, i,
                     k_nn_bn_apply(k_nn_get<DT>(p.x, i), p.mean[ch], p.consts[ch], p.beta[ch], res, RES, RELU));
    });
}

/* The apply on 16-byte vectors (k_nn_bn_each_vec). */
template <int DT, bool RES, bool RELU>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_apply_vec_kernel(const __grid_constant__ k_nn_bn_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    k_nn_bn_each_vec<V>(p, [&](size_t j, int ch0) {
        k_vec xv, rv = {}, out = {};
        k_vec_load<16>(xv, p.x + j * 16);
        if (RES) k_vec_load<16>(rv, p.res + j * 16);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int ch = ch0 + k;
            const float res = RES ? k_nn_load((uint32_t)k_vec_get<S>(rv, k), DT) : 0.0f;
            const float v = k_nn_bn_apply(k_nn_load((uint32_t)k_vec_get<S>(xv, k), DT), __ldg(p.mean + ch),
                                          __ldg(p.consts + ch), __ldg(p.beta + ch), res, RES, RELU);
            k_vec_set<S>(out, k, k_nn_store(v, DT));
        }
        k_vec_store<16>(p.out + j * 16, out);
    });
}

/* ---- batch norm: backward -------------------------------------------------------- */

template <int DT, bool Y> __device__ __forceinline__ float k_nn_bn_g(const k_nn_bn_params &p, size_t i)
{
    const float d = k_nn_get<DT>(p.dy, i);
    return Y ? k_train_relu_grad(k_nn_get<DT>(p.y, i), d) : d;
}

/* Per (chunk, channel group): sum g and sum g xhat; the masked g into
 * dresidual when it is wanted. */
template <int DT, bool Y, bool DRES>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_bwd_stats_kernel(const __grid_constant__ k_nn_bn_params p)
{
    __shared__ float sh_g[K_NN_BN_LANES][K_NN_BN_CGROUP], sh_gx[K_NN_BN_LANES][K_NN_BN_CGROUP];
    const int cx = threadIdx.x % K_NN_BN_CGROUP, lane = threadIdx.x / K_NN_BN_CGROUP;
    const int ch = blockIdx.y * K_NN_BN_CGROUP + cx;
    const size_t k = blockIdx.x;
    const int count = k_nn_chunk_count(p.rows, k);
    float g_sum = 0.0f, gx_sum = 0.0f;
    if (ch < p.c) {
        const float mean = p.mean[ch], invstd = p.invstd_or_scale[ch];
#pragma unroll 4
        for (int i = 0; i < K_NN_BN_PER_LANE; i++) {
            const int r = lane + K_NN_BN_LANES * i;
            if (r < count) {
                const size_t e = (k * K_NN_BN_CHUNK + (size_t)r) * (size_t)p.c + (size_t)ch;
                const float g = k_nn_bn_g<DT, Y>(p, e);
                const float xh = k_nn_bn_xhat(k_nn_get<DT>(p.x, e), mean, invstd);
                g_sum = g_sum + g;
                gx_sum = gx_sum + g * xh;
                if (DRES) k_nn_set<DT>(p.dres, e, g);
            }
        }
    }
    sh_g[lane][cx] = g_sum;
    sh_gx[lane][cx] = gx_sum;
    __syncthreads();
    k_nn_lane_tree(sh_g, lane, cx);
    k_nn_lane_tree(sh_gx, lane, cx);
    if (lane == 0 && ch < p.c) {
        const size_t at = (size_t)ch * p.chunks + k;
        p.ws[at] = sh_g[0][cx];
        p.ws[(size_t)p.c * p.chunks + at] = sh_gx[0][cx];
    }
}

/* A block per channel: dbeta, dgamma (in GDT) and dx's constants. */
template <int GDT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_bwd_merge_kernel(const __grid_constant__ k_nn_bn_params p)
{
    __shared__ double sh_g[K_NN_MERGE_THREADS], sh_gx[K_NN_MERGE_THREADS];
    const int ch = blockIdx.x, t = threadIdx.x;
    const float *sg = p.ws + (size_t)ch * p.chunks, *sgx = sg + (size_t)p.c * p.chunks;
    double g = 0.0, gx = 0.0;
    for (size_t k = t; k < p.chunks; k += K_NN_MERGE_THREADS) {
        g = g + (double)sg[k];
        gx = gx + (double)sgx[k];
    }
    sh_g[t] = g, sh_gx[t] = gx;
    __syncthreads();
    for (int h = K_NN_MERGE_THREADS / 2; h >= 1; h /= 2) {
        if (t < h) {
            sh_g[t] = sh_g[t] + sh_g[t + h];
            sh_gx[t] = sh_gx[t] + sh_gx[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        k_nn_set<GDT>(p.dbeta, ch, (float)sh_g[0]);
        k_nn_set<GDT>(p.dgamma, ch, (float)sh_gx[0]);
        p.consts[3 * ch] = (float)(sh_g[0] / (double)p.rows);
        p.consts[3 * ch + 1] = (float)(sh_gx[0] / (double)p.rows);
        p.consts[3 * ch + 2] = p.gamma[ch] * p.invstd_or_scale[ch];
    }
}

template <int DT, bool Y>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_dx_kernel(const __grid_constant__ k_nn_bn_params p)
{
    k_nn_bn_each(p, [&](size_t i, int ch) {
        const float g = k_nn_bn_g<DT, Y>(p, i);
        const float xh = k_nn_bn_xhat(k_nn_get<DT>(p.x, i), p.mean[ch], p.invstd_or_scale[ch]);
        k_nn_set<DT>(p.out, i, k_nn_bn_dx(g, xh, p.consts[3 * ch], p.consts[3 * ch + 1], p.consts[3 * ch + 2]));
    });
}

/* dx on 16-byte vectors, under the apply's conditions (dy, y, x, dx). */
template <int DT, bool Y>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_bn_dx_vec_kernel(const __grid_constant__ k_nn_bn_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    k_nn_bn_each_vec<V>(p, [&](size_t j, int ch0) {
        k_vec xv, dyv, yv = {}, out = {};
        k_vec_load<16>(xv, p.x + j * 16);
        k_vec_load<16>(dyv, p.dy + j * 16);
        if (Y) k_vec_load<16>(yv, p.y + j * 16);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int ch = ch0 + k;
            const float d = k_nn_load((uint32_t)k_vec_get<S>(dyv, k), DT);
            const float g = Y ? k_train_relu_grad(k_nn_load((uint32_t)k_vec_get<S>(yv, k), DT), d) : d;
            const float xh = k_nn_bn_xhat(k_nn_load((uint32_t)k_vec_get<S>(xv, k), DT), __ldg(p.mean + ch),
                                          __ldg(p.invstd_or_scale + ch));
            const float dx =
                k_nn_bn_dx(g, xh, __ldg(p.consts + 3 * ch), __ldg(p.consts + 3 * ch + 1), __ldg(p.consts + 3 * ch + 2));
            k_vec_set<S>(out, k, k_nn_store(dx, DT));
        }
        k_vec_store<16>(p.out + j * 16, out);
    });
}

/* ---- pooling -------------------------------------------------------------------- */

/* f(i, ch, col, row, n) for every element i < count of an NHWC tensor of
 * rows x cols x c per image (grid stride): its channel, column, row and
 * image. */
template <typename F> __device__ __forceinline__ void k_nn_each_nhwc(size_t count, int c, int cols, int rows, F f)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const int ch = (int)(i % c);
        size_t rest = i / c;
        const int col = (int)(rest % cols);
        rest /= cols;
        const int row = (int)(rest % rows);
        f(i, ch, col, row, rest / rows);
    }
}

struct k_nn_pool_params {
    const unsigned char *in;
    unsigned char *out;
    const uint8_t *argmax_in;
    uint8_t *argmax_out;
    k_cuda_pool_t g;
    int ho, wo;
    size_t count; /* output (forward) or input (backward) elements */
};

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_maxpool_fwd_kernel(const __grid_constant__ k_nn_pool_params p)
{
    const k_cuda_pool_t g = p.g;
    k_nn_each_nhwc(p.count, g.c, p.wo, p.ho, [&](size_t o, int ch, int ow, int oh, size_t n) {
        float best = 0.0f;
        int have = 0, at = 0;
        for (int kh = 0; kh < g.kernel; kh++) {
            const int ih = oh * g.stride - g.pad + kh;
            if (ih < 0 || ih >= g.h) continue;
            for (int kw = 0; kw < g.kernel; kw++) {
                const int iw = ow * g.stride - g.pad + kw;
                if (iw < 0 || iw >= g.w) continue;
                const float v = k_nn_get<DT>(p.in, ((n * g.h + ih) * g.w + iw) * g.c + (size_t)ch);
                if (k_nn_max_takes(best, v, have)) best = v, at = kh * g.kernel + kw, have = 1;
            }
        }
        k_nn_set<DT>(p.out, o, best);
        p.argmax_out[o] = (uint8_t)at;
    });
}

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_maxpool_bwd_kernel(const __grid_constant__ k_nn_pool_params p)
{
    const k_cuda_pool_t g = p.g;
    k_nn_each_nhwc(p.count, g.c, g.w, g.h, [&](size_t i, int ch, int iw, int ih, size_t n) {
        int oh_lo, oh_hi, ow_lo, ow_hi;
        k_nn_pool_cover(ih, g.kernel, g.stride, g.pad, p.ho, &oh_lo, &oh_hi);
        k_nn_pool_cover(iw, g.kernel, g.stride, g.pad, p.wo, &ow_lo, &ow_hi);
        float acc = 0.0f;
        for (int oh = oh_lo; oh < oh_hi; oh++)
            for (int ow = ow_lo; ow < ow_hi; ow++) {
                const size_t o = ((n * p.ho + oh) * p.wo + ow) * g.c + (size_t)ch;
                const int want = (ih + g.pad - oh * g.stride) * g.kernel + (iw + g.pad - ow * g.stride);
                if (p.argmax_in[o] == want) acc = acc + k_nn_get<DT>(p.in, o);
            }
        k_nn_set<DT>(p.out, i, acc);
    });
}

/* Global average: g.h = hw, g.w = 1. Forward: count = n * c outputs. */
template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_avgpool_fwd_kernel(const __grid_constant__ k_nn_pool_params p)
{
    const int hw = p.g.h, c = p.g.c;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < p.count; o += (size_t)gridDim.x * blockDim.x) {
        const size_t n = o / c;
        const int ch = (int)(o % c);
        float acc = 0.0f;
        for (int i = 0; i < hw; i++) acc = acc + k_nn_get<DT>(p.in, (n * hw + i) * c + (size_t)ch);
        k_nn_set<DT>(p.out, o, acc / (float)hw);
    }
}

template <int DT>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_avgpool_bwd_kernel(const __grid_constant__ k_nn_pool_params p)
{
    const int hw = p.g.h, c = p.g.c;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / ((size_t)hw * c);
        const int ch = (int)(i % c);
        k_nn_set<DT>(p.out, i, k_nn_get<DT>(p.in, n * c + (size_t)ch) / (float)hw);
    }
}

/* ---- relu, add ------------------------------------------------------------------ */

struct k_nn_elem_params {
    const unsigned char *a, *b;
    unsigned char *out;
    size_t count, vecs;
};

/* OP 0: relu(a); 1: relu_grad(a = y, b = dy); 2: a + b; 3: relu(a + b). */
template <int DT, int OP> __device__ __forceinline__ float k_nn_elem_op(float a, float b)
{
    if constexpr (OP == 0)
        return k_train_relu_pos_zero(a);
    else if constexpr (OP == 1)
        return k_train_relu_grad(a, b);
    else
        return k_nn_add(a, b, OP == 3);
}

/* vecs 16-byte vectors first (vecs = 0 unless every pointer is 16-byte
 * aligned), then the elements after them one by one. */
template <int DT, int OP>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_nn_elem_kernel(const __grid_constant__ k_nn_elem_params p)
{
    constexpr int S = k_dtype_bytes<DT>::value, V = 16 / S;
    const size_t stride = (size_t)gridDim.x * blockDim.x, tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t j = tid; j < p.vecs; j += stride) {
        k_vec av, bv = {}, out = {};
        k_vec_load<16>(av, p.a + j * 16);
        if (OP != 0) k_vec_load<16>(bv, p.b + j * 16);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float b = OP != 0 ? k_nn_load((uint32_t)k_vec_get<S>(bv, k), DT) : 0.0f;
            k_vec_set<S>(out, k, k_nn_store(k_nn_elem_op<DT, OP>(k_nn_load((uint32_t)k_vec_get<S>(av, k), DT), b), DT));
        }
        k_vec_store<16>(p.out + j * 16, out);
    }
    for (size_t i = p.vecs * V + tid; i < p.count; i += stride) {
        const float b = OP != 0 ? k_nn_get<DT>(p.b, i) : 0.0f;
        k_nn_set<DT>(p.out, i, k_nn_elem_op<DT, OP>(k_nn_get<DT>(p.a, i), b));
    }
}

/* ---- launching ------------------------------------------------------------------ */

template <typename P> cudaError_t k_nn_launch(void (*kernel)(P), dim3 grid, const P &params, cudaStream_t stream)
{
    void *args[] = {(void *)&params};
    return cudaLaunchKernel((const void *)kernel, grid, dim3(K_CUDA_THREADS), args, 0, stream);
}

/* A grid-stride launch over `work` threads' worth of items. */
template <typename P> cudaError_t k_nn_launch_flat(void (*kernel)(P), size_t work, const P &params, cudaStream_t stream)
{
    unsigned blocks;
    cudaError_t err = k_cuda_blocks(work, &blocks);
    return err != cudaSuccess ? err : k_cuda_launch(kernel, blocks, params, stream);
}

/* The index of a dtype in the kernels' tables (f32, f16, bf16). */
int k_nn_dt_index(k_dtype_t dtype) { return dtype == K_DTYPE_F16 ? 1 : dtype == K_DTYPE_BF16 ? 2 : 0; }

typedef void (*k_nn_bn_fn)(k_nn_bn_params);
typedef void (*k_nn_pool_fn)(k_nn_pool_params);
typedef void (*k_nn_elem_fn)(k_nn_elem_params);

#define K_NN_BY_DT(kernel, ...)                                                                                     \
    {                                                                                                               \
        kernel<K_DTYPE_F32, ##__VA_ARGS__>, kernel<K_DTYPE_F16, ##__VA_ARGS__>, kernel<K_DTYPE_BF16, ##__VA_ARGS__> \
    }

const k_nn_bn_fn k_nn_stats_fns[3] = K_NN_BY_DT(k_nn_bn_stats_kernel);
const k_nn_bn_fn k_nn_apply_fns[4][3] = {
    K_NN_BY_DT(k_nn_bn_apply_kernel, false, false),
    K_NN_BY_DT(k_nn_bn_apply_kernel, false, true),
    K_NN_BY_DT(k_nn_bn_apply_kernel, true, false),
    K_NN_BY_DT(k_nn_bn_apply_kernel, true, true),
};
const k_nn_bn_fn k_nn_apply_vec_fns[4][3] = {
    K_NN_BY_DT(k_nn_bn_apply_vec_kernel, false, false),
    K_NN_BY_DT(k_nn_bn_apply_vec_kernel, false, true),
    K_NN_BY_DT(k_nn_bn_apply_vec_kernel, true, false),
    K_NN_BY_DT(k_nn_bn_apply_vec_kernel, true, true),
};
const k_nn_bn_fn k_nn_bwd_stats_fns[3][3] = {
    K_NN_BY_DT(k_nn_bn_bwd_stats_kernel, false, false),
    K_NN_BY_DT(k_nn_bn_bwd_stats_kernel, true, false),
    K_NN_BY_DT(k_nn_bn_bwd_stats_kernel, true, true),
};
const k_nn_bn_fn k_nn_bwd_merge_fns[3] = {k_nn_bn_bwd_merge_kernel<K_DTYPE_F32>, k_nn_bn_bwd_merge_kernel<K_DTYPE_F16>,
                                          k_nn_bn_bwd_merge_kernel<K_DTYPE_BF16>};
const k_nn_bn_fn k_nn_dx_fns[2][3] = {K_NN_BY_DT(k_nn_bn_dx_kernel, false), K_NN_BY_DT(k_nn_bn_dx_kernel, true)};
const k_nn_bn_fn k_nn_dx_vec_fns[2][3] = {K_NN_BY_DT(k_nn_bn_dx_vec_kernel, false),
                                          K_NN_BY_DT(k_nn_bn_dx_vec_kernel, true)};
const k_nn_pool_fn k_nn_maxpool_fwd_fns[3] = K_NN_BY_DT(k_nn_maxpool_fwd_kernel);
const k_nn_pool_fn k_nn_maxpool_bwd_fns[3] = K_NN_BY_DT(k_nn_maxpool_bwd_kernel);
const k_nn_pool_fn k_nn_avgpool_fwd_fns[3] = K_NN_BY_DT(k_nn_avgpool_fwd_kernel);
const k_nn_pool_fn k_nn_avgpool_bwd_fns[3] = K_NN_BY_DT(k_nn_avgpool_bwd_kernel);
const k_nn_elem_fn k_nn_elem_fns[4][3] = {
    K_NN_BY_DT(k_nn_elem_kernel, 0),
    K_NN_BY_DT(k_nn_elem_kernel, 1),
    K_NN_BY_DT(k_nn_elem_kernel, 2),
    K_NN_BY_DT(k_nn_elem_kernel, 3),
};

/* Shared checks of the batch-norm entry points: dtype, shape, alignment,
 * and the grid limits of the stats kernels. */
bool k_nn_bn_ok(const void *out, const void *x, const void *res, k_dtype_t dtype, size_t rows, int c,
                const void *workspace)
{
    return k_nn_dtype_ok(dtype) && out && x && workspace && rows >= 1 && c >= 1 && k_nn_aligned(out, dtype) &&
           k_nn_aligned(x, dtype) && k_nn_aligned(res, dtype) && ((uintptr_t)workspace % 8) == 0 &&
           k_nn_chunks(rows) <= 0x7FFFFFFFu && (c + K_NN_BN_CGROUP - 1) / K_NN_BN_CGROUP <= 65535;
}

dim3 k_nn_stats_grid(size_t rows, int c)
{
    return dim3((unsigned)k_nn_chunks(rows), (unsigned)((c + K_NN_BN_CGROUP - 1) / K_NN_BN_CGROUP));
}

/* Rows of an element-wise pass: 32 threads per row. */
size_t k_nn_row_work(size_t rows) { return rows * k_warp; }

/* Elements per 16-byte vector of dtype. */
size_t k_nn_vec_elems(k_dtype_t dtype) { return 16 / k_dtype_size(dtype); }

/* Every non-NULL pointer of ptrs 16-byte aligned. */
bool k_nn_vec_aligned(const void *const *ptrs, int n)
{
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ptrs[i] % 16) return false;
    return true;
}

/* The element-wise pass of a batch-norm call: 16-byte vectors where c and
 * the pointers allow, else a warp over 32 channels of a row. */
cudaError_t k_nn_bn_launch_rows(const k_nn_bn_fn *vec_fns, const k_nn_bn_fn *fns, int dt, k_dtype_t dtype,
                                const void *const *ptrs, int n, const k_nn_bn_params &p, cudaStream_t s)
{
    const size_t V = k_nn_vec_elems(dtype);
    if ((size_t)p.c % V == 0 && k_nn_vec_aligned(ptrs, n))
        return k_nn_launch_flat(vec_fns[dt], p.rows * ((size_t)p.c / V), p, s);
    return k_nn_launch_flat(fns[dt], k_nn_row_work(p.rows), p, s);
}

} /* namespace */

extern "C" {

int k_cuda_bn_forward_train(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c,
                            const float *gamma, const float *beta, float *running_mean, float *running_var,
                            float momentum, float epsilon, int relu, float *save_mean, float *save_invstd,
                            void *workspace, void *stream)
{
    if (!k_nn_bn_ok(y, x, residual, dtype, rows, c, workspace) || rows < 2 || !gamma || !beta || !running_mean ||
        !running_var || !save_mean || !save_invstd || !(epsilon > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return K_CUDA_ERR_INVALID_VALUE;
    cudaStream_t s = (cudaStream_t)stream;
    const int dt = k_nn_dt_index(dtype);
    k_nn_bn_params p = {};
    p.x = (const unsigned char *)x;
    p.res = (const unsigned char *)residual;
    p.out = (unsigned char *)y;
    p.rows = rows, p.chunks = k_nn_chunks(rows), p.c = c;
    p.gamma = gamma, p.beta = beta, p.mean = save_mean;
    p.running_mean = running_mean, p.running_var = running_var;
    p.save_mean = save_mean, p.save_invstd = save_invstd;
    p.ws = (float *)workspace;
    p.consts = p.ws + 3 * p.chunks * (size_t)c;
    p.momentum = momentum, p.epsilon = epsilon;
    cudaError_t err = k_nn_launch(k_nn_stats_fns[dt], k_nn_stats_grid(rows, c), p, s);
    if (err == cudaSuccess) err = k_nn_launch(k_nn_bn_merge_kernel, dim3((unsigned)c), p, s);
    const int variant = (residual != NULL) * 2 + (relu != 0);
    const void *const ptrs[3] = {x, y, residual};
    if (err == cudaSuccess)
        err = k_nn_bn_launch_rows(k_nn_apply_vec_fns[variant], k_nn_apply_fns[variant], dt, dtype, ptrs, 3, p, s);
    return (int)err;
}

int k_cuda_bn_forward_infer(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c,
                            const float *gamma, const float *beta, const float *running_mean, const float *running_var,
                            float epsilon, int relu, void *workspace, void *stream)
{
    if (!k_nn_bn_ok(y, x, residual, dtype, rows, c, workspace) || !gamma || !beta || !running_mean || !running_var ||
        !(epsilon > 0.0f))
        return K_CUDA_ERR_INVALID_VALUE;
    cudaStream_t s = (cudaStream_t)stream;
    k_nn_bn_params p = {};
    p.x = (const unsigned char *)x;
    p.res = (const unsigned char *)residual;
    p.out = (unsigned char *)y;
    p.rows = rows, p.chunks = k_nn_chunks(rows), p.c = c;
    p.gamma = gamma, p.beta = beta, p.mean = running_mean;
    p.running_var = (float *)running_var; /* read only */
    p.consts = (float *)workspace;
    p.epsilon = epsilon;
    cudaError_t err =
        k_nn_launch(k_nn_bn_infer_prep_kernel, dim3((unsigned)((c + K_CUDA_THREADS - 1) / K_CUDA_THREADS)), p, s);
    const int variant = (residual != NULL) * 2 + (relu != 0);
    const void *const ptrs[3] = {x, y, residual};
    if (err == cudaSuccess)
        err = k_nn_bn_launch_rows(k_nn_apply_vec_fns[variant], k_nn_apply_fns[variant], k_nn_dt_index(dtype), dtype,
                                  ptrs, 3, p, s);
    return (int)err;
}

int k_cuda_bn_backward(void *dx, void *dresidual, const void *x, const void *dy, const void *y, k_dtype_t dtype,
                       size_t rows, int c, const float *gamma, const float *save_mean, const float *save_invstd,
                       void *dgamma, void *dbeta, k_dtype_t grad_dtype, void *workspace, void *stream)
{
    if (!k_nn_bn_ok(dx, x, NULL, dtype, rows, c, workspace) || !dy || !k_nn_aligned(dy, dtype) ||
        !k_nn_aligned(y, dtype) || !k_nn_aligned(dresidual, dtype) || (dresidual && !y) ||
        (dresidual && dresidual == dx) || !gamma || !save_mean || !save_invstd || !dgamma || !dbeta ||
        !k_nn_dtype_ok(grad_dtype) || !k_nn_aligned(dgamma, grad_dtype) || !k_nn_aligned(dbeta, grad_dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    cudaStream_t s = (cudaStream_t)stream;
    const int dt = k_nn_dt_index(dtype);
    k_nn_bn_params p = {};
    p.x = (const unsigned char *)x;
    p.dy = (const unsigned char *)dy;
    p.y = (const unsigned char *)y;
    p.out = (unsigned char *)dx;
    p.dres = (unsigned char *)dresidual;
    p.rows = rows, p.chunks = k_nn_chunks(rows), p.c = c;
    p.gamma = gamma, p.mean = save_mean, p.invstd_or_scale = save_invstd;
    p.ws = (float *)workspace;
    p.consts = p.ws + 3 * p.chunks * (size_t)c;
    p.dgamma = (unsigned char *)dgamma, p.dbeta = (unsigned char *)dbeta;
    const int variant = y == NULL ? 0 : dresidual == NULL ? 1 : 2;
    cudaError_t err = k_nn_launch(k_nn_bwd_stats_fns[variant][dt], k_nn_stats_grid(rows, c), p, s);
    if (err == cudaSuccess) err = k_nn_launch(k_nn_bwd_merge_fns[k_nn_dt_index(grad_dtype)], dim3((unsigned)c), p, s);
    const void *const ptrs[4] = {dx, x, dy, y};
    if (err == cudaSuccess)
        err = k_nn_bn_launch_rows(k_nn_dx_vec_fns[y != NULL], k_nn_dx_fns[y != NULL], dt, dtype, ptrs, 4, p, s);
    return (int)err;
}

int k_cuda_maxpool_forward(void *y, uint8_t *argmax, const void *x, k_dtype_t dtype, const k_cuda_pool_t *pool,
                           void *stream)
{
    int ho, wo;
    if (!k_nn_dtype_ok(dtype) || !y || !argmax || !x || !k_nn_pool_ok(pool, &ho, &wo) || !k_nn_aligned(y, dtype) ||
        !k_nn_aligned(x, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    k_nn_pool_params p = {};
    p.in = (const unsigned char *)x, p.out = (unsigned char *)y, p.argmax_out = argmax;
    p.g = *pool, p.ho = ho, p.wo = wo;
    p.count = (size_t)pool->n * ho * wo * pool->c;
    return (int)k_nn_launch_flat(k_nn_maxpool_fwd_fns[k_nn_dt_index(dtype)], p.count, p, (cudaStream_t)stream);
}

int k_cuda_maxpool_backward(void *dx, const void *dy, const uint8_t *argmax, k_dtype_t dtype, const k_cuda_pool_t *pool,
                            void *stream)
{
    int ho, wo;
    if (!k_nn_dtype_ok(dtype) || !dx || !argmax || !dy || !k_nn_pool_ok(pool, &ho, &wo) || !k_nn_aligned(dx, dtype) ||
        !k_nn_aligned(dy, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    k_nn_pool_params p = {};
    p.in = (const unsigned char *)dy, p.out = (unsigned char *)dx, p.argmax_in = argmax;
    p.g = *pool, p.ho = ho, p.wo = wo;
    p.count = (size_t)pool->n * pool->h * pool->w * pool->c;
    return (int)k_nn_launch_flat(k_nn_maxpool_bwd_fns[k_nn_dt_index(dtype)], p.count, p, (cudaStream_t)stream);
}

static int k_nn_avgpool(const k_nn_pool_fn *fns, void *out, const void *in, k_dtype_t dtype, int n, int hw, int c,
                        int forward, void *stream)
{
    if (!k_nn_dtype_ok(dtype) || !out || !in || n < 1 || hw < 1 || c < 1 || !k_nn_aligned(out, dtype) ||
        !k_nn_aligned(in, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    k_nn_pool_params p = {};
    p.in = (const unsigned char *)in, p.out = (unsigned char *)out;
    p.g.n = n, p.g.h = hw, p.g.w = 1, p.g.c = c;
    p.count = (size_t)n * c * (forward ? 1 : (size_t)hw);
    return (int)k_nn_launch_flat(fns[k_nn_dt_index(dtype)], p.count, p, (cudaStream_t)stream);
}

int k_cuda_avgpool_forward(void *y, const void *x, k_dtype_t dtype, int n, int hw, int c, void *stream)
{
    return k_nn_avgpool(k_nn_avgpool_fwd_fns, y, x, dtype, n, hw, c, 1, stream);
}

int k_cuda_avgpool_backward(void *dx, const void *dy, k_dtype_t dtype, int n, int hw, int c, void *stream)
{
    return k_nn_avgpool(k_nn_avgpool_bwd_fns, dx, dy, dtype, n, hw, c, 0, stream);
}

static int k_nn_elem(int op, void *out, const void *a, const void *b, k_dtype_t dtype, size_t count, void *stream)
{
    if (!k_nn_dtype_ok(dtype) || (count && (!out || !a || (op && !b))) || !k_nn_aligned(out, dtype) ||
        !k_nn_aligned(a, dtype) || !k_nn_aligned(b, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    if (count == 0) return 0;
    const void *const ptrs[3] = {out, a, b};
    const size_t V = k_nn_vec_elems(dtype);
    k_nn_elem_params p = {(const unsigned char *)a, (const unsigned char *)b, (unsigned char *)out, count,
                          k_nn_vec_aligned(ptrs, 3) ? count / V : 0};
    const size_t work = p.vecs + (count - p.vecs * V); /* threads' worth: vectors, then the elements left */
    return (int)k_nn_launch_flat(k_nn_elem_fns[op][k_nn_dt_index(dtype)], work, p, (cudaStream_t)stream);
}

int k_cuda_relu_forward(void *y, const void *x, k_dtype_t dtype, size_t count, void *stream)
{
    return k_nn_elem(0, y, x, NULL, dtype, count, stream);
}

int k_cuda_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count, void *stream)
{
    return k_nn_elem(1, dx, y, dy, dtype, count, stream);
}

int k_cuda_add_forward(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu, void *stream)
{
    return k_nn_elem(relu ? 3 : 2, y, a, b, dtype, count, stream);
}

} /* extern "C" */
