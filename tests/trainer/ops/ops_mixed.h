/*
 * ops_mixed.h - what the files of test_ops_mixed share: the compute dtype
 * under test, rounding to a 16-bit dtype (the kernels' scalar functions and
 * an independent reference), plain host tensors of any float dtype, and a
 * comparison against a double reference that knows the output's dtype and
 * keeps a summary of the worst error per op.
 *
 * test_ops_mixed checks the cpu backend's mixed precision (trainer/backends/backend.h,
 * "dtypes (mixed precision)") op by op, one file per family:
 *   ops_mixed_common.c   the helpers below
 *   ops_mixed_layers.c   conv, batch norm, pooling, linear in bf16 / f16
 *                        against double loops on the same rounded inputs
 *   ops_mixed_eltwise.c  relu / add / relu backward bit for bit (bf16, or
 *                        f16), softmax cross-entropy with a gradient scale
 *   ops_mixed_numeric.c  cast, check_finite, the mixed SGD step
 *   ops_mixed_contract.c dtype checks: mixing dtypes, f16 where the backend
 *                        cannot compute in it
 *   test_ops_mixed.c     main: the shapes, batch sizes and dtypes each runs at
 * It reuses test_ops's helpers (ops_test.h: the backend, random numbers,
 * tensor_put / tensor_get, which convert f32 host arrays to and from
 * activations of any dtype the backend has).
 */
#ifndef TEST_OPS_MIXED_H
#define TEST_OPS_MIXED_H

#include <stddef.h>
#include <stdint.h>

#include "k_cpu.h"
#include "ops_test.h"

/* ---- error bounds ------------------------------------------------------------
 *
 * Every check compares an op's output with a double reference computed from
 * the very values the op was given (the random f32 inputs are rounded to the
 * compute dtype first, so tensor_import stores them exactly). What is left is
 * the op's own error: its f32 accumulation (backend.h: accumulation is f32
 * inside every op, whatever the dtype) and the one rounding of each result
 * to the output's dtype. The bounds are on max |got - want| / max |want|
 * over a tensor:
 *
 *  - bf16 has 8 significant bits: a value in [2^e, 2^(e+1)) rounds by at
 *    most half an ulp, 2^(e-8), which is between 2^-9 and 2^-8 of the value
 *    (2^-8 just above a power of two). Relative to max |want| one rounding
 *    is thus at most 2^-8 = 3.91e-3, and the measured worst cases reach
 *    3.7e-3. f32 accumulation adds little: the f32 outputs of the same ops
 *    on the same inputs are off by at most 7e-7 (below). Bound 4e-3:
 *    2^-8 plus 9e-5 for accumulation (over 100x what it was measured at). Not
 *    looser, on purpose: a second rounding (accumulating in bf16) goes
 *    past it, as max pooling's backward in blocked layouts shows (5.5e-3).
 *  - f16 has 11: one rounding is at most 2^-11 = 4.88e-4 of max |want|
 *    (f16's subnormals are closer still); measured 4.7e-4 on f16
 *    gradients (this CPU has no f16 compute). Bound 6e-4: 2^-11 plus
 *    1.1e-4.
 *  - an f32 output from 16-bit inputs (logits, f32 parameter gradients,
 *    BN statistics): f32 accumulation only, sums of at most a few hundred
 *    products here, measured at 6.7e-7 at most. Bound 1e-5, what test_ops
 *    allows these ops in f32. f32 dlogits come from double, rounded once:
 *    1e-6 (ops_mixed_eltwise.c).
 *  - ops that only select (max pooling forward, relu, the relu mask) are
 *    exact: bound 0 (relu and add are checked bit for bit).
 * The summary at the end prints the worst error measured for each op and
 * dtype next to its bound. */
#define TOL_BF16 4e-3
#define TOL_F16 6e-4
#define TOL_F32 1e-5

/* The bound for an output stored in dtype (see above). */
double tol_for(tr_dtype_t dtype);

/* The compute dtype this run tests (--dtype; bf16 by default). */
extern tr_dtype_t mixed_dtype;

/* ---- rounding -------------------------------------------------------------- */

