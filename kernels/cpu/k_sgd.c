/*
 * k_sgd.c - the optimizer steps: k_sgd_step, SGD with momentum, weight decay
 * and Nesterov (torch.optim.SGD, dampening 0) on an f32 parameter tensor,
 * and k_sgd_step_mixed, the same update on fp32 master weights fed with
 * f32/f16/bf16 gradients times a scale, also writing the new weights'
 * f32/f16/bf16 copy. The scalar loops are the reference and the tails of
 * the AVX2 / AVX-512 loops, which do the same operations in the same order,
 * one rounding each (no FMA: kernels/ builds with -ffp-contract=off and the
 * vector code calls mul and add separately), so every path gives the same
 * bits. Both steps call one update (k_sgd_update and its vector twins), so
 * the mixed step with f32 gradients, scale 1 and no copy is k_sgd_step by
 * construction (g * 1 is g, bit for bit, except that it quiets a
 * signalling NaN, which the update's first multiply quiets anyway).
 *
 * The optimizer sweeps every parameter once per step and is memory bound
 * (param, grad and momentum in, param and momentum out, plus the
 * low-precision copy); the vector loops just keep the arithmetic off the
 * critical path.
 */
/* First: fp contraction off whatever the build flags (k_simd_all.h). */
#include "k_simd_all.h"

/* The mixed kernels are written once per ISA with the two dtypes as
 * parameters and instantiated for each pair with constant arguments;
 * forcing the inlining makes each instance a loop without dtype branches. */
#if defined(__GNUC__)
#define K_SGD_INLINE static inline __attribute__((always_inline))
#else
#define K_SGD_INLINE static inline
#endif

typedef struct {
    float lr, momentum, weight_decay;
    int nesterov;
} k_sgd_args_t;

/* k_sgd_step_mixed's arguments, checked. lp_dtype is K_DTYPE_COUNT when
 * there is no low-precision copy (param_lp NULL). */
typedef struct {
    float *param;
    void *param_lp;
    k_dtype_t lp_dtype;
    const void *grad;
    k_dtype_t grad_dtype;
    float grad_scale;
    float *buf; /* momentum; NULL allowed when hyper.momentum == 0 */
    k_sgd_args_t hyper;
} k_sgd_mixed_t;

/* ---- the update, one element and one vector ------------------------------ */

/* Element i, exactly as k_cpu.h states it: returns the new param, updates
 * buf[i]. PyTorch skips the terms whose factor is 0 (no weight decay:
 * g = grad, not grad + 0 * param, which differs for -0 and non-finite
 * params; no momentum: no buffer at all, so buf is not touched), and so do
 * we. The hyper-parameters come by value: the stores to param and buf
 * cannot alias a local copy, so the loops keep them in registers. */
K_SGD_INLINE float k_sgd_update(float p, float g, float *buf, size_t i, k_sgd_args_t a)
{
    if (a.weight_decay != 0.0f) g = g + a.weight_decay * p;
    float step = g;
    if (a.momentum != 0.0f) {
        float m = a.momentum * buf[i] + g;
        buf[i] = m;
        step = a.nesterov ? g + a.momentum * m : m;
    }
    return p - a.lr * step;
}

/* The same for `lanes` elements at i; lr, mom and wd are a's fields
 * broadcast. The flags are loop-invariant branches. */
#define K_SGD_VEC_UPDATE(name, attr, vec_t, load, store, add, sub, mul)                                 \
    K_SGD_INLINE attr vec_t name(vec_t p, vec_t g, float *buf, size_t i, vec_t lr, vec_t mom, vec_t wd, \
                                 k_sgd_args_t a)                                                        \
    {                                                                                                   \
        if (a.weight_decay != 0.0f) g = add(g, mul(wd, p));                                             \
        vec_t step = g;                                                                                 \
        if (a.momentum != 0.0f) {                                                                       \
            vec_t m = add(mul(mom, load(buf + i)), g);                                                  \
            store(buf + i, m);                                                                          \
            step = a.nesterov ? add(g, mul(mom, m)) : m;                                                \
        }                                                                                               \
        return sub(p, mul(lr, step));                                                                   \
    }

