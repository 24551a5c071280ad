/*
 * k_elem.h - the per-element arithmetic of the CUDA kernels, shared with
 * their CPU twins: every function is K_HD (k_numeric.h), so the .cu
 * kernels (nvcc, device code) and k_twin.c (gcc, host code) run the very
 * same lines, and what the twin computes on the CPU is what the kernel
 * computes on the GPU.
 *
 * Private to kernels/cuda. Plain C (and C++ for nvcc); needs only the C
 * library and libm. The numerics are k_cpu.h's, element for element:
 *  - bit casts, f16/bf16 <-> f32 (round to nearest even, NaN stays NaN
 *    with its top payload bits and the quiet bit, overflow -> inf), float
 *    MIN/MAX, rounding and saturation are k_numeric.h's, the very
 *    functions kernels/cpu calls;
 *  - reductions fold in an accumulator per dtype (fp32 for f32/f16/bf16,
 *    fp64, wrapping integers), then divide (fp32 by (float)divisor, fp64,
 *    or C's truncating integer division by a multiply, as k_div does), then
 *    narrow once;
 *  - k_scale's truncation and saturation of integers, k_cast's one
 *    rounding (float -> integer to nearest even, saturated).
 * Each op is one IEEE operation in the default rounding mode: the twin is
 * built with -ffp-contract=off and the kernels with -fmad=false, and
 * neither with fast-math, so no FMA contraction or flushing changes a bit.
 *
 * Elements travel as raw bits in a uint64_t (the low 8, 16, 32 or 64 bits,
 * by the dtype's size), so the kernels can take them straight out of
 * vector loads and the twin straight out of memcpy.
 */
#ifndef K_ELEM_H
#define K_ELEM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "k_cpu.h"
#include "k_numeric.h"

/* High 64 bits of a * b. */
K_HD uint64_t k_elem_mulhi_u64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 k_elem_u128_t;
    return (uint64_t)(((k_elem_u128_t)a * b) >> 64);
#else
    uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
    uint64_t mid = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
    return hi_hi + (hi_lo >> 32) + (mid >> 32);
#endif
}

/* ---- division (k_div's, for the divisor of k_reduce_n) -----------------------
 *
 * Integers divide by a multiply with a precomputed reciprocal (Granlund &
 * Montgomery; the argument is in kernels/cpu/k_internal.h): exactly C's
 * truncating division, without a 64-bit divide per element (dozens of
 * instructions on a GPU). k_elem_div_init runs on the host, once per call.
 */
typedef struct {
    int divide;         /* divisor > 1 */
    float f32;          /* (float)divisor: f32, f16, bf16 divide in fp32 */
    double f64;         /* (double)divisor: f64 */
    uint32_t i32_magic; /* |x| / d = (|x| * i32_magic) >> i32_shift; 0 and 0 */
    uint32_t i32_shift; /*   when d >= 2^32 (every quotient is 0) */
    uint64_t i64_magic; /* |x| / d = mulhi(|x|, i64_magic) >> i64_shift */
    uint32_t i64_shift; /*   (the shift past the high word) */
    uint32_t u8_magic;  /* x / d = (x * u8_magic) >> 16; 0 when d >= 256 */
} k_elem_div_t;

/* Smallest L with 2^L >= d (d >= 1). */
static inline uint32_t k_elem_ceil_log2(uint64_t d)
{
    uint32_t log = 0;
    while (log < 64 && ((uint64_t)1 << log) < d) log++;
    return log;
}

