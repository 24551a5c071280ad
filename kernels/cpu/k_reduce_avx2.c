/*
 * k_reduce_avx2.c - k_reduce's vector kernels for AVX2 + FMA + F16C
 * (Haswell and later, Zen): the template k_reduce_simd.h instantiated with
 * this level's vectors (256 bits) and the helpers of k_simd_avx2.h.
 * Compiled with plain flags: each function carries a target attribute, and
 * k_dispatch.c only installs this table after checking the CPU and OS.
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

/* AVX2 has no 64-bit signed min/max: compare and blend. */
K_AVX2 static inline __m256i k_avx2_min_epi64(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}

K_AVX2 static inline __m256i k_avx2_max_epi64(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}

#define K_SIMD_ISA avx2
#define K_SIMD_BITS 256
#define K_SIMD_TARGET K_AVX2
#define K_REDUCE_I64_MIN k_avx2_min_epi64
#define K_REDUCE_I64_MAX k_avx2_max_epi64
/* No K_REDUCE_I64_PROD: no 64-bit multiply before AVX-512DQ; i64 PROD
 * takes the scalar kernel. */
#include "k_reduce_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_avx2_unused_t;
#endif /* __x86_64__ */
