/*
 * k_train_numeric.h - the scalar arithmetic of the trainer's step, written
 * once for the host and the device: softmax cross-entropy with label
 * smoothing, per row and per element. kernels/cpu's k_softmax_xent (the
 * cpu backend's loss, k_cpu.h) and kernels/cuda's k_cuda_softmax_xent and
 * its twin (k_cuda_step.h) call these very functions; they differ only in
 * the order in which a row's sums are added (the CPU one element after
 * another, the device in a warp's 32 lanes and a butterfly).
 *
 * Every function is K_HD (k_numeric.h): `__host__ __device__ static
 * inline` under nvcc, `static inline` in C. Nothing here is exported.
 * Each operation rounds once in double (kernels/ is built with
 * -ffp-contract=off, the CUDA kernels with -fmad=false); exp and log are
 * libm's on the host and CUDA's on the device, which may differ in the
 * last bit.
 *
 * Softmax cross-entropy, PyTorch's cross_entropy(label_smoothing = s) with
 * the mean over the n rows, for a row of k logits z and its label:
 *   max   = the largest z
 *   sum   = sum_j exp((double)z_j - max),  sum_z = sum_j z_j   (double)
 *   lse   = max + log(sum)                   (log sum_j exp(z_j), no overflow)
 *   loss  = (1 - s) (lse - z_label) + s (lse - sum_z / k)
 *   g_j   = (exp((double)z_j - lse) - (s / k + [j == label] (1 - s))) / n * scale
 * The mean loss is the rows' losses added in row order in double, / n,
 * rounded to fp32; g_j is rounded once from double to the gradient's dtype.
 */
#ifndef K_TRAIN_NUMERIC_H
#define K_TRAIN_NUMERIC_H

#include <math.h>

#include "k_numeric.h"

/* The running maximum of a row (a NaN z never replaces m). */
K_HD double k_train_xent_max(double m, double z) { return z > m ? z : m; }

K_HD double k_train_xent_exp_term(float z, double max) { return exp((double)z - max); }

/* lse of the row: what the gradient needs. */
K_HD double k_train_xent_lse(double max, double sum) { return max + log(sum); }

/* The row's loss term. */
K_HD double k_train_xent_row_loss(double lse, float z_label, double sum_z, int k, double s)
{
    double nll = lse - z_label;
    double smooth = lse - sum_z / k; /* mean_j(-log p_j) */
    return (1.0 - s) * nll + s * smooth;
}

/* d loss / d z_j times scale, in double (rounded once by the caller); s_k
 * is s / k, the same for the whole row. */
K_HD double k_train_xent_grad(float z, double lse, int is_label, double s_k, double s, int n, double scale)
{
    double target = s_k + (is_label ? 1.0 - s : 0.0);
    return (exp((double)z - lse) - target) / n * scale;
}

#endif /* K_TRAIN_NUMERIC_H */
