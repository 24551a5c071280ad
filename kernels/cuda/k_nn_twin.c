/*
 * k_nn_twin.c - the CPU twins of the layer kernels of k_nn.cu (k_twin_* of
 * k_cuda_nn.h): every element computed by the k_nn.h functions the kernel
 * calls, and the batch-norm reductions replayed in the kernels' blocked
 * order (chunks, row lanes, the lane tree, the merge threads and their
 * tree: k_nn.h), so that a kernel equals its twin bit for bit.
 *
 * Plain C, built into libhora-kernels-twin.a (the tests' static library)
 * whether or not CUDA is. Slow on purpose (clarity, not speed); the GPU
 * test (tests/kernels/cuda/test_gpu_nn.c) compares the kernels with these,
 * the unit test (tests/kernels/cuda/test_twin_nn.c) these with a double
 * reference.
 */
#include <stdlib.h>

#include "k_cuda_nn.h"
#include "k_nn.h"

/* Element i of an activation array. */
static float k_nn_twin_get(const void *p, k_dtype_t dtype, size_t i)
{
    if (dtype == K_DTYPE_F32) {
        uint32_t v;
        memcpy(&v, (const unsigned char *)p + 4 * i, 4);
        return k_nn_load(v, dtype);
    }
    uint16_t v;
    memcpy(&v, (const unsigned char *)p + 2 * i, 2);
    return k_nn_load(v, dtype);
}

static void k_nn_twin_put(void *p, k_dtype_t dtype, size_t i, float value)
{
    uint32_t raw = k_nn_store(value, dtype);
    if (dtype == K_DTYPE_F32) {
        memcpy((unsigned char *)p + 4 * i, &raw, 4);
    } else {
        uint16_t v = (uint16_t)raw;
        memcpy((unsigned char *)p + 2 * i, &v, 2);
    }
}

/* The lane tree of a chunk: lane l += lane l + h for h = LANES / 2 .. 1. */
static float k_nn_twin_lane_tree(float *lanes)
{
    for (int h = K_NN_BN_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) lanes[l] = lanes[l] + lanes[l + h];
    return lanes[0];
}

/* ---- batch norm ---------------------------------------------------------------- */

/* The forward's chunk statistics of channel ch in chunk k: (mc, D, Q). */
static void k_nn_twin_bn_chunk(const void *x, k_dtype_t dtype, size_t rows, int c, int ch, size_t k, float out[3])
{
    const int count = k_nn_chunk_count(rows, k);
    float v[K_NN_BN_LANES][K_NN_BN_PER_LANE];
    float s[K_NN_BN_LANES], d_sum[K_NN_BN_LANES], q_sum[K_NN_BN_LANES];
    for (int l = 0; l < K_NN_BN_LANES; l++) {
        s[l] = 0.0f;
        for (int i = 0; i < K_NN_BN_PER_LANE; i++) {
            int r = l + K_NN_BN_LANES * i;
            if (r < count) {
                v[l][i] = k_nn_twin_get(x, dtype, (k * K_NN_BN_CHUNK + (size_t)r) * (size_t)c + (size_t)ch);
                s[l] = s[l] + v[l][i];
            }
        }
    }
    const float mc = k_nn_twin_lane_tree(s) / (float)count;
    for (int l = 0; l < K_NN_BN_LANES; l++) {
        d_sum[l] = 0.0f, q_sum[l] = 0.0f;
        for (int i = 0; i < K_NN_BN_PER_LANE; i++)
            if (l + K_NN_BN_LANES * i < count) {
                float d = v[l][i] - mc;
                d_sum[l] = d_sum[l] + d;
                q_sum[l] = q_sum[l] + d * d;
            }
    }
    out[0] = mc;
    out[1] = k_nn_twin_lane_tree(d_sum);
    out[2] = k_nn_twin_lane_tree(q_sum);
}

/* The merge of channel ch's chunks (triples[k] = (mc, D, Q)) as the merge
 * kernel's threads and tree do it: (m, mean, M2) in double. */
static void k_nn_twin_bn_merge(const float (*triples)[3], size_t rows, double out[3])
{
    double n[K_NN_MERGE_THREADS], mean[K_NN_MERGE_THREADS], m2[K_NN_MERGE_THREADS];
    const size_t chunks = k_nn_chunks(rows);
    for (int t = 0; t < K_NN_MERGE_THREADS; t++) {
        n[t] = mean[t] = m2[t] = 0.0;
        for (size_t k = (size_t)t; k < chunks; k += K_NN_MERGE_THREADS) {
            int count = k_nn_chunk_count(rows, k);
            double mk, m2k;
            k_nn_chunk_moments(triples[k][0], triples[k][1], triples[k][2], count, &mk, &m2k);
            k_nn_stat_merge(&n[t], &mean[t], &m2[t], (double)count, mk, m2k);
        }
    }
    for (int h = K_NN_MERGE_THREADS / 2; h >= 1; h /= 2)
        for (int t = 0; t < h; t++) k_nn_stat_merge(&n[t], &mean[t], &m2[t], n[t + h], mean[t + h], m2[t + h]);
    out[0] = n[0], out[1] = mean[0], out[2] = m2[0];
}

