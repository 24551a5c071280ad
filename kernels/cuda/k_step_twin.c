/*
 * k_step_twin.c - the CPU twins of the training-step kernels (k_twin_* of
 * k_cuda_step.h): every element computed by the k_step.h / k_elem.h
 * functions the kernels of k_step.cu call, in the kernels' order, one
 * element at a time (softmax cross-entropy replays the 32 lanes of a warp
 * and their butterfly). tests/kernels/cuda/test_gpu_step.c compares the
 * kernels with these; tests/kernels/cuda/test_twin_step.c compares these
 * with kernels/cpu (k_nonfinite, k_unscale_nonfinite, k_sgd_step_mixed)
 * and with the trainer's formulas (softmax_xent of the cpu backend,
 * tr_aug_store of the data pipeline).
 *
 * Plain C, built into libhora-kernels-twin.a (the tests' static library)
 * with or without CUDA; slow on purpose (memcpy per element, any
 * alignment).
 */
#include "k_cuda_step.h"
#include "k_step.h"

static uint64_t k_step_twin_load(const unsigned char *p, size_t size)
{
    if (size == 2) {
        uint16_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static void k_step_twin_store(unsigned char *p, size_t size, uint64_t raw)
{
    if (size == 2) {
        uint16_t v = (uint16_t)raw;
        memcpy(p, &v, sizeof(v));
    } else if (size == 4) {
        uint32_t v = (uint32_t)raw;
        memcpy(p, &v, sizeof(v));
    } else {
        memcpy(p, &raw, sizeof(raw));
    }
}

static int k_step_twin_half_or_f32(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16;
}

/* ---- softmax cross-entropy ----------------------------------------------------------- */

/* The butterfly of k_step.cu's warp reduction over lanes[0..LANES): after
 * it every lane holds the total; lane 0's is the row's. */
static double k_step_twin_fold(double *lanes, int is_max)
{
    double next[K_STEP_XENT_LANES];
    for (int o = K_STEP_XENT_LANES / 2; o >= 1; o /= 2) {
        for (int l = 0; l < K_STEP_XENT_LANES; l++)
            next[l] = is_max ? k_train_xent_max(lanes[l], lanes[l ^ o]) : lanes[l] + lanes[l ^ o];
        memcpy(lanes, next, sizeof(next));
    }
    return lanes[0];
}

int k_twin_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                        float grad_scale, float *loss, void *dlogits, k_dtype_t dlogits_dtype, int32_t *label_error)
{
    if (n < 1 || k < 1 || !(label_smoothing >= 0.0f && label_smoothing <= 1.0f) ||
        !(grad_scale > 0.0f && isfinite(grad_scale)) || !k_step_twin_half_or_f32(dlogits_dtype) || !logits || !labels ||
        !loss || !dlogits || !label_error)
        return K_CUDA_ERR_INVALID_VALUE;
    const double s = label_smoothing, scale = grad_scale;
    const size_t out_size = k_dtype_size(dlogits_dtype);
    unsigned char *out = dlogits;
    const uint64_t nan_out = k_elem_from_f64(NAN, dlogits_dtype);
    /* The row kernel (one warp per row) and the loss kernel (the rows'
     * losses added in row order, the first bad label) in one sweep. */
    double total = 0.0;
    int32_t bad = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        unsigned char *g = out + (size_t)i * k * out_size;
        const int32_t label = labels[i];
        if (label < 0 || label >= k) {
            for (int j = 0; j < k; j++) k_step_twin_store(g + (size_t)j * out_size, out_size, nan_out);
            total += NAN;
            if (!bad) bad = i + 1;
            continue;
        }
        double lanes[K_STEP_XENT_LANES], lanes_z[K_STEP_XENT_LANES];
        for (int l = 0; l < K_STEP_XENT_LANES; l++) {
            double m = -INFINITY;
            for (int j = l; j < k; j += K_STEP_XENT_LANES) m = k_train_xent_max(m, z[j]);
            lanes[l] = m;
        }
        const double max = k_step_twin_fold(lanes, 1);
        for (int l = 0; l < K_STEP_XENT_LANES; l++) {
            double sum = 0.0, sum_z = 0.0;
            for (int j = l; j < k; j += K_STEP_XENT_LANES) {
                sum += k_train_xent_exp_term(z[j], max);
                sum_z += z[j];
            }
            lanes[l] = sum;
            lanes_z[l] = sum_z;
        }
        const double sum = k_step_twin_fold(lanes, 0), sum_z = k_step_twin_fold(lanes_z, 0);
        const double lse = k_train_xent_lse(max, sum);
        const double s_k = s / k;
        total += k_train_xent_row_loss(lse, z[label], sum_z, k, s);
        for (int j = 0; j < k; j++)
            k_step_twin_store(
                g + (size_t)j * out_size, out_size,
                k_elem_from_f64(k_train_xent_grad(z[j], lse, j == label, s_k, s, n, scale), dlogits_dtype));
    }
    *loss = (float)(total / n);
    *label_error = bad;
    return 0;
}

