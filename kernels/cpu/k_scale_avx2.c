/*
 * k_scale_avx2.c - k_div / k_scale kernels for AVX2 + FMA + F16C, installed
 * by k_scale.c when k_isa_current() says AVX2. Same structure as
 * k_reduce_avx2.c: 4 vectors per iteration, then single vectors, then the
 * scalar kernel of k_scale.c for the tail, with the same precomputed
 * k_unary_args_t, so every element gets the bits the scalar path gives it.
 *
 * Floats divide with vdivps / vdivpd (a true IEEE division, never a
 * multiply by the reciprocal, which rounds differently). Integers divide by
 * the magic multiply described in k_internal.h. i64 stays scalar (AVX2 has
 * no 64x64 -> 128-bit multiply; the scalar magic multiply is cheap), and so
 * does u8 scaling (a 256-entry table lookup).
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

/* ---- element-wise ops on vectors ---------------------------------------- */

/* i32 / d: divide |x| (abs(INT32_MIN) is 0x80000000 = 2^31 read unsigned)
 * by the magic multiply, then give the quotient x's sign. mul_epu32 takes
 * the even 32-bit lanes, so the odd lanes are shifted down for a second
 * multiply and their quotients shifted back up. */
typedef struct {
    __m256i magic; /* i32_magic in every 64-bit lane */
    __m128i shift; /* i32_shift, as the count operand of vpsrlq */
} k_avx2_div_i32_t;

K_AVX2 static inline __m256i k_avx2_vdiv_i32(__m256i x, k_avx2_div_i32_t k)
{
    __m256i n = _mm256_abs_epi32(x);
    __m256i q_even = _mm256_srl_epi64(_mm256_mul_epu32(n, k.magic), k.shift);
    __m256i q_odd = _mm256_srl_epi64(_mm256_mul_epu32(_mm256_srli_epi64(n, 32), k.magic), k.shift);
    __m256i q = _mm256_blend_epi32(q_even, _mm256_slli_epi64(q_odd, 32), 0xAA);
    return _mm256_sign_epi32(q, x); /* -q where x < 0 (q is 0 where x is) */
}

/* u8 / d: the even and the odd bytes as 16-bit lanes, q = (x * magic) >> 16
 * (vpmulhuw), q <= 127 fits back in its byte. */
K_AVX2 static inline __m256i k_avx2_vdiv_u8(__m256i x, __m256i magic)
{
    __m256i q_even = _mm256_mulhi_epu16(_mm256_and_si256(x, _mm256_set1_epi16(0x00FF)), magic);
    __m256i q_odd = _mm256_mulhi_epu16(_mm256_srli_epi16(x, 8), magic);
    return _mm256_or_si256(q_even, _mm256_slli_epi16(q_odd, 8));
}

/* i32 * factor for 4 lanes, as k_trunc_to_i32_sat: the product in double
 * (exact widening, one rounding, as the scalar kernel's), NaN -> 0 (before
 * the clamp: maxpd would turn a NaN into the bound), clamp to [INT32_MIN,
 * INT32_MAX], then vcvttpd2dq, which
 * truncates toward zero whatever MXCSR says. The bounds are integers, so
 * clamping before truncating gives what truncating before clamping gives
 * (the scalar order), and the clamped value always converts in range. */
K_AVX2 static inline __m128i k_avx2_vscale_i32x4(__m128i x, __m256d factor)
{
    __m256d r = _mm256_mul_pd(_mm256_cvtepi32_pd(x), factor);
    r = _mm256_and_pd(r, _mm256_cmp_pd(r, r, _CMP_ORD_Q));
    r = _mm256_min_pd(_mm256_max_pd(r, _mm256_set1_pd(-2147483648.0)),
                      _mm256_set1_pd(2147483647.0));
    return _mm256_cvttpd_epi32(r);
}

K_AVX2 static inline __m256i k_avx2_vscale_i32(__m256i x, __m256d factor)
{
    __m128i lo = k_avx2_vscale_i32x4(_mm256_castsi256_si128(x), factor);
    __m128i hi = k_avx2_vscale_i32x4(_mm256_extracti128_si256(x, 1), factor);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* ---- kernel templates -----------------------------------------------------
 * kind: div or scale; type names the dtype and the scalar tail kernel;
 * k: the loop-invariant operand of vop, built from args by `init`. */
#define K_AVX2_UNARY(kind, type, elem_t, vec_t, lanes, load, store, vop, k_t, init) \
    K_AVX2 static void k_avx2_##kind##_##type(void *dst, const void *src, size_t count, \
                                              const k_unary_args_t *args)    \
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