#if defined(__x86_64__)
K_SGD_VEC_UPDATE(k_avx2_sgd_update, K_AVX2, __m256, k_avx2_load_ps, k_avx2_store_ps, _mm256_add_ps, _mm256_sub_ps,
                 _mm256_mul_ps)
K_SGD_VEC_UPDATE(k_avx512_sgd_update, K_AVX512, __m512, k_avx512_load_ps, k_avx512_store_ps, _mm512_add_ps,
                 _mm512_sub_ps, _mm512_mul_ps)
#endif

/* ---- k_sgd_step ---------------------------------------------------------- */

/* Elements [begin, end): the reference, and the vector loops' tail. */
static void k_sgd_scalar(float *param, const float *grad, float *buf, size_t begin, size_t end, k_sgd_args_t a)
{
    for (size_t i = begin; i < end; i++) param[i] = k_sgd_update(param[i], grad[i], buf, i, a);
}

#if defined(__x86_64__)

/* One template for both widths. */
#define K_SGD_SIMD(name, attr, vec_t, lanes, load, store, set1, update)                              \
    attr static void name(float *param, const float *grad, float *buf, size_t count, k_sgd_args_t a) \
    {                                                                                                \
        vec_t lr = set1(a.lr), mom = set1(a.momentum), wd = set1(a.weight_decay);                    \
        size_t i = 0;                                                                                \
        for (; i + (lanes) <= count; i += (lanes))                                                   \
            store(param + i, update(load(param + i), load(grad + i), buf, i, lr, mom, wd, a));       \
        k_sgd_scalar(param, grad, buf, i, count, a);                                                 \
    }

K_SGD_SIMD(k_sgd_avx2, K_AVX2, __m256, 8, k_avx2_load_ps, k_avx2_store_ps, _mm256_set1_ps, k_avx2_sgd_update)
K_SGD_SIMD(k_sgd_avx512, K_AVX512, __m512, 16, k_avx512_load_ps, k_avx512_store_ps, _mm512_set1_ps, k_avx512_sgd_update)
#endif

void k_sgd_step(float *param, const float *grad, float *momentum_buf, size_t count, float lr, float momentum,
                float weight_decay, int nesterov)
{
    k_sgd_args_t args = {lr, momentum, weight_decay, nesterov != 0};
    if (count == 0) return;
    switch (k_dispatch_isa()) {
#if defined(__x86_64__)
    case K_ISA_AVX512: k_sgd_avx512(param, grad, momentum_buf, count, args); return;
    case K_ISA_AVX2: k_sgd_avx2(param, grad, momentum_buf, count, args); return;
#endif
    default: k_sgd_scalar(param, grad, momentum_buf, 0, count, args); return;
    }
}

/* ---- k_sgd_step_mixed ------------------------------------------------------
 * Per element: widen the gradient, multiply by grad_scale, k_sgd_update,
 * store the new param and (lp_dtype != K_DTYPE_COUNT) its rounded copy.
 * A body handles elements [begin, end) for one (grad, lp) dtype pair; the
 * vector bodies hand their tail to the scalar one. */

K_SGD_INLINE float k_sgd_load_grad(const void *grad, size_t i, k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_num_f16_to_f32(((const uint16_t *)grad)[i]);
    case K_DTYPE_BF16: return k_num_bf16_to_f32(((const uint16_t *)grad)[i]);
    default: return ((const float *)grad)[i];
    }
}

