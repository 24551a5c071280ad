/*
 * k_reduce_avx512.c - k_reduce's vector kernels for AVX-512 F+BW+VL+DQ
 * (+F16C for the 256-bit conversions the compiler may pick; Skylake-SP,
 * Ice Lake, Zen 4 and later): the template k_reduce_simd.h instantiated
 * with this level's vectors (512 bits) and the helpers of k_simd_avx512.h.
 *
 * AVX512-FP16 / AVX512-BF16 are deliberately unused: fp32 math via
 * vcvtph2ps/vcvtps2ph is what the header specifies, and vcvtneps2bf16
 * flushes subnormals (the scalar path does not).
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

#define K_SIMD_ISA avx512
#define K_SIMD_BITS 512
#define K_SIMD_TARGET K_AVX512
#define K_REDUCE_I64_MIN _mm512_min_epi64
#define K_REDUCE_I64_MAX _mm512_max_epi64
#define K_REDUCE_I64_PROD _mm512_mullo_epi64 /* DQ */
#include "k_reduce_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_avx512_unused_t;
#endif /* __x86_64__ */
