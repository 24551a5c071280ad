/*
 * k_scale.c - k_div (the second half of AVG: SUM, then divide by the number
 * of ranks) and k_scale (pre/post-scaling of gradients): the entry points,
 * the loop-invariant operands they precompute (k_unary_args_t, see
 * k_internal.h), and the scalar kernels, which are the reference for the
 * SIMD paths (k_scale_simd.h, in k_scale_avx2.c / k_scale_avx512.c) and
 * handle their tails.
 *
 * Both run over every byte of a fused buffer after the reduction, so they
 * must keep up with memory: one loop per dtype (no switch per element), and
 * integer division by a multiply with a precomputed reciprocal instead of a
 * 20-40 cycle hardware divide per element.
 */
#include "k_internal.h"

/* ---- loop-invariant operands ---------------------------------------------- */

/* Smallest L with 2^L >= d (d >= 1). */
static uint32_t k_ceil_log2(uint64_t d)
{
    uint32_t log = 0;
    while (log < 64 && ((uint64_t)1 << log) < d) log++;
    return log;
}

/* |x| <= 2^31 for an int32 x, so n_max * d <= 2^(31 + L) and shift = 31 + L
 * (see k_internal.h). magic = ceil(2^shift / d) < 2^32: for d = 2^L it is
 * exactly 2^31, otherwise 2^(L-1) < d gives 2^(31+L) / d < 2^32. Divisors
 * of 2^32 and more leave every quotient 0: magic 0. */
static void k_div_args_i32(k_unary_args_t *args, int64_t divisor)
{
    uint64_t d = (uint64_t)divisor;
    if (d > UINT32_MAX) {
        args->i32_magic = 0;
        args->i32_shift = 0;
        return;
    }
    uint32_t shift = 31 + k_ceil_log2(d); /* <= 63 */
    args->i32_magic = (uint32_t)((((uint64_t)1 << shift) + d - 1) / d);
    args->i32_shift = shift;
}

/* Same argument one size up: |x| <= 2^63, shift = 63 + L <= 126, magic < 2^64,
 * and the 128-bit product |x| * magic < 2^127. */
static void k_div_args_i64(k_unary_args_t *args, int64_t divisor)
{
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 k_u128_t;
    uint64_t d = (uint64_t)divisor;
    uint32_t shift = 63 + k_ceil_log2(d);
    args->i64_magic = (uint64_t)((((k_u128_t)1 << shift) - 1) / d + 1);
    args->i64_shift = shift;
#else
    (void)args;
    (void)divisor;
#endif
}

/* x <= 255 and e < d <= 255 give x * e < 2^16 for every d, so shift 16 and
 * magic = ceil(2^16 / d), which fits 16 bits for d >= 2. */
static void k_div_args_u8(k_unary_args_t *args, int64_t divisor)
{
    args->u8_magic = divisor >= 256 ? 0 : (uint16_t)((65536 + divisor - 1) / divisor);
}

/* ---- scalar kernels ---------------------------------------------------------- */

/* The float kernels of both operations: one IEEE operation in the
 * element's compute type (f16 / bf16 widened to fp32, rounded once back),
 * dst[i] = load(src[i]) op the precomputed operand. */
#define K_ID(x) (x)
#define K_UNARY_SCALAR_FLOAT(name, elem_t, operand_t, operand, load, store, op)     \
    void name(void *dst, const void *src, size_t count, const k_unary_args_t *args) \
    {                                                                               \
        elem_t *d = dst;                                                            \
        const elem_t *s = src;                                                      \
        const operand_t v = args->operand;                                          \
        for (size_t i = 0; i < count; i++) d[i] = store(load(s[i]) op v);           \
    }
