/*
 * k_reduce_n_simd.h - private to kernels/cpu: the vector k_reduce_n kernels
 * (f32, f16, bf16 x SUM/MIN/MAX/PROD) and their table, written once for
 * every SIMD level. k_reduce_n_avx2.c and k_reduce_n_avx512.c include it
 * after their k_simd_<isa>.h, defining first the names of k_simd_level.h
 * (K_SIMD_ISA, K_SIMD_BITS, K_SIMD_TARGET).
 *
 * How a kernel runs: a block of 4 vectors of elements (64 f32 on AVX-512)
 * loads 4 accumulators from srcs[0], folds in the same 4 vectors of every
 * further source in order, divides if asked, and stores once. The
 * accumulators stay in registers across the n sources, so each input byte
 * is read once and dst written once, with no buffer in between; 4 vectors
 * per source keep enough loads in flight to saturate memory. A block of 2
 * vectors follows, then the scalar kernel of k_reduce_n.c takes the last
 * < 2 vectors' worth. Every operation (widening, fp32 op in source order,
 * IEEE division, narrowing) is the scalar kernel's, which is what makes the
 * two bit-identical.
 *
 * Loads for a whole block, from every source, happen before its stores,
 * and a block touches only its own elements of each array: that makes dst
 * == any source safe.
 */
#ifndef K_REDUCE_N_SIMD_H
#define K_REDUCE_N_SIMD_H

#include "k_simd_level.h"

#define K_N_LANES K_SIMD_LANES(float)

/* ---- two vectors of elements as two fp32 vectors, per dtype ------------------
 * f32 and f16 load two consecutive vectors; bf16 has its own pair (lanes
 * interleaved, undone by its store), which is why the kernels work in pairs. */

K_SIMD_TARGET static inline void K_SIMD_FN(_n_load2_f32)(const float *p, K_SIMD_PS *lo, K_SIMD_PS *hi)
{
    *lo = K_SIMD_FN(_load_ps)(p);
    *hi = K_SIMD_FN(_load_ps)(p + K_N_LANES);
}

K_SIMD_TARGET static inline void K_SIMD_FN(_n_store2_f32)(float *p, K_SIMD_PS lo, K_SIMD_PS hi)
{
    K_SIMD_FN(_store_ps)(p, lo);
    K_SIMD_FN(_store_ps)(p + K_N_LANES, hi);
}

K_SIMD_TARGET static inline void K_SIMD_FN(_n_load2_f16)(const uint16_t *p, K_SIMD_PS *lo, K_SIMD_PS *hi)
{
    *lo = K_SIMD_FN(_load_f16)(p);
    *hi = K_SIMD_FN(_load_f16)(p + K_N_LANES);
}

K_SIMD_TARGET static inline void K_SIMD_FN(_n_store2_f16)(uint16_t *p, K_SIMD_PS lo, K_SIMD_PS hi)
{
    K_SIMD_FN(_store_f16)(p, lo);
    K_SIMD_FN(_store_f16)(p + K_N_LANES, hi);
}

K_SIMD_TARGET static inline void K_SIMD_FN(_n_load2_bf16)(const uint16_t *p, K_SIMD_PS *lo, K_SIMD_PS *hi)
{
    K_SIMD_FN(_load_bf16_pair)(p, lo, hi);
}

K_SIMD_TARGET static inline void K_SIMD_FN(_n_store2_bf16)(uint16_t *p, K_SIMD_PS lo, K_SIMD_PS hi)
{
    K_SIMD_FN(_store_bf16_pair)(p, lo, hi);
}

#define K_N_SUM(a, b) K_SIMD_MM(_add_ps)(a, b)
#define K_N_PROD(a, b) K_SIMD_MM(_mul_ps)(a, b)
#define K_N_MIN(a, b) K_SIMD_FN(_min_ps)(a, b)
#define K_N_MAX(a, b) K_SIMD_FN(_max_ps)(a, b)

/* ---- kernel template ---------------------------------------------------------------
 * K_N_KERNEL(type, op, elem_t, vop) defines k_<isa>_n_<type>_<op>, whose
 * tail is k_reduce_n_scalar_<type>_<op>; n >= 2 (the entry point handles
 * n == 1).
 *
 * The block helper folds `pairs` (1 or 2, a constant once inlined, so the
 * `pairs == 2` halves vanish from the second loop) pairs of vectors
 * starting at element i. Sources 0 and 1 are held in registers (s0, s1);
 * the others are reloaded from srcs[] in every block, because the compiler
 * must assume the (may_alias) vector stores to dst could change srcs[]. */