/* bf16: one load yields two fp32 vectors (see k_simd_avx2.h). */
#define K_AVX2_UNARY_BF16(kind, vop)                                          \
    K_AVX2 static void k_avx2_##kind##_bf16(void *dst, const void *src, size_t count, \
                                            const k_unary_args_t *args)      \
    {                                                                         \
        uint16_t *d = dst;                                                    \
        const uint16_t *s = src;                                              \
        __m256 k = _mm256_set1_ps(args->f32);                                 \
        size_t i = 0;                                                         \
        for (; i + 32 <= count; i += 32) {                                    \
            __m256 v0l, v0h, v1l, v1h;                                        \
            k_avx2_load_bf16x16(s + i, &v0l, &v0h);                           \
            k_avx2_load_bf16x16(s + i + 16, &v1l, &v1h);                      \
            k_avx2_store_bf16x16(d + i, vop(v0l, k), vop(v0h, k));            \
            k_avx2_store_bf16x16(d + i + 16, vop(v1l, k), vop(v1h, k));       \
        }                                                                     \
        for (; i + 16 <= count; i += 16) {                                    \
            __m256 vl, vh;                                                    \
            k_avx2_load_bf16x16(s + i, &vl, &vh);                             \
            k_avx2_store_bf16x16(d + i, vop(vl, k), vop(vh, k));              \
        }                                                                     \
        k_##kind##_scalar_bf16(d + i, s + i, count - i, args);                \
    }

#define K_AVX2_F32(kind, vop)                                                 \
    K_AVX2_UNARY(kind, f32, float, __m256, 8, k_avx2_load_ps, k_avx2_store_ps, vop, __m256, \
                 _mm256_set1_ps(args->f32))
#define K_AVX2_F16(kind, vop)                                                 \
    K_AVX2_UNARY(kind, f16, uint16_t, __m256, 8, k_avx2_load_f16, k_avx2_store_f16, vop, __m256, \
                 _mm256_set1_ps(args->f32))
#define K_AVX2_F64(kind, vop)                                                 \
    K_AVX2_UNARY(kind, f64, double, __m256d, 4, k_avx2_load_pd, k_avx2_store_pd, vop, __m256d, \
                 _mm256_set1_pd(args->f64))

K_AVX2_F32(div, _mm256_div_ps)
K_AVX2_F32(scale, _mm256_mul_ps)
K_AVX2_F16(div, _mm256_div_ps)
K_AVX2_F16(scale, _mm256_mul_ps)
K_AVX2_UNARY_BF16(div, _mm256_div_ps)
K_AVX2_UNARY_BF16(scale, _mm256_mul_ps)
K_AVX2_F64(div, _mm256_div_pd)
K_AVX2_F64(scale, _mm256_mul_pd)

K_AVX2_UNARY(div, i32, int32_t, __m256i, 8, k_avx2_load_si, k_avx2_store_si, k_avx2_vdiv_i32,
             k_avx2_div_i32_t,
             ((k_avx2_div_i32_t){_mm256_set1_epi64x((long long)args->i32_magic),
                                 _mm_cvtsi32_si128((int)args->i32_shift)}))
K_AVX2_UNARY(scale, i32, int32_t, __m256i, 8, k_avx2_load_si, k_avx2_store_si, k_avx2_vscale_i32,
             __m256d, _mm256_set1_pd(args->f64))
K_AVX2_UNARY(div, u8, uint8_t, __m256i, 32, k_avx2_load_si, k_avx2_store_si, k_avx2_vdiv_u8,
             __m256i, _mm256_set1_epi16((short)args->u8_magic))

const k_unary_table_t k_div_table_avx2 = {
    [K_DTYPE_F32] = k_avx2_div_f32, [K_DTYPE_F16] = k_avx2_div_f16,
    [K_DTYPE_BF16] = k_avx2_div_bf16, [K_DTYPE_F64] = k_avx2_div_f64,
    [K_DTYPE_I32] = k_avx2_div_i32, [K_DTYPE_I64] = k_div_scalar_i64,
    [K_DTYPE_U8] = k_avx2_div_u8,
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_div_scalar_i8, [K_DTYPE_I16] = k_div_scalar_i16,
    [K_DTYPE_U16] = k_div_scalar_u16, [K_DTYPE_BOOL] = k_div_scalar_bool,
};

const k_unary_table_t k_scale_table_avx2 = {
    [K_DTYPE_F32] = k_avx2_scale_f32, [K_DTYPE_F16] = k_avx2_scale_f16,
    [K_DTYPE_BF16] = k_avx2_scale_bf16, [K_DTYPE_F64] = k_avx2_scale_f64,
    [K_DTYPE_I32] = k_avx2_scale_i32, [K_DTYPE_I64] = k_scale_scalar_i64,
    [K_DTYPE_U8] = k_scale_scalar_u8,
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_scale_scalar_i8, [K_DTYPE_I16] = k_scale_scalar_i16,
    [K_DTYPE_U16] = k_scale_scalar_u16, [K_DTYPE_BOOL] = k_scale_scalar_bool,
};

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_scale_avx2_unused_t;
#endif /* __x86_64__ */
