/*
 * k_simd_avx512.h - private to kernels/cpu: the AVX-512 F/BW/VL/DQ target attribute
 * and the vector loads / stores (f16 and bf16 widened to fp32 and rounded
 * back bit-identically to k_internal.h) and the float MIN/MAX with the
 * scalar NaN rule, shared by the reduce, reduce_n, div / scale, SGD and
 * unscale kernels.
 * Included only from x86-64 builds.
 */
#ifndef K_SIMD_AVX512_H
#define K_SIMD_AVX512_H

#include <immintrin.h>

#include "k_internal.h"

#define K_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* ---- loads / stores, widening f16 and bf16 to fp32 ---------------------- */

K_AVX512 static inline __m512 k_avx512_load_ps(const float *p) { return _mm512_loadu_ps(p); }
K_AVX512 static inline void k_avx512_store_ps(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
K_AVX512 static inline __m512d k_avx512_load_pd(const double *p) { return _mm512_loadu_pd(p); }
K_AVX512 static inline void k_avx512_store_pd(double *p, __m512d v) { _mm512_storeu_pd(p, v); }
K_AVX512 static inline __m512i k_avx512_load_si(const void *p) { return _mm512_loadu_si512(p); }
K_AVX512 static inline void k_avx512_store_si(void *p, __m512i v) { _mm512_storeu_si512(p, v); }

/* v in every 64-bit lane */
K_AVX512 static inline __m512i k_avx512_set1_epi64(long long v) { return _mm512_set1_epi64(v); }

K_AVX512 static inline __m512 k_avx512_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

K_AVX512 static inline void k_avx512_store_f16(uint16_t *p, __m512 v)
{
    __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256((__m256i *)p, h);
}

/* A bf16 pair: 32 elements per 512-bit load, split like k_avx2_load_bf16_pair
 * (zeros interleaved below each bf16; lane-wise, undone by packus). */
K_AVX512 static inline void k_avx512_load_bf16_pair(const uint16_t *p, __m512 *lo, __m512 *hi)
{
    __m512i v = _mm512_loadu_si512(p);
    *lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
    *hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
}

/* Same rounding as k_num_f32_to_bf16: add 0x7FFF + lsb, NaN made quiet. */
K_AVX512 static inline __m512i k_avx512_round_bf16(__m512 v)
{
    __m512i bits = _mm512_castps_si512(v);
    __m512i high = _mm512_srli_epi32(bits, 16);
    __m512i bias = _mm512_add_epi32(_mm512_and_si512(high, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
}

K_AVX512 static inline void k_avx512_store_bf16_pair(uint16_t *p, __m512 lo, __m512 hi)
{
    _mm512_storeu_si512(p, _mm512_packus_epi32(k_avx512_round_bf16(lo), k_avx512_round_bf16(hi)));
}

/* bf16 in element order, 16 at a time (see k_avx2_load_bf16); the store
 * narrows with vpmovdw, exact since the rounded values fit 16 bits. */
K_AVX512 static inline __m512 k_avx512_load_bf16(const uint16_t *p)
{
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

K_AVX512 static inline void k_avx512_store_bf16(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(k_avx512_round_bf16(v)));
}

/* ---- float MIN/MAX with the scalar path's NaN rule ------------------------ */

/* minps/maxps return b when either is NaN or on ties; put a back where a is
 * NaN: "a if NaN, else b if NaN", identical to the scalar kernels. */
K_AVX512 static inline __m512 k_avx512_min_ps(__m512 a, __m512 b)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_min_ps(a, b), a);
}

K_AVX512 static inline __m512 k_avx512_max_ps(__m512 a, __m512 b)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_max_ps(a, b), a);
}

K_AVX512 static inline __m512d k_avx512_min_pd(__m512d a, __m512d b)
{
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), _mm512_min_pd(a, b), a);
}

K_AVX512 static inline __m512d k_avx512_max_pd(__m512d a, __m512d b)
{
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), _mm512_max_pd(a, b), a);
}

#endif /* K_SIMD_AVX512_H */
