/* k_reduce_exact.c - k_reduce_n_exact: the n-way SUM of f32/f16/bf16 whose
 * result is the exact sum of the inputs rounded once to the dtype, so it
 * depends only on the multiset of addends (not on their order, nor on how
 * many sources they were split across). The runtime's HORA_REPRODUCIBLE=exact
 * all-reduce runs it on every element's contributions.
 *
 * Two paths per element, both giving the correctly rounded exact sum:
 *
 *  - fast: the inputs (f16/bf16 widened to f32, exactly) are added in fp64,
 *    and every addition's rounding error is computed with Knuth's TwoSum (six
 *    flops, no branch). If every error is zero, no addition rounded, the
 *    fp64 sum is the exact sum and one conversion rounds it. That holds
 *    whenever an element's inputs span fewer than about 29 - log2(n) binades
 *    (the 53-bit double holds the 24-bit mantissas with room to spare):
 *    nearly always for gradients. The loops run over blocks of elements, one
 *    source at a time, so the compiler vectorises them.
 *  - exact: any element whose error sum is not zero (or not finite) is redone
 *    in a long accumulator: a fixed-point integer wide enough for the whole
 *    f32 range (2^-149 .. 2^128, 277 bits, plus carries), kept as nine 32-bit
 *    digits in signed 64-bit words (carry-save: each add touches two digits;
 *    2^31 adds fit before a carry could overflow). Integer addition is
 *    associative, so the order of the inputs cannot matter. The accumulator
 *    is normalised once and rounded to fp64 with round-to-odd (truncate, set
 *    the last bit when anything was dropped).
 *
 * The rounding to the dtype: f32 rounds the fp64 value to nearest even. f16
 * and bf16 first round it to f32 with round-to-odd, then to the dtype to
 * nearest even: round-to-odd to a precision at least two bits wider than
 * the target composes with the final rounding into one correct rounding,
 * where two round-to-nearest steps could round twice. Non-finite inputs: a
 * NaN, or +inf with -inf, give the dtype's default quiet NaN (its payload
 * would otherwise depend on the order); +-inf alone give that infinity. A
 * zero sum is -0 only when every input is -0 (what IEEE addition gives in
 * any order). divisor > 1 (AVG): the exact sum is rounded to f32, divided in
 * f32 and rounded to the dtype (k_div's arithmetic).
 *
 * This is the scalar path (baseline x86-64) and the reference of the vector
 * kernels (k_reduce_exact_simd.h), which hand it their tails and every
 * vector of elements their cheaper exactness test cannot certify. The entry
 * point, k_reduce_n_exact, is in k_dispatch.c.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "k_cpu.h"
#include "k_internal.h"

/* Elements per block of the fast path: two fp64 arrays of it stay in L1. */
#define K_EXACT_BLOCK 512
/* 32-bit digits of the long accumulator: 9 x 32 = 288 bits >= 277 + carries. */
#define K_EXACT_DIGITS 9

static inline double k_exact_load(const void *src, size_t i, k_dtype_t dtype)
{
    if (dtype == K_DTYPE_F32) return ((const float *)src)[i];
    if (dtype == K_DTYPE_F16) return k_num_f16_to_f32(((const uint16_t *)src)[i]);
    return k_num_bf16_to_f32(((const uint16_t *)src)[i]);
}

/* The fp64 value (exact, or round-to-odd of the exact sum) to the dtype. */
static inline void k_exact_store(void *dst, size_t i, k_dtype_t dtype, double d, int64_t divisor)
{
    if (isnan(d)) {
        if (dtype == K_DTYPE_F32)
            ((float *)dst)[i] = k_num_f32_from_bits(0x7FC00000u);
        else
            ((uint16_t *)dst)[i] = dtype == K_DTYPE_F16 ? 0x7E00u : 0x7FC0u;
        return;
    }
    float f;
    if (divisor > 1)
        f = (float)d / (float)divisor;
    else
        f = dtype == K_DTYPE_F32 ? (float)d : k_num_f64_to_f32_round_odd(d);
    if (dtype == K_DTYPE_F32)
        ((float *)dst)[i] = f;
    else if (dtype == K_DTYPE_F16)
        ((uint16_t *)dst)[i] = k_num_f32_to_f16(f);
    else
        ((uint16_t *)dst)[i] = k_num_f32_to_bf16(f);
}

