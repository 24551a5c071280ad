/*
 * k_eltwise.c - k_relu, k_relu_backward and k_add (k_cpu.h): the trainer's
 * cpu backend's element-wise ops on f32, f16 and bf16 activations, whose
 * scalar definitions are k_train_numeric.h's (k_train_relu,
 * k_train_relu_grad, k_train_add; f16 / bf16 widened exactly, one rounding
 * back).
 *
 * Each loop is written once (K_ELTWISE_LEVEL) and instantiated for
 * AVX-512, AVX2 and the baseline, each with its target attribute; the
 * compiler vectorises it (`#pragma omp simd`, -fopenmp-simd: no OpenMP
 * runtime) and k_dispatch_isa() picks the instance, so every path runs the
 * same scalar expression per element and gives the same bits.
 *
 * relu and its mask select without rounding, so on f16 / bf16 they work on
 * the bit patterns, as an and-mask (the form the compiler vectorises on
 * 16-bit lanes): with inf the bits of +inf (bf16 0x7F80, f16 0x7C00),
 * x < 0 exactly for 0x8001 .. 0x8000 + inf (negative, not -0, not NaN),
 * and y > 0 for 0x0001 .. inf (positive, not +0, not NaN): the bits of
 * k_train_relu / k_train_relu_grad on the widened values, rounded back
 * (exact). bf16 add widens, adds and rounds in the loop; f16 add widens
 * and rounds through k_cast's F16C loops, a block on the stack at a time.
 */
#include "k_internal.h"
#include "k_train_numeric.h"

#if defined(__x86_64__)
#include "k_simd_avx2.h"
#include "k_simd_avx512.h"
#endif

/* The bits of +inf in a 16-bit float dtype (the masks' bound). */
static uint16_t k_eltwise_inf_bits(k_dtype_t dtype) { return dtype == K_DTYPE_F16 ? 0x7C00u : 0x7F80u; }

typedef struct {
    void (*relu_f32)(float *y, const float *x, size_t count);
    void (*relu_16)(uint16_t *y, const uint16_t *x, size_t count, uint16_t inf);
    void (*relu_backward_f32)(float *dx, const float *y, const float *dy, size_t count);
    void (*relu_backward_16)(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t count, uint16_t inf);
    void (*add_f32)(float *y, const float *a, const float *b, size_t count, int relu);
    void (*add_bf16)(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t count, int relu);
} k_eltwise_table_t;

#define K_ELTWISE_LEVEL(isa, target)                                                                               \
    target static void k_relu_f32_##isa(float *y, const float *x, size_t count)                                    \
    {                                                                                                              \
        _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] = k_train_relu(x[i]);                          \
    }                                                                                                              \
    target static void k_relu_16_##isa(uint16_t *y, const uint16_t *x, size_t count, uint16_t inf)                 \
    {                                                                                                              \
        _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] =                                              \
            x[i] & ((uint16_t)(x[i] - 0x8001u) < inf ? 0 : 0xFFFFu);                                               \
    }                                                                                                              \
    target static void k_relu_backward_f32_##isa(float *dx, const float *y, const float *dy, size_t count)         \
    {                                                                                                              \
        _Pragma("omp simd") for (size_t i = 0; i < count; i++) dx[i] = k_train_relu_grad(y[i], dy[i]);             \
    }                                                                                                              \
    target static void k_relu_backward_16_##isa(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t count, \
                                                uint16_t inf)                                                      \
    {                                                                                                              \
        _Pragma("omp simd") for (size_t i = 0; i < count; i++) dx[i] =                                             \
            dy[i] & ((uint16_t)(y[i] - 1u) < inf ? 0xFFFFu : 0);                                                   \
    }                                                                                                              \
    target static void k_add_f32_##isa(float *y, const float *a, const float *b, size_t count, int relu)           \
    {                                                                                                              \
        if (relu) {                                                                                                \
            _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] = k_train_add(a[i], b[i], 1);              \
        } else {                                                                                                   \
            _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] = k_train_add(a[i], b[i], 0);              \
        }                                                                                                          \
    }                                                                                                              \
    target static void k_add_bf16_##isa(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t count, int relu) \
    {                                                                                                              \
        if (relu) {                                                                                                \
            _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] =                                          \
                k_num_f32_to_bf16(k_train_add(k_num_bf16_to_f32(a[i]), k_num_bf16_to_f32(b[i]), 1));               \
        } else {                                                                                                   \
            _Pragma("omp simd") for (size_t i = 0; i < count; i++) y[i] =                                          \
                k_num_f32_to_bf16(k_train_add(k_num_bf16_to_f32(a[i]), k_num_bf16_to_f32(b[i]), 0));               \
        }                                                                                                          \
    }                                                                                                              \
    static const k_eltwise_table_t k_eltwise_table_##isa = {                                                       \
        k_relu_f32_##isa,         k_relu_16_##isa, k_relu_backward_f32_##isa,                                      \
        k_relu_backward_16_##isa, k_add_f32_##isa, k_add_bf16_##isa,                                               \
    };

