/*
 * mixed.h - what the mixed-precision kernel tests share (mixed_common.c):
 * the counts every group runs, elements read and written as bits, the
 * interesting values (non-finite and finite extremes) and random elements.
 * mixed.c runs the groups: k_nonfinite and k_unscale_nonfinite there,
 * k_sgd_step_mixed in mixed_sgd.c, k_relu / k_relu_backward / k_add in
 * mixed_eltwise.c.
 */
#ifndef HORA_TEST_KERNELS_MIXED_H
#define HORA_TEST_KERNELS_MIXED_H

#include "kernels_test.h"

#define SMALL_COUNT_MAX 70 /* counts 0..70: every vector tail of every path */
#define N_LARGE 7          /* mixed_large_counts */
#define N_COUNTS (SMALL_COUNT_MAX + 1 + N_LARGE)
#define MAX_COUNT 100003 /* the largest count any group here uses */

extern const size_t mixed_large_counts[N_LARGE];
/* The float dtypes of gradients and their low-precision copies. */
#define N_GRAD_DTYPES 3
extern const k_dtype_t mixed_grad_dtypes[N_GRAD_DTYPES];
/* Per float dtype (mixed_float_row: f32, f16, bf16, f64): the non-finite
 * and the finite extremes (mixed_common.c lists them). */
extern const uint64_t mixed_nonfinite_bits[4][8];
extern const uint64_t mixed_finite_bits[4][8];

/* The k-th count of a group (0 .. N_COUNTS-1): 0..70, then the large ones. */
size_t mixed_count_at(size_t k);
/* Element i of base as its bits, and back. */
uint64_t mixed_get_bits(k_dtype_t dtype, const void *base, size_t i);
void mixed_put_bits(k_dtype_t dtype, void *base, size_t i, uint64_t bits);
/* Written here: is an element (an array) non-finite. */
int mixed_ref_nonfinite_elem(k_dtype_t dtype, uint64_t bits);
int mixed_ref_nonfinite(k_dtype_t dtype, const void *src, size_t count);
/* f16/bf16/f32 bits to float exactly, and float to bits rounded once. */
float mixed_widen(k_dtype_t dtype, uint64_t bits);
uint64_t mixed_narrow(k_dtype_t dtype, float v);
int mixed_is_nan_elem(k_dtype_t dtype, uint64_t bits);
int mixed_float_row(k_dtype_t dtype);
/* A finite element (an extreme or random), any element (one in ten non-finite). */
uint64_t mixed_random_finite(test_rng_t *gen, k_dtype_t dtype);
uint64_t mixed_random_any(test_rng_t *gen, k_dtype_t dtype);
/* k_nonfinite on the scalar path, then back to the path under test. */
int mixed_nonfinite_scalar(const void *src, k_dtype_t dtype, size_t count);

/* The groups of the other files, on one ISA. */
void mixed_test_sgd_isa(k_isa_t isa);     /* mixed_sgd.c */
void mixed_test_eltwise_isa(k_isa_t isa); /* mixed_eltwise.c */

#endif