/* y from x (and residual) with per-channel mean / scale / beta. */
static void k_nn_twin_bn_apply(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c,
                               const float *mean, const float *scale, const float *beta, int relu)
{
    for (size_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            size_t i = r * (size_t)c + (size_t)ch;
            float res = residual ? k_nn_twin_get(residual, dtype, i) : 0.0f;
            float v =
                k_nn_bn_apply(k_nn_twin_get(x, dtype, i), mean[ch], scale[ch], beta[ch], res, residual != NULL, relu);
            k_nn_twin_put(y, dtype, i, v);
        }
}

static int k_nn_twin_bn_args(const void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c)
{
    return k_nn_dtype_ok(dtype) && y && x && rows >= 1 && c >= 1 && k_nn_aligned(y, dtype) && k_nn_aligned(x, dtype) &&
           k_nn_aligned(residual, dtype);
}

int k_twin_bn_forward_train(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c,
                            const float *gamma, const float *beta, float *running_mean, float *running_var,
                            float momentum, float epsilon, int relu, float *save_mean, float *save_invstd)
{
    if (!k_nn_twin_bn_args(y, x, residual, dtype, rows, c) || rows < 2 || !gamma || !beta || !running_mean ||
        !running_var || !save_mean || !save_invstd || !(epsilon > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return K_CUDA_ERR_INVALID_VALUE;
    const size_t chunks = k_nn_chunks(rows);
    float(*triples)[3] = malloc(chunks * sizeof(*triples));
    float *scale = malloc((size_t)c * sizeof(float));
    if (triples == NULL || scale == NULL) {
        free(triples);
        free(scale);
        return 2; /* cudaErrorMemoryAllocation */
    }
    for (int ch = 0; ch < c; ch++) {
        for (size_t k = 0; k < chunks; k++) k_nn_twin_bn_chunk(x, dtype, rows, c, ch, k, triples[k]);
        double st[3];
        k_nn_twin_bn_merge((const float(*)[3])triples, rows, st);
        k_nn_bn_stats_t s =
            k_nn_bn_finish(st[0], st[1], st[2], gamma[ch], running_mean[ch], running_var[ch], momentum, epsilon);
        save_mean[ch] = s.mean;
        save_invstd[ch] = s.invstd;
        scale[ch] = s.scale;
        running_mean[ch] = s.running_mean;
        running_var[ch] = s.running_var;
    }
    k_nn_twin_bn_apply(y, x, residual, dtype, rows, c, save_mean, scale, beta, relu);
    free(triples);
    free(scale);
    return 0;
}

int k_twin_bn_forward_infer(void *y, const void *x, const void *residual, k_dtype_t dtype, size_t rows, int c,
                            const float *gamma, const float *beta, const float *running_mean, const float *running_var,
                            float epsilon, int relu)
{
    if (!k_nn_twin_bn_args(y, x, residual, dtype, rows, c) || !gamma || !beta || !running_mean || !running_var ||
        !(epsilon > 0.0f))
        return K_CUDA_ERR_INVALID_VALUE;
    float *scale = malloc((size_t)c * sizeof(float));
    if (scale == NULL) return 2;
    for (int ch = 0; ch < c; ch++) scale[ch] = k_nn_bn_infer_scale(gamma[ch], running_var[ch], epsilon);
    k_nn_twin_bn_apply(y, x, residual, dtype, rows, c, running_mean, scale, beta, relu);
    free(scale);
    return 0;
}

/* g of element i: dy, through the relu's mask when y is given. */
static float k_nn_twin_bn_g(const void *dy, const void *y, k_dtype_t dtype, size_t i)
{
    float d = k_nn_twin_get(dy, dtype, i);
    return y ? k_train_relu_grad(k_nn_twin_get(y, dtype, i), d) : d;
}

int k_twin_bn_backward(void *dx, void *dresidual, const void *x, const void *dy, const void *y, k_dtype_t dtype,
                       size_t rows, int c, const float *gamma, const float *save_mean, const float *save_invstd,
                       void *dgamma, void *dbeta, k_dtype_t grad_dtype)
{
    if (!k_nn_twin_bn_args(dx, x, NULL, dtype, rows, c) || !dy || !k_nn_aligned(dy, dtype) || !k_nn_aligned(y, dtype) ||
        !k_nn_aligned(dresidual, dtype) || (dresidual && !y) || (dresidual && dresidual == dx) || !gamma ||
        !save_mean || !save_invstd || !dgamma || !dbeta || !k_nn_dtype_ok(grad_dtype) ||
        !k_nn_aligned(dgamma, grad_dtype) || !k_nn_aligned(dbeta, grad_dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    const size_t chunks = k_nn_chunks(rows);
    float(*sums)[2] = malloc(chunks * sizeof(*sums));
    float *consts = malloc(3 * (size_t)c * sizeof(float)); /* k1, k2, a per channel */
    if (sums == NULL || consts == NULL) {
        free(sums);
        free(consts);
        return 2;
    }
    double acc_g[K_NN_MERGE_THREADS], acc_gx[K_NN_MERGE_THREADS];
    for (int ch = 0; ch < c; ch++) {
        const float mean = save_mean[ch], invstd = save_invstd[ch];
        for (size_t k = 0; k < chunks; k++) {
            const int count = k_nn_chunk_count(rows, k);
            float lg[K_NN_BN_LANES], lgx[K_NN_BN_LANES];
            for (int l = 0; l < K_NN_BN_LANES; l++) {
                lg[l] = 0.0f, lgx[l] = 0.0f;
                for (int i = 0; i < K_NN_BN_PER_LANE; i++) {
                    int r = l + K_NN_BN_LANES * i;
                    if (r < count) {
                        size_t e = (k * K_NN_BN_CHUNK + (size_t)r) * (size_t)c + (size_t)ch;
                        float g = k_nn_twin_bn_g(dy, y, dtype, e);
                        float xh = k_nn_bn_xhat(k_nn_twin_get(x, dtype, e), mean, invstd);
                        lg[l] = lg[l] + g;
                        lgx[l] = lgx[l] + g * xh;
                    }
                }
            }
            sums[k][0] = k_nn_twin_lane_tree(lg);
            sums[k][1] = k_nn_twin_lane_tree(lgx);
        }
        for (int t = 0; t < K_NN_MERGE_THREADS; t++) {
            acc_g[t] = acc_gx[t] = 0.0;
            for (size_t k = (size_t)t; k < chunks; k += K_NN_MERGE_THREADS) {
                acc_g[t] = acc_g[t] + (double)sums[k][0];
                acc_gx[t] = acc_gx[t] + (double)sums[k][1];
            }
        }
        for (int h = K_NN_MERGE_THREADS / 2; h >= 1; h /= 2)
            for (int t = 0; t < h; t++) {
                acc_g[t] = acc_g[t] + acc_g[t + h];
                acc_gx[t] = acc_gx[t] + acc_gx[t + h];
            }
        k_nn_twin_put(dbeta, grad_dtype, (size_t)ch, (float)acc_g[0]);
        k_nn_twin_put(dgamma, grad_dtype, (size_t)ch, (float)acc_gx[0]);
        consts[3 * ch] = (float)(acc_g[0] / (double)rows);
        consts[3 * ch + 1] = (float)(acc_gx[0] / (double)rows);
        consts[3 * ch + 2] = gamma[ch] * invstd;
    }
    for (size_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            size_t e = r * (size_t)c + (size_t)ch;
            float g = k_nn_twin_bn_g(dy, y, dtype, e);
            float xh = k_nn_bn_xhat(k_nn_twin_get(x, dtype, e), save_mean[ch], save_invstd[ch]);
            if (dresidual) k_nn_twin_put(dresidual, dtype, e, g);
            k_nn_twin_put(dx, dtype, e, k_nn_bn_dx(g, xh, consts[3 * ch], consts[3 * ch + 1], consts[3 * ch + 2]));
        }
    free(sums);
    free(consts);
    return 0;
}

/* ---- pooling ------------------------------------------------------------------- */

int k_twin_maxpool_forward(void *y, uint8_t *argmax, const void *x, k_dtype_t dtype, const k_cuda_pool_t *pool)
{
    int ho, wo;
    if (!k_nn_dtype_ok(dtype) || !y || !argmax || !x || !k_nn_pool_ok(pool, &ho, &wo) || !k_nn_aligned(y, dtype) ||
        !k_nn_aligned(x, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    const k_cuda_pool_t p = *pool;
    for (int n = 0; n < p.n; n++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++)
                for (int ch = 0; ch < p.c; ch++) {
                    float best = 0.0f;
                    int have = 0, at = 0;
                    for (int kh = 0; kh < p.kernel; kh++) {
                        int ih = oh * p.stride - p.pad + kh;
                        if (ih < 0 || ih >= p.h) continue;
                        for (int kw = 0; kw < p.kernel; kw++) {
                            int iw = ow * p.stride - p.pad + kw;
                            if (iw < 0 || iw >= p.w) continue;
                            float v = k_nn_twin_get(x, dtype, (((size_t)n * p.h + ih) * p.w + iw) * p.c + (size_t)ch);
                            if (k_nn_max_takes(best, v, have)) best = v, at = kh * p.kernel + kw, have = 1;
                        }
                    }
                    size_t o = (((size_t)n * ho + oh) * wo + ow) * p.c + (size_t)ch;
                    k_nn_twin_put(y, dtype, o, best);
                    argmax[o] = (uint8_t)at;
                }
    return 0;
}

int k_twin_maxpool_backward(void *dx, const void *dy, const uint8_t *argmax, k_dtype_t dtype, const k_cuda_pool_t *pool)
{
    int ho, wo;
    if (!k_nn_dtype_ok(dtype) || !dx || !argmax || !dy || !k_nn_pool_ok(pool, &ho, &wo) || !k_nn_aligned(dx, dtype) ||
        !k_nn_aligned(dy, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    const k_cuda_pool_t p = *pool;
    for (int n = 0; n < p.n; n++)
        for (int ih = 0; ih < p.h; ih++)
            for (int iw = 0; iw < p.w; iw++)
                for (int ch = 0; ch < p.c; ch++) {
                    int oh_lo, oh_hi, ow_lo, ow_hi;
                    k_nn_pool_cover(ih, p.kernel, p.stride, p.pad, ho, &oh_lo, &oh_hi);
                    k_nn_pool_cover(iw, p.kernel, p.stride, p.pad, wo, &ow_lo, &ow_hi);
                    float acc = 0.0f;
                    for (int oh = oh_lo; oh < oh_hi; oh++)
                        for (int ow = ow_lo; ow < ow_hi; ow++) {
                            size_t o = (((size_t)n * ho + oh) * wo + ow) * p.c + (size_t)ch;
                            int want = (ih + p.pad - oh * p.stride) * p.kernel + (iw + p.pad - ow * p.stride);
                            if (argmax[o] == want) acc = acc + k_nn_twin_get(dy, dtype, o);
                        }
                    k_nn_twin_put(dx, dtype, (((size_t)n * p.h + ih) * p.w + iw) * p.c + (size_t)ch, acc);
                }
    return 0;
}

int k_twin_avgpool_forward(void *y, const void *x, k_dtype_t dtype, int n, int hw, int c)
{
    if (!k_nn_dtype_ok(dtype) || !y || !x || n < 1 || hw < 1 || c < 1 || !k_nn_aligned(y, dtype) ||
        !k_nn_aligned(x, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    for (int s = 0; s < n; s++)
        for (int ch = 0; ch < c; ch++) {
            float acc = 0.0f;
            for (int i = 0; i < hw; i++) acc = acc + k_nn_twin_get(x, dtype, ((size_t)s * hw + i) * c + (size_t)ch);
            k_nn_twin_put(y, dtype, (size_t)s * c + (size_t)ch, acc / (float)hw);
        }
    return 0;
}

int k_twin_avgpool_backward(void *dx, const void *dy, k_dtype_t dtype, int n, int hw, int c)
{
    if (!k_nn_dtype_ok(dtype) || !dx || !dy || n < 1 || hw < 1 || c < 1 || !k_nn_aligned(dx, dtype) ||
        !k_nn_aligned(dy, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < hw; i++)
            for (int ch = 0; ch < c; ch++)
                k_nn_twin_put(dx, dtype, ((size_t)s * hw + i) * c + (size_t)ch,
                              k_nn_twin_get(dy, dtype, (size_t)s * c + (size_t)ch) / (float)hw);
    return 0;
}

/* ---- relu, add ---------------------------------------------------------------- */

int k_twin_relu_forward(void *y, const void *x, k_dtype_t dtype, size_t count)
{
    if (!k_nn_dtype_ok(dtype) || (count && (!y || !x)) || !k_nn_aligned(y, dtype) || !k_nn_aligned(x, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) k_nn_twin_put(y, dtype, i, k_train_relu_pos_zero(k_nn_twin_get(x, dtype, i)));
    return 0;
}

int k_twin_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count)
{
    if (!k_nn_dtype_ok(dtype) || (count && (!dx || !y || !dy)) || !k_nn_aligned(dx, dtype) || !k_nn_aligned(y, dtype) ||
        !k_nn_aligned(dy, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        k_nn_twin_put(dx, dtype, i, k_train_relu_grad(k_nn_twin_get(y, dtype, i), k_nn_twin_get(dy, dtype, i)));
    return 0;
}

int k_twin_add_forward(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu)
{
    if (!k_nn_dtype_ok(dtype) || (count && (!y || !a || !b)) || !k_nn_aligned(y, dtype) || !k_nn_aligned(a, dtype) ||
        !k_nn_aligned(b, dtype))
        return K_CUDA_ERR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        k_nn_twin_put(y, dtype, i, k_nn_add(k_nn_twin_get(a, dtype, i), k_nn_twin_get(b, dtype, i), relu));
    return 0;
}
