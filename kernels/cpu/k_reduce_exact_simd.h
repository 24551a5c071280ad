/*
 * k_reduce_exact_simd.h - private to kernels/cpu: the vector kernels of
 * k_reduce_n_exact (f32, f16, bf16), written once for every ISA.
 * k_reduce_exact_avx2.c and k_reduce_exact_avx512.c include it after their
 * k_simd_<isa>.h, defining first K_SIMD_ISA, K_SIMD_BITS and K_SIMD_TARGET
 * (k_simd_level.h, from which this file derives K_X_ISA, K_X_TARGET, the
 * float, int and double vectors K_X_VEC / K_X_IVEC / K_X_DVEC and K_X_LANES,
 * the floats per K_X_VEC, two K_X_DVEC holding them) and these helpers,
 * k_<isa>_x_<name>, whose instructions differ by level:
 *   bad(hi, lo, span)  -> K_X_IVEC, nonzero in the lanes that are not certified
 *   any(b) -> int       b has a nonzero lane; lanes(b) -> unsigned, one bit per lane
 *   widen(v, *d0, *d1) / narrow_rn(d0, d1) -> K_X_VEC   fp32 <-> two fp64
 *       halves; narrow_rn rounds to nearest even; widen_f32(p, *d0, *d1)
 *       K_X_LANES f32 at p as two fp64 halves
 *   narrow_odd(d0, d1) -> K_X_VEC   rounds to fp32 with round-to-odd
 *       (k_numeric.h's k_num_f64_to_f32_round_odd)
 *   default_nan(v) -> K_X_VEC   NaN lanes replaced by 0x7FC00000
 * The helpers that are the same intrinsics at either width are below:
 *   load_f32 / load_f16 / load_bf16 (p) -> K_X_VEC   K_X_LANES elements,
 *       widened to fp32 in element order
 *   store_f32 / store_f16 / store_bf16 (p, v)        rounded to nearest even
 *       (k_internal.h's bits)
 *   track(v, *hi, *lo)  per lane: hi = max(hi, |v| bits), lo = min(lo, |v| bits - 1)
 *       as unsigned, so a zero (-1 = all ones) never lowers lo
 *   load_pd / store_pd  K_X_DVEC from / to K_X_LANES / 2 doubles
 *   add_ps, add_pd, div (fp32), or, set1_ps, set1_epi32
 *
 * How a kernel runs. Two vectors of elements at a time: for every source
 * in order, load both vectors (f16/bf16 widened to fp32, exactly), track
 * each lane's largest magnitude and smallest nonzero one (integer max/min
 * on the bits), and add the values in fp64 (each fp32 vector becomes two
 * fp64 vectors). At the end one test per lane: the exponent fields of the
 * two magnitudes differ by at most k_exact_span_max(n), and neither is inf
 * or NaN. That certifies that no fp64 addition rounded (k_internal.h has
 * the argument), so the fp64 sum is the exact sum, the very value the
 * scalar kernel holds for such an element (it adds the same numbers, also
 * without rounding), and the same conversion rounds it once: to nearest
 * even for f32 (and, divisor > 1, for the f32 that is then divided in
 * f32), with round-to-odd to f32 then to nearest even for f16 and bf16.
 * The lanes that fail get the scalar kernel's fp64 instead
 * (k_reduce_n_exact_one: TwoSum, then the long accumulator), computed
 * before anything is stored, and go through the same rounding. A zero sum
 * is -0 only when every input is -0, as IEEE fp64 addition gives in the
 * scalar kernel.
 *
 * A block reads all of its elements of every source before it writes its
 * elements of dst, and touches nothing else, so dst may be any source. The
 * common n = 2..4 get their own instances (the loop over sources unrolled);
 * f32 with n = 2 needs no fp64 at all (k_x_f32_pair below), nor do f16 and
 * bf16 steps whose spans are small enough for an exact fp32 sum.
 */
#ifndef K_REDUCE_EXACT_SIMD_H
#define K_REDUCE_EXACT_SIMD_H

#include "k_simd_level.h"

#define K_X_ISA K_SIMD_ISA
#define K_X_TARGET K_SIMD_TARGET
#define K_X_VEC K_SIMD_PS
#define K_X_IVEC K_SIMD_I
#define K_X_DVEC K_SIMD_PD
#define K_X_LANES K_SIMD_LANES(float)
/* K_X_FN(_x_track) is k_avx2_x_track or k_avx512_x_track. */
#define K_X_FN(suffix) K_SIMD_FN(suffix)

