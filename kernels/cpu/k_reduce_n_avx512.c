/*
 * k_reduce_n_avx512.c - k_reduce_n's vector kernels for AVX-512 F/BW/VL/DQ:
 * the template k_reduce_n_simd.h instantiated with this level's vectors
 * (512 bits, 16 floats) and the helpers of k_simd_avx512.h. k_dispatch.c
 * picks the table only when k_isa_current() says avx512.
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

#define K_SIMD_ISA avx512
#define K_SIMD_BITS 512
#define K_SIMD_TARGET K_AVX512
#include "k_reduce_n_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_n_avx512_unused_t;
#endif /* __x86_64__ */
