/*
 * k_reduce_exact_avx2.c - k_reduce_n_exact's vector kernels for AVX2 + FMA
 * + F16C: the template k_reduce_exact_simd.h instantiated with __m256 (8
 * floats, two __m256d) and the helpers below. Round-to-odd as the scalar
 * kernel does it: round to nearest, step back one ulp where that went away
 * from zero, set the last bit where it was inexact. k_dispatch.c runs it
 * only when k_isa_current() says avx2.
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

#define K_SIMD_ISA avx2
#define K_SIMD_BITS 256
#define K_SIMD_TARGET K_AVX2

/* As k_avx512_x_bad (k_reduce_exact_avx512.c): all values below 2^31, so
 * AVX2's signed compares serve. */
K_AVX2 static inline __m256i k_avx2_x_bad(__m256i hi, __m256i lo, __m256i span)
{
    const __m256i emax = _mm256_srli_epi32(hi, 23);
    const __m256i emin = _mm256_srli_epi32(_mm256_add_epi32(lo, _mm256_set1_epi32(1)), 23);
    return _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_sub_epi32(emax, emin), span),
                           _mm256_cmpgt_epi32(hi, _mm256_set1_epi32(0x7F7FFFFF)));
}

K_AVX2 static inline int k_avx2_x_any(__m256i b) { return !_mm256_testz_si256(b, b); }

K_AVX2 static inline unsigned k_avx2_x_lanes(__m256i b) { return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(b)); }

K_AVX2 static inline __m256 k_avx2_x_default_nan(__m256 v)
{
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

K_AVX2 static inline void k_avx2_x_widen_f32(const float *p, __m256d *d0, __m256d *d1)
{
    *d0 = _mm256_cvtps_pd(_mm_loadu_ps(p));
    *d1 = _mm256_cvtps_pd(_mm_loadu_ps(p + 4));
}

K_AVX2 static inline void k_avx2_x_widen(__m256 v, __m256d *d0, __m256d *d1)
{
    *d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    *d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

K_AVX2 static inline __m256 k_avx2_x_narrow_rn(__m256d d0, __m256d d1)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(d0)), _mm256_cvtpd_ps(d1), 1);
}

/* Two vectors of 64-bit lane masks as one of 32-bit lanes, in order. */
K_AVX2 static inline __m256i k_avx2_x_pack_masks(__m256d m0, __m256d m1)
{
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    return _mm256_blend_epi32(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m0), even),
                              _mm256_permutevar8x32_epi32(_mm256_castpd_si256(m1), even), 0xF0);
}

K_AVX2 static inline __m256 k_avx2_x_narrow_odd(__m256d d0, __m256d d1)
{
    const __m256 f = k_avx2_x_narrow_rn(d0, d1);
    __m256d b0, b1;
    k_avx2_x_widen(f, &b0, &b1);
    const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFLL));
    /* Away from zero: |f| > |d| (also inf from a value past FLT_MAX). */
    const __m256i away =
        k_avx2_x_pack_masks(_mm256_cmp_pd(_mm256_and_pd(b0, abs_mask), _mm256_and_pd(d0, abs_mask), _CMP_GT_OQ),
                            _mm256_cmp_pd(_mm256_and_pd(b1, abs_mask), _mm256_and_pd(d1, abs_mask), _CMP_GT_OQ));
    const __m256i inexact = k_avx2_x_pack_masks(_mm256_cmp_pd(b0, d0, _CMP_NEQ_UQ), _mm256_cmp_pd(b1, d1, _CMP_NEQ_UQ));
    __m256i bits = _mm256_add_epi32(_mm256_castps_si256(f), away); /* away lanes: -1, one ulp toward zero */
    bits = _mm256_or_si256(bits, _mm256_and_si256(inexact, _mm256_set1_epi32(1)));
    return _mm256_castsi256_ps(bits);
}

#include "k_reduce_exact_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_exact_avx2_unused_t;
#endif /* __x86_64__ */
