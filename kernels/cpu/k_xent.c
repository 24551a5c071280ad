/*
 * k_xent.c - k_softmax_xent (k_cpu.h), the cpu backend's loss: softmax
 * cross-entropy with label smoothing, row after row, each row's sums added
 * one element after another in double. The arithmetic is
 * k_train_numeric.h's, which the CUDA kernel and its twin run too (they add
 * a row's sums in another order: a warp's 32 lanes).
 *
 * Scalar only: n x k is a batch of logits (kilobytes), and exp / log in
 * double dominate.
 */
#include "k_internal.h"
#include "k_train_numeric.h"

static int k_xent_args_ok(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                          float grad_scale, const float *loss, const void *dlogits, k_dtype_t dlogits_dtype)
{
    return n >= 1 && k >= 1 && label_smoothing >= 0.0f && label_smoothing <= 1.0f && grad_scale > 0.0f &&
           isfinite(grad_scale) &&
           (dlogits_dtype == K_DTYPE_F32 || dlogits_dtype == K_DTYPE_F16 || dlogits_dtype == K_DTYPE_BF16) &&
           logits != NULL && labels != NULL && loss != NULL && dlogits != NULL;
}

int k_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing, float grad_scale,
                   float *loss, void *dlogits, k_dtype_t dlogits_dtype)
{
    if (!k_xent_args_ok(logits, labels, n, k, label_smoothing, grad_scale, loss, dlogits, dlogits_dtype)) return -1;
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k) return i + 1;
    const double s = label_smoothing, scale = grad_scale, s_k = s / k;
    float *out_f32 = dlogits;
    uint16_t *out_16 = dlogits;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        const int label = labels[i];
        double max = z[0];
        for (int j = 1; j < k; j++) max = k_train_xent_max(max, z[j]);
        double sum = 0.0, sum_z = 0.0;
        for (int j = 0; j < k; j++) {
            sum += k_train_xent_exp_term(z[j], max);
            sum_z += z[j];
        }
        const double lse = k_train_xent_lse(max, sum);
        total += k_train_xent_row_loss(lse, z[label], sum_z, k, s);
        for (int j = 0; j < k; j++) {
            const double g = k_train_xent_grad(z[j], lse, j == label, s_k, s, n, scale);
            const size_t at = (size_t)i * k + j;
            /* One rounding from double (through a round-to-nearest float
             * would round twice): k_cast's f64 conversions. */
            if (dlogits_dtype == K_DTYPE_F32)
                out_f32[at] = (float)g;
            else if (dlogits_dtype == K_DTYPE_F16)
                out_16[at] = k_num_f32_to_f16(k_num_f64_to_f32_round_odd(g));
            else
                out_16[at] = k_num_f32_to_bf16(k_num_f64_to_f32_round_odd(g));
        }
    }
    *loss = (float)(total / n);
    return 0;
}
