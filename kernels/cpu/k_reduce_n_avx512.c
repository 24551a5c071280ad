/*
 * k_reduce_n_avx512.c - k_reduce_n's vector kernels for AVX-512 F/BW/VL/DQ:
 * the template k_reduce_n_simd.h instantiated with this ISA's vectors
 * (__m512, 16 floats) and the helpers of k_simd_avx512.h. k_dispatch.c
 * picks the table only when k_isa_current() says avx512.
 */
#if defined(__x86_64__)

#include "k_simd_avx512.h"

#define K_N_ISA avx512
#define K_N_TARGET K_AVX512
#define K_N_MM _mm512
#define K_N_VEC __m512
#define K_N_LANES 16
#define K_N_LOAD_BF16 k_avx512_load_bf16x32
#define K_N_STORE_BF16 k_avx512_store_bf16x32
#include "k_reduce_n_simd.h"

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_n_avx512_unused_t;
#endif /* __x86_64__ */
