/*
 * k_reduce_avx512.c - reduce kernels for AVX-512 F+BW+VL+DQ (+F16C for the
 * 256-bit conversions the compiler may pick). Skylake-SP, Ice Lake, Zen 4
 * and later. Same structure and rules as k_reduce_avx2.c: 4 vectors per
 * iteration, then single vectors, then the scalar kernel for the tail.
 *
 * AVX512-FP16 / AVX512-BF16 are deliberately unused: fp32 math via
 * vcvtph2ps/vcvtps2ph is what the header specifies, and vcvtneps2bf16
 * flushes subnormals (the scalar path does not).
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

/* ---- element-wise ops on vectors ---------------------------------------- */

/* No 8-bit multiply: even and odd bytes as 16-bit products, merged. */
K_AVX512 static inline __m512i k_avx512_mul_epu8(__m512i a, __m512i b)
{
    __m512i low_bytes = _mm512_set1_epi16(0x00FF);
    __m512i even = _mm512_and_si512(_mm512_mullo_epi16(a, b), low_bytes);
    __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
    return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
}

/* ---- kernel template (see k_reduce_avx2.c) ------------------------------- */
#define K_AVX512_KERNEL(name, elem_t, vec_t, lanes, load, store, vop)         \
    K_AVX512 static void k_avx512_##name(void *dst, const void *a, const void *b, size_t count) \
    {                                                                         \
        elem_t *d = dst;                                                      \
        const elem_t *x = a;                                                  \
        const elem_t *y = b;                                                  \
        size_t i = 0;                                                         \
        for (; i + 4 * (lanes) <= count; i += 4 * (lanes)) {                  \
            vec_t x0 = load(x + i), y0 = load(y + i);                         \
            vec_t x1 = load(x + i + (lanes)), y1 = load(y + i + (lanes));     \
            vec_t x2 = load(x + i + 2 * (lanes)), y2 = load(y + i + 2 * (lanes)); \
            vec_t x3 = load(x + i + 3 * (lanes)), y3 = load(y + i + 3 * (lanes)); \
            store(d + i, vop(x0, y0));                                        \
            store(d + i + (lanes), vop(x1, y1));                              \
            store(d + i + 2 * (lanes), vop(x2, y2));                          \
            store(d + i + 3 * (lanes), vop(x3, y3));                          \
        }                                                                     \
        for (; i + (lanes) <= count; i += (lanes))                            \
            store(d + i, vop(load(x + i), load(y + i)));                      \
        k_reduce_scalar_##name(d + i, x + i, y + i, count - i);               \
    }