/* The operands for divisor >= 1 (1: no division). Host only. */
static inline k_elem_div_t k_elem_div_init(int64_t divisor)
{
    k_elem_div_t div;
    memset(&div, 0, sizeof(div));
    div.divide = divisor > 1;
    div.f32 = (float)divisor;
    div.f64 = (double)divisor;
    if (!div.divide) return div;
    uint64_t d = (uint64_t)divisor;
    uint32_t log = k_elem_ceil_log2(d); /* 1 .. 63 */
    /* i32: |x| <= 2^31, shift 31 + L, magic = ceil(2^shift / d) < 2^32. */
    if (d <= UINT32_MAX) {
        uint32_t shift = 31 + log;
        div.i32_magic = (uint32_t)((((uint64_t)1 << shift) + d - 1) / d);
        div.i32_shift = shift;
    }
    /* i64: |x| <= 2^63, shift s = 63 + L (64 .. 126), magic =
     * floor((2^s - 1) / d) + 1 < 2^64, by long division of s one bits (the
     * remainder stays below d < 2^63, so 2r + 1 fits). */
    uint32_t shift = 63 + log;
    uint64_t q = 0, r = 0;
    for (uint32_t bit = 0; bit < shift; bit++) {
        r = 2 * r + 1;
        q <<= 1;
        if (r >= d) {
            r -= d;
            q |= 1;
        }
    }
    div.i64_magic = q + 1;
    div.i64_shift = shift - 64;
    /* u8: x * e < 2^16 for every d <= 255: shift 16, magic ceil(2^16 / d). */
    div.u8_magic = d >= 256 ? 0u : (uint32_t)((65536 + d - 1) / d);
    return div;
}

/* Branch-free sign handling: sign = all ones for x < 0; (v ^ sign) - sign
 * is |v| in unsigned arithmetic, and q ^ sign, + 1, puts the sign back. */
K_HD int32_t k_elem_div_i32(int32_t x, uint32_t magic, uint32_t shift)
{
    uint32_t sign = 0u - (uint32_t)(x < 0);
    uint32_t n = ((uint32_t)x ^ sign) - sign;
    uint32_t q = (uint32_t)(((uint64_t)n * magic) >> shift);
    return (int32_t)(q ^ sign) + (int32_t)(sign & 1u);
}

K_HD int64_t k_elem_div_i64(int64_t x, uint64_t magic, uint32_t shift)
{
    uint64_t sign = 0u - (uint64_t)(x < 0);
    uint64_t n = ((uint64_t)x ^ sign) - sign;
    uint64_t q = k_elem_mulhi_u64(n, magic) >> shift;
    return (int64_t)(q ^ sign) + (int64_t)(sign & 1u);
}

/* ---- reductions, per dtype -----------------------------------------------------
 *
 * k_elem_<t>_load(raw) gives an element's accumulator value,
 * k_elem_<t>_combine(acc, x, op) folds the next source in (op a k_op_t;
 * the kernels pass it as a constant, so the switch disappears), and
 * k_elem_<t>_finish(acc, div) divides and narrows to raw bits. An element
 * of a reduce is
 *   acc = load(src_0); acc = combine(acc, load(src_j), op) for j = 1..n-1;
 *   out = finish(acc, div)
 * in the kernel and in the twin alike.
 */

/* combine(a, b, op) of one accumulator type: its SUM, MIN, MAX and PROD
 * (any other op). */
#define K_ELEM_COMBINE(t, acc_t, sum, min, max, prod)       \
    K_HD acc_t k_elem_combine_##t(acc_t a, acc_t b, int op) \
    {                                                       \
        switch (op) {                                       \
        case K_OP_SUM: return sum;                          \
        case K_OP_MIN: return min;                          \
        case K_OP_MAX: return max;                          \
        default: return prod;                               \
        }                                                   \
    }
/* clang-format would read "a < b ? a : b" as a template argument list. */
// clang-format off
K_ELEM_COMBINE(f32, float, a + b, k_num_min_f32(a, b), k_num_max_f32(a, b), a * b)
K_ELEM_COMBINE(f64, double, a + b, k_num_min_f64(a, b), k_num_max_f64(a, b), a * b)
/* Wrapping SUM/PROD in the unsigned type (no signed overflow). */
K_ELEM_COMBINE(i32, int32_t, (int32_t)((uint32_t)a + (uint32_t)b), a < b ? a : b, a > b ? a : b,
               (int32_t)((uint32_t)a * (uint32_t)b))