K_X_TARGET static inline K_X_VEC K_X_FN(_x_load_f32)(const float *p) { return K_SIMD_MM(_loadu_ps)(p); }
K_X_TARGET static inline K_X_VEC K_X_FN(_x_load_f16)(const uint16_t *p) { return K_SIMD_FN(_load_f16)(p); }
K_X_TARGET static inline K_X_VEC K_X_FN(_x_load_bf16)(const uint16_t *p) { return K_SIMD_FN(_load_bf16)(p); }
K_X_TARGET static inline void K_X_FN(_x_store_f32)(float *p, K_X_VEC v) { K_SIMD_MM(_storeu_ps)(p, v); }
K_X_TARGET static inline void K_X_FN(_x_store_f16)(uint16_t *p, K_X_VEC v) { K_SIMD_FN(_store_f16)(p, v); }
K_X_TARGET static inline void K_X_FN(_x_store_bf16)(uint16_t *p, K_X_VEC v) { K_SIMD_FN(_store_bf16)(p, v); }
K_X_TARGET static inline K_X_DVEC K_X_FN(_x_load_pd)(const double *p) { return K_SIMD_MM(_loadu_pd)(p); }
K_X_TARGET static inline void K_X_FN(_x_store_pd)(double *p, K_X_DVEC v) { K_SIMD_MM(_storeu_pd)(p, v); }

K_X_TARGET static inline K_X_IVEC K_X_FN(_x_set1_epi32)(int v) { return K_SIMD_MM(_set1_epi32)(v); }
K_X_TARGET static inline K_X_VEC K_X_FN(_x_set1_ps)(float v) { return K_SIMD_MM(_set1_ps)(v); }
K_X_TARGET static inline K_X_VEC K_X_FN(_x_add_ps)(K_X_VEC a, K_X_VEC b) { return K_SIMD_MM(_add_ps)(a, b); }
K_X_TARGET static inline K_X_DVEC K_X_FN(_x_add_pd)(K_X_DVEC a, K_X_DVEC b) { return K_SIMD_MM(_add_pd)(a, b); }
K_X_TARGET static inline K_X_VEC K_X_FN(_x_div)(K_X_VEC a, K_X_VEC b) { return K_SIMD_MM(_div_ps)(a, b); }
K_X_TARGET static inline K_X_IVEC K_X_FN(_x_or)(K_X_IVEC a, K_X_IVEC b) { return K_SIMD_SI(_or)(a, b); }

K_X_TARGET static inline void K_X_FN(_x_track)(K_X_VEC v, K_X_IVEC *hi, K_X_IVEC *lo)
{
    const K_X_IVEC mag =
        K_SIMD_SI(_and)(K_SIMD_JOIN(_mm, K_SIMD_BITS, _castps_si, K_SIMD_BITS)(v), K_SIMD_MM(_set1_epi32)(0x7FFFFFFF));
    *hi = K_SIMD_MM(_max_epu32)(*hi, mag);
    *lo = K_SIMD_MM(_min_epu32)(*lo, K_SIMD_MM(_sub_epi32)(mag, K_SIMD_MM(_set1_epi32)(1)));
}

/* One vector of elements i .. i + K_X_LANES - 1 of src, as fp32. */
K_X_TARGET __attribute__((always_inline)) static inline K_X_VEC K_X_FN(_x_load)(const void *src, size_t i,
                                                                                k_dtype_t dtype)
{
    if (dtype == K_DTYPE_F32) return K_X_FN(_x_load_f32)((const float *)src + i);
    if (dtype == K_DTYPE_F16) return K_X_FN(_x_load_f16)((const uint16_t *)src + i);
    return K_X_FN(_x_load_bf16)((const uint16_t *)src + i);
}

/* Element i .. of src as two fp64 halves: f32 converts straight from
 * memory (no shuffle to split a vector), f16/bf16 from the fp32 vector. */
K_X_TARGET __attribute__((always_inline)) static inline void
K_X_FN(_x_widen_at)(const void *src, size_t i, k_dtype_t dtype, K_X_VEC v, K_X_DVEC *d0, K_X_DVEC *d1)
{
    if (dtype == K_DTYPE_F32)
        K_X_FN(_x_widen_f32)((const float *)src + i, d0, d1);
    else
        K_X_FN(_x_widen)(v, d0, d1);
}