K_ELTWISE_LEVEL(scalar, )
#if defined(__x86_64__)
K_ELTWISE_LEVEL(avx2, K_AVX2)
K_ELTWISE_LEVEL(avx512, K_AVX512)
#endif
#undef K_ELTWISE_LEVEL

static const k_eltwise_table_t *k_eltwise_table(void)
{
    switch (k_dispatch_isa()) {
#if defined(__x86_64__)
    case K_ISA_AVX512: return &k_eltwise_table_avx512;
    case K_ISA_AVX2: return &k_eltwise_table_avx2;
#endif
    default: return &k_eltwise_table_scalar;
    }
}

/* The instances for a call, or NULL when there is nothing to do; *rc is
 * what the call returns (-1 for another dtype, else 0). */
static const k_eltwise_table_t *k_eltwise_start(k_dtype_t dtype, size_t count, int *rc)
{
    *rc = dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16 ? 0 : -1;
    return *rc == 0 && count > 0 ? k_eltwise_table() : NULL;
}

int k_relu(void *y, const void *x, k_dtype_t dtype, size_t count)
{
    int rc;
    const k_eltwise_table_t *t = k_eltwise_start(dtype, count, &rc);
    if (t == NULL) return rc;
    if (dtype == K_DTYPE_F32)
        t->relu_f32(y, x, count);
    else
        t->relu_16(y, x, count, k_eltwise_inf_bits(dtype));
    return 0;
}

int k_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count)
{
    int rc;
    const k_eltwise_table_t *t = k_eltwise_start(dtype, count, &rc);
    if (t == NULL) return rc;
    if (dtype == K_DTYPE_F32)
        t->relu_backward_f32(dx, y, dy, count);
    else
        t->relu_backward_16(dx, y, dy, count, k_eltwise_inf_bits(dtype));
    return 0;
}

/* f16: widened through k_cast (F16C where the CPU has it) a block at a
 * time, added (and relu'd) in fp32, rounded back through k_cast. */
#define K_ADD_F16_BLOCK 256

static void k_add_f16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t count, int relu)
{
    float wa[K_ADD_F16_BLOCK], wb[K_ADD_F16_BLOCK];
    for (size_t at = 0; at < count; at += K_ADD_F16_BLOCK) {
        const size_t n = count - at < K_ADD_F16_BLOCK ? count - at : K_ADD_F16_BLOCK;
        k_cast(wa, K_DTYPE_F32, a + at, K_DTYPE_F16, n);
        k_cast(wb, K_DTYPE_F32, b + at, K_DTYPE_F16, n);
        for (size_t i = 0; i < n; i++) wa[i] = k_train_add(wa[i], wb[i], relu);
        k_cast(y + at, K_DTYPE_F16, wa, K_DTYPE_F32, n);
    }
}

int k_add(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu)
{
    int rc;
    const k_eltwise_table_t *t = k_eltwise_start(dtype, count, &rc);
    if (t == NULL) return rc;
    if (dtype == K_DTYPE_F16) {
        k_add_f16(y, a, b, count, relu != 0);
        return 0;
    }
    if (dtype == K_DTYPE_F32)
        t->add_f32(y, a, b, count, relu != 0);
    else
        t->add_bf16(y, a, b, count, relu != 0);
    return 0;
}
