/*
 * kernels_test.h - shared by the files of test_kernels (one executable, one
 * file per concern, run in order by test_kernels.c): the group report, the
 * random stream every file draws from, references written here
 * independently of the library (binary formats in double arithmetic, one
 * element of a reduce, one-rounding f32 steps), random elements, guard
 * bytes.
 */
#ifndef HORA_KERNELS_TEST_H
#define HORA_KERNELS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k_cpu.h"
#include "rand.h"

extern const char *const dtype_names[K_DTYPE_COUNT];
extern const char *const op_names[K_OP_COUNT];

/* ---- reporting --------------------------------------------------------------- */

extern int groups_run, groups_failed;

/* One summary line per group of checks, the group named by a printf format;
 * the first few failures of a group are printed by the group itself (at most
 * MAX_PRINTED). */
void report(long checks, long failures, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define MAX_PRINTED 5

/* Prints the bytes of one element as a hex number (most significant first). */
void print_hex(const void *p, size_t size);

/* ---- random numbers ------------------------------------------------------------
 * One stream, seeded with TEST_RNG_SEED, consumed by the groups in the order
 * test_kernels.c runs them: the inputs of a group depend on what ran before
 * it, so the order is fixed (and a group run alone sees other values). */
extern test_rng_t rng;

/* Random element of dtype at p, drawn from gen. Floats mix ordinary values of both signs
 * over many magnitudes with specials (+-0, +-inf, NaNs, subnormals, huge);
 * integers mix full-range bits (to wrap) with small values and extremes. */
void random_element(test_rng_t *gen, k_dtype_t dtype, void *p);

/* ---- reference binary formats, in double arithmetic ---------------------------- */

typedef struct {
    int mant_bits; /* stored fraction bits */
    int emin;      /* exponent of the smallest normal */
    int emax;      /* exponent of the largest finite */
} ref_fmt_t;

extern const ref_fmt_t REF_F16, REF_BF16, REF_F32, REF_F64;

double ref_round_half_even(double q); /* q >= 0 */
/* x rounded to the nearest value of fmt, ties to even, overflow to inf. */
double ref_round(double x, ref_fmt_t fmt);
double ref_round_i64(int64_t v, ref_fmt_t fmt);
double ref_decode16(uint16_t h, ref_fmt_t fmt);
uint16_t ref_encode16(double v, ref_fmt_t fmt);
int is_nan16(uint16_t h, ref_fmt_t fmt);
float f32_from_bits(uint32_t b);
uint32_t f32_bits(float f);

/* One rounded f32 operation each: the volatile store is a rounding point
 * the compiler may not fuse across (the tests build without
 * -ffp-contract=off, and GCC would otherwise make FMAs where it can). */
static inline float ref_mul_f32(float a, float b)
{
    volatile float r = a * b;
    return r;
}
static inline float ref_add_f32(float a, float b)
{
    volatile float r = a + b;
    return r;
}
static inline float ref_sub_f32(float a, float b)
{
    volatile float r = a - b;
    return r;
}

/* ---- one element of a reduce ------------------------------------------------------ */

/* Expected a op b for one element, written to out (k_cpu.h's rules: f16/bf16
 * in fp32, wrapping integers, the first NaN operand wins MIN/MAX). Also says
 * whether the result is a NaN whose exact bits are not specified (SUM/PROD). */
void ref_reduce(k_dtype_t dtype, k_op_t op, const void *pa, const void *pb, void *out, int *any_nan_ok);
int is_zero_bits(k_dtype_t dtype, const void *p);
int is_nan_bits(k_dtype_t dtype, const void *p);
/* got matches want: any NaN where any_nan_ok, either zero for MIN/MAX of the
 * two zeros a and b, else the same bits. */
int element_ok(k_dtype_t dtype, k_op_t op, const void *got, const void *want, int any_nan_ok, const void *a,
               const void *b);

/* ---- guard bytes ------------------------------------------------------------------- */

/* Outputs sit GUARD_BYTES into a POISON-filled buffer, after an offset of
 * up to MAX_OFFSET elements (so vectors start misaligned). */
#define GUARD_BYTES 64
#define POISON 0xA5
#define MAX_OFFSET 7

/* The GUARD_BYTES before buf + GUARD_BYTES and after its data_bytes are
 * still POISON. */
int guards_intact(const uint8_t *buf, size_t data_bytes);

/* ---- the groups, one entry point per concern (test_kernels.c runs them) ---------- */

void test_api(void);                  /* api.c */
void test_conversions(void);          /* conversions.c */
void test_reduce(k_isa_t isa);        /* reduce.c */
void test_div_scale_isa(k_isa_t isa); /* div_scale_isa.c */
void test_cast_div_scale(void);       /* cast_div_scale.c */
void test_sgd_isa(k_isa_t isa);       /* sgd.c */
void test_reduce_n(k_isa_t isa);      /* reduce_n.c */
void test_reduce_n_api(void);         /* reduce_n.c */
void test_mixed_isa(k_isa_t isa);     /* mixed.c */
void test_mixed_api(void);            /* mixed.c */
void test_reduce_exact(void);         /* reduce_exact.c: every ISA in one group */

#endif
