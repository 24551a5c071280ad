/*
 * k_reduce_n_avx2.c - k_reduce_n's vector kernels for AVX2 + FMA + F16C:
 * the template k_reduce_n_simd.h instantiated with this level's vectors
 * (256 bits, 8 floats) and the helpers of k_simd_avx2.h. k_dispatch.c
 * picks the table only when k_isa_current() says avx2.
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

#define K_SIMD_ISA avx2
#define K_SIMD_BITS 256
#define K_SIMD_TARGET K_AVX2
#include "k_reduce_n_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_n_avx2_unused_t;
#endif /* __x86_64__ */
