/*
 * k_internal.h - private to kernels/cpu: the reduce, reduce_n and div/scale
 * kernel table types and the scalar kernels (exported so SIMD paths can hand
 * them their tails and the ops they do not vectorise). The scalar numerics
 * (bit casts, f16/bf16 conversions, float MIN/MAX, rounding, saturation)
 * are k_numeric.h's, shared with kernels/cuda.
 *
 * Not installed, not included from outside kernels/cpu.
 */
#ifndef K_INTERNAL_H
#define K_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "k_cpu.h"
#include "k_numeric.h" /* conversions, rounding, saturation: one definition with kernels/cuda */

/* The path in use: what k_isa_current() returns, for the library's own
 * entry points. Hidden like everything not marked K_API, so their calls
 * are direct; calling the exported k_isa_current() from inside the shared
 * library would go through the PLT on every kernel call. */
k_isa_t k_dispatch_isa(void);

/* One kernel: dst[i] = a[i] op b[i], i < count; dst may be exactly a or b. */
typedef void (*k_reduce_fn)(void *dst, const void *a, const void *b, size_t count);

/* Every ISA fills every slot (a SIMD path points at a scalar kernel for the
 * combinations it does not vectorise), so dispatch never meets NULL. */
typedef k_reduce_fn k_reduce_table_t[K_DTYPE_COUNT][K_OP_COUNT];

extern const k_reduce_table_t k_reduce_table_scalar;
#if defined(__x86_64__)
extern const k_reduce_table_t k_reduce_table_avx2;
extern const k_reduce_table_t k_reduce_table_avx512;
#endif

/* X-macro over every (dtype, op) pair; names match k_dtype_t / k_op_t. */
// clang-format off
#define K_REDUCE_LIST(X)                                                      \
    X(f32, sum) X(f32, min) X(f32, max) X(f32, prod)                          \
    X(f16, sum) X(f16, min) X(f16, max) X(f16, prod)                          \
    X(bf16, sum) X(bf16, min) X(bf16, max) X(bf16, prod)                      \
    X(f64, sum) X(f64, min) X(f64, max) X(f64, prod)                          \
    X(i32, sum) X(i32, min) X(i32, max) X(i32, prod)                          \
    X(i64, sum) X(i64, min) X(i64, max) X(i64, prod)                          \
    X(u8, sum) X(u8, min) X(u8, max) X(u8, prod)                          \
    X(i8, sum) X(i8, min) X(i8, max) X(i8, prod)                          \
    X(i16, sum) X(i16, min) X(i16, max) X(i16, prod)                      \
    X(u16, sum) X(u16, min) X(u16, max) X(u16, prod)                      \
    X(bool, sum) X(bool, min) X(bool, max) X(bool, prod)
// clang-format on

#define K_DECLARE_SCALAR_REDUCE(type, op) \
    void k_reduce_scalar_##type##_##op(void *dst, const void *a, const void *b, size_t count);
K_REDUCE_LIST(K_DECLARE_SCALAR_REDUCE)
#undef K_DECLARE_SCALAR_REDUCE

/* ---- k_reduce_n ------------------------------------------------------------
 *
 * One kernel folds all n sources of elements [begin, end) in registers and
 * stores each result once; begin lets a vector kernel hand its tail to the
 * scalar kernel with the caller's pointers. The entry point (k_dispatch.c)
 * has checked the arguments, handled n == 1 (and n == 2 without a divisor,
 * which is k_reduce), and filled the record below.
 */
typedef struct {
    k_dtype_t dtype;
    k_op_t op;
    int64_t divisor; /* >= 1; 1 means no division */
    float f32;       /* (float)divisor: f32, f16 and bf16 divide in fp32 */
} k_reduce_n_args_t;

typedef void (*k_reduce_n_fn)(void *dst, const void *const *srcs, int n, size_t begin, size_t end,
                              const k_reduce_n_args_t *args);

/* Every slot filled: f64, the integers and bool (which k_reduce_n computes as
 * chained k_reduce / k_div calls) point at k_reduce_n_chained. */