#define K_AVX512_F32(op, vop)                                                 \
    K_AVX512_KERNEL(f32_##op, float, __m512, 16, k_avx512_load_ps, k_avx512_store_ps, vop)
#define K_AVX512_F64(op, vop)                                                 \
    K_AVX512_KERNEL(f64_##op, double, __m512d, 8, k_avx512_load_pd, k_avx512_store_pd, vop)
#define K_AVX512_F16(op, vop)                                                 \
    K_AVX512_KERNEL(f16_##op, uint16_t, __m512, 16, k_avx512_load_f16, k_avx512_store_f16, vop)
/* bf16: one load yields two fp32 vectors; 2 x 32 elements per iteration. */
#define K_AVX512_BF16(op, vop)                                                \
    K_AVX512 static void k_avx512_bf16_##op(void *dst, const void *a, const void *b, size_t count) \
    {                                                                         \
        uint16_t *d = dst;                                                    \
        const uint16_t *x = a;                                                \
        const uint16_t *y = b;                                                \
        size_t i = 0;                                                         \
        for (; i + 64 <= count; i += 64) {                                    \
            __m512 x0l, x0h, y0l, y0h, x1l, x1h, y1l, y1h;                    \
            k_avx512_load_bf16x32(x + i, &x0l, &x0h);                         \
            k_avx512_load_bf16x32(y + i, &y0l, &y0h);                         \
            k_avx512_load_bf16x32(x + i + 32, &x1l, &x1h);                    \
            k_avx512_load_bf16x32(y + i + 32, &y1l, &y1h);                    \
            k_avx512_store_bf16x32(d + i, vop(x0l, y0l), vop(x0h, y0h));      \
            k_avx512_store_bf16x32(d + i + 32, vop(x1l, y1l), vop(x1h, y1h)); \
        }                                                                     \
        for (; i + 32 <= count; i += 32) {                                    \
            __m512 xl, xh, yl, yh;                                            \
            k_avx512_load_bf16x32(x + i, &xl, &xh);                           \
            k_avx512_load_bf16x32(y + i, &yl, &yh);                           \
            k_avx512_store_bf16x32(d + i, vop(xl, yl), vop(xh, yh));          \
        }                                                                     \
        k_reduce_scalar_bf16_##op(d + i, x + i, y + i, count - i);            \
    }
#define K_AVX512_INT(type, elem_t, op, vop)                                   \
    K_AVX512_KERNEL(type##_##op, elem_t, __m512i, 64 / sizeof(elem_t), k_avx512_load_si, \
                    k_avx512_store_si, vop)

K_AVX512_F32(sum, _mm512_add_ps)
K_AVX512_F32(min, k_avx512_min_ps)
K_AVX512_F32(max, k_avx512_max_ps)
K_AVX512_F32(prod, _mm512_mul_ps)

K_AVX512_F64(sum, _mm512_add_pd)
K_AVX512_F64(min, k_avx512_min_pd)
K_AVX512_F64(max, k_avx512_max_pd)
K_AVX512_F64(prod, _mm512_mul_pd)

K_AVX512_F16(sum, _mm512_add_ps)
K_AVX512_F16(min, k_avx512_min_ps)
K_AVX512_F16(max, k_avx512_max_ps)
K_AVX512_F16(prod, _mm512_mul_ps)

K_AVX512_BF16(sum, _mm512_add_ps)
K_AVX512_BF16(min, k_avx512_min_ps)
K_AVX512_BF16(max, k_avx512_max_ps)
K_AVX512_BF16(prod, _mm512_mul_ps)

K_AVX512_INT(i32, int32_t, sum, _mm512_add_epi32)
K_AVX512_INT(i32, int32_t, min, _mm512_min_epi32)
K_AVX512_INT(i32, int32_t, max, _mm512_max_epi32)
K_AVX512_INT(i32, int32_t, prod, _mm512_mullo_epi32)

K_AVX512_INT(i64, int64_t, sum, _mm512_add_epi64)
K_AVX512_INT(i64, int64_t, min, _mm512_min_epi64)
K_AVX512_INT(i64, int64_t, max, _mm512_max_epi64)
K_AVX512_INT(i64, int64_t, prod, _mm512_mullo_epi64) /* DQ */

K_AVX512_INT(u8, uint8_t, sum, _mm512_add_epi8)
K_AVX512_INT(u8, uint8_t, min, _mm512_min_epu8)
K_AVX512_INT(u8, uint8_t, max, _mm512_max_epu8)
K_AVX512_INT(u8, uint8_t, prod, k_avx512_mul_epu8)

#define K_SCALAR_ROW(type)                                                    \
    [K_OP_SUM] = k_reduce_scalar_##type##_sum, [K_OP_MIN] = k_reduce_scalar_##type##_min, \
    [K_OP_MAX] = k_reduce_scalar_##type##_max, [K_OP_PROD] = k_reduce_scalar_##type##_prod

#define K_ROW(type)                                                           \
    [K_OP_SUM] = k_avx512_##type##_sum, [K_OP_MIN] = k_avx512_##type##_min,   \
    [K_OP_MAX] = k_avx512_##type##_max, [K_OP_PROD] = k_avx512_##type##_prod

const k_reduce_table_t k_reduce_table_avx512 = {
    [K_DTYPE_F32] = {K_ROW(f32)},   [K_DTYPE_F16] = {K_ROW(f16)}, [K_DTYPE_BF16] = {K_ROW(bf16)},
    [K_DTYPE_F64] = {K_ROW(f64)},   [K_DTYPE_I32] = {K_ROW(i32)}, [K_DTYPE_I64] = {K_ROW(i64)},
    [K_DTYPE_U8] = {K_ROW(u8)},
    /* Not vectorised (rare in gradients: masks, counters, flags): the
     * scalar kernels, which are the reference anyway. */
    [K_DTYPE_I8] = {K_SCALAR_ROW(i8)},
    [K_DTYPE_I16] = {K_SCALAR_ROW(i16)},
    [K_DTYPE_U16] = {K_SCALAR_ROW(u16)},
    [K_DTYPE_BOOL] = {K_SCALAR_ROW(bool)},
};

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_avx512_unused_t;
#endif /* __x86_64__ */