#define K_N_KERNEL(type, op, elem_t, vop)                                                                          \
    K_SIMD_TARGET __attribute__((always_inline)) static inline void K_SIMD_FN(_n_block_##type##_##op)(             \
        elem_t * d, const elem_t *s0, const elem_t *s1, const void *const *srcs, int n, size_t i, int pairs,       \
        int divide, K_SIMD_PS divisor)                                                                             \
    {                                                                                                              \
        K_SIMD_PS a0, a1, a2, a3, x0, x1, x2, x3;                                                                  \
        K_SIMD_FN(_n_load2_##type)(s0 + i, &a0, &a1);                                                              \
        K_SIMD_FN(_n_load2_##type)(s1 + i, &x0, &x1);                                                              \
        a0 = vop(a0, x0);                                                                                          \
        a1 = vop(a1, x1);                                                                                          \
        a2 = a0, a3 = a1; /* defined even when pairs == 1 */                                                       \
        if (pairs == 2) {                                                                                          \
            K_SIMD_FN(_n_load2_##type)(s0 + i + 2 * K_N_LANES, &a2, &a3);                                          \
            K_SIMD_FN(_n_load2_##type)(s1 + i + 2 * K_N_LANES, &x2, &x3);                                          \
            a2 = vop(a2, x2);                                                                                      \
            a3 = vop(a3, x3);                                                                                      \
        }                                                                                                          \
        for (int j = 2; j < n; j++) {                                                                              \
            const elem_t *q = (const elem_t *)srcs[j] + i;                                                         \
            K_SIMD_FN(_n_load2_##type)(q, &x0, &x1);                                                               \
            a0 = vop(a0, x0);                                                                                      \
            a1 = vop(a1, x1);                                                                                      \
            if (pairs == 2) {                                                                                      \
                K_SIMD_FN(_n_load2_##type)(q + 2 * K_N_LANES, &x2, &x3);                                           \
                a2 = vop(a2, x2);                                                                                  \
                a3 = vop(a3, x3);                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
        if (divide) {                                                                                              \
            a0 = K_SIMD_MM(_div_ps)(a0, divisor);                                                                  \
            a1 = K_SIMD_MM(_div_ps)(a1, divisor);                                                                  \
            a2 = K_SIMD_MM(_div_ps)(a2, divisor);                                                                  \
            a3 = K_SIMD_MM(_div_ps)(a3, divisor);                                                                  \
        }                                                                                                          \
        K_SIMD_FN(_n_store2_##type)(d + i, a0, a1);                                                                \
        if (pairs == 2) K_SIMD_FN(_n_store2_##type)(d + i + 2 * K_N_LANES, a2, a3);                                \
    }                                                                                                              \
                                                                                                                   \
    K_SIMD_TARGET static void K_SIMD_FN(_n_##type##_##op)(void *dst, const void *const *srcs, int n, size_t begin, \
                                                          size_t end, const k_reduce_n_args_t *args)               \
    {                                                                                                              \
        elem_t *d = dst;                                                                                           \
        const elem_t *s0 = srcs[0], *s1 = srcs[1];                                                                 \
        const int divide = args->divisor > 1;                                                                      \
        const K_SIMD_PS divisor = K_SIMD_MM(_set1_ps)(args->f32);                                                  \
        size_t i = begin;                                                                                          \
        for (; i + 4 * K_N_LANES <= end; i += 4 * K_N_LANES)                                                       \
            K_SIMD_FN(_n_block_##type##_##op)(d, s0, s1, srcs, n, i, 2, divide, divisor);                          \
        for (; i + 2 * K_N_LANES <= end; i += 2 * K_N_LANES)                                                       \
            K_SIMD_FN(_n_block_##type##_##op)(d, s0, s1, srcs, n, i, 1, divide, divisor);                          \
        k_reduce_n_scalar_##type##_##op(dst, srcs, n, i, end, args);                                               \
    }

#define K_N_KERNELS(type, elem_t)          \
    K_N_KERNEL(type, sum, elem_t, K_N_SUM) \
    K_N_KERNEL(type, min, elem_t, K_N_MIN) \
    K_N_KERNEL(type, max, elem_t, K_N_MAX) \
    K_N_KERNEL(type, prod, elem_t, K_N_PROD)

K_N_KERNELS(f32, float)
K_N_KERNELS(f16, uint16_t)
K_N_KERNELS(bf16, uint16_t)

#define K_N_ROW(type)                                                                 \
    [K_OP_SUM] = K_SIMD_FN(_n_##type##_sum), [K_OP_MIN] = K_SIMD_FN(_n_##type##_min), \
    [K_OP_MAX] = K_SIMD_FN(_n_##type##_max), [K_OP_PROD] = K_SIMD_FN(_n_##type##_prod)

/* k_reduce_n_table_<isa>; f64 and the integers run the chain, whose
 * k_reduce calls take this same ISA's vector kernels. */
const k_reduce_n_table_t K_SIMD_JOIN(k_reduce_n_table_, K_SIMD_ISA, , ) = K_REDUCE_N_TABLE(K_N_ROW(f32), K_N_ROW(f16),
                                                                                           K_N_ROW(bf16));

#endif /* K_REDUCE_N_SIMD_H */
