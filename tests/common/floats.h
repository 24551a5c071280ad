/*
 * floats.h - the kernel tests' float elements (f32, f16, bf16, little
 * endian): read one as a double, write one rounded to its dtype, one ulp of
 * a dtype, and "within a bound" with NaN and infinity handled. Header-only
 * (static inline); needs kernels/include (k_cpu.h's conversions, which
 * test_kernels checks exhaustively).
 */
#ifndef HORA_TEST_FLOATS_H
#define HORA_TEST_FLOATS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "k_cpu.h"

/* Element i of p: f32, or f16 / bf16 widened exactly (any other dtype is
 * read as f32). */
static inline double test_float_get(const void *p, k_dtype_t dt, size_t i)
{
    if (dt == K_DTYPE_F16 || dt == K_DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        return dt == K_DTYPE_F16 ? k_f16_to_f32(h) : k_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, (const char *)p + 4 * i, 4);
    return f;
}

/* Writes v as element i of p, rounded to f32, then (f16, bf16) to nearest
 * even through k_cpu.h. */
static inline void test_float_put(void *p, k_dtype_t dt, size_t i, double v)
{
    if (dt == K_DTYPE_F16 || dt == K_DTYPE_BF16) {
        uint16_t h = dt == K_DTYPE_F16 ? k_f32_to_f16((float)v) : k_f32_to_bf16((float)v);
        memcpy((char *)p + 2 * i, &h, 2);
        return;
    }
    float f = (float)v;
    memcpy((char *)p + 4 * i, &f, 4);
}

/* One ulp of dt (f32 24 significant bits, f16 11, bf16 8) at |v|: the
 * spacing of dt's values in [2^(e-1), 2^e) holding |v|; below the smallest
 * normal (and at 0) the subnormals' spacing. */
static inline double test_float_ulp(k_dtype_t dt, double v)
{
    const int bits = dt == K_DTYPE_F16 ? 11 : dt == K_DTYPE_BF16 ? 8 : 24;
    const int min_exp = dt == K_DTYPE_F16 ? -14 : -126;
    int e = min_exp + 1;
    if (v != 0) {
        frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
        if (e - 1 < min_exp) e = min_exp + 1;
    }
    return ldexp(1.0, e - bits);
}

/* 1 when got is within ulp + abs_bound of want (both compared in double);
 * NaN only with NaN, an infinity only with the same infinity. */
static inline int test_float_within(double got, double want, double ulp, double abs_bound)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= ulp + abs_bound;
}

#endif