K_ELEM_COMBINE(i64, int64_t, (int64_t)((uint64_t)a + (uint64_t)b), a < b ? a : b, a > b ? a : b,
               (int64_t)((uint64_t)a * (uint64_t)b))
/* u8 values in a uint32_t, wrapped to 8 bits at every step as k_reduce's
 * uint8_t stores do (u16 likewise to 16 bits). */
K_ELEM_COMBINE(u8, uint32_t, (a + b) & 0xFFu, a < b ? a : b, a > b ? a : b, (a * b) & 0xFFu)
K_ELEM_COMBINE(u16, uint32_t, (a + b) & 0xFFFFu, a < b ? a : b, a > b ? a : b, (a * b) & 0xFFFFu)
// clang-format on
#undef K_ELEM_COMBINE

/* i8 / i16 in an int32_t, sign-extended from `bits` after every wrapping
 * step (done on uint32_t: no signed overflow), as k_reduce's stores of the
 * unsigned type wrap. */
K_HD int32_t k_elem_wrap_signed(uint32_t v, int bits)
{
    const uint32_t m = (uint32_t)1 << (bits - 1);
    v &= (m << 1) - 1u;
    return (int32_t)(v ^ m) - (int32_t)m;
}

K_HD int32_t k_elem_combine_narrow(int32_t a, int32_t b, int op, int bits)
{
    switch (op) {
    case K_OP_SUM: return k_elem_wrap_signed((uint32_t)a + (uint32_t)b, bits);
    case K_OP_MIN: return a < b ? a : b;
    case K_OP_MAX: return a > b ? a : b;
    default: return k_elem_wrap_signed((uint32_t)a * (uint32_t)b, bits);
    }
}

/* bool as 0 / 1 in a uint32_t: SUM and MAX are OR, MIN and PROD AND. */
K_HD uint32_t k_elem_combine_bool(uint32_t a, uint32_t b, int op)
{
    return op == K_OP_SUM || op == K_OP_MAX ? (a | b) : (a & b);
}

/* The combine of each dtype (f16 and bf16 fold in fp32). */
K_HD float k_elem_f32_combine(float a, float b, int op) { return k_elem_combine_f32(a, b, op); }
K_HD float k_elem_f16_combine(float a, float b, int op) { return k_elem_combine_f32(a, b, op); }
K_HD float k_elem_bf16_combine(float a, float b, int op) { return k_elem_combine_f32(a, b, op); }
K_HD double k_elem_f64_combine(double a, double b, int op) { return k_elem_combine_f64(a, b, op); }
K_HD int32_t k_elem_i32_combine(int32_t a, int32_t b, int op) { return k_elem_combine_i32(a, b, op); }
K_HD int64_t k_elem_i64_combine(int64_t a, int64_t b, int op) { return k_elem_combine_i64(a, b, op); }
K_HD uint32_t k_elem_u8_combine(uint32_t a, uint32_t b, int op) { return k_elem_combine_u8(a, b, op); }
K_HD int32_t k_elem_i8_combine(int32_t a, int32_t b, int op) { return k_elem_combine_narrow(a, b, op, 8); }
K_HD int32_t k_elem_i16_combine(int32_t a, int32_t b, int op) { return k_elem_combine_narrow(a, b, op, 16); }
K_HD uint32_t k_elem_u16_combine(uint32_t a, uint32_t b, int op) { return k_elem_combine_u16(a, b, op); }
K_HD uint32_t k_elem_bool_combine(uint32_t a, uint32_t b, int op) { return k_elem_combine_bool(a, b, op); }

/* Every dtype, its K_DTYPE_* and the type k_elem_<t>_load widens it to,
 * which its reduction accumulates in: X(t, K_DTYPE_*, acc_t). The reduce
 * kernels (k_reduce.cu) and their twins (k_twin.c) are instantiated from
 * this one list. */