K_UNARY_SCALAR_FLOAT(k_div_scalar_f32, float, float, f32, K_ID, K_ID, /)
K_UNARY_SCALAR_FLOAT(k_div_scalar_f16, uint16_t, float, f32, k_num_f16_to_f32, k_num_f32_to_f16, /)
K_UNARY_SCALAR_FLOAT(k_div_scalar_bf16, uint16_t, float, f32, k_num_bf16_to_f32, k_num_f32_to_bf16, /)
K_UNARY_SCALAR_FLOAT(k_div_scalar_f64, double, double, f64, K_ID, K_ID, /)
K_UNARY_SCALAR_FLOAT(k_scale_scalar_f32, float, float, f32, K_ID, K_ID, *)
K_UNARY_SCALAR_FLOAT(k_scale_scalar_f16, uint16_t, float, f32, k_num_f16_to_f32, k_num_f32_to_f16, *)
K_UNARY_SCALAR_FLOAT(k_scale_scalar_bf16, uint16_t, float, f32, k_num_bf16_to_f32, k_num_f32_to_bf16, *)
K_UNARY_SCALAR_FLOAT(k_scale_scalar_f64, double, double, f64, K_ID, K_ID, *)
#undef K_UNARY_SCALAR_FLOAT
#undef K_ID

/* As k_div_scalar_i32 (above); divisor >= 2: |q| <= 2^62. */
void k_div_scalar_i64(void *dst, const void *src, size_t count, const k_unary_args_t *args)
{
    int64_t *d = dst;
    const int64_t *s = src;
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 k_u128_t;
    uint64_t magic = args->i64_magic;
    uint32_t shift = args->i64_shift - 64; /* >= 64 for divisor >= 2 */
    for (size_t i = 0; i < count; i++) {
        uint64_t sign = 0u - (uint64_t)(s[i] < 0);
        uint64_t n = ((uint64_t)s[i] ^ sign) - sign;
        uint64_t q = (uint64_t)(((k_u128_t)n * magic) >> 64) >> shift;
        d[i] = (int64_t)(q ^ sign) + (int64_t)(sign & 1u);
    }
#else
    int64_t divisor = args->divisor; /* >= 2, so INT64_MIN / -1 cannot happen */
    for (size_t i = 0; i < count; i++) d[i] = s[i] / divisor;
#endif
}

void k_div_scalar_u8(void *dst, const void *src, size_t count, const k_unary_args_t *args)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint32_t magic = args->u8_magic;
    for (size_t i = 0; i < count; i++) d[i] = (uint8_t)((s[i] * magic) >> 16);
}

/* i32, and i8, i16 and u16 widened to int32 with i32's magic (|x| <= 2^16
 * is within its n_max of 2^31; the quotient fits the type again).
 * Branch-free (signs of summed gradients are random, so a branch would
 * mispredict half the time): with sign = all ones for x < 0, else 0,
 * (v ^ sign) - sign is v or -v in unsigned arithmetic. divisor >= 2 here,
 * so |q| <= 2^30 and the final conversion is in range. */
#define K_DIV_SCALAR_INT(type, elem_t)                                                             \
    void k_div_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args) \
    {                                                                                              \
        elem_t *d = dst;                                                                           \
        const elem_t *s = src;                                                                     \
        uint64_t magic = args->i32_magic;                                                          \
        uint32_t shift = args->i32_shift;                                                          \
        for (size_t i = 0; i < count; i++) {                                                       \
            int32_t x = s[i];                                                                      \
            uint32_t sign = 0u - (uint32_t)(x < 0);                                                \
            uint32_t n = ((uint32_t)x ^ sign) - sign;                                              \
            uint32_t q = (uint32_t)((n * magic) >> shift);                                         \
            d[i] = (elem_t)((int32_t)(q ^ sign) + (int32_t)(sign & 1u));                           \
        }                                                                                          \
    }
K_DIV_SCALAR_INT(i32, int32_t)
K_DIV_SCALAR_INT(i8, int8_t)
K_DIV_SCALAR_INT(i16, int16_t)
K_DIV_SCALAR_INT(u16, uint16_t)
#undef K_DIV_SCALAR_INT

