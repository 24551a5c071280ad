/*
 * k_nn.h - the per-element arithmetic of the layer kernels of k_nn.cu
 * (k_cuda_nn.h: batch norm, pooling, relu, add), shared with their CPU
 * twins in k_nn_twin.c: every function is K_HD (k_numeric.h), so a kernel and
 * its twin run the very same lines, and the fixed blocked order of the
 * batch-norm reductions (below) is written down once, here, for both.
 *
 * Private to kernels/cuda. Activations are f32, f16 or bf16 (raw bits in a
 * uint32_t, k_numeric.h's conversions), widened exactly to fp32; each
 * operation below is one IEEE fp32 (or, where it says so, fp64) operation,
 * no FMA (-ffp-contract=off in the twin, -fmad=false in the kernels).
 *
 * Batch-norm reductions over the m = rows values of a channel (NHWC: a
 * row is one (n, h, w) position, C values apart):
 *  - rows are cut into chunks of K_NN_BN_CHUNK consecutive rows; chunk k
 *    covers rows [k * CHUNK, min((k + 1) * CHUNK, rows));
 *  - within a chunk, row lane l (0 .. K_NN_BN_LANES - 1) takes the rows
 *    k * CHUNK + l + K_NN_BN_LANES * i, i = 0, 1, ..., in order, summing
 *    in fp32 from +0; the lanes' partials are folded by k_nn_tree_f32
 *    (lane l += lane l + s for s = LANES / 2 .. 1), lane 0 is the chunk's;
 *  - forward: the chunk's mean mc = sum / count (fp32), then the same
 *    lanes and tree give D = sum (x - mc) and Q = sum (x - mc)^2 (fp32,
 *    d = x - mc rounded once, then d * d): the corrected two-pass
 *    statistics of the chunk from one read of x (the values stay in
 *    registers); in double its mean is mc + D / count and its M2
 *    Q - D^2 / count (k_nn_chunk_moments), so the rounding of mc costs
 *    nothing;
 *  - the chunks are merged per channel in double: K_NN_MERGE_THREADS
 *    threads, thread t taking chunks t, t + THREADS, ... in order, then
 *    the tree of k_nn_tree over the threads; forward merges (count, mean,
 *    M2) by Chan's formula (k_nn_stat_merge), backward adds plain sums.
 */
#ifndef K_NN_H
#define K_NN_H

#include <math.h>
#include <stdint.h>

#include "k_cuda_nn.h"
#include "k_elem.h"
#include "k_train_numeric.h"

#define K_NN_BN_LANES 8                                  /* row lanes of a chunk (threadIdx.y of the stats kernels) */
#define K_NN_BN_PER_LANE 16                              /* rows per lane */
#define K_NN_BN_CHUNK (K_NN_BN_LANES * K_NN_BN_PER_LANE) /* 128 rows: K_CUDA_BN_CHUNK */
#define K_NN_BN_CGROUP 32                                /* channels per stats block (threadIdx.x, a warp) */
#define K_NN_MERGE_THREADS 256                           /* threads of a channel's merge */

/* ---- elements ------------------------------------------------------------- */

/* Raw bits of an f32 / f16 / bf16 element -> fp32 (exact) and back (round
 * to nearest even). */
K_HD float k_nn_load(uint32_t raw, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_num_f16_to_f32((uint16_t)raw);
    case K_DTYPE_BF16: return k_num_bf16_to_f32((uint16_t)raw);
    default: return k_num_f32_from_bits(raw);
    }
}

K_HD uint32_t k_nn_store(float v, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_num_f32_to_f16(v);
    case K_DTYPE_BF16: return k_num_f32_to_bf16(v);
    default: return k_num_f32_bits(v);
    }
}

/* a + b in fp32, then relu when relu: the cuda backend's relu, which
 * gives +0 for -0 as PyTorch's CUDA relu does (k_train_numeric.h has both
 * devices' relu and relu's gradient). */
K_HD float k_nn_add(float a, float b, int relu)
{
    float t = a + b;
    return relu ? k_train_relu_pos_zero(t) : t;
}

/* ---- batch norm: forward -------------------------------------------------- */

/* (x - mean) * scale + beta, scale = gamma * invstd (per channel, fp32),
 * plus the residual when there is one (has_res), then the relu when
 * relu: the pre-rounding fp32 value of y. */
K_HD float k_nn_bn_apply(float x, float mean, float scale, float beta, float res, int has_res, int relu)
{
    float t = (x - mean) * scale + beta;
    if (has_res) t = t + res;
    return relu ? k_train_relu_pos_zero(t) : t;
}

/* Chan's merge of (count, mean, M2) b into a, in double; an empty side
 * leaves the other as it is. */
K_HD void k_nn_stat_merge(double *n_a, double *mean_a, double *m2_a, double n_b, double mean_b, double m2_b)
{
    if (n_b == 0.0) return;
    if (*n_a == 0.0) {
        *n_a = n_b, *mean_a = mean_b, *m2_a = m2_b;
        return;
    }
    double n = *n_a + n_b;
    double delta = mean_b - *mean_a;
    *mean_a = *mean_a + delta * (n_b / n);
    *m2_a = *m2_a + m2_b + delta * delta * (*n_a * n_b / n);
    *n_a = n;
}