/* The exact sum of element i of the n sources, as an fp64 rounded to odd
 * (exact whenever it fits 53 bits); NaN for a NaN or for inf - inf. */
static double k_exact_sum_slow(const void *const *srcs, int n, size_t i, k_dtype_t dtype)
{
    int64_t acc[K_EXACT_DIGITS] = {0};
    int pos_inf = 0, neg_inf = 0, nan = 0, all_neg_zero = 1;
    for (int k = 0; k < n; k++) {
        const float v = (float)k_exact_load(srcs[k], i, dtype);
        const uint32_t b = k_num_f32_bits(v);
        uint32_t e = (b >> 23) & 0xFFu;
        uint64_t m = b & 0x7FFFFFu;
        if (b != 0x80000000u) all_neg_zero = 0;
        if (e == 0xFFu) {
            if (m)
                nan = 1;
            else if (b >> 31)
                neg_inf = 1;
            else
                pos_inf = 1;
            continue;
        }
        if (e)
            m |= 0x800000u;
        else
            e = 1; /* subnormal: the exponent of the smallest normal, no hidden bit */
        if (!m) continue;
        /* v = m * 2^(e - 150): bit 0 of the accumulator weighs 2^-149. */
        const unsigned at = e - 1, d = at / 32;
        const uint64_t w = m << (at % 32); /* at most 55 bits: two digits */
        const int64_t lo = (int64_t)(w & 0xFFFFFFFFu), hi = (int64_t)(w >> 32);
        if (b >> 31) {
            acc[d] -= lo;
            acc[d + 1] -= hi;
        } else {
            acc[d] += lo;
            acc[d + 1] += hi;
        }
    }
    if (nan || (pos_inf && neg_inf)) return NAN;
    if (pos_inf) return INFINITY;
    if (neg_inf) return -INFINITY;

    /* Carries up: digits 0..7 in [0, 2^32), the top one signed. */
    double sign = 1.0;
    for (int pass = 0; pass < 2; pass++) {
        for (int d = 0; d + 1 < K_EXACT_DIGITS; d++) {
            const int64_t carry = (acc[d] - (int64_t)((uint64_t)acc[d] & 0xFFFFFFFFu)) / ((int64_t)1 << 32);
            acc[d] -= carry * ((int64_t)1 << 32);
            acc[d + 1] += carry;
        }
        if (acc[K_EXACT_DIGITS - 1] >= 0) break;
        /* Negative: take the magnitude and normalise it once more. */
        sign = -1.0;
        for (int d = 0; d < K_EXACT_DIGITS; d++) acc[d] = -acc[d];
    }
    int top = K_EXACT_DIGITS - 1;
    while (top >= 0 && acc[top] == 0) top--;
    if (top < 0) return all_neg_zero ? -0.0 : 0.0;

    /* The top three digits (at least 65 bits when there are three) and a
     * sticky bit for the rest, rounded to 53 bits with round-to-odd. */
    const int low = top >= 2 ? top - 2 : 0;
    unsigned __int128 w = 0;
    for (int d = top; d >= low; d--) w = (w << 32) | (uint64_t)acc[d];
    int sticky = 0;
    for (int d = 0; d < low; d++) sticky |= acc[d] != 0;
    int bits = 0;
    for (unsigned __int128 t = w; t; t >>= 1) bits++;
    int shift = 0;
    if (bits > 53) {
        shift = bits - 53;
        sticky |= (w & (((unsigned __int128)1 << shift) - 1)) != 0;
        w >>= shift;
    }
    uint64_t mant = (uint64_t)w;
    if (sticky) mant |= 1u;
    return sign * ldexp((double)mant, shift + 32 * low - 149);
}

