/*
 * kernels_test.c - what the kernel test files share (see kernels_test.h):
 * the group report, the random stream, reference binary formats in double
 * arithmetic, random elements, the one-element reduce reference, guards.
 */
#include <stdarg.h>

#include "kernels_test.h"

test_rng_t rng = {TEST_RNG_SEED};

const char *const dtype_names[K_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i32", "i64",
                                                "u8",  "i8",  "i16",  "u16", "bool"};
const char *const op_names[K_OP_COUNT] = {"sum", "min", "max", "prod"};

int groups_run;
int groups_failed;

void report(long checks, long failures, const char *fmt, ...)
{
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    groups_run++;
    if (failures) groups_failed++;
    printf("%s %-44s %10ld checks%s\n", failures ? "FAIL" : "ok  ", what, checks, failures ? " <--" : "");
}

/* ---- reference binary formats, in double arithmetic --------------------- */

const ref_fmt_t REF_F16 = {10, -14, 15};
const ref_fmt_t REF_BF16 = {7, -126, 127};
const ref_fmt_t REF_F32 = {23, -126, 127};
const ref_fmt_t REF_F64 = {52, -1022, 1023};

double ref_round_half_even(double q) /* q >= 0 */
{
    double lo = floor(q);
    double frac = q - lo;
    if (frac > 0.5) return lo + 1;
    if (frac < 0.5) return lo;
    return fmod(lo, 2.0) == 0.0 ? lo : lo + 1;
}

/* Exact: scaling by a power of two is exact and x has at most 53 bits. */
double ref_round(double x, ref_fmt_t fmt)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    double mag = fabs(x);
    int e = ilogb(mag);
    if (e < fmt.emin) e = fmt.emin;
    double quantum = ldexp(1.0, e - fmt.mant_bits);
    double r = ref_round_half_even(mag / quantum) * quantum;
    if (r > ldexp(2.0 - ldexp(1.0, -fmt.mant_bits), fmt.emax)) r = INFINITY;
    return copysign(r, x);
}

/* int64 rounded to a format with mant_bits, exactly (no trip through double
 * precision first), ties to even, overflow to inf. */
double ref_round_i64(int64_t v, ref_fmt_t fmt)
{
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int len = 0;
    while (len < 64 && (mag >> len) != 0) len++;
    double r;
    if (len <= fmt.mant_bits + 1) {
        r = (double)mag;
    } else {
        int shift = len - (fmt.mant_bits + 1);
        uint64_t q = mag >> shift;
        uint64_t rem = mag & ((UINT64_C(1) << shift) - 1);
        uint64_t half = UINT64_C(1) << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        r = ldexp((double)q, shift);
    }
    if (r > ldexp(2.0 - ldexp(1.0, -fmt.mant_bits), fmt.emax)) r = INFINITY;
    return v < 0 ? -r : r;
}

/* 16-bit formats: 1 sign bit, 15 - mant_bits exponent bits. */
double ref_decode16(uint16_t h, ref_fmt_t fmt)
{
    int exp_bits = 15 - fmt.mant_bits;
    unsigned exp_all = (1u << exp_bits) - 1;
    unsigned exp = (h >> fmt.mant_bits) & exp_all;
    unsigned mant = h & ((1u << fmt.mant_bits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == exp_all) return mant ? NAN : sign * INFINITY;
    if (exp == 0) return sign * ldexp(mant, fmt.emin - fmt.mant_bits);
    return sign * ldexp(mant + (1u << fmt.mant_bits), (int)exp - (1 - fmt.emin) - fmt.mant_bits);
}

/* v must be exactly representable in fmt (or +-inf); not NaN. */
uint16_t ref_encode16(double v, ref_fmt_t fmt)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double mag = fabs(v);
    int bias = 1 - fmt.emin;
    unsigned exp_all = (1u << (15 - fmt.mant_bits)) - 1;
    if (isinf(mag)) return (uint16_t)(sign | (exp_all << fmt.mant_bits));
    if (mag < ldexp(1.0, fmt.emin)) return (uint16_t)(sign | (unsigned)(mag / ldexp(1.0, fmt.emin - fmt.mant_bits)));
    int e = ilogb(mag);
    unsigned mant = (unsigned)(mag / ldexp(1.0, e - fmt.mant_bits)) - (1u << fmt.mant_bits);
    return (uint16_t)(sign | ((unsigned)(e + bias) << fmt.mant_bits) | mant);
}

