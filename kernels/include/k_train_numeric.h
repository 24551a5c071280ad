/*
 * k_train_numeric.h - the scalar arithmetic of the trainer's step, written
 * once for the host and the device: softmax cross-entropy with label
 * smoothing, per row and per element; relu, its gradient and the
 * residual add; the input step's normalisation and batch norm's running
 * statistics. kernels/cpu's k_softmax_xent, k_relu, k_relu_backward and
 * k_add (the cpu backend's, k_cpu.h) and kernels/cuda's
 * k_cuda_softmax_xent, relu and add kernels and their twins (k_cuda_step.h,
 * k_cuda_nn.h) call these very functions. Softmax cross-entropy differs
 * only in the order in which a row's sums are added (the CPU one element
 * after another, the device in a warp's 32 lanes and a butterfly); relu
 * has one deliberate difference, below.
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

/* ---- relu, its gradient, the residual add ------------------------------------
 *
 * relu as PyTorch computes it on each device: its CPU relu is clamp_min(x,
 * 0), x < 0 ? +0 : x, so -0 and NaN pass through (k_train_relu, the cpu
 * backend's); its CUDA relu gives +0 for -0 (k_train_relu_pos_zero, the
 * cuda backend's). The two differ in the sign of a zero only. */
K_HD float k_train_relu(float x) { return x < 0.0f ? 0.0f : x; }
K_HD float k_train_relu_pos_zero(float x) { return x > 0.0f || x != x ? x : 0.0f; }

/* relu's gradient, backend.h's rule: dy where y > 0, else +0 (a NaN y
 * gives 0). */
K_HD float k_train_relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

/* The residual join: a + b in fp32, then the cpu backend's relu when relu
 * (f16 / bf16 operands widened first and the result rounded once). */
K_HD float k_train_add(float a, float b, int relu)
{
    float s = a + b;
    return relu ? k_train_relu(s) : s;
}

/* ---- the input step, batch norm's running statistics ---------------------- */

/* One channel value v (a pixel's 0..255, in fp32) normalised as the data
 * pipeline stores it, in fp32 in exactly this order (v / 255 alone when
 * std is not > 0): trainer/data's tr_aug_store, the cpu backend's input
 * (tr_tensor_normalize_u8) and k_cuda_input_normalize. */
K_HD float k_train_input_value(float v, float mean, float std)
{
    return std > 0.0f ? (v / 255.0f - mean) / std : v / 255.0f;
}

/* One running statistic of batch norm, PyTorch's update in double from the
 * batch's value (the mean, or the variance times m / (m - 1)), rounded
 * once to fp32: the cpu backend's (trainer/backends/cpu/cpu_bn.c) and the
 * cuda kernels' (k_nn.h). */
K_HD float k_train_bn_running(float running, double batch, double momentum)
{
    return (float)(momentum * batch + (1.0 - momentum) * running);
}

#endif /* K_TRAIN_NUMERIC_H */
