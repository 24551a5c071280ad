/*
 * k_simd_avx2.h - private to kernels/cpu: the AVX2 + FMA + F16C target attribute
 * and the vector loads / stores (f16 and bf16 widened to fp32 and rounded
 * back bit-identically to k_internal.h) and the float MIN/MAX with the
 * scalar NaN rule, shared by the reduce, reduce_n, div / scale, SGD and
 * unscale kernels.
 * Included only from x86-64 builds.
 */
#ifndef K_SIMD_AVX2_H
#define K_SIMD_AVX2_H

#include <immintrin.h>

#include "k_internal.h"

#define K_AVX2 __attribute__((target("avx2,fma,f16c")))

/* ---- loads / stores, widening f16 and bf16 to fp32 ---------------------- */

K_AVX2 static inline __m256 k_avx2_load_ps(const float *p) { return _mm256_loadu_ps(p); }
K_AVX2 static inline void k_avx2_store_ps(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
K_AVX2 static inline __m256d k_avx2_load_pd(const double *p) { return _mm256_loadu_pd(p); }
K_AVX2 static inline void k_avx2_store_pd(double *p, __m256d v) { _mm256_storeu_pd(p, v); }

K_AVX2 static inline __m256i k_avx2_load_si(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

K_AVX2 static inline void k_avx2_store_si(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

/* v in every 64-bit lane */
K_AVX2 static inline __m256i k_avx2_set1_epi64(long long v) { return _mm256_set1_epi64x(v); }

K_AVX2 static inline __m256 k_avx2_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

K_AVX2 static inline void k_avx2_store_f16(uint16_t *p, __m256 v)
{
    /* imm 0: round to nearest even regardless of MXCSR */
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, 0));
}

/* A bf16 pair: 16 elements (one 256-bit load) as two fp32 vectors, for
 * loops that only combine bf16 with bf16 (reduce, div / scale). Interleaving
 * zeros below each bf16 gives its fp32 bits directly. unpacklo/hi work
 * within 128-bit lanes, so `lo` holds elements 0-3 and 8-11, `hi` 4-7 and
 * 12-15; packus (also per lane) puts them back in order on the way out. */
K_AVX2 static inline void k_avx2_load_bf16_pair(const uint16_t *p, __m256 *lo, __m256 *hi)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
}

/* Same rounding as k_num_f32_to_bf16 (integer add of 0x7FFF + lsb, NaN
 * truncated and made quiet), result in the low 16 bits of each 32-bit lane.
 * Not vcvtneps2bf16: AVX512-BF16 treats subnormal inputs as zero, which
 * would break agreement with the scalar path. */
K_AVX2 static inline __m256i k_avx2_round_bf16(__m256 v)
{
    __m256i bits = _mm256_castps_si256(v);
    __m256i high = _mm256_srli_epi32(bits, 16);
    __m256i bias = _mm256_add_epi32(_mm256_and_si256(high, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7FFF));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
    __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

/* lo/hi as produced by k_avx2_load_bf16_pair; values fit 16 bits, so the
 * unsigned saturation of packus never triggers. */
K_AVX2 static inline void k_avx2_store_bf16_pair(uint16_t *p, __m256 lo, __m256 hi)
{
    __m256i packed = _mm256_packus_epi32(k_avx2_round_bf16(lo), k_avx2_round_bf16(hi));
    _mm256_storeu_si256((__m256i *)p, packed);
}

/* bf16 in element order, 8 at a time (for loops that pair them with f32
 * vectors): zero-extend to 32 bits and shift into the high half, which is
 * k_num_bf16_to_f32; the store rounds as k_avx2_round_bf16 and packs the
 * two 128-bit halves (values fit 16 bits: packus never saturates). */
K_AVX2 static inline __m256 k_avx2_load_bf16(const uint16_t *p)
{
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

K_AVX2 static inline void k_avx2_store_bf16(uint16_t *p, __m256 v)
{
    __m256i r = k_avx2_round_bf16(v);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128((__m128i *)p, packed);
}

/* ---- float MIN/MAX with the scalar path's NaN rule ------------------------ */

/* minps/maxps return the second operand (b) when either input is NaN or on
 * ties; blending a back in where a is NaN gives "a if NaN, else b if NaN". */
K_AVX2 static inline __m256 k_avx2_min_ps(__m256 a, __m256 b)
{
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

K_AVX2 static inline __m256 k_avx2_max_ps(__m256 a, __m256 b)
{
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

K_AVX2 static inline __m256d k_avx2_min_pd(__m256d a, __m256d b)
{
    return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

K_AVX2 static inline __m256d k_avx2_max_pd(__m256d a, __m256d b)
{
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

#endif /* K_SIMD_AVX2_H */