int is_nan16(uint16_t h, ref_fmt_t fmt) { return isnan(ref_decode16(h, fmt)); }

float f32_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}
uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* ---- random inputs and the one-element reduce reference ----------------- */

void random_element(test_rng_t *gen, k_dtype_t dtype, void *p)
{
    uint32_t kind = test_rng_below(gen, 100);
    switch (dtype) {
    case K_DTYPE_F32:
    case K_DTYPE_F64: {
        double v;
        if (kind < 80) {
            v = (test_rng_unit(gen) * 2 - 1) * ldexp(1.0, (int)test_rng_below(gen, 41) - 20);
        } else if (kind < 90) {
            static const double specials[] = {0.0,  -0.0,     INFINITY,  -INFINITY, NAN,     -NAN,  1.0,
                                              -1.0, 0x1p-149, -0x1p-140, 3.4e38,    -3.4e38, 1e300, -1e-310};
            v = specials[test_rng_below(gen, sizeof(specials) / sizeof(specials[0]))];
        } else {
            uint64_t bits = test_rng_u64(gen);
            if (dtype == K_DTYPE_F32) {
                float f = f32_from_bits((uint32_t)bits); /* any pattern, payloads too */
                memcpy(p, &f, 4);
                return;
            }
            memcpy(&v, &bits, 8);
        }
        if (dtype == K_DTYPE_F32) {
            float f = (float)v;
            memcpy(p, &f, 4);
        } else {
            memcpy(p, &v, 8);
        }
        return;
    }
    case K_DTYPE_F16:
    case K_DTYPE_BF16: {
        uint16_t h = (uint16_t)test_rng_u64(gen);
        uint16_t exp_mask = dtype == K_DTYPE_F16 ? 0x7C00 : 0x7F80;
        if (kind < 75 && (h & exp_mask) == exp_mask)
            h &= (uint16_t)~0x4000u;                           /* mostly finite: clear the top exponent bit */
        if (kind >= 75 && kind < 85) h &= (uint16_t)~exp_mask; /* zero / subnormal */
        memcpy(p, &h, 2);
        return;
    }
    case K_DTYPE_I32: {
        static const int32_t extremes[] = {INT32_MIN, INT32_MAX, -1, 0, 1};
        int32_t v = kind < 50   ? (int32_t)test_rng_u64(gen)
                    : kind < 90 ? (int32_t)test_rng_below(gen, 201) - 100
                                : extremes[test_rng_below(gen, 5)];
        memcpy(p, &v, 4);
        return;
    }
    case K_DTYPE_I64: {
        static const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0, 1};
        int64_t v = kind < 50   ? (int64_t)test_rng_u64(gen)
                    : kind < 90 ? (int64_t)test_rng_below(gen, 2001) - 1000
                                : extremes[test_rng_below(gen, 5)];
        memcpy(p, &v, 8);
        return;
    }
    case K_DTYPE_U8: {
        uint8_t v = (uint8_t)test_rng_u64(gen);
        memcpy(p, &v, 1);
        return;
    }
    case K_DTYPE_I8: {
        static const int8_t extremes[] = {INT8_MIN, INT8_MAX, -1, 0, 1, INT8_MIN + 1, INT8_MAX - 1};
        int8_t v = kind < 60 ? (int8_t)(uint8_t)test_rng_u64(gen) : extremes[test_rng_below(gen, 7)];
        memcpy(p, &v, 1);
        return;
    }
    case K_DTYPE_I16: {
        static const int16_t extremes[] = {INT16_MIN, INT16_MAX, -1, 0, 1, INT16_MIN + 1, INT16_MAX - 1};
        int16_t v = kind < 50   ? (int16_t)(uint16_t)test_rng_u64(gen)
                    : kind < 80 ? (int16_t)(test_rng_below(gen, 401) - 200)
                                : extremes[test_rng_below(gen, 7)];
        memcpy(p, &v, 2);
        return;
    }
    case K_DTYPE_U16: {
        static const uint16_t extremes[] = {0, 1, 2, 255, 256, UINT16_MAX, UINT16_MAX - 1};
        uint16_t v = kind < 50   ? (uint16_t)test_rng_u64(gen)
                     : kind < 80 ? (uint16_t)test_rng_below(gen, 400)
                                 : extremes[test_rng_below(gen, 7)];
        memcpy(p, &v, 2);
        return;
    }
    case K_DTYPE_BOOL: {
        /* mostly 0 / 1, a quarter other bytes (true, to be normalised) */
        uint8_t v = kind < 75 ? (uint8_t)(kind & 1) : (uint8_t)(2 + test_rng_below(gen, 254));
        memcpy(p, &v, 1);
        return;
    }
    case K_DTYPE_COUNT: return;
    }
}