/* One block of m elements starting at element base. */
static void k_exact_block(void *dst, const void *const *srcs, int n, size_t base, size_t m, k_dtype_t dtype,
                          int64_t divisor)
{
    double s[K_EXACT_BLOCK], err[K_EXACT_BLOCK];
    if (dtype == K_DTYPE_F32) {
        const float *x0 = (const float *)srcs[0] + base;
        if (n >= 2) {
            /* The first two sources in one pass (all of the work at n = 2). */
            const float *x1 = (const float *)srcs[1] + base;
            for (size_t i = 0; i < m; i++) {
                const double a = x0[i], x = x1[i], t = a + x, xv = t - a;
                err[i] = (a - a) + fabs((a - (t - xv)) + (x - xv)); /* NaN for a non-finite first input */
                s[i] = t;
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                s[i] = x0[i];
                err[i] = s[i] - s[i];
            }
        }
        for (int k = 2; k < n; k++) {
            const float *xk = (const float *)srcs[k] + base;
            for (size_t i = 0; i < m; i++) {
                /* TwoSum: t + e == s + x exactly. */
                const double x = xk[i], t = s[i] + x, xv = t - s[i];
                const double e = (s[i] - (t - xv)) + (x - xv);
                err[i] += fabs(e);
                s[i] = t;
            }
        }
    } else {
        for (size_t i = 0; i < m; i++) {
            s[i] = k_exact_load(srcs[0], base + i, dtype);
            err[i] = s[i] - s[i];
        }
        for (int k = 1; k < n; k++)
            for (size_t i = 0; i < m; i++) {
                const double x = k_exact_load(srcs[k], base + i, dtype), t = s[i] + x, xv = t - s[i];
                const double e = (s[i] - (t - xv)) + (x - xv);
                err[i] += fabs(e);
                s[i] = t;
            }
    }
    /* The elements some addition rounded (or that met a non-finite input)
     * again, exactly; before any output is written, since dst may be one
     * of the sources. */
    int bad = 0;
    for (size_t i = 0; i < m; i++) bad |= !(err[i] == 0.0);
    for (size_t i = 0; i < m && bad; i++)
        if (!(err[i] == 0.0)) s[i] = k_exact_sum_slow(srcs, n, base + i, dtype);
    if (dtype == K_DTYPE_F32 && divisor == 1) {
        float *out = (float *)dst + base;
        for (size_t i = 0; i < m; i++) out[i] = (float)s[i]; /* NaN: the default quiet NaN */
    } else {
        for (size_t i = 0; i < m; i++) k_exact_store(dst, base + i, dtype, s[i], divisor);
    }
}

double k_reduce_n_exact_one(const void *const *srcs, int n, size_t i, k_dtype_t dtype)
{
    double s = k_exact_load(srcs[0], i, dtype), err = s - s; /* NaN for a non-finite input */
    for (int k = 1; k < n; k++) {
        const double x = k_exact_load(srcs[k], i, dtype), t = s + x, xv = t - s;
        err += fabs((s - (t - xv)) + (x - xv));
        s = t;
    }
    return err == 0.0 ? s : k_exact_sum_slow(srcs, n, i, dtype);
}

void k_reduce_n_exact_scalar(void *dst, const void *const *srcs, int n, size_t begin, size_t end, k_dtype_t dtype,
                             int64_t divisor)
{
    for (size_t base = begin; base < end; base += K_EXACT_BLOCK) {
        const size_t m = end - base < K_EXACT_BLOCK ? end - base : K_EXACT_BLOCK;
        k_exact_block(dst, srcs, n, base, m, dtype, divisor);
    }
}
