/*
 * k_scale_avx512.c - k_div / k_scale kernels for AVX-512 F+BW+VL+DQ (+F16C),
 * installed by k_scale.c when k_isa_current() says AVX-512. Same structure
 * and rules as k_scale_avx2.c (true IEEE division for floats, magic
 * multiply for integers, scalar kernel with the same k_unary_args_t for
 * the tail); DQ adds vectorised i64 scaling (vcvtqq2pd / vcvttpd2qq). i64
 * division stays scalar: there is no 64x64 -> 128-bit vector multiply.
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

/* ---- element-wise ops on vectors (see k_scale_avx2.c) -------------------- */

typedef struct {
    __m512i magic; /* i32_magic in every 64-bit lane */
    __m128i shift; /* i32_shift, as the count operand of vpsrlq */
} k_avx512_div_i32_t;

K_AVX512 static inline __m512i k_avx512_vdiv_i32(__m512i x, k_avx512_div_i32_t k)
{
    __m512i n = _mm512_abs_epi32(x); /* INT32_MIN -> 2^31 read unsigned */
    __m512i q_even = _mm512_srl_epi64(_mm512_mul_epu32(n, k.magic), k.shift);
    __m512i q_odd = _mm512_srl_epi64(_mm512_mul_epu32(_mm512_srli_epi64(n, 32), k.magic), k.shift);
    __m512i q = _mm512_mask_blend_epi32(0xAAAA, q_even, _mm512_slli_epi64(q_odd, 32));
    __mmask16 negative = _mm512_movepi32_mask(x); /* sign bits (DQ) */
    return _mm512_mask_sub_epi32(q, negative, _mm512_setzero_si512(), q);
}

K_AVX512 static inline __m512i k_avx512_vdiv_u8(__m512i x, __m512i magic)
{
    __m512i q_even = _mm512_mulhi_epu16(_mm512_and_si512(x, _mm512_set1_epi16(0x00FF)), magic);
    __m512i q_odd = _mm512_mulhi_epu16(_mm512_srli_epi16(x, 8), magic);
    return _mm512_or_si512(q_even, _mm512_slli_epi16(q_odd, 8));
}

/* As k_trunc_to_i32_sat for 8 lanes (see k_avx2_vscale_i32x4): NaN -> 0,
 * clamp, then vcvttpd2dq truncates toward zero. */
K_AVX512 static inline __m256i k_avx512_vscale_i32x8(__m256i x, __m512d factor)
{
    __m512d r = _mm512_mul_pd(_mm512_cvtepi32_pd(x), factor);
    r = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(r, r, _CMP_ORD_Q), r);
    r = _mm512_min_pd(_mm512_max_pd(r, _mm512_set1_pd(-2147483648.0)),
                      _mm512_set1_pd(2147483647.0));
    return _mm512_cvttpd_epi32(r);
}

K_AVX512 static inline __m512i k_avx512_vscale_i32(__m512i x, __m512d factor)
{
    __m256i lo = k_avx512_vscale_i32x8(_mm512_castsi512_si256(x), factor);
    __m256i hi = k_avx512_vscale_i32x8(_mm512_extracti64x4_epi64(x, 1), factor);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* As k_trunc_to_i64_sat: (double)x rounds to nearest like the scalar
 * conversion (both follow MXCSR), then vcvttpd2qq truncates the product
 * toward zero and turns NaN and everything outside [-2^63, 2^63) into
 * INT64_MIN, which is the saturated value below the range, so only NaN
 * (-> 0) and r >= 2^63 (-> INT64_MAX) need patching. */
K_AVX512 static inline __m512i k_avx512_vscale_i64(__m512i x, __m512d factor)
{
    __m512d r = _mm512_mul_pd(_mm512_cvtepi64_pd(x), factor);
    __mmask8 ordered = _mm512_cmp_pd_mask(r, r, _CMP_ORD_Q);
    __mmask8 too_big = _mm512_cmp_pd_mask(r, _mm512_set1_pd(0x1p63), _CMP_GE_OQ);
    __m512i q = _mm512_maskz_mov_epi64(ordered, _mm512_cvttpd_epi64(r));
    return _mm512_mask_mov_epi64(q, too_big, _mm512_set1_epi64(INT64_MAX));
}

/* ---- kernel templates (see k_scale_avx2.c) ------------------------------- */
#define K_AVX512_UNARY(kind, type, elem_t, vec_t, lanes, load, store, vop, k_t, init) \
    K_AVX512 static void k_avx512_##kind##_##type(void *dst, const void *src, size_t count, \
                                                  const k_unary_args_t *args) \
    {                                                                         \
        elem_t *d = dst;                                                      \
        const elem_t *s = src;                                                \
        k_t k = init;                                                         \
        size_t i = 0;                                                         \
        for (; i + 4 * (lanes) <= count; i += 4 * (lanes)) {                  \
            vec_t v0 = load(s + i), v1 = load(s + i + (lanes));               \
            vec_t v2 = load(s + i + 2 * (lanes)), v3 = load(s + i + 3 * (lanes)); \
            store(d + i, vop(v0, k));                                         \
            store(d + i + (lanes), vop(v1, k));                               \
            store(d + i + 2 * (lanes), vop(v2, k));                           \
            store(d + i + 3 * (lanes), vop(v3, k));                           \
        }                                                                     \
        for (; i + (lanes) <= count; i += (lanes))                            \
            store(d + i, vop(load(s + i), k));                                \
        k_##kind##_scalar_##type(d + i, s + i, count - i, args);              \
    }