typedef k_reduce_n_fn k_reduce_n_table_t[K_DTYPE_COUNT][K_OP_COUNT];

extern const k_reduce_n_table_t k_reduce_n_table_scalar;
#if defined(__x86_64__)
extern const k_reduce_n_table_t k_reduce_n_table_avx2;
extern const k_reduce_n_table_t k_reduce_n_table_avx512;
#endif

void k_reduce_n_chained(void *dst, const void *const *srcs, int n, size_t begin, size_t end,
                        const k_reduce_n_args_t *args);
#define K_REDUCE_N_CHAINED_ROW                                                                         \
    [K_OP_SUM] = k_reduce_n_chained, [K_OP_MIN] = k_reduce_n_chained, [K_OP_MAX] = k_reduce_n_chained, \
    [K_OP_PROD] = k_reduce_n_chained

/* A whole table from the rows (op initialisers) of the three fp32 dtypes. */
#define K_REDUCE_N_TABLE(f32_row, f16_row, bf16_row)                                         \
    {                                                                                        \
        [K_DTYPE_F32] = {f32_row}, [K_DTYPE_F16] = {f16_row}, [K_DTYPE_BF16] = {bf16_row},   \
        [K_DTYPE_F64] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_I32] = {K_REDUCE_N_CHAINED_ROW},  \
        [K_DTYPE_I64] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_U8] = {K_REDUCE_N_CHAINED_ROW},   \
        [K_DTYPE_I8] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_I16] = {K_REDUCE_N_CHAINED_ROW},   \
        [K_DTYPE_U16] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_BOOL] = {K_REDUCE_N_CHAINED_ROW}, \
    }

/* The dtypes with their own kernels: fp32 accumulation, one rounding. */
// clang-format off
#define K_REDUCE_N_LIST(X)                                                    \
    X(f32, sum) X(f32, min) X(f32, max) X(f32, prod)                          \
    X(f16, sum) X(f16, min) X(f16, max) X(f16, prod)                          \
    X(bf16, sum) X(bf16, min) X(bf16, max) X(bf16, prod)
// clang-format on

#define K_DECLARE_SCALAR_REDUCE_N(type, op)                                                                   \
    void k_reduce_n_scalar_##type##_##op(void *dst, const void *const *srcs, int n, size_t begin, size_t end, \
                                         const k_reduce_n_args_t *args);
K_REDUCE_N_LIST(K_DECLARE_SCALAR_REDUCE_N)
#undef K_DECLARE_SCALAR_REDUCE_N

/* ---- k_reduce_n_exact ------------------------------------------------------
 *
 * One kernel per ISA sums elements [begin, end) of the n sources of an f32,
 * f16 or bf16 buffer exactly and rounds once (k_cpu.h); the entry point
 * (k_dispatch.c) has checked the arguments and the dtype. Every kernel gives
 * the bits of the scalar one, k_reduce_n_exact_scalar (k_reduce_exact.c),
 * which is also the tail and the fallback of the vector kernels.
 */
typedef void (*k_reduce_n_exact_fn)(void *dst, const void *const *srcs, int n, size_t begin, size_t end,
                                    k_dtype_t dtype, int64_t divisor);

void k_reduce_n_exact_scalar(void *dst, const void *const *srcs, int n, size_t begin, size_t end, k_dtype_t dtype,
                             int64_t divisor);
/* The exact sum of element i of the n sources as an fp64, rounded to odd
 * where it needs more than 53 bits (which the rounding to the dtype then
 * gives the bits of the exact sum); NaN for a NaN or for +inf with -inf.
 * What the vector kernels compute for the elements they cannot certify. */
double k_reduce_n_exact_one(const void *const *srcs, int n, size_t i, k_dtype_t dtype);
#if defined(__x86_64__)
void k_reduce_n_exact_avx2(void *dst, const void *const *srcs, int n, size_t begin, size_t end, k_dtype_t dtype,
                           int64_t divisor);
void k_reduce_n_exact_avx512(void *dst, const void *const *srcs, int n, size_t begin, size_t end, k_dtype_t dtype,
                             int64_t divisor);
#endif