/* An fp32 vector to the dtype, rounded to nearest even. */
K_X_TARGET __attribute__((always_inline)) static inline void K_X_FN(_x_store_ps)(void *dst, size_t i, k_dtype_t dtype,
                                                                                 K_X_VEC f)
{
    if (dtype == K_DTYPE_F32)
        K_X_FN(_x_store_f32)((float *)dst + i, f);
    else if (dtype == K_DTYPE_F16)
        K_X_FN(_x_store_f16)((uint16_t *)dst + i, f);
    else
        K_X_FN(_x_store_bf16)((uint16_t *)dst + i, f);
}

/* The certified exact sum (two fp64 halves) rounded once to the dtype. */
K_X_TARGET __attribute__((always_inline)) static inline void
K_X_FN(_x_store)(void *dst, size_t i, k_dtype_t dtype, K_X_DVEC d0, K_X_DVEC d1, int divide, K_X_VEC divisor)
{
    K_X_VEC f;
    if (divide)
        f = K_X_FN(_x_div)(K_X_FN(_x_narrow_rn)(d0, d1), divisor);
    else if (dtype == K_DTYPE_F32)
        f = K_X_FN(_x_narrow_rn)(d0, d1);
    else
        f = K_X_FN(_x_narrow_odd)(d0, d1);
    K_X_FN(_x_store_ps)(dst, i, dtype, f);
}

/* The lanes of elements i.. that bad marks, replaced by the scalar
 * kernel's fp64 (k_reduce_n_exact_one: exact, or rounded to odd from the
 * exact sum, or NaN / inf), which the vector rounding turns into the same
 * bits as the scalar kernel's: to nearest from a value rounded to odd at
 * 53 >= 24 + 2 bits is the one rounding of the exact sum, round-to-odd
 * twice is round-to-odd once, and the NaN that k_reduce_n_exact_one
 * returns converts to the default NaN (0x7FC00000; f16 0x7E00 and bf16
 * 0x7FC0 from it). Called before dst is written. */
K_X_TARGET __attribute__((noinline)) static void
K_X_FN(_x_redo)(const void *const *srcs, int n, size_t i, k_dtype_t dtype, K_X_IVEC bad, K_X_DVEC *d0, K_X_DVEC *d1)
{
    double sum[K_X_LANES];
    K_X_FN(_x_store_pd)(sum, *d0);
    K_X_FN(_x_store_pd)(sum + K_X_LANES / 2, *d1);
    for (unsigned mask = K_X_FN(_x_lanes)(bad); mask; mask &= mask - 1) {
        const int lane = __builtin_ctz(mask);
        sum[lane] = k_reduce_n_exact_one(srcs, n, i + (size_t)lane, dtype);
    }
    *d0 = K_X_FN(_x_load_pd)(sum);
    *d1 = K_X_FN(_x_load_pd)(sum + K_X_LANES / 2);
}

/* Elements [begin, end); dtype and (in the instances for 2..4) n are
 * constants once inlined. */
