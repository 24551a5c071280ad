/*
 * ref_ops.h - reference operations the tests compare against, in double,
 * written once. Header-only (static inline, libm).
 *
 * test_ref_xent_row: softmax cross-entropy of one row of k logits with
 * label smoothing s, in the order of operations of kernels/cpu's
 * k_softmax_xent, the cpu backend's loss (so the two agree to the last bit
 * or two of a double):
 *   lse = max + log(sum exp(z - max)),
 *   loss = (1 - s) (lse - z[label]) + s (lse - mean z),
 *   g[j] = (exp(z[j] - lse) - (s / k + (j == label) (1 - s))) / n * grad_scale,
 * n the batch the mean loss is over. loss may be NULL. Used by
 * tests/trainer/ops/ops_mixed_eltwise.c (the cpu backend in bf16; the CUDA
 * step kernel's twin is checked against k_softmax_xent itself).
 */
#ifndef HORA_TEST_REF_OPS_H
#define HORA_TEST_REF_OPS_H

#include <math.h>

static inline void test_ref_xent_row(const float *z, int k, int label, float smoothing, int n, float grad_scale,
                                     double *g, double *loss)
{
    double max = z[0];
    for (int j = 1; j < k; j++)
        if (z[j] > max) max = z[j];
    double sum = 0.0, sum_z = 0.0;
    for (int j = 0; j < k; j++) {
        sum += exp((double)z[j] - max);
        sum_z += z[j];
    }
    double lse = max + log(sum), s = smoothing;
    if (loss != NULL) *loss = (1.0 - s) * (lse - z[label]) + s * (lse - sum_z / k);
    for (int j = 0; j < k; j++) {
        double target = s / k + (j == label ? 1.0 - s : 0.0);
        g[j] = (exp((double)z[j] - lse) - target) / n * (double)grad_scale;
    }
}

#endif
