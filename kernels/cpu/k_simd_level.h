/*
 * k_simd_level.h - private to kernels/cpu: the names in which the vector
 * templates (k_reduce_simd.h, k_scale_simd.h, k_reduce_n_simd.h,
 * k_reduce_exact_simd.h) are
 * written once for every SIMD level. A file that instantiates a template
 * includes its level's k_simd_<isa>.h (the helpers) and defines
 *   K_SIMD_ISA     avx2 | avx512: the prefix of k_simd_<isa>.h's helpers
 *                  and of what the template defines
 *   K_SIMD_BITS    256 | 512: the vector width, which names the intrinsics
 *                  and the vector types
 *   K_SIMD_TARGET  K_AVX2 | K_AVX512: the target attribute
 * and this header derives from them:
 *   K_SIMD_FN(_load_ps)   k_avx2_load_ps | k_avx512_load_ps
 *   K_SIMD_MM(_add_ps)    _mm256_add_ps | _mm512_add_ps
 *   K_SIMD_SI(_and)       _mm256_and_si256 | _mm512_and_si512
 *   K_SIMD_PS, K_SIMD_PD, K_SIMD_I   __m256, __m256d, __m256i | __m512...
 *   K_SIMD_LANES(elem_t)  elements of type elem_t in one vector
 * Everything stays a compile-time constant, so a template instance
 * compiles to what the same loop written out for its level would.
 */
#ifndef K_SIMD_LEVEL_H
#define K_SIMD_LEVEL_H

#define K_SIMD_PASTE(a, b, c, d) a##b##c##d
#define K_SIMD_JOIN(a, b, c, d) K_SIMD_PASTE(a, b, c, d)

#define K_SIMD_FN(suffix) K_SIMD_JOIN(k_, K_SIMD_ISA, suffix, )
#define K_SIMD_MM(suffix) K_SIMD_JOIN(_mm, K_SIMD_BITS, suffix, )
#define K_SIMD_SI(op) K_SIMD_JOIN(_mm, K_SIMD_BITS, op##_si, K_SIMD_BITS)
#define K_SIMD_PS K_SIMD_JOIN(__m, K_SIMD_BITS, , )
#define K_SIMD_PD K_SIMD_JOIN(__m, K_SIMD_BITS, d, )
#define K_SIMD_I K_SIMD_JOIN(__m, K_SIMD_BITS, i, )
#define K_SIMD_LANES(elem_t) (K_SIMD_BITS / 8 / sizeof(elem_t))

#endif /* K_SIMD_LEVEL_H */
