/*
 * twin_data.h - what the two tests of the CUDA kernels' CPU twins share:
 * tests/kernels/cuda/test_twin.c (the twins k_twin_* against kernels/cpu)
 * and tests/kernels/cuda/test_gpu_kernels.c (the CUDA kernels k_cuda_*
 * against the twins), and the SGD cases' type of their step twins. The cases' values (divisors, scale factors, the
 * inputs a cast must get right), random elements of every dtype, and the
 * bitwise comparison of two outputs with its failure message.
 *
 * Random draws come from the caller's stream, in a fixed order: changing a
 * generator here changes what both programs check. Elements are little
 * endian, as everywhere in hora.
 */
#ifndef HORA_TWIN_DATA_H
#define HORA_TWIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "k_cpu.h"
#include "rand.h"

/* Output fills: all ones is a NaN in every float dtype, 0x5A bytes a finite
 * value in every float dtype. One side of a comparison gets one, the other
 * side the other, so an element left unwritten on either cannot pass. */
#define TWIN_POISON_NAN 0xFF
#define TWIN_POISON_FINITE 0x5A
/* The bytes around an output that must stay as they are. */
#define TWIN_GUARD_BYTE 0xC3

extern const char *const twin_dtype_name[K_DTYPE_COUNT]; /* "f32", ... */
extern const char *const twin_op_name[K_OP_COUNT];       /* "sum", ... */

/* Divisors of reduce_n, 1 .. INT64_MAX, including ones fp32 cannot hold. */
#define TWIN_DIVISOR_COUNT 13
extern const int64_t twin_divisors[TWIN_DIVISOR_COUNT];

/* Factors of scale: exact and rounding ones, signed zeros, ones that
 * overflow or underflow a dtype, inf and NaN. */
#define TWIN_FACTOR_COUNT 21
extern const double twin_factors[TWIN_FACTOR_COUNT];

/* Inputs that need care in a cast (each program plants them over random
 * elements in its own way): rounding ties of float -> integer, saturation,
 * values one rounding away from a tie of f16/bf16 (through fp32 they would
 * round the wrong way); the f64 ones also serve as f32, the i64 ones (cut
 * to 32 bits) as i32. */
#define TWIN_CAST_F64_COUNT 24
extern const double twin_cast_f64s[TWIN_CAST_F64_COUNT];
#define TWIN_CAST_I64_COUNT 12
extern const int64_t twin_cast_i64s[TWIN_CAST_I64_COUNT];

/* One SGD step's settings (k_twin_sgd_step_mixed / k_cuda_sgd_step_mixed); each step test has its own table of them. */
typedef struct {
    float lr, momentum, weight_decay;
    int nesterov;
    float grad_scale;
} twin_sgd_case_t;

/* ---- elements --------------------------------------------------------------------- */

/* 1 for f32, f16, bf16 and f64. */
int twin_is_float(k_dtype_t dtype);

/* The element of size bytes (1..8) at p, in the low bits. */
uint64_t twin_raw_at(const unsigned char *p, size_t size);

/* 1 if raw is a NaN of dtype (0 for the integer dtypes). */
int twin_raw_is_nan(k_dtype_t dtype, uint64_t raw);

/* Equal bits, or (loose_nan) both NaNs. */
int twin_raw_same(k_dtype_t dtype, uint64_t a, uint64_t b, int loose_nan);

/* Writes one random element of dtype at p. Floats: with specials, zeros,
 * infinities, quiet and signalling NaNs, subnormals and values near the top
 * of the range one element in 4; otherwise values within 2^+-12 of 1 (sums
 * and products that round, and stay finite) and a few zeros. Integers: any
 * value, small ones, or the extremes. */
void twin_random_element(test_rng_t *rng, k_dtype_t dtype, int specials, unsigned char *p);

/* Writes a non-finite element of dtype (f32, f16, bf16, f64) at p: kind 0
 * +inf, 1 -inf, 2 a quiet NaN, 3 a signalling NaN (payload 1). */
void twin_plant_special(unsigned char *p, k_dtype_t dtype, int kind);

/* A random multiple of size (an element size) in 0..15: an offset at which
 * elements are still aligned to their size. */
size_t twin_random_offset(test_rng_t *rng, size_t size);

/* ---- comparing outputs ------------------------------------------------------------ */

/* How twin_compare names the two sides and how much it prints. */
typedef struct {
    const char *got_name;  /* the side under test ("twin", "gpu") */
    const char *want_name; /* the reference ("kernels/cpu", "twin") */
    int print_max;         /* comparisons whose first mismatch is printed, at most */
    int printed;           /* such comparisons so far */
} twin_report_t;

/* Compares count elements of dtype of got and want (twin_raw_same with
 * loose_nan); returns the number that differ. The first mismatch goes to
 * stderr as "FAIL what: element i of count: <got_name> 0x.., <want_name>
 * 0x.." while report->printed < report->print_max. */
long twin_compare(twin_report_t *report, const char *what, k_dtype_t dtype, const unsigned char *got,
                  const unsigned char *want, size_t count, int loose_nan);

#endif