/* bool: the truncated quotient of 0 or 1, so 0 for divisor >= 2; divisor 1
 * (the entry point passes it for bool) normalises. */
void k_div_scalar_bool(void *dst, const void *src, size_t count, const k_unary_args_t *args)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint8_t keep = args->divisor == 1;
    for (size_t i = 0; i < count; i++) d[i] = (uint8_t)(s[i] != 0) & keep;
}

/* A u8 has 256 values: the entry point tabulates them all (with the same
 * formula) and every path looks the result up. */
void k_scale_scalar_u8(void *dst, const void *src, size_t count, const k_unary_args_t *args)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t i = 0; i < count; i++) d[i] = args->u8_table[s[i]];
}

/* Integers (u8 aside), Horovod's way: the product in double, truncated
 * toward zero by C's conversion, NaN -> 0 and saturated where C's
 * conversion would be undefined (k_num_trunc_to_*_sat, k_numeric.h). */
#define K_SCALE_SCALAR_INT(type, elem_t, sat)                                                        \
    void k_scale_scalar_##type(void *dst, const void *src, size_t count, const k_unary_args_t *args) \
    {                                                                                                \
        elem_t *d = dst;                                                                             \
        const elem_t *s = src;                                                                       \
        double factor = args->f64;                                                                   \
        for (size_t i = 0; i < count; i++) d[i] = sat((double)s[i] * factor);                        \
    }
K_SCALE_SCALAR_INT(i32, int32_t, k_num_trunc_to_i32_sat)
K_SCALE_SCALAR_INT(i64, int64_t, k_num_trunc_to_i64_sat)
K_SCALE_SCALAR_INT(i8, int8_t, k_num_trunc_to_i8_sat)
K_SCALE_SCALAR_INT(i16, int16_t, k_num_trunc_to_i16_sat)
K_SCALE_SCALAR_INT(u16, uint16_t, k_num_trunc_to_u16_sat)
#undef K_SCALE_SCALAR_INT

/* bool: x AND (factor != 0), a NaN factor counting as nonzero (k_cpu.h). */
void k_scale_scalar_bool(void *dst, const void *src, size_t count, const k_unary_args_t *args)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint8_t keep = args->f64 != 0.0;
    for (size_t i = 0; i < count; i++) d[i] = (uint8_t)(s[i] != 0) & keep;
}

const k_unary_table_t k_div_table_scalar = {
    [K_DTYPE_F32] = k_div_scalar_f32, [K_DTYPE_F16] = k_div_scalar_f16,   [K_DTYPE_BF16] = k_div_scalar_bf16,
    [K_DTYPE_F64] = k_div_scalar_f64, [K_DTYPE_I32] = k_div_scalar_i32,   [K_DTYPE_I64] = k_div_scalar_i64,
    [K_DTYPE_U8] = k_div_scalar_u8,   [K_DTYPE_I8] = k_div_scalar_i8,     [K_DTYPE_I16] = k_div_scalar_i16,
    [K_DTYPE_U16] = k_div_scalar_u16, [K_DTYPE_BOOL] = k_div_scalar_bool,
};

const k_unary_table_t k_scale_table_scalar = {
    [K_DTYPE_F32] = k_scale_scalar_f32, [K_DTYPE_F16] = k_scale_scalar_f16,   [K_DTYPE_BF16] = k_scale_scalar_bf16,
    [K_DTYPE_F64] = k_scale_scalar_f64, [K_DTYPE_I32] = k_scale_scalar_i32,   [K_DTYPE_I64] = k_scale_scalar_i64,
    [K_DTYPE_U8] = k_scale_scalar_u8,   [K_DTYPE_I8] = k_scale_scalar_i8,     [K_DTYPE_I16] = k_scale_scalar_i16,
    [K_DTYPE_U16] = k_scale_scalar_u16, [K_DTYPE_BOOL] = k_scale_scalar_bool,
};

