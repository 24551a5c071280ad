/*
 * k_internal.h - private to kernels/cpu: the reduce, reduce_n and div/scale
 * kernel table types, the scalar kernels (exported so SIMD paths can hand them
 * their tails and the ops they do not vectorise), and inline bit-exact
 * scalar conversions.
 *
 * Not installed, not included from outside kernels/cpu.
 */
#ifndef K_INTERNAL_H
#define K_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "k_cpu.h"

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

#define K_DECLARE_SCALAR_REDUCE(type, op)                                     \
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
#define K_REDUCE_N_CHAINED_ROW                                                \
    [K_OP_SUM] = k_reduce_n_chained, [K_OP_MIN] = k_reduce_n_chained,         \
    [K_OP_MAX] = k_reduce_n_chained, [K_OP_PROD] = k_reduce_n_chained

/* A whole table from the rows (op initialisers) of the three fp32 dtypes. */
#define K_REDUCE_N_TABLE(f32_row, f16_row, bf16_row)                          \
    {                                                                         \
        [K_DTYPE_F32] = {f32_row}, [K_DTYPE_F16] = {f16_row}, [K_DTYPE_BF16] = {bf16_row}, \
        [K_DTYPE_F64] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_I32] = {K_REDUCE_N_CHAINED_ROW}, \
        [K_DTYPE_I64] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_U8] = {K_REDUCE_N_CHAINED_ROW}, \
        [K_DTYPE_I8] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_I16] = {K_REDUCE_N_CHAINED_ROW}, \
        [K_DTYPE_U16] = {K_REDUCE_N_CHAINED_ROW}, [K_DTYPE_BOOL] = {K_REDUCE_N_CHAINED_ROW}, \
    }

/* The dtypes with their own kernels: fp32 accumulation, one rounding. */
#define K_REDUCE_N_LIST(X)                                                    \
    X(f32, sum) X(f32, min) X(f32, max) X(f32, prod)                          \
    X(f16, sum) X(f16, min) X(f16, max) X(f16, prod)                          \
    X(bf16, sum) X(bf16, min) X(bf16, max) X(bf16, prod)

#define K_DECLARE_SCALAR_REDUCE_N(type, op)                                   \
    void k_reduce_n_scalar_##type##_##op(void *dst, const void *const *srcs, int n, size_t begin, \
                                         size_t end, const k_reduce_n_args_t *args);
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
#define K_DECLARE_SCALAR_UNARY(type)                                          \
    void k_div_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args); \
    void k_scale_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args);
K_DTYPE_LIST(K_DECLARE_SCALAR_UNARY)
#undef K_DECLARE_SCALAR_UNARY

/* ---- bit casts (memcpy: the only aliasing-safe way in C) ---------------- */

static inline uint32_t k_f32_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    return bits;
}

static inline float k_f32_from_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

/* ---- f16 / bf16 <-> f32, bit-exact with F16C and with our bf16 SIMD code --
 *
 * NaN handling copies what vcvtph2ps / vcvtps2ph do, so a scalar tail gives
 * the same bits as the vector body: widening sets the quiet bit, narrowing
 * keeps the top payload bits and sets the quiet bit.
 */

