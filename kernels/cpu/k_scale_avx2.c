/*
 * k_scale_avx2.c - k_div / k_scale's vector kernels for AVX2 + FMA + F16C:
 * the template k_scale_simd.h instantiated with this level's vectors (256
 * bits), the helpers of k_simd_avx2.h and the integer ops below; k_scale.c
 * installs the tables when k_isa_current() says AVX2. i64 scaling stays
 * scalar (no vcvttpd2qq before AVX-512DQ).
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

/* ---- integer ops on vectors ------------------------------------------------ */

/* i32 / d, the last step (k_scale_simd.h has the first): the quotients of
 * the even lanes (in q_even's low halves) and of the odd ones (q_odd's,
 * shifted back up) merged, with x's sign: -q where x < 0 (q is 0 where x
 * is). */
K_AVX2 static inline __m256i k_avx2_div_i32_sign(__m256i x, __m256i q_even, __m256i q_odd)
{
    __m256i q = _mm256_blend_epi32(q_even, _mm256_slli_epi64(q_odd, 32), 0xAA);
    return _mm256_sign_epi32(q, x);
}

/* i32 * factor for 4 lanes, as k_num_trunc_to_i32_sat: the product in double
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
    r = _mm256_min_pd(_mm256_max_pd(r, _mm256_set1_pd(-2147483648.0)), _mm256_set1_pd(2147483647.0));
    return _mm256_cvttpd_epi32(r);
}

K_AVX2 static inline __m256i k_avx2_vscale_i32(__m256i x, __m256d factor)
{
    __m128i lo = k_avx2_vscale_i32x4(_mm256_castsi256_si128(x), factor);
    __m128i hi = k_avx2_vscale_i32x4(_mm256_extracti128_si256(x, 1), factor);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

#define K_SIMD_ISA avx2
#define K_SIMD_BITS 256
#define K_SIMD_TARGET K_AVX2
/* No K_SCALE_I64: i64 scaling takes the scalar kernel. */
#include "k_scale_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_scale_avx2_unused_t;
#endif /* __x86_64__ */