/* ---- entry points -------------------------------------------------------------- */

#if defined(__x86_64__)
static const k_unary_table_t *const k_div_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_div_table_scalar,
    [K_ISA_AVX2] = &k_div_table_avx2,
    [K_ISA_AVX512] = &k_div_table_avx512,
};
static const k_unary_table_t *const k_scale_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_scale_table_scalar,
    [K_ISA_AVX2] = &k_scale_table_avx2,
    [K_ISA_AVX512] = &k_scale_table_avx512,
};
#else
static const k_unary_table_t *const k_div_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_div_table_scalar,
    [K_ISA_AVX2] = &k_div_table_scalar, /* unreachable: k_isa_set refuses */
    [K_ISA_AVX512] = &k_div_table_scalar,
};
static const k_unary_table_t *const k_scale_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_scale_table_scalar,
    [K_ISA_AVX2] = &k_scale_table_scalar,
    [K_ISA_AVX512] = &k_scale_table_scalar,
};
#endif

void k_div(void *dst, const void *src, size_t count, k_dtype_t dtype, int64_t divisor)
{
    /* The header requires divisor >= 1; refusing anything else keeps a
     * caller bug from becoming an integer division by zero. Out-of-range
     * dtypes are likewise refused rather than indexing past the tables. */
    if (divisor < 1 || count == 0 || (unsigned)dtype >= K_DTYPE_COUNT) return;

    int is_int = dtype == K_DTYPE_I32 || dtype == K_DTYPE_I64 || dtype == K_DTYPE_U8 || dtype == K_DTYPE_I8 ||
                 dtype == K_DTYPE_I16 || dtype == K_DTYPE_U16;
    if (is_int && divisor == 1) {
        /* x / 1 == x; the kernels assume divisor >= 2 (u8's magic needs it).
         * Floats still divide: x / 1.0 quiets a signalling NaN. */
        if (dst != src) memcpy(dst, src, count * k_dtype_size(dtype));
        return;
    }

    k_unary_args_t args = {.f32 = (float)divisor, .f64 = (double)divisor, .divisor = divisor};
    if (dtype == K_DTYPE_I32 || dtype == K_DTYPE_I8 || dtype == K_DTYPE_I16 || dtype == K_DTYPE_U16)
        k_div_args_i32(&args, divisor);
    else if (dtype == K_DTYPE_I64)
        k_div_args_i64(&args, divisor);
    else if (dtype == K_DTYPE_U8)
        k_div_args_u8(&args, divisor);
    (*k_div_tables[k_dispatch_isa()])[dtype](dst, src, count, &args);
}

void k_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor)
{
    if (count == 0 || (unsigned)dtype >= K_DTYPE_COUNT) return;

    k_unary_args_t args = {.f32 = (float)factor, .f64 = factor};
    if (dtype == K_DTYPE_U8) {
        /* Only the inputs present need a result; past 256 elements
         * tabulating all of them is the cheaper way. */
        if (count < 256) {
            uint8_t *d = dst;
            const uint8_t *s = src;
            for (size_t i = 0; i < count; i++) d[i] = k_num_trunc_to_u8_sat((double)s[i] * factor);
            return;
        }
        for (int x = 0; x < 256; x++) args.u8_table[x] = k_num_trunc_to_u8_sat((double)x * factor);
    }
    /* x * NaN for a NaN x may return either NaN's payload, and multiply
     * commutes, so the compiler picks the operand order of the scalar and
     * of the vector instruction independently. A NaN factor is a caller's
     * degenerate case: the scalar path alone handles it, so every ISA gives
     * the same bits. */
    k_isa_t isa = isnan(factor) ? K_ISA_SCALAR : k_dispatch_isa();
    (*k_scale_tables[isa])[dtype](dst, src, count, &args);
}