static inline float k_f16_to_f32_inl(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;

    if (exp == 0x1F) /* inf, or NaN made quiet */
        return k_f32_from_bits(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in fp32 */
        float mag = (float)mant * 0x1p-24f;
        return sign ? -mag : mag;
    }
    return k_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t k_f32_to_f16_inl(float x)
{
    uint32_t bits = k_f32_bits(x);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t mag = bits & 0x7FFFFFFFu;

    if (mag > 0x7F800000u) /* NaN */
        return (uint16_t)(sign | 0x7E00u | ((mag >> 13) & 0x3FFu));
    if (mag >= 0x477FF000u) /* >= 65520 = max + half ulp: ties go to inf (even) */
        return (uint16_t)(sign | 0x7C00u);
    if (mag >= 0x38800000u) {
        /* normal half: rebias the exponent (127 -> 15, i.e. -112 << 23,
         * written as + 0xC8000000 mod 2^32) and round to nearest even by
         * adding just under half an ulp plus the kept lsb; a carry out of
         * the mantissa correctly bumps the exponent. */
        uint32_t lsb = (mag >> 13) & 1u;
        return (uint16_t)(sign | ((mag + 0xC8000FFFu + lsb) >> 13));
    }
    /* subnormal half: value / 2^-24 = m * 2^(e - 126); shift m right */
    uint32_t e = mag >> 23;
    if (e < 102) /* below 2^-25: rounds to zero (2^-25 itself ties to 0) */
        return sign;
    uint32_t m = (mag & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* may become 0x400, the smallest normal: still the right bits */
    return (uint16_t)(sign | q);
}

static inline float k_bf16_to_f32_inl(uint16_t h)
{
    return k_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t k_f32_to_bf16_inl(float x)
{
    uint32_t bits = k_f32_bits(x);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: truncate, keep it quiet */
        return (uint16_t)((bits >> 16) | 0x40u);
    /* round to nearest even on the dropped 16 bits; cannot wrap because the
     * largest non-NaN pattern (0xFF800000) plus 0x8000 stays below 2^32 */
    return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

/* ---- float MIN/MAX: a if a is NaN, else b if b is NaN, else the smaller /
 * larger, b on ties (what minps/maxps plus "blend a where a is NaN" give,
 * see k_reduce_scalar.c) ---------------------------------------------------- */

static inline float k_min_f32(float a, float b) { return isnan(a) ? a : (a < b ? a : b); }
static inline float k_max_f32(float a, float b) { return isnan(a) ? a : (a > b ? a : b); }
static inline double k_min_f64(double a, double b) { return isnan(a) ? a : (a < b ? a : b); }
static inline double k_max_f64(double a, double b) { return isnan(a) ? a : (a > b ? a : b); }

/* ---- float -> integer for k_cast: round to nearest (ties to even), saturate */

/* Independent of the FP rounding mode. x - floor(x) is exact for doubles. */
static inline double k_round_half_even(double x)
{
    double lo = floor(x);
    double frac = x - lo;
    if (frac > 0.5 || (frac == 0.5 && fmod(lo, 2.0) != 0.0))
        return lo + 1.0;
    return lo;
}

/* NaN -> 0. The bounds are exact powers of two, so the comparisons are exact
 * and the final conversion is always in range (no UB). */
static inline int64_t k_double_to_i64_sat(double x)
{
    if (isnan(x))
        return 0;
    x = k_round_half_even(x);
    if (x >= 0x1p63)
        return INT64_MAX;
    if (x < -0x1p63)
        return INT64_MIN;
    return (int64_t)x;
}

static inline int32_t k_double_to_i32_sat(double x)
{
    if (isnan(x))
        return 0;
    x = k_round_half_even(x);
    if (x >= 0x1p31)
        return INT32_MAX;
    if (x < -0x1p31)
        return INT32_MIN;
    return (int32_t)x;
}

static inline uint8_t k_double_to_u8_sat(double x)
{
    if (isnan(x))
        return 0;
    x = k_round_half_even(x);
    if (x >= 255.0)
        return 255;
    if (x <= 0.0)
        return 0;
    return (uint8_t)x;
}

/* The same for the narrow integers, into [lo, hi] (exact small bounds). */
static inline int64_t k_double_to_range_sat(double x, double lo, double hi)
{
    if (isnan(x))
        return 0;
    x = k_round_half_even(x);
    if (x >= hi)
        return (int64_t)hi;
    if (x <= lo)
        return (int64_t)lo;
    return (int64_t)x;
}
static inline int8_t k_double_to_i8_sat(double x) { return (int8_t)k_double_to_range_sat(x, -128.0, 127.0); }
static inline int16_t k_double_to_i16_sat(double x)
{
    return (int16_t)k_double_to_range_sat(x, -32768.0, 32767.0);
}
static inline uint16_t k_double_to_u16_sat(double x)
{
    return (uint16_t)k_double_to_range_sat(x, 0.0, 65535.0);
}

/* ---- float -> integer for k_scale: truncate toward zero, saturate ----------
 *
 * Horovod scales an integer tensor in double and converts the product back
 * with C's conversion, which discards the fraction (7 * 0.5 = 3.5 -> 3,
 * -3.5 -> -3); k_scale does the same, so hora's integer pre/postscale
 * gives Horovod's numbers. C leaves the conversion undefined for NaN and
 * for a value whose truncation does not fit the type (x86's cvttsd2si
 * answers INT_MIN, other targets other things), so hora defines those
 * cases: NaN -> 0 and saturation at the type's limits.
 *
 * The bounds are integers held exactly in a double, so the comparisons are
 * exact, and x >= hi (or x <= lo) is exactly the set where the truncation
 * is hi or more (lo or less). In between, lo < x < hi, the conversion is
 * defined and is the truncation. No trunc() call: the cast is it. */
static inline int64_t k_trunc_to_i64_sat(double x)
{
    if (isnan(x))
        return 0;
    if (x >= 0x1p63) /* INT64_MAX + 1 */
        return INT64_MAX;
    if (x <= -0x1p63)
        return INT64_MIN;
    return (int64_t)x;
}

/* [lo, hi] within +-2^53 (every integer dtype but i64). */
static inline int64_t k_trunc_to_range_sat(double x, double lo, double hi)
{
    if (isnan(x))
        return 0;
    if (x >= hi)
        return (int64_t)hi;
    if (x <= lo)
        return (int64_t)lo;
    return (int64_t)x;
}
static inline int32_t k_trunc_to_i32_sat(double x)
{
    return (int32_t)k_trunc_to_range_sat(x, -2147483648.0, 2147483647.0);
}
static inline uint8_t k_trunc_to_u8_sat(double x) { return (uint8_t)k_trunc_to_range_sat(x, 0.0, 255.0); }
static inline int8_t k_trunc_to_i8_sat(double x) { return (int8_t)k_trunc_to_range_sat(x, -128.0, 127.0); }
static inline int16_t k_trunc_to_i16_sat(double x)
{
    return (int16_t)k_trunc_to_range_sat(x, -32768.0, 32767.0);
}
static inline uint16_t k_trunc_to_u16_sat(double x)
{
    return (uint16_t)k_trunc_to_range_sat(x, 0.0, 65535.0);
}

#endif /* K_INTERNAL_H */