K_SGD_INLINE void k_sgd_store_lp(void *lp, size_t i, k_dtype_t dtype, float p)
{
    switch (dtype) {
    case K_DTYPE_F32: ((float *)lp)[i] = p; return;
    case K_DTYPE_F16: ((uint16_t *)lp)[i] = k_num_f32_to_f16(p); return;
    case K_DTYPE_BF16: ((uint16_t *)lp)[i] = k_num_f32_to_bf16(p); return;
    default: return; /* no copy */
    }
}

K_SGD_INLINE void k_sgd_mixed_scalar_body(const k_sgd_mixed_t *x, size_t begin, size_t end, k_dtype_t grad_dtype,
                                          k_dtype_t lp_dtype)
{
    float *param = x->param, *buf = x->buf;
    const void *grad = x->grad;
    void *lp = x->param_lp;
    float scale = x->grad_scale;
    k_sgd_args_t a = x->hyper;
    for (size_t i = begin; i < end; i++) {
        float p = k_sgd_update(param[i], k_sgd_load_grad(grad, i, grad_dtype) * scale, buf, i, a);
        param[i] = p;
        k_sgd_store_lp(lp, i, lp_dtype, p);
    }
}

/* name(x, begin, end): body instantiated for each of the 3 x 4 dtype pairs. */
#define K_SGD_MIXED_LP_CASES(body, x, begin, end, grad_dtype)                 \
    switch ((x)->lp_dtype) {                                                  \
    case K_DTYPE_F32: body(x, begin, end, grad_dtype, K_DTYPE_F32); return;   \
    case K_DTYPE_F16: body(x, begin, end, grad_dtype, K_DTYPE_F16); return;   \
    case K_DTYPE_BF16: body(x, begin, end, grad_dtype, K_DTYPE_BF16); return; \
    default: body(x, begin, end, grad_dtype, K_DTYPE_COUNT); return;          \
    }

#define K_SGD_MIXED_INSTANCES(name, attr, body)                                    \
    attr static void name(const k_sgd_mixed_t *x, size_t begin, size_t end)        \
    {                                                                              \
        switch (x->grad_dtype) {                                                   \
        case K_DTYPE_F16: K_SGD_MIXED_LP_CASES(body, x, begin, end, K_DTYPE_F16)   \
        case K_DTYPE_BF16: K_SGD_MIXED_LP_CASES(body, x, begin, end, K_DTYPE_BF16) \
        default: K_SGD_MIXED_LP_CASES(body, x, begin, end, K_DTYPE_F32)            \
        }                                                                          \
    }

K_SGD_MIXED_INSTANCES(k_sgd_mixed_scalar, , k_sgd_mixed_scalar_body)

#if defined(__x86_64__)

/* Loads and stores in element order, `lanes` fp32 values at a time. */
K_SGD_INLINE K_AVX2 __m256 k_avx2_sgd_load_grad(const void *grad, size_t i, k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_avx2_load_f16((const uint16_t *)grad + i);
    case K_DTYPE_BF16: return k_avx2_load_bf16((const uint16_t *)grad + i);
    default: return k_avx2_load_ps((const float *)grad + i);
    }
}

K_SGD_INLINE K_AVX2 void k_avx2_sgd_store_lp(void *lp, size_t i, k_dtype_t dtype, __m256 p)
{
    switch (dtype) {
    case K_DTYPE_F32: k_avx2_store_ps((float *)lp + i, p); return;
    case K_DTYPE_F16: k_avx2_store_f16((uint16_t *)lp + i, p); return;
    case K_DTYPE_BF16: k_avx2_store_bf16((uint16_t *)lp + i, p); return;
    default: return;
    }
}

K_SGD_INLINE K_AVX512 __m512 k_avx512_sgd_load_grad(const void *grad, size_t i, k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_avx512_load_f16((const uint16_t *)grad + i);
    case K_DTYPE_BF16: return k_avx512_load_bf16((const uint16_t *)grad + i);
    default: return k_avx512_load_ps((const float *)grad + i);
    }
}