/* The vector kernels' exactness certificate. Let every input of an element
 * be an f32 (f16/bf16 widen exactly) with biased exponent field E (the
 * subnormals' 0 included): it is a multiple of 2^(E - 150) below
 * 2^(E - 126) in magnitude. With Emax / Emin the largest field of the
 * element's inputs and the smallest of its nonzero ones, every partial sum
 * of n <= 2^k of them is a multiple of 2^(Emin - 150) below
 * n * 2^(Emax - 126), i.e. an integer below 2^(k + Emax - Emin + 24) times
 * that unit: exact in fp64 (53 bits) when Emax - Emin <= 29 - k, whatever
 * the order of the additions. Returns 29 - k (negative: never). */
static inline int k_exact_span_max(int n)
{
    int k = 0;
    while (k < 31 && ((int64_t)1 << k) < (int64_t)n) k++;
    return 29 - k;
}

/* ---- k_div / k_scale -------------------------------------------------------
 *
 * The entry points in k_scale.c turn the divisor or factor into these
 * loop-invariant operands once per call; every ISA path reads the same
 * record, which is what keeps them bit-identical.
 *
 * Integer division uses a multiply by a "magic" reciprocal instead of a
 * hardware divide (Granlund & Montgomery, "Division by invariant integers
 * using multiplication", 1994): for 0 <= n <= n_max and divisor d, pick
 * shift = s with n_max * d <= 2^s and magic = ceil(2^s / d). Writing
 * magic * d = 2^s + e (0 <= e < d) and n = q*d + r,
 *   n * magic / 2^s = q + (r + n*e / 2^s) / d,
 * and n*e < n_max * d <= 2^s makes the fraction < 1, so
 * floor(n * magic / 2^s) = q exactly. Signed dividends divide |x| and put
 * the sign back, which is C's truncating division.
 */
typedef struct {
    float f32;  /* (float)divisor or (float)factor: f32, f16, bf16 */
    double f64; /* (double)divisor or factor: f64, and integer k_scale */
    /* k_div only, for the integer dtype being divided (divisor >= 2; the
     * entry point copies for divisor 1): */
    uint32_t i32_magic; /* |x| / d = (|x| * i32_magic) >> i32_shift, |x| <= 2^31 (also i8, i16, u16); */
    uint32_t i32_shift; /*   both 0 for d >= 2^32 (every quotient is 0) */
    uint64_t i64_magic; /* |x| / d = (|x| * i64_magic) >> i64_shift in 128 bits, */
    uint32_t i64_shift; /*   |x| <= 2^63 (unused without __int128) */
    int64_t divisor;    /* the divisor itself, for the fallback without __int128 */
    uint16_t u8_magic;  /* x / d = (x * u8_magic) >> 16 for x <= 255; 0 for d >= 256 */
    /* k_scale only, u8: the result for each of the 256 inputs */
    uint8_t u8_table[256];
} k_unary_args_t;

/* dst[i] = f(src[i], args), i < count; dst may be exactly src. */
typedef void (*k_unary_fn)(void *dst, const void *src, size_t count, const k_unary_args_t *args);
typedef k_unary_fn k_unary_table_t[K_DTYPE_COUNT];

/* Per ISA, one table for k_div and one for k_scale; every slot filled. */
extern const k_unary_table_t k_div_table_scalar, k_scale_table_scalar;
#if defined(__x86_64__)
extern const k_unary_table_t k_div_table_avx2, k_scale_table_avx2;
extern const k_unary_table_t k_div_table_avx512, k_scale_table_avx512;
#endif

#define K_DTYPE_LIST(X) X(f32) X(f16) X(bf16) X(f64) X(i32) X(i64) X(u8) X(i8) X(i16) X(u16) X(bool)

/* Scalar kernels: the reference, and the tails of the SIMD loops. */
#define K_DECLARE_SCALAR_UNARY(type)                                                                \
    void k_div_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args); \
    void k_scale_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args);
K_DTYPE_LIST(K_DECLARE_SCALAR_UNARY)
#undef K_DECLARE_SCALAR_UNARY

#endif /* K_INTERNAL_H */
