/*
 * k_step.h - the per-element (and per-row) arithmetic of the training-step
 * kernels of k_step.cu (k_cuda_step.h), shared with their CPU twins in
 * k_step_twin.c: every function is K_HD (k_numeric.h), so the kernel and the
 * twin run the very same lines.
 *
 * Private to kernels/cuda. What each part reproduces:
 *  - the SGD update: kernels/cpu/k_sgd.c's k_sgd_update fed with
 *    widen(grad) * grad_scale, the same fp32 operations in the same order,
 *    one rounding each (-ffp-contract=off here, -fmad=false in the
 *    kernels), so k_twin_sgd_step_mixed gives k_sgd_step_mixed's bits;
 *  - the finite check: k_nonfinite.c's test on the exponent bits (the
 *    magnitude above the largest finite one), no floating-point operation;
 *  - the unscale: k_elem.h's k_scale elements (widen, one fp32 multiply,
 *    one rounding to the dtype), which is k_unscale_nonfinite's rounding;
 *  - the input step: trainer/data/augment.c's tr_aug_store normalisation,
 *    (v / 255.0f - mean) / std in fp32 (v / 255.0f when std is not > 0),
 *    rounded once to f16/bf16;
 *  - softmax cross-entropy: k_train_numeric.h's functions, which
 *    kernels/cpu's k_softmax_xent (the cpu backend's loss) runs too, in
 *    double (max subtracted, exp / log in double, the gradient rounded
 *    once from double), with the row sums split over
 *    K_STEP_XENT_LANES lanes (a warp) and folded by a butterfly; the twin
 *    replays the lanes in the same order, so only exp and log (CUDA's
 *    versus libm's, both within an ulp or two of the exact value in double)
 *    separate a kernel from its twin.
 */
#ifndef K_STEP_H
#define K_STEP_H

#include <math.h>
#include <stdint.h>

#include "k_elem.h"
#include "k_train_numeric.h"

/* ---- finite check ------------------------------------------------------------ */

/* 1 when the raw bits of an element of dtype (f32, f16, bf16, f64) are
 * +-inf or a NaN: the exponent all ones, i.e. the magnitude above that of
 * the largest finite value (k_nonfinite.c's test). */
K_HD int k_step_nonfinite_raw(uint64_t raw, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return (raw & 0x7FFFu) > 0x7BFFu;
    case K_DTYPE_BF16: return (raw & 0x7FFFu) > 0x7F7Fu;
    case K_DTYPE_F64: return (raw & UINT64_C(0x7FFFFFFFFFFFFFFF)) > UINT64_C(0x7FEFFFFFFFFFFFFF);
    default: return (raw & 0x7FFFFFFFu) > 0x7F7FFFFFu;
    }
}

/* ---- SGD step -------------------------------------------------------------------- */

typedef struct {
    float lr, momentum, weight_decay, grad_scale;
    int nesterov;
} k_step_sgd_t;

/* One element of k_sgd_step_mixed: g = widen(grad) * grad_scale, then
 * k_sgd_update's operations in its order (the weight-decay term only when
 * weight_decay != 0, the momentum buffer only when momentum != 0: *buf is
 * then read and written, else untouched). Returns the new parameter. */
K_HD float k_step_sgd_elem(float p, float grad, float *buf, k_step_sgd_t a)
{
    float g = grad * a.grad_scale;
    if (a.weight_decay != 0.0f) g = g + a.weight_decay * p;
    float step = g;
    if (a.momentum != 0.0f) {
        float m = a.momentum * *buf + g;
        *buf = m;
        step = a.nesterov ? g + a.momentum * m : m;
    }
    return p - a.lr * step;
}

/* ---- input step ---------------------------------------------------------------- */

/* One channel value of a uint8 pixel, normalised as tr_aug_store does it
 * (k_train_numeric.h). */
K_HD float k_step_input_value(uint32_t v, float mean, float std) { return k_train_input_value((float)v, mean, std); }

/* ---- softmax cross-entropy -------------------------------------------------------
 *
 * The arithmetic is k_train_numeric.h's (kernels/cpu's k_softmax_xent runs
 * the same functions). A row of k logits z is reduced by K_STEP_XENT_LANES
 * lanes, lane l taking j = l, l + LANES, ... in order; the lanes' partials
 * are folded by a butterfly (for o = LANES/2 .. 1: lane l combines its own
 * value with lane l ^ o's, own first) and lane 0's result is the row's (the
 * lanes' maxima start from -inf). */
#define K_STEP_XENT_LANES 32

#endif /* K_STEP_H */