K_X_TARGET __attribute__((always_inline)) static inline void
K_X_FN(_x_run)(void *dst, const void *const *srcs, int n, size_t begin, size_t end, k_dtype_t dtype, int64_t divisor)
{
    const int span = k_exact_span_max(n);
    size_t i = begin;
    if (span >= 0) {
        const K_X_IVEC vspan = K_X_FN(_x_set1_epi32)(span);
        const int divide = divisor > 1;
        const K_X_VEC vdivisor = K_X_FN(_x_set1_ps)((float)divisor); /* the scalar kernel's (float)divisor */
        const K_X_IVEC zero = K_X_FN(_x_set1_epi32)(0), ones = K_X_FN(_x_set1_epi32)(-1);
        /* f16 / bf16: their inputs have 11 / 8 significant bits, so the
         * argument of k_exact_span_max, with fp32's 24 bits for fp64's 53
         * and 11 / 8 for 24, makes the fp32 sum exact when the span is at
         * most 24 - 11 - k / 24 - 8 - k: then it is added in fp32 and
         * rounded once to the dtype (or divided first), and only steps
         * where a lane fails that take the fp64 way below (reading their
         * inputs again, from L1). */
        const int span32 = span - 5 - (dtype == K_DTYPE_F16 ? 11 : 8);
        const K_X_IVEC vspan32 = K_X_FN(_x_set1_epi32)(span32);
        /* Two vectors per step: more loads in flight. */
        for (; i + 2 * K_X_LANES <= end; i += 2 * K_X_LANES) {
            if (dtype != K_DTYPE_F32 && span32 >= 0) {
                K_X_IVEC hi0 = zero, lo0 = ones, hi1 = zero, lo1 = ones;
                K_X_VEC f0 = K_X_FN(_x_load)(srcs[0], i, dtype), f1 = K_X_FN(_x_load)(srcs[0], i + K_X_LANES, dtype);
                K_X_FN(_x_track)(f0, &hi0, &lo0);
                K_X_FN(_x_track)(f1, &hi1, &lo1);
                for (int j = 1; j < n; j++) {
                    const K_X_VEC x = K_X_FN(_x_load)(srcs[j], i, dtype);
                    const K_X_VEC y = K_X_FN(_x_load)(srcs[j], i + K_X_LANES, dtype);
                    K_X_FN(_x_track)(x, &hi0, &lo0);
                    K_X_FN(_x_track)(y, &hi1, &lo1);
                    f0 = K_X_FN(_x_add_ps)(f0, x);
                    f1 = K_X_FN(_x_add_ps)(f1, y);
                }
                if (!K_X_FN(_x_any)(
                        K_X_FN(_x_or)(K_X_FN(_x_bad)(hi0, lo0, vspan32), K_X_FN(_x_bad)(hi1, lo1, vspan32)))) {
                    if (divide) {
                        f0 = K_X_FN(_x_div)(f0, vdivisor);
                        f1 = K_X_FN(_x_div)(f1, vdivisor);
                    }
                    K_X_FN(_x_store_ps)(dst, i, dtype, f0);
                    K_X_FN(_x_store_ps)(dst, i + K_X_LANES, dtype, f1);
                    continue;
                }
            }
            K_X_IVEC hi0 = zero, lo0 = ones, hi1 = zero, lo1 = ones;
            K_X_DVEC a0, a1, b0, b1, w0, w1;
            K_X_VEC x = K_X_FN(_x_load)(srcs[0], i, dtype), y = K_X_FN(_x_load)(srcs[0], i + K_X_LANES, dtype);
            K_X_FN(_x_track)(x, &hi0, &lo0);
            K_X_FN(_x_track)(y, &hi1, &lo1);
            K_X_FN(_x_widen_at)(srcs[0], i, dtype, x, &a0, &a1);
            K_X_FN(_x_widen_at)(srcs[0], i + K_X_LANES, dtype, y, &b0, &b1);
            for (int j = 1; j < n; j++) {
                x = K_X_FN(_x_load)(srcs[j], i, dtype);
                y = K_X_FN(_x_load)(srcs[j], i + K_X_LANES, dtype);
                K_X_FN(_x_track)(x, &hi0, &lo0);
                K_X_FN(_x_track)(y, &hi1, &lo1);
                K_X_FN(_x_widen_at)(srcs[j], i, dtype, x, &w0, &w1);
                a0 = K_X_FN(_x_add_pd)(a0, w0);
                a1 = K_X_FN(_x_add_pd)(a1, w1);
                K_X_FN(_x_widen_at)(srcs[j], i + K_X_LANES, dtype, y, &w0, &w1);
                b0 = K_X_FN(_x_add_pd)(b0, w0);
                b1 = K_X_FN(_x_add_pd)(b1, w1);
            }
            const K_X_IVEC bad0 = K_X_FN(_x_bad)(hi0, lo0, vspan), bad1 = K_X_FN(_x_bad)(hi1, lo1, vspan);
            if (K_X_FN(_x_any)(K_X_FN(_x_or)(bad0, bad1))) {
                K_X_FN(_x_redo)(srcs, n, i, dtype, bad0, &a0, &a1);
                K_X_FN(_x_redo)(srcs, n, i + K_X_LANES, dtype, bad1, &b0, &b1);
            }
            K_X_FN(_x_store)(dst, i, dtype, a0, a1, divide, vdivisor);
            K_X_FN(_x_store)(dst, i + K_X_LANES, dtype, b0, b1, divide, vdivisor);
        }
        if (i + K_X_LANES <= end) {
            K_X_IVEC hi0 = zero, lo0 = ones;
            K_X_DVEC a0, a1, w0, w1;
            K_X_VEC x = K_X_FN(_x_load)(srcs[0], i, dtype);
            K_X_FN(_x_track)(x, &hi0, &lo0);
            K_X_FN(_x_widen_at)(srcs[0], i, dtype, x, &a0, &a1);
            for (int j = 1; j < n; j++) {
                x = K_X_FN(_x_load)(srcs[j], i, dtype);
                K_X_FN(_x_track)(x, &hi0, &lo0);
                K_X_FN(_x_widen_at)(srcs[j], i, dtype, x, &w0, &w1);
                a0 = K_X_FN(_x_add_pd)(a0, w0);
                a1 = K_X_FN(_x_add_pd)(a1, w1);
            }
            const K_X_IVEC bad0 = K_X_FN(_x_bad)(hi0, lo0, vspan);
            if (K_X_FN(_x_any)(bad0)) K_X_FN(_x_redo)(srcs, n, i, dtype, bad0, &a0, &a1);
            K_X_FN(_x_store)(dst, i, dtype, a0, a1, divide, vdivisor);
            i += K_X_LANES;
        }
    }
    k_reduce_n_exact_scalar(dst, srcs, n, i, end, dtype, divisor);
}