/* ---- input step ----------------------------------------------------------------------- */

int k_twin_input_normalize(void *dst, k_dtype_t dst_dtype, int dst_channels, const uint8_t *src, int src_channels,
                           size_t pixel_count, const float *mean, const float *std)
{
    if (!k_step_twin_half_or_f32(dst_dtype) || src_channels < 1 || dst_channels < src_channels ||
        dst_channels > K_CUDA_INPUT_MAX_CHANNELS)
        return K_CUDA_ERR_INVALID_VALUE;
    if (pixel_count == 0) return 0;
    if (!dst || !src || !mean || !std) return K_CUDA_ERR_INVALID_VALUE;
    unsigned char *d = dst;
    const size_t size = dst_dtype == K_DTYPE_F32 ? 4 : 2;
    for (size_t p = 0; p < pixel_count; p++)
        for (int c = 0; c < dst_channels; c++) {
            uint64_t raw = 0; /* +0: the padding */
            if (c < src_channels)
                raw = k_elem_from_f32(k_step_input_value(src[p * (size_t)src_channels + (size_t)c], mean[c], std[c]),
                                      dst_dtype);
            k_step_twin_store(d + (p * (size_t)dst_channels + (size_t)c) * size, size, raw);
        }
    return 0;
}

/* ---- finite check and unscale ----------------------------------------------------------- */

int k_twin_nonfinite(const void *src, k_dtype_t dtype, size_t count, int32_t *flag)
{
    if ((unsigned)dtype >= K_DTYPE_COUNT) return K_CUDA_ERR_INVALID_VALUE;
    if (count == 0 || !(k_step_twin_half_or_f32(dtype) || dtype == K_DTYPE_F64)) return 0;
    if (!src || !flag) return K_CUDA_ERR_INVALID_VALUE;
    const size_t size = k_dtype_size(dtype);
    const unsigned char *s = src;
    int hit = 0;
    for (size_t i = 0; i < count; i++) hit |= k_step_nonfinite_raw(k_step_twin_load(s + i * size, size), dtype);
    if (hit) *flag = 1;
    return 0;
}

int k_twin_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor, int32_t *flag)
{
    if (!k_step_twin_half_or_f32(dtype)) return K_CUDA_ERR_INVALID_VALUE;
    if (count == 0) return 0;
    if (!dst || !src || !flag) return K_CUDA_ERR_INVALID_VALUE;
    const size_t size = k_dtype_size(dtype);
    const unsigned char *s = src;
    unsigned char *d = dst;
    int hit = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t raw = k_step_twin_load(s + i * size, size), out;
        hit |= k_step_nonfinite_raw(raw, dtype);
        switch (dtype) {
        case K_DTYPE_F16: out = k_elem_f16_scale(raw, factor, 0.0); break;
        case K_DTYPE_BF16: out = k_elem_bf16_scale(raw, factor, 0.0); break;
        default: out = k_elem_f32_scale(raw, factor, 0.0); break;
        }
        k_step_twin_store(d + i * size, size, out);
    }
    if (hit) *flag = 1;
    return 0;
}

/* ---- SGD step ------------------------------------------------------------------------------ */

int k_twin_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad, k_dtype_t grad_dtype,
                          float grad_scale, float *momentum_buf, size_t count, float lr, float momentum,
                          float weight_decay, int nesterov)
{
    if (!k_step_twin_half_or_f32(grad_dtype) || (param_lp && !k_step_twin_half_or_f32(lp_dtype)))
        return K_CUDA_ERR_INVALID_VALUE;
    if (count == 0) return 0;
    if (!param || !grad || (momentum != 0.0f && !momentum_buf)) return K_CUDA_ERR_INVALID_VALUE;
    const k_step_sgd_t a = {lr, momentum, weight_decay, grad_scale, nesterov != 0};
    const size_t grad_size = k_dtype_size(grad_dtype), lp_size = param_lp ? k_dtype_size(lp_dtype) : 0;
    const unsigned char *g = grad;
    unsigned char *lp = param_lp;
    for (size_t i = 0; i < count; i++) {
        float p, m = 0.0f;
        memcpy(&p, param + i, sizeof(p));
        if (momentum != 0.0f) memcpy(&m, momentum_buf + i, sizeof(m));
        p = k_step_sgd_elem(p, k_elem_to_f32(k_step_twin_load(g + i * grad_size, grad_size), grad_dtype), &m, a);
        memcpy(param + i, &p, sizeof(p));
        if (momentum != 0.0f) memcpy(momentum_buf + i, &m, sizeof(m));
        if (lp) k_step_twin_store(lp + i * lp_size, lp_size, k_elem_from_f32(p, lp_dtype));
    }
    return 0;
}