/* A chunk's mean and M2 in double from its fp32 (mc, D, Q), see above. */
K_HD void k_nn_chunk_moments(float mc, float d_sum, float q_sum, int count, double *mean, double *m2)
{
    double d = d_sum;
    *mean = (double)mc + d / count;
    *m2 = (double)q_sum - d * d / count;
}

/* Rows in chunk k of rows. */
K_HD int k_nn_chunk_count(size_t rows, size_t k)
{
    size_t start = k * K_NN_BN_CHUNK;
    size_t left = rows - start;
    return left < K_NN_BN_CHUNK ? (int)left : K_NN_BN_CHUNK;
}

/* What the forward's merge ends with, per channel: the batch mean and
 * biased variance (m values, m >= 2) from the merged double statistics;
 * invstd = 1 / sqrt(var + epsilon) in double, each rounded once to fp32;
 * scale = gamma * invstd (fp32); the running statistics updated as the cpu
 * backend does (k_train_bn_running: in double from the fp32 mean and
 * variance, variance unbiased by m / (m - 1), stored as floats). */
typedef struct {
    float mean, invstd, scale, running_mean, running_var;
} k_nn_bn_stats_t;

K_HD k_nn_bn_stats_t k_nn_bn_finish(double m, double mean_d, double m2_d, float gamma, float running_mean,
                                    float running_var, float momentum, float epsilon)
{
    k_nn_bn_stats_t s;
    double var_d = m2_d < 0.0 ? 0.0 : m2_d / m; /* Q - D^2 / n may round below 0; NaN stays */
    float mean = (float)mean_d, var = (float)var_d;
    s.mean = mean;
    s.invstd = (float)(1.0 / sqrt(var_d + (double)epsilon));
    s.scale = gamma * s.invstd;
    double mom = momentum, unbias = m / (m - 1.0);
    s.running_mean = k_train_bn_running(running_mean, mean, mom);
    s.running_var = k_train_bn_running(running_var, (double)var * unbias, mom);
    return s;
}

/* The inference forward's per-channel constants from the running
 * statistics: invstd = 1 / sqrt(running_var + epsilon) in double, rounded
 * to fp32; scale = gamma * invstd (fp32). */
K_HD float k_nn_bn_infer_scale(float gamma, float running_var, float epsilon)
{
    float invstd = (float)(1.0 / sqrt((double)running_var + (double)epsilon));
    return gamma * invstd;
}

/* ---- batch norm: backward --------------------------------------------------
 * g = dy (or relu_grad(y, dy) with the fused relu), xhat = (x - mean) *
 * invstd; per channel dbeta = sum g, dgamma = sum g xhat, and
 *   dx = (g - dbeta / m - xhat dgamma / m) * (gamma invstd)
 * with k1 = dbeta / m, k2 = dgamma / m (double, rounded to fp32) and
 * a = gamma * invstd (fp32). */
K_HD float k_nn_bn_xhat(float x, float mean, float invstd) { return (x - mean) * invstd; }

K_HD float k_nn_bn_dx(float g, float xhat, float k1, float k2, float a) { return (g - k1 - xhat * k2) * a; }

/* ---- pooling ------------------------------------------------------------- */

/* Max pool's running maximum over a window scanned in (kh, kw) order:
 * the first NaN wins, else the first of equal maxima (a later value
 * replaces it only when strictly larger), as PyTorch's max pool. */
K_HD int k_nn_max_takes(float best, float v, int have) { return !have || (best == best && (v > best || v != v)); }

/* Output rows/columns covering input index i (0 .. in - 1) of a pooling
 * of kernel k, stride s, pad p, out outputs: [*lo, *hi). */
K_HD void k_nn_pool_cover(int i, int k, int s, int p, int out, int *lo, int *hi)
{
    int a = i + p - k + 1; /* smallest o * s that still reaches i */
    int l = a <= 0 ? 0 : (a + s - 1) / s;
    int h = (i + p) / s + 1;
    *lo = l;
    *hi = h < out ? h : out;
}

/* ---- argument checks (host code: the kernels' entry points and the twins) ---- */

static inline int k_nn_dtype_ok(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16;
}

/* p is aligned to the size of dtype's elements (NULL passes). */
static inline int k_nn_aligned(const void *p, k_dtype_t dtype) { return ((uintptr_t)p % k_dtype_size(dtype)) == 0; }

/* Max pool geometry within k_cuda_pool_t's limits; *h_out / *w_out. */
static inline int k_nn_pool_ok(const k_cuda_pool_t *p, int *h_out, int *w_out)
{
    if (p == NULL || p->n < 1 || p->h < 1 || p->w < 1 || p->c < 1 || p->kernel < 1 || p->stride < 1 || p->pad < 0 ||
        2 * p->pad > p->kernel || p->kernel * p->kernel > 255 || p->h + 2 * p->pad < p->kernel ||
        p->w + 2 * p->pad < p->kernel)
        return 0;
    *h_out = (p->h + 2 * p->pad - p->kernel) / p->stride + 1;
    *w_out = (p->w + 2 * p->pad - p->kernel) / p->stride + 1;
    return 1;
}

/* Chunks of rows. */
static inline size_t k_nn_chunks(size_t rows) { return (rows + K_NN_BN_CHUNK - 1) / K_NN_BN_CHUNK; }

#endif /* K_NN_H */
