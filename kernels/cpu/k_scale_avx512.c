/*
 * k_scale_avx512.c - k_div / k_scale's vector kernels for AVX-512
 * F+BW+VL+DQ (+F16C): the template k_scale_simd.h instantiated with this
 * level's vectors (512 bits), the helpers of k_simd_avx512.h and the
 * integer ops below; k_scale.c installs the tables when k_isa_current()
 * says AVX-512. DQ adds vectorised i64 scaling (vcvtqq2pd / vcvttpd2qq).
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

/* ---- integer ops on vectors (see k_scale_avx2.c) ------------------------- */

/* As k_avx2_div_i32_sign: merge by a mask, negate the lanes whose x has its
 * sign bit set. */
K_AVX512 static inline __m512i k_avx512_div_i32_sign(__m512i x, __m512i q_even, __m512i q_odd)
{
    __m512i q = _mm512_mask_blend_epi32(0xAAAA, q_even, _mm512_slli_epi64(q_odd, 32));
    __mmask16 negative = _mm512_movepi32_mask(x); /* sign bits (DQ) */
    return _mm512_mask_sub_epi32(q, negative, _mm512_setzero_si512(), q);
}

/* As k_num_trunc_to_i32_sat for 8 lanes (see k_avx2_vscale_i32x4): NaN -> 0,
 * clamp, then vcvttpd2dq truncates toward zero. */
K_AVX512 static inline __m256i k_avx512_vscale_i32x8(__m256i x, __m512d factor)
{
    __m512d r = _mm512_mul_pd(_mm512_cvtepi32_pd(x), factor);
    r = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(r, r, _CMP_ORD_Q), r);
    r = _mm512_min_pd(_mm512_max_pd(r, _mm512_set1_pd(-2147483648.0)), _mm512_set1_pd(2147483647.0));
    return _mm512_cvttpd_epi32(r);
}

K_AVX512 static inline __m512i k_avx512_vscale_i32(__m512i x, __m512d factor)
{
    __m256i lo = k_avx512_vscale_i32x8(_mm512_castsi512_si256(x), factor);
    __m256i hi = k_avx512_vscale_i32x8(_mm512_extracti64x4_epi64(x, 1), factor);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* As k_num_trunc_to_i64_sat: (double)x rounds to nearest like the scalar
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

#define K_SIMD_ISA avx512
#define K_SIMD_BITS 512
#define K_SIMD_TARGET K_AVX512
#define K_SCALE_I64
#include "k_scale_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_scale_avx512_unused_t;
#endif /* __x86_64__ */
