/*
 * k_reduce_exact_avx512.c - k_reduce_n_exact's vector kernels for AVX-512
 * F/BW/VL/DQ: the template k_reduce_exact_simd.h instantiated with __m512
 * (16 floats, two __m512d) and the helpers below. Round-to-odd uses the
 * conversion's embedded rounding: truncate (toward zero), then set the last
 * bit where the truncation was inexact. k_dispatch.c runs it only when
 * k_isa_current() says avx512.
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

#define K_SIMD_ISA avx512
#define K_SIMD_BITS 512
#define K_SIMD_TARGET K_AVX512

/* Exponent fields: of the largest magnitude, and of the smallest nonzero
 * one (lo + 1; 0 where every input is zero). Both are below 2^31, so the
 * signed compares are the unsigned ones. Not certified: a span above `span`,
 * or an inf / NaN (largest magnitude above FLT_MAX). */
K_AVX512 static inline __m512i k_avx512_x_bad(__m512i hi, __m512i lo, __m512i span)
{
    const __m512i emax = _mm512_srli_epi32(hi, 23);
    const __m512i emin = _mm512_srli_epi32(_mm512_add_epi32(lo, _mm512_set1_epi32(1)), 23);
    const __mmask16 bad = _mm512_cmpgt_epi32_mask(_mm512_sub_epi32(emax, emin), span) |
                          _mm512_cmpgt_epi32_mask(hi, _mm512_set1_epi32(0x7F7FFFFF));
    return _mm512_movm_epi32(bad);
}

K_AVX512 static inline int k_avx512_x_any(__m512i b) { return _mm512_test_epi32_mask(b, b) != 0; }

K_AVX512 static inline unsigned k_avx512_x_lanes(__m512i b) { return _mm512_test_epi32_mask(b, b); }

K_AVX512 static inline __m512 k_avx512_x_default_nan(__m512 v)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v,
                                _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

K_AVX512 static inline void k_avx512_x_widen_f32(const float *p, __m512d *d0, __m512d *d1)
{
    *d0 = _mm512_cvtps_pd(_mm256_loadu_ps(p));
    *d1 = _mm512_cvtps_pd(_mm256_loadu_ps(p + 8));
}

K_AVX512 static inline void k_avx512_x_widen(__m512 v, __m512d *d0, __m512d *d1)
{
    *d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    *d1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
}

K_AVX512 static inline __m512 k_avx512_x_narrow_rn(__m512d d0, __m512d d1)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(d0)), _mm512_cvtpd_ps(d1), 1);
}

K_AVX512 static inline __m512 k_avx512_x_narrow_odd(__m512d d0, __m512d d1)
{
    const __m256 t0 = _mm512_cvt_roundpd_ps(d0, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 t1 = _mm512_cvt_roundpd_ps(d1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact0 = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t0), d0, _CMP_NEQ_UQ);
    const __mmask8 inexact1 = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t1), d1, _CMP_NEQ_UQ);
    const __mmask16 inexact = (__mmask16)(inexact0 | ((unsigned)inexact1 << 8));
    const __m512i bits = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(t0), t1, 1));
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(bits, inexact, bits, _mm512_set1_epi32(1)));
}

#include "k_reduce_exact_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_exact_avx512_unused_t;
#endif /* __x86_64__ */