void ref_reduce(k_dtype_t dtype, k_op_t op, const void *pa, const void *pb, void *out, int *any_nan_ok)
{
    *any_nan_ok = 0;
    switch (dtype) {
        /* f32 in float, f64 in double: each type's own arithmetic. */
#define REF_REDUCE_FLOAT(T)                                            \
    {                                                                  \
        T a, b, r;                                                     \
        memcpy(&a, pa, sizeof(a));                                     \
        memcpy(&b, pb, sizeof(b));                                     \
        if (op == K_OP_SUM)                                            \
            r = a + b;                                                 \
        else if (op == K_OP_PROD)                                      \
            r = a * b;                                                 \
        else if (isnan(a))                                             \
            r = a;                                                     \
        else if (isnan(b))                                             \
            r = b;                                                     \
        else                                                           \
            r = op == K_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);    \
        *any_nan_ok = (op == K_OP_SUM || op == K_OP_PROD) && isnan(r); \
        memcpy(out, &r, sizeof(r));                                    \
        return;                                                        \
    }
    case K_DTYPE_F32: REF_REDUCE_FLOAT(float)
    case K_DTYPE_F64: REF_REDUCE_FLOAT(double)
#undef REF_REDUCE_FLOAT
    case K_DTYPE_F16:
    case K_DTYPE_BF16: {
        ref_fmt_t fmt = dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
        uint16_t quiet_bit = dtype == K_DTYPE_F16 ? 0x0200 : 0x0040;
        uint16_t a, b, r;
        memcpy(&a, pa, 2);
        memcpy(&b, pb, 2);
        float fa = (float)ref_decode16(a, fmt), fb = (float)ref_decode16(b, fmt), fr;
        if (op == K_OP_SUM || op == K_OP_PROD) {
            fr = op == K_OP_SUM ? fa + fb : fa * fb;
            *any_nan_ok = isnan(fr);
            r = isnan(fr) ? 0x7FFF : ref_encode16(ref_round(fr, fmt), fmt);
        } else if (isnan(fa)) {
            r = a | quiet_bit; /* widening quiets the NaN, narrowing keeps the payload */
        } else if (isnan(fb)) {
            r = b | quiet_bit;
        } else {
            int pick_b = op == K_OP_MIN ? fb < fa : fb > fa;
            r = pick_b ? b : a;
            if (fa == fb) r = b; /* ties (incl. +-0) return b; callers accept either zero */
        }
        memcpy(out, &r, 2);
        return;
    }
    case K_DTYPE_I32: {
        int32_t a, b, r;
        memcpy(&a, pa, 4);
        memcpy(&b, pb, 4);
        int64_t wide = op == K_OP_SUM ? (int64_t)a + b : (int64_t)a * b; /* exact */
        if (op == K_OP_MIN)
            r = a < b ? a : b;
        else if (op == K_OP_MAX)
            r = a > b ? a : b;
        else
            r = (int32_t)(uint32_t)((uint64_t)wide & 0xFFFFFFFFu);
        memcpy(out, &r, 4);
        return;
    }
    case K_DTYPE_I64: {
        int64_t a, b, r;
        memcpy(&a, pa, 8);
        memcpy(&b, pb, 8);
        if (op == K_OP_MIN)
            r = a < b ? a : b;
        else if (op == K_OP_MAX)
            r = a > b ? a : b;
#if defined(__SIZEOF_INT128__)
        /* exact 128-bit product, then keep the low 64 bits */
        else if (op == K_OP_PROD)
            r = (int64_t)(uint64_t)(__extension__(unsigned __int128)((__extension__(__int128) a) * b));
#else
        else if (op == K_OP_PROD)
            r = (int64_t)((uint64_t)a * (uint64_t)b);
#endif
        else
            r = (int64_t)((uint64_t)a + (uint64_t)b);
        memcpy(out, &r, 8);
        return;
    }
    case K_DTYPE_U8: {
        uint8_t a = *(const uint8_t *)pa, b = *(const uint8_t *)pb, r;
        unsigned wide = op == K_OP_SUM ? (unsigned)a + b : (unsigned)a * b;
        if (op == K_OP_MIN)
            r = a < b ? a : b;
        else if (op == K_OP_MAX)
            r = a > b ? a : b;
        else
            r = (uint8_t)(wide & 0xFF);
        memcpy(out, &r, 1);
        return;
    }
    case K_DTYPE_I8:
    case K_DTYPE_I16:
    case K_DTYPE_U16: {
        /* exact in int64, then wrapped by hand to the type's width */
        int64_t a, b, r;
        if (dtype == K_DTYPE_I8) {
            a = *(const int8_t *)pa, b = *(const int8_t *)pb;
        } else if (dtype == K_DTYPE_I16) {
            int16_t x, y;
            memcpy(&x, pa, 2), memcpy(&y, pb, 2);
            a = x, b = y;
        } else {
            uint16_t x, y;
            memcpy(&x, pa, 2), memcpy(&y, pb, 2);
            a = x, b = y;
        }
        int bits = dtype == K_DTYPE_I8 ? 8 : 16;
        int64_t modulus = (int64_t)1 << bits;
        if (op == K_OP_MIN)
            r = a < b ? a : b;
        else if (op == K_OP_MAX)
            r = a > b ? a : b;
        else {
            r = op == K_OP_SUM ? a + b : a * b;
            r = ((r % modulus) + modulus) % modulus; /* 0 .. 2^bits - 1 */
            if (dtype != K_DTYPE_U16 && r >= modulus / 2) r -= modulus;
        }
        if (dtype == K_DTYPE_I8) {
            int8_t v = (int8_t)r;
            memcpy(out, &v, 1);
        } else if (dtype == K_DTYPE_I16) {
            int16_t v = (int16_t)r;
            memcpy(out, &v, 2);
        } else {
            uint16_t v = (uint16_t)r;
            memcpy(out, &v, 2);
        }
        return;
    }
    case K_DTYPE_BOOL: {
        int a = *(const uint8_t *)pa != 0, b = *(const uint8_t *)pb != 0;
        uint8_t r = (uint8_t)(op == K_OP_SUM || op == K_OP_MAX ? (a || b) : (a && b));
        memcpy(out, &r, 1);
        return;
    }
    case K_DTYPE_COUNT: return;
    }
}