#define K_ELEM_DTYPES(X)          \
    X(f32, K_DTYPE_F32, float)    \
    X(f16, K_DTYPE_F16, float)    \
    X(bf16, K_DTYPE_BF16, float)  \
    X(f64, K_DTYPE_F64, double)   \
    X(i32, K_DTYPE_I32, int32_t)  \
    X(i64, K_DTYPE_I64, int64_t)  \
    X(u8, K_DTYPE_U8, uint32_t)   \
    X(i8, K_DTYPE_I8, int32_t)    \
    X(i16, K_DTYPE_I16, int32_t)  \
    X(u16, K_DTYPE_U16, uint32_t) \
    X(bool, K_DTYPE_BOOL, uint32_t)

K_HD float k_elem_f32_load(uint64_t raw) { return k_num_f32_from_bits((uint32_t)raw); }
K_HD float k_elem_f16_load(uint64_t raw) { return k_num_f16_to_f32((uint16_t)raw); }
K_HD float k_elem_bf16_load(uint64_t raw) { return k_num_bf16_to_f32((uint16_t)raw); }
K_HD double k_elem_f64_load(uint64_t raw) { return k_num_f64_from_bits(raw); }
K_HD int32_t k_elem_i32_load(uint64_t raw) { return (int32_t)(uint32_t)raw; }
K_HD int64_t k_elem_i64_load(uint64_t raw) { return (int64_t)raw; }
K_HD uint32_t k_elem_u8_load(uint64_t raw) { return (uint32_t)(raw & 0xFFu); }
K_HD int32_t k_elem_i8_load(uint64_t raw) { return k_elem_wrap_signed((uint32_t)raw, 8); }
K_HD int32_t k_elem_i16_load(uint64_t raw) { return k_elem_wrap_signed((uint32_t)raw, 16); }
K_HD uint32_t k_elem_u16_load(uint64_t raw) { return (uint32_t)(raw & 0xFFFFu); }
K_HD uint32_t k_elem_bool_load(uint64_t raw) { return (raw & 0xFFu) != 0; } /* any nonzero byte: true */

/* The fp32-accumulated floats: divide in fp32, then round once to the type. */
#define K_ELEM_F32_FINISH(t, store) \
    K_HD uint64_t k_elem_##t##_finish(float acc, k_elem_div_t div) { return store(div.divide ? acc / div.f32 : acc); }
K_ELEM_F32_FINISH(f32, k_num_f32_bits)
K_ELEM_F32_FINISH(f16, k_num_f32_to_f16)
K_ELEM_F32_FINISH(bf16, k_num_f32_to_bf16)
#undef K_ELEM_F32_FINISH

K_HD uint64_t k_elem_f64_finish(double acc, k_elem_div_t div)
{
    return k_num_f64_bits(div.divide ? acc / div.f64 : acc);
}

K_HD uint64_t k_elem_i32_finish(int32_t acc, k_elem_div_t div)
{
    return (uint32_t)(div.divide ? k_elem_div_i32(acc, div.i32_magic, div.i32_shift) : acc);
}

K_HD uint64_t k_elem_i64_finish(int64_t acc, k_elem_div_t div)
{
    return (uint64_t)(div.divide ? k_elem_div_i64(acc, div.i64_magic, div.i64_shift) : acc);
}

K_HD uint64_t k_elem_u8_finish(uint32_t acc, k_elem_div_t div) { return div.divide ? (acc * div.u8_magic) >> 16 : acc; }

/* i8, i16, u16 divide as int32 (|x| <= 2^16, within i32's magic), then
 * keep the type's bits. */
#define K_ELEM_NARROW_FINISH(t, acc_t, bits_t)                                                            \
    K_HD uint64_t k_elem_##t##_finish(acc_t acc, k_elem_div_t div)                                        \
    {                                                                                                     \
        return (bits_t)(uint32_t)(div.divide ? k_elem_div_i32((int32_t)acc, div.i32_magic, div.i32_shift) \
                                             : (int32_t)acc);                                             \
    }
