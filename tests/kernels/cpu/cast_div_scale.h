/*
 * cast_div_scale.h - the exact-value reference of k_cast, k_div and k_scale
 * (cast_div_scale.c), which div_scale_isa.c's every-ISA tests share.
 */
#ifndef HORA_TEST_KERNELS_CAST_DIV_SCALE_H
#define HORA_TEST_KERNELS_CAST_DIV_SCALE_H

#include "kernels_test.h"

/* An element as its exact value: a double for float dtypes, an int64 for
 * integer dtypes. */
typedef struct {
    int is_int;
    double f;
    int64_t i;
} value_t;

/* The rounding format of a float dtype (NULL for an integer one). */
const ref_fmt_t *cds_float_fmt(k_dtype_t dtype);
/* An integer dtype's range. */
int64_t cds_int_lo(k_dtype_t dtype);
int64_t cds_int_hi(k_dtype_t dtype);
value_t cds_load_value(k_dtype_t dtype, const void *p);
/* Stores an exactly representable value (already rounded / saturated). */
void cds_store_value(k_dtype_t dtype, void *p, value_t v);
int64_t cds_saturate(int64_t x, k_dtype_t dtype);
/* x / divisor (divisor != 0) or x * factor, converted to dtype as k_div /
 * k_scale must. */
value_t cds_ref_div_or_scale(k_dtype_t dtype, value_t x, int64_t divisor, double factor);
/* k_div (is_div, by divisor) or k_scale (by factor) of count elements of
 * src into out; in place: src is copied into out first and out is both. */
void cds_div_or_scale(void *out, const void *src, size_t count, k_dtype_t dtype, int is_div, int64_t divisor,
                      double factor, int in_place);
/* The element at x_bytes, and into want (8 bytes) what k_div by divisor
 * (non-zero) or k_scale by factor must make of it. */
value_t cds_want(k_dtype_t dtype, const void *x_bytes, int64_t divisor, double factor, uint8_t *want);
/* Equal: floats by value and sign (any NaN equals any NaN), integers bitwise. */
int cds_values_equal(k_dtype_t dtype, const void *got, const void *want);

#endif