/* f32, n = 2: IEEE fp32 addition is the exact sum rounded once to nearest
 * even (overflow, subnormals and the sign of zero included), so a + b is
 * the result, but for the NaNs: a NaN input, or inf + -inf, must give the
 * default NaN 0x7FC00000 (the addition would keep a payload, or give
 * x86's negative default). Then the f32 division, as the scalar kernel
 * does (a quiet NaN divided stays itself). Reads both sources' elements
 * before it writes them: dst may be either. */
K_X_TARGET static void K_X_FN(_x_f32_pair)(void *dst, const void *const *srcs, size_t begin, size_t end,
                                           int64_t divisor)
{
    const float *a = srcs[0], *b = srcs[1];
    float *d = dst;
    const int divide = divisor > 1;
    const K_X_VEC vdivisor = K_X_FN(_x_set1_ps)((float)divisor);
    size_t i = begin;
    for (; i + 2 * K_X_LANES <= end; i += 2 * K_X_LANES) {
        K_X_VEC s0 = K_X_FN(_x_add_ps)(K_X_FN(_x_load_f32)(a + i), K_X_FN(_x_load_f32)(b + i));
        K_X_VEC s1 = K_X_FN(_x_add_ps)(K_X_FN(_x_load_f32)(a + i + K_X_LANES), K_X_FN(_x_load_f32)(b + i + K_X_LANES));
        s0 = K_X_FN(_x_default_nan)(s0);
        s1 = K_X_FN(_x_default_nan)(s1);
        if (divide) {
            s0 = K_X_FN(_x_div)(s0, vdivisor);
            s1 = K_X_FN(_x_div)(s1, vdivisor);
        }
        K_X_FN(_x_store_f32)(d + i, s0);
        K_X_FN(_x_store_f32)(d + i + K_X_LANES, s1);
    }
    k_reduce_n_exact_scalar(dst, srcs, 2, i, end, K_DTYPE_F32, divisor);
}

/* One kernel per dtype, with n = 2, 3, 4 as constants. */
#define K_X_KERNEL(type, dtype_value)                                                                             \
    K_X_TARGET static void K_X_FN(_x_##type)(void *dst, const void *const *srcs, int n, size_t begin, size_t end, \
                                             int64_t divisor)                                                     \
    {                                                                                                             \
        switch (n) {                                                                                              \
        case 2: K_X_FN(_x_run)(dst, srcs, 2, begin, end, dtype_value, divisor); break;                            \
        case 3: K_X_FN(_x_run)(dst, srcs, 3, begin, end, dtype_value, divisor); break;                            \
        case 4: K_X_FN(_x_run)(dst, srcs, 4, begin, end, dtype_value, divisor); break;                            \
        default: K_X_FN(_x_run)(dst, srcs, n, begin, end, dtype_value, divisor); break;                           \
        }                                                                                                         \
    }

K_X_KERNEL(f32, K_DTYPE_F32)
K_X_KERNEL(f16, K_DTYPE_F16)
K_X_KERNEL(bf16, K_DTYPE_BF16)

/* k_reduce_n_exact_<isa> (k_internal.h); dtype is f32, f16 or bf16. */
void K_SIMD_JOIN(k_reduce_n_exact_, K_X_ISA, , )(void *dst, const void *const *srcs, int n, size_t begin, size_t end,
                                                 k_dtype_t dtype, int64_t divisor)
{
    if (dtype == K_DTYPE_F32 && n == 2)
        K_X_FN(_x_f32_pair)(dst, srcs, begin, end, divisor);
    else if (dtype == K_DTYPE_F32)
        K_X_FN(_x_f32)(dst, srcs, n, begin, end, divisor);
    else if (dtype == K_DTYPE_F16)
        K_X_FN(_x_f16)(dst, srcs, n, begin, end, divisor);
    else
        K_X_FN(_x_bf16)(dst, srcs, n, begin, end, divisor);
}

#endif /* K_REDUCE_EXACT_SIMD_H */