K_ELEM_NARROW_FINISH(i8, int32_t, uint8_t)
K_ELEM_NARROW_FINISH(i16, int32_t, uint16_t)
K_ELEM_NARROW_FINISH(u16, uint32_t, uint16_t)
#undef K_ELEM_NARROW_FINISH

/* bool: the truncated quotient of 0 or 1 is 0 for a divisor >= 2. */
K_HD uint64_t k_elem_bool_finish(uint32_t acc, k_elem_div_t div) { return div.divide ? 0u : acc; }

/* ---- k_scale, per dtype: raw bits in, raw bits out --------------------------
 * f32: the float factor (float)factor; f64 and the integers: the double. */

/* f32, f16, bf16: the product in fp32, rounded once to the type. */
#define K_ELEM_F32_SCALE(t, store)                                        \
    K_HD uint64_t k_elem_##t##_scale(uint64_t raw, float f32, double f64) \
    {                                                                     \
        (void)f64;                                                        \
        return store(k_elem_##t##_load(raw) * f32);                       \
    }
K_ELEM_F32_SCALE(f32, k_num_f32_bits)
K_ELEM_F32_SCALE(f16, k_num_f32_to_f16)
K_ELEM_F32_SCALE(bf16, k_num_f32_to_bf16)
#undef K_ELEM_F32_SCALE

K_HD uint64_t k_elem_f64_scale(uint64_t raw, float f32, double f64)
{
    (void)f32;
    return k_num_f64_bits(k_elem_f64_load(raw) * f64);
}

/* The integers: the product in double, truncated toward zero and saturated
 * (k_numeric.h), the type's bits kept. */
#define K_ELEM_INT_SCALE(t, bits_t)                                                    \
    K_HD uint64_t k_elem_##t##_scale(uint64_t raw, float f32, double f64)              \
    {                                                                                  \
        (void)f32;                                                                     \
        return (bits_t)k_num_trunc_to_##t##_sat((double)k_elem_##t##_load(raw) * f64); \
    }
K_ELEM_INT_SCALE(i32, uint32_t)
K_ELEM_INT_SCALE(i64, uint64_t)
K_ELEM_INT_SCALE(u8, uint8_t)
K_ELEM_INT_SCALE(i8, uint8_t)
K_ELEM_INT_SCALE(i16, uint16_t)
K_ELEM_INT_SCALE(u16, uint16_t)
#undef K_ELEM_INT_SCALE

/* bool: x AND (factor != 0), a NaN factor counting as nonzero (k_cpu.h). */
K_HD uint64_t k_elem_bool_scale(uint64_t raw, float f32, double f64)
{
    (void)f32;
    return k_elem_bool_load(raw) & (uint32_t)(f64 != 0.0);
}

/* ---- k_cast ------------------------------------------------------------------
 *
 * One rounding per element, as k_cast.c: floats no wider than f32 convert
 * through f32 (exact widening, one narrowing); anything with an f64 source
 * goes through double, integers through int64. Narrowing a double or an
 * int64 to f16/bf16 first narrows to fp32 with round-to-odd (truncate, set
 * the lsb if anything was dropped), which keeps the following
 * round-to-nearest-even correct (k_cast.c explains why): k_numeric.h's
 * k_num_*_to_f32_round_odd, as k_cast.c uses them.
 */

K_HD int k_elem_dtype_is_float(int dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16 || dtype == K_DTYPE_F64;
}

/* Raw bits of a float dtype no wider than f32, widened to f32 (exact). */
K_HD float k_elem_to_f32(uint64_t raw, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_num_f16_to_f32((uint16_t)raw);
    case K_DTYPE_BF16: return k_num_bf16_to_f32((uint16_t)raw);
    default: return k_num_f32_from_bits((uint32_t)raw);
    }
}