/* x rounded to dtype (f32: x itself) and widened back: the kernels' scalar
 * functions (k_f32_to_bf16, k_f32_to_f16), round to nearest even. */
float round_to(float x, tr_dtype_t dtype);
/* The bits of x in dtype, and the f32 value of such bits (dtype 16-bit). */
uint16_t bits_of(float x, tr_dtype_t dtype);
float widen(uint16_t bits, tr_dtype_t dtype);
/* The independent reference: x rounded to nearest, ties to even, to a
 * binary format with p significant bits, smallest normal exponent emin and
 * overflow (to +-inf) at 2^emax_plus_1, computed in double; NaN stays NaN,
 * zeros keep their sign. ref_round_dtype picks bf16's or f16's parameters. */
double ref_round(double x, int p, int emin, int emax_plus_1);
double ref_round_dtype(double x, tr_dtype_t dtype);
/* count random f32 in (-scale, scale), rounded to dtype (freshly malloc'd). */
float *rand_rounded(size_t count, float scale, tr_dtype_t dtype);
/* f32 bits <-> value. */
uint32_t f32_bits(float x);
float f32_from_bits(uint32_t bits);
/* 1 when a and b have different signs (zeros and NaNs included); signbit
 * itself returns some non-zero int, not 1, and not the same one for float
 * and double. */
static inline int sign_differs(double a, double b) { return !__builtin_signbit(a) != !__builtin_signbit(b); }

/* ---- tensors --------------------------------------------------------------- */

/* A zeroed activation of dtype from the backend's tensor_alloc. */
tr_tensor_t act_make(int n, int c, int h, int w, tr_dtype_t dtype);
/* A plain host tensor of dtype over fresh memory (free(t.data)), filled
 * with NaN. */
tr_tensor_t plain_make(tr_dtype_t dtype, int ndim, const int *dims);
/* plain tensor <- f32 values, rounded to its dtype; -> f32 values, widened. */
void plain_put(tr_tensor_t *t, const float *values);
void plain_get(const tr_tensor_t *t, float *values);
void plain_poison(tr_tensor_t *t);

/* ---- comparing ------------------------------------------------------------- */

/* got (an output of dtype, widened to f32) against want (double). Passes when
 * every value is finite and max |got - want| <= tol * max |want|. For an f16
 * output, a want at or beyond 65520 (where f16 rounds to inf) must come out
 * as the infinity of its sign instead, and does not enter max |want|; wants
 * within 1e-4 of that threshold are left out (the op's f32 sum may fall on
 * either side). Prints one line, adds the error to the summary under key
 * (e.g. "conv forward y bf16"), and returns how many infinities it checked. */
long compare_dtype(const char *what, const char *key, const float *got, const double *want, size_t count,
                   tr_dtype_t dtype, double tol);
/* An exact check's line in the summary (bit mismatches, checked values). */
void summary_exact(const char *key, long mismatches, long values);
/* The worst error per key, with its bound: printed by main at the end. */
void summary_print(void);

/* ---- the families (one file each) ---------------------------------------------- */

void mixed_conv(tr_layer_t *layer, const tr_conv_desc_t *d, int n);
void mixed_bn(tr_layer_t *layer, const tr_bn_desc_t *d, int n);
void mixed_pool(tr_layer_t *layer, const tr_pool_desc_t *d, int n);
void mixed_linear(tr_layer_t *layer, const tr_linear_desc_t *d, int n);
void mixed_tensor_roundtrip(int n, int c, int h, int w, tr_dtype_t dtype);
void mixed_eltwise_exact(int n, int c, int h, int w, tr_dtype_t dtype);
void mixed_softmax_xent(int n, int k, float smoothing);
void mixed_softmax_rounding(void);
void mixed_rounding_reference(void);
void mixed_cast(size_t count);
void mixed_cast_exhaustive(void);
void mixed_check_finite(void);
void mixed_sgd(void);
void mixed_contract(void);
/* compute_dtype's answer for dt, and every layer and tensor_alloc made or
 * refused (HORA_ERR_UNSUPPORTED) as it says. */
void mixed_contract_create(tr_dtype_t dt);

#endif
