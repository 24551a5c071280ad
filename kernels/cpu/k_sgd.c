/*
 * k_sgd.c - k_sgd_step: one step of SGD with momentum, weight decay and
 * Nesterov (torch.optim.SGD, dampening 0) on an f32 parameter tensor. The
 * scalar loop is the reference and the tail of the AVX2 / AVX-512 loops,
 * which do the same operations in the same order, one rounding each (no
 * FMA: kernels/ builds with -ffp-contract=off and the vector code calls
 * mul and add separately), so every path gives the same bits.
 *
 * The optimizer sweeps every parameter once per step and is memory bound
 * (4 streams: param, grad and momentum in, param and momentum out); the
 * vector loops just keep the arithmetic off the critical path.
 */
/* The one-rounding promise must hold whatever the build flags: meson
 * passes -ffp-contract=off, a hand build may not, and GCC would then fuse
 * the vector loops' mul + add into FMAs. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "k_internal.h"

#if defined(__x86_64__)
#include "k_simd_avx2.h"
#include "k_simd_avx512.h"
#endif

typedef struct {
    float lr, momentum, weight_decay;
    int nesterov;
} k_sgd_args_t;

/* The update, element by element, exactly as k_cpu.h states it. PyTorch
 * skips the terms whose factor is 0 (no weight decay: g = grad, not
 * grad + 0 * param, which differs for -0 and non-finite params; no
 * momentum: no buffer at all), and so do we. */
static void k_sgd_scalar(float *param, const float *grad, float *buf, size_t count, const k_sgd_args_t *a)
{
    for (size_t i = 0; i < count; i++) {
        float g = grad[i];
        if (a->weight_decay != 0.0f)
            g = g + a->weight_decay * param[i];
        float step = g;
        if (a->momentum != 0.0f) {
            float m = a->momentum * buf[i] + g;
            buf[i] = m;
            step = a->nesterov ? g + a->momentum * m : m;
        }
        param[i] = param[i] - a->lr * step;
    }
}

#if defined(__x86_64__)

/* One template for both widths; the flags are loop-invariant branches. */
#define K_SGD_SIMD(name, attr, vec_t, lanes, load, store, set1, add, sub, mul)               \
    attr static void name(float *param, const float *grad, float *buf, size_t count,         \
                          const k_sgd_args_t *a)                                             \
    {                                                                                        \
        vec_t lr = set1(a->lr), mom = set1(a->momentum), wd = set1(a->weight_decay);         \
        int use_wd = a->weight_decay != 0.0f, use_mom = a->momentum != 0.0f;                 \
        size_t i = 0;                                                                        \
        for (; i + (lanes) <= count; i += (lanes)) {                                         \
            vec_t p = load(param + i);                                                       \
            vec_t g = load(grad + i);                                                        \
            if (use_wd)                                                                      \
                g = add(g, mul(wd, p));                                                      \
            vec_t step = g;                                                                  \
            if (use_mom) {                                                                   \
                vec_t m = add(mul(mom, load(buf + i)), g);                                   \
                store(buf + i, m);                                                           \
                step = a->nesterov ? add(g, mul(mom, m)) : m;                                \
            }                                                                                \
            store(param + i, sub(p, mul(lr, step)));                                         \
        }                                                                                    \
        k_sgd_scalar(param + i, grad + i, use_mom ? buf + i : buf, count - i, a);            \
    }

K_SGD_SIMD(k_sgd_avx2, K_AVX2, __m256, 8, k_avx2_load_ps, k_avx2_store_ps, _mm256_set1_ps,
           _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps)
K_SGD_SIMD(k_sgd_avx512, K_AVX512, __m512, 16, k_avx512_load_ps, k_avx512_store_ps, _mm512_set1_ps,
           _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps)
#endif

void k_sgd_step(float *param, const float *grad, float *momentum_buf, size_t count, float lr, float momentum,
                float weight_decay, int nesterov)
{
    k_sgd_args_t args = {lr, momentum, weight_decay, nesterov != 0};
    if (count == 0)
        return;
    switch (k_dispatch_isa()) {
#if defined(__x86_64__)
    case K_ISA_AVX512: k_sgd_avx512(param, grad, momentum_buf, count, &args); return;
    case K_ISA_AVX2: k_sgd_avx2(param, grad, momentum_buf, count, &args); return;
#endif
    default: k_sgd_scalar(param, grad, momentum_buf, count, &args); return;
    }
}