K_HD uint64_t k_elem_from_f32(float x, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_num_f32_to_f16(x);
    case K_DTYPE_BF16: return k_num_f32_to_bf16(x);
    default: return k_num_f32_bits(x);
    }
}

K_HD uint64_t k_elem_from_f64(double x, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F32: return k_num_f32_bits((float)x);
    case K_DTYPE_F16: return k_num_f32_to_f16(k_num_f64_to_f32_round_odd(x));
    case K_DTYPE_BF16: return k_num_f32_to_bf16(k_num_f64_to_f32_round_odd(x));
    case K_DTYPE_F64: return k_num_f64_bits(x);
    case K_DTYPE_I32: return (uint32_t)k_num_round_to_i32_sat(x);
    case K_DTYPE_I64: return (uint64_t)k_num_round_to_i64_sat(x);
    case K_DTYPE_I8: return (uint8_t)k_num_round_to_i8_sat(x);
    case K_DTYPE_I16: return (uint16_t)k_num_round_to_i16_sat(x);
    case K_DTYPE_U16: return (uint32_t)k_num_round_to_u16_sat(x);
    case K_DTYPE_BOOL: return x != 0.0; /* NaN -> 1, as C's _Bool */
    default: return k_num_round_to_u8_sat(x);
    }
}

K_HD uint64_t k_elem_from_i64(int64_t v, int dtype)
{
    switch (dtype) {
    case K_DTYPE_F32: return k_num_f32_bits((float)v);
    case K_DTYPE_F16: return k_num_f32_to_f16(k_num_i64_to_f32_round_odd(v));
    case K_DTYPE_BF16: return k_num_f32_to_bf16(k_num_i64_to_f32_round_odd(v));
    case K_DTYPE_F64: return k_num_f64_bits((double)v);
    case K_DTYPE_I32: return (uint32_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v);
    case K_DTYPE_I64: return (uint64_t)v;
    case K_DTYPE_I8: return (uint8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    case K_DTYPE_I16: return (uint16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
    case K_DTYPE_U16: return v > 65535 ? 65535u : v < 0 ? 0u : (uint64_t)v;
    case K_DTYPE_BOOL: return v != 0;
    default: return v > 255 ? 255u : v < 0 ? 0u : (uint64_t)v;
    }
}

/* One element of k_cast from src_dtype to dst_dtype (different dtypes, or
 * bool -> bool, which normalises; other equal ones are a byte copy, done
 * by the callers). */
K_HD uint64_t k_elem_cast(uint64_t raw, int src_dtype, int dst_dtype)
{
    if (src_dtype == K_DTYPE_F64) return k_elem_from_f64(k_num_f64_from_bits(raw), dst_dtype);
    if (k_elem_dtype_is_float(src_dtype)) {
        float x = k_elem_to_f32(raw, src_dtype);
        if (dst_dtype == K_DTYPE_F32 || dst_dtype == K_DTYPE_F16 || dst_dtype == K_DTYPE_BF16)
            return k_elem_from_f32(x, dst_dtype);
        return k_elem_from_f64((double)x, dst_dtype);
    }
    int64_t v = src_dtype == K_DTYPE_I32    ? (int64_t)(int32_t)(uint32_t)raw
                : src_dtype == K_DTYPE_U8   ? (int64_t)(raw & 0xFFu)
                : src_dtype == K_DTYPE_I8   ? (int64_t)k_elem_i8_load(raw)
                : src_dtype == K_DTYPE_I16  ? (int64_t)k_elem_i16_load(raw)
                : src_dtype == K_DTYPE_U16  ? (int64_t)(raw & 0xFFFFu)
                : src_dtype == K_DTYPE_BOOL ? (int64_t)k_elem_bool_load(raw)
                                            : (int64_t)raw;
    return k_elem_from_i64(v, dst_dtype);
}

#endif /* K_ELEM_H */