K_SGD_INLINE K_AVX512 void k_avx512_sgd_store_lp(void *lp, size_t i, k_dtype_t dtype, __m512 p)
{
    switch (dtype) {
    case K_DTYPE_F32: k_avx512_store_ps((float *)lp + i, p); return;
    case K_DTYPE_F16: k_avx512_store_f16((uint16_t *)lp + i, p); return;
    case K_DTYPE_BF16: k_avx512_store_bf16((uint16_t *)lp + i, p); return;
    default: return;
    }
}

#define K_SGD_MIXED_SIMD_BODY(name, attr, vec_t, lanes, load, store, set1, mul, load_grad, store_lp, update) \
    K_SGD_INLINE attr void name(const k_sgd_mixed_t *x, size_t begin, size_t end, k_dtype_t grad_dtype,      \
                                k_dtype_t lp_dtype)                                                          \
    {                                                                                                        \
        float *param = x->param, *buf = x->buf;                                                              \
        const void *grad = x->grad;                                                                          \
        void *lp = x->param_lp;                                                                              \
        k_sgd_args_t a = x->hyper;                                                                           \
        vec_t scale = set1(x->grad_scale);                                                                   \
        vec_t lr = set1(a.lr), mom = set1(a.momentum), wd = set1(a.weight_decay);                            \
        size_t i = begin;                                                                                    \
        for (; i + (lanes) <= end; i += (lanes)) {                                                           \
            vec_t g = mul(load_grad(grad, i, grad_dtype), scale);                                            \
            vec_t p = update(load(param + i), g, buf, i, lr, mom, wd, a);                                    \
            store(param + i, p);                                                                             \
            store_lp(lp, i, lp_dtype, p);                                                                    \
        }                                                                                                    \
        k_sgd_mixed_scalar(x, i, end);                                                                       \
    }

K_SGD_MIXED_SIMD_BODY(k_sgd_mixed_avx2_body, K_AVX2, __m256, 8, k_avx2_load_ps, k_avx2_store_ps, _mm256_set1_ps,
                      _mm256_mul_ps, k_avx2_sgd_load_grad, k_avx2_sgd_store_lp, k_avx2_sgd_update)
K_SGD_MIXED_SIMD_BODY(k_sgd_mixed_avx512_body, K_AVX512, __m512, 16, k_avx512_load_ps, k_avx512_store_ps,
                      _mm512_set1_ps, _mm512_mul_ps, k_avx512_sgd_load_grad, k_avx512_sgd_store_lp, k_avx512_sgd_update)
K_SGD_MIXED_INSTANCES(k_sgd_mixed_avx2, K_AVX2, k_sgd_mixed_avx2_body)
K_SGD_MIXED_INSTANCES(k_sgd_mixed_avx512, K_AVX512, k_sgd_mixed_avx512_body)
#endif

static int k_sgd_mixed_dtype_ok(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16;
}

void k_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad, k_dtype_t grad_dtype,
                      float grad_scale, float *momentum_buf, size_t count, float lr, float momentum, float weight_decay,
                      int nesterov)
{
    if (count == 0 || !k_sgd_mixed_dtype_ok(grad_dtype) || (param_lp && !k_sgd_mixed_dtype_ok(lp_dtype))) return;
    k_sgd_mixed_t x = {
        .param = param,
        .param_lp = param_lp,
        .lp_dtype = param_lp ? lp_dtype : K_DTYPE_COUNT,
        .grad = grad,
        .grad_dtype = grad_dtype,
        .grad_scale = grad_scale,
        .buf = momentum_buf,
        .hyper = {lr, momentum, weight_decay, nesterov != 0},
    };
    switch (k_dispatch_isa()) {
#if defined(__x86_64__)
    case K_ISA_AVX512: k_sgd_mixed_avx512(&x, 0, count); return;
    case K_ISA_AVX2: k_sgd_mixed_avx2(&x, 0, count); return;
#endif
    default: k_sgd_mixed_scalar(&x, 0, count); return;
    }
}