int is_zero_bits(k_dtype_t dtype, const void *p)
{
    switch (dtype) {
    case K_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return f == 0;
    }
    case K_DTYPE_F64: {
        double d;
        memcpy(&d, p, 8);
        return d == 0;
    }
    case K_DTYPE_F16:
    case K_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return (h & 0x7FFF) == 0;
    }
    default: return 0;
    }
}

int is_nan_bits(k_dtype_t dtype, const void *p)
{
    switch (dtype) {
    case K_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return isnan(f);
    }
    case K_DTYPE_F64: {
        double d;
        memcpy(&d, p, 8);
        return isnan(d);
    }
    case K_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return is_nan16(h, REF_F16);
    }
    case K_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return is_nan16(h, REF_BF16);
    }
    default: return 0;
    }
}

int element_ok(k_dtype_t dtype, k_op_t op, const void *got, const void *want, int any_nan_ok, const void *a,
               const void *b)
{
    size_t size = k_dtype_size(dtype);
    if (any_nan_ok) return is_nan_bits(dtype, got);
    /* the header allows either zero for min/max of two zeros */
    if ((op == K_OP_MIN || op == K_OP_MAX) && is_zero_bits(dtype, a) && is_zero_bits(dtype, b))
        return is_zero_bits(dtype, got);
    return memcmp(got, want, size) == 0;
}

void print_hex(const void *p, size_t size)
{
    const uint8_t *bytes = p;
    for (size_t i = size; i-- > 0;) printf("%02x", bytes[i]);
}

int guards_intact(const uint8_t *buf, size_t data_bytes)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (buf[i] != POISON || buf[GUARD_BYTES + data_bytes + i] != POISON) return 0;
    return 1;
}