/* bf16: one load yields two fp32 vectors; 2 x 32 elements per iteration. */
#define K_AVX512_UNARY_BF16(kind, vop)                                        \
    K_AVX512 static void k_avx512_##kind##_bf16(void *dst, const void *src, size_t count, \
                                                const k_unary_args_t *args)  \
    {                                                                         \
        uint16_t *d = dst;                                                    \
        const uint16_t *s = src;                                              \
        __m512 k = _mm512_set1_ps(args->f32);                                 \
        size_t i = 0;                                                         \
        for (; i + 64 <= count; i += 64) {                                    \
            __m512 v0l, v0h, v1l, v1h;                                        \
            k_avx512_load_bf16x32(s + i, &v0l, &v0h);                         \
            k_avx512_load_bf16x32(s + i + 32, &v1l, &v1h);                    \
            k_avx512_store_bf16x32(d + i, vop(v0l, k), vop(v0h, k));          \
            k_avx512_store_bf16x32(d + i + 32, vop(v1l, k), vop(v1h, k));     \
        }                                                                     \
        for (; i + 32 <= count; i += 32) {                                    \
            __m512 vl, vh;                                                    \
            k_avx512_load_bf16x32(s + i, &vl, &vh);                           \
            k_avx512_store_bf16x32(d + i, vop(vl, k), vop(vh, k));            \
        }                                                                     \
        k_##kind##_scalar_bf16(d + i, s + i, count - i, args);                \
    }

#define K_AVX512_F32(kind, vop)                                               \
    K_AVX512_UNARY(kind, f32, float, __m512, 16, k_avx512_load_ps, k_avx512_store_ps, vop, \
                   __m512, _mm512_set1_ps(args->f32))
#define K_AVX512_F16(kind, vop)                                               \
    K_AVX512_UNARY(kind, f16, uint16_t, __m512, 16, k_avx512_load_f16, k_avx512_store_f16, vop, \
                   __m512, _mm512_set1_ps(args->f32))
#define K_AVX512_F64(kind, vop)                                               \
    K_AVX512_UNARY(kind, f64, double, __m512d, 8, k_avx512_load_pd, k_avx512_store_pd, vop, \
                   __m512d, _mm512_set1_pd(args->f64))

K_AVX512_F32(div, _mm512_div_ps)
K_AVX512_F32(scale, _mm512_mul_ps)
K_AVX512_F16(div, _mm512_div_ps)
K_AVX512_F16(scale, _mm512_mul_ps)
K_AVX512_UNARY_BF16(div, _mm512_div_ps)
K_AVX512_UNARY_BF16(scale, _mm512_mul_ps)
K_AVX512_F64(div, _mm512_div_pd)
K_AVX512_F64(scale, _mm512_mul_pd)

K_AVX512_UNARY(div, i32, int32_t, __m512i, 16, k_avx512_load_si, k_avx512_store_si,
               k_avx512_vdiv_i32, k_avx512_div_i32_t,
               ((k_avx512_div_i32_t){_mm512_set1_epi64((long long)args->i32_magic),
                                     _mm_cvtsi32_si128((int)args->i32_shift)}))
K_AVX512_UNARY(scale, i32, int32_t, __m512i, 16, k_avx512_load_si, k_avx512_store_si,
               k_avx512_vscale_i32, __m512d, _mm512_set1_pd(args->f64))
K_AVX512_UNARY(scale, i64, int64_t, __m512i, 8, k_avx512_load_si, k_avx512_store_si,
               k_avx512_vscale_i64, __m512d, _mm512_set1_pd(args->f64))
K_AVX512_UNARY(div, u8, uint8_t, __m512i, 64, k_avx512_load_si, k_avx512_store_si,
               k_avx512_vdiv_u8, __m512i, _mm512_set1_epi16((short)args->u8_magic))

const k_unary_table_t k_div_table_avx512 = {
    [K_DTYPE_F32] = k_avx512_div_f32, [K_DTYPE_F16] = k_avx512_div_f16,
    [K_DTYPE_BF16] = k_avx512_div_bf16, [K_DTYPE_F64] = k_avx512_div_f64,
    [K_DTYPE_I32] = k_avx512_div_i32, [K_DTYPE_I64] = k_div_scalar_i64,
    [K_DTYPE_U8] = k_avx512_div_u8,
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_div_scalar_i8, [K_DTYPE_I16] = k_div_scalar_i16,
    [K_DTYPE_U16] = k_div_scalar_u16, [K_DTYPE_BOOL] = k_div_scalar_bool,
};

const k_unary_table_t k_scale_table_avx512 = {
    [K_DTYPE_F32] = k_avx512_scale_f32, [K_DTYPE_F16] = k_avx512_scale_f16,
    [K_DTYPE_BF16] = k_avx512_scale_bf16, [K_DTYPE_F64] = k_avx512_scale_f64,
    [K_DTYPE_I32] = k_avx512_scale_i32, [K_DTYPE_I64] = k_avx512_scale_i64,
    [K_DTYPE_U8] = k_scale_scalar_u8,
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_scale_scalar_i8, [K_DTYPE_I16] = k_scale_scalar_i16,
    [K_DTYPE_U16] = k_scale_scalar_u16, [K_DTYPE_BOOL] = k_scale_scalar_bool,
};

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_scale_avx512_unused_t;
#endif /* __x86_64__ */
