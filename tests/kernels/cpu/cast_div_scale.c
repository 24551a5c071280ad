/*
 * cast_div_scale.c - k_cast (all 121 pairs), k_div and k_scale on
 * representative values against an exact-value reference; and k_div /
 * k_scale on every ISA x dtype: random values (specials, integer extremes,
 * numerators next to multiples of the divisor), divisors 1..9 up to
 * INT64_MAX, every count to 200 and large odd ones, unaligned, in place;
 * equal to the reference and bit-identical to the scalar path. Integer
 * division also exhaustively for u8 and near the largest multiples for i32.
 * Integer k_scale truncates toward zero (Horovod's semantics; casts round
 * to nearest even): the reference says so, and hand-written cases on every
 * ISA show it where rounding would differ, with negative values,
 * saturation at both ends and NaN products.
 */
#include "cast_div_scale.h"

/* ---- k_div, k_scale, k_cast ----------------------------------------------
 * Values are held as "exact value" records: a double for float dtypes, an
 * int64 for integer dtypes. */

const ref_fmt_t *cds_float_fmt(k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F32: return &REF_F32;
    case K_DTYPE_F16: return &REF_F16;
    case K_DTYPE_BF16: return &REF_BF16;
    case K_DTYPE_F64: return &REF_F64;
    default: return NULL;
    }
}

/* The range of an integer dtype (bool: 0 .. 1). */
int64_t cds_int_lo(k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_I32: return INT32_MIN;
    case K_DTYPE_I8: return INT8_MIN;
    case K_DTYPE_I16: return INT16_MIN;
    case K_DTYPE_U8:
    case K_DTYPE_U16:
    case K_DTYPE_BOOL: return 0;
    default: return INT64_MIN;
    }
}

int64_t cds_int_hi(k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_I32: return INT32_MAX;
    case K_DTYPE_I8: return INT8_MAX;
    case K_DTYPE_I16: return INT16_MAX;
    case K_DTYPE_U8: return UINT8_MAX;
    case K_DTYPE_U16: return UINT16_MAX;
    case K_DTYPE_BOOL: return 1;
    default: return INT64_MAX;
    }
}

value_t cds_load_value(k_dtype_t dtype, const void *p)
{
    value_t v = {0, 0, 0};
    switch (dtype) {
    case K_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        v.f = f;
        break;
    }
    case K_DTYPE_F64: memcpy(&v.f, p, 8); break;
    case K_DTYPE_F16:
    case K_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        v.f = ref_decode16(h, *cds_float_fmt(dtype));
        break;
    }
#define LOAD_INT(T)              \
    {                            \
        T x;                     \
        memcpy(&x, p, sizeof x); \
        v.is_int = 1;            \
        v.i = (int64_t)x;        \
        break;                   \
    }
    case K_DTYPE_I32: LOAD_INT(int32_t)
    case K_DTYPE_I64: LOAD_INT(int64_t)
    case K_DTYPE_U8: LOAD_INT(uint8_t)
    case K_DTYPE_I8: LOAD_INT(int8_t)
    case K_DTYPE_I16: LOAD_INT(int16_t)
    case K_DTYPE_U16: LOAD_INT(uint16_t)
#undef LOAD_INT
    case K_DTYPE_BOOL:
        v.is_int = 1;
        v.i = *(const uint8_t *)p != 0;
        break; /* any nonzero byte: true */
    case K_DTYPE_COUNT: break;
    }
    return v;
}

/* Stores an exactly representable value (already rounded / saturated). */
void cds_store_value(k_dtype_t dtype, void *p, value_t v)
{
    switch (dtype) {
    case K_DTYPE_F32: {
        float f = isnan(v.f) ? NAN : (float)v.f;
        memcpy(p, &f, 4);
        break;
    }
    case K_DTYPE_F64: memcpy(p, &v.f, 8); break;
    case K_DTYPE_F16:
    case K_DTYPE_BF16: {
        ref_fmt_t fmt = *cds_float_fmt(dtype);
        uint16_t h = isnan(v.f) ? (uint16_t)0x7FFF : ref_encode16(v.f, fmt);
        memcpy(p, &h, 2);
        break;
    }
    case K_DTYPE_I32: {
        int32_t x = (int32_t)v.i;
        memcpy(p, &x, 4);
        break;
    }
    case K_DTYPE_I64: memcpy(p, &v.i, 8); break;
    case K_DTYPE_U8: *(uint8_t *)p = (uint8_t)v.i; break;
    case K_DTYPE_I8: *(int8_t *)p = (int8_t)v.i; break;
    case K_DTYPE_I16: {
        int16_t x = (int16_t)v.i;
        memcpy(p, &x, 2);
        break;
    }
    case K_DTYPE_U16: {
        uint16_t x = (uint16_t)v.i;
        memcpy(p, &x, 2);
        break;
    }
    case K_DTYPE_BOOL: *(uint8_t *)p = (uint8_t)v.i; break;
    case K_DTYPE_COUNT: break;
    }
}

int64_t cds_saturate(int64_t x, k_dtype_t dtype)
{
    int64_t lo = cds_int_lo(dtype), hi = cds_int_hi(dtype);
    return x < lo ? lo : x > hi ? hi : x;
}

/* An integral double saturated to dtype's range (and int64_t's first). */
static int64_t ref_integral_to_int(double r, k_dtype_t dtype)
{
    if (r >= 0x1p63) return cds_saturate(INT64_MAX, dtype);
    if (r < -0x1p63) return cds_saturate(INT64_MIN, dtype);
    return cds_saturate((int64_t)r, dtype);
}

/* double -> integer dtype as k_cast converts: round half even, cds_saturate,
 * NaN -> 0 */
static int64_t ref_double_to_int(double x, k_dtype_t dtype)
{
    if (isnan(x)) return 0;
    return ref_integral_to_int(copysign(ref_round_half_even(fabs(x)), x), dtype);
}

/* An integer k_scale's product -> integer dtype: truncated toward zero
 * (Horovod's C conversion), saturated, NaN -> 0. The truncation is the
 * floor of the magnitude with the sign put back, not the library's range
 * comparisons. */
static int64_t ref_scale_to_int(double x, k_dtype_t dtype)
{
    if (isnan(x)) return 0;
    return ref_integral_to_int(copysign(floor(fabs(x)), x), dtype);
}

/* The value `v` converted to dtype exactly as k_cast must do it. */
static value_t ref_convert(value_t v, k_dtype_t dtype)
{
    value_t r = {0, 0, 0};
    const ref_fmt_t *fmt = cds_float_fmt(dtype);
    if (fmt) {
        r.f = v.is_int ? ref_round_i64(v.i, *fmt) : ref_round(v.f, *fmt);
    } else if (dtype == K_DTYPE_BOOL) {
        r.is_int = 1; /* value != 0, NaN -> 1 (C's _Bool) */
        r.i = v.is_int ? v.i != 0 : v.f != 0.0;
    } else {
        r.is_int = 1;
        r.i = v.is_int ? cds_saturate(v.i, dtype) : ref_double_to_int(v.f, dtype);
    }
    return r;
}

int cds_values_equal(k_dtype_t dtype, const void *got, const void *want)
{
    if (cds_float_fmt(dtype)) {
        value_t g = cds_load_value(dtype, got), w = cds_load_value(dtype, want);
        if (isnan(w.f)) return isnan(g.f);
        return g.f == w.f && !signbit(g.f) == !signbit(w.f);
    }
    return memcmp(got, want, k_dtype_size(dtype)) == 0;
}

static const double representative_doubles[] = {
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    3.5,
    0.49999999999999994,
    100.25,
    -7.75,
    127.0,
    128.0,
    255.0,
    255.5,
    256.0,
    -300.0,
    1000.0,
    65504.0,
    65519.99,
    65520.0,
    1e5,
    2147483647.0,
    2147483648.0,
    -2147483648.0,
    -2147483649.0,
    4294967296.5,
    0x1p53 + 2,
    0x1p63,
    -0x1p63,
    0x1p64,
    1e30,
    -1e30,
    3.4028234663852886e38,
    3.5e38,
    1e300,
    -1e300,
    0x1p-14,
    0x1p-24,
    0x1p-25,
    0x1.8p-25,
    0x1p-126,
    0x1p-133,
    0x1p-149,
    0x1p-150,
    1e-310,
    1.0 + 0x1p-11 + 0x1p-40, /* f16 tie + tiny: must round up (double rounding trap) */
    -(1.0 + 0x1p-11 + 0x1p-40),
    1.0 + 0x1p-8 + 0x1p-40,  /* same trap for bf16 */
    1.0 + 0x1p-24 + 0x1p-50, /* and for f32 */
    0.1,
    -0.1,
    1.0 / 3.0,
    INFINITY,
    -INFINITY,
    NAN,
};

static const int64_t representative_ints[] = {
    0,
    1,
    -1,
    2,
    -2,
    3,
    7,
    100,
    -100,
    127,
    128,
    200,
    255,
    256,
    -255,
    -256,
    1000,
    65504,
    65519,
    65520,
    65535,
    65536,
    -65520,
    (1 << 24) + 1,
    (1 << 24) + 3,
    2147483647,
    -2147483647 - 1,
    2147483648LL,
    -2147483649LL,
    (1LL << 40) + (1LL << 32) + 1, /* bf16 double-rounding trap */
    -((1LL << 40) + (1LL << 32) + 1),
    (1LL << 53) + 1,
    (1LL << 62) + (1LL << 38) + 1,
    INT64_MAX,
    INT64_MIN,
    INT64_MIN + 1,
    0x7FFFFF7FFFFFFFFFLL,
};

#define N_DOUBLES (sizeof(representative_doubles) / sizeof(representative_doubles[0]))
#define N_INTS (sizeof(representative_ints) / sizeof(representative_ints[0]))
#define N_VALUES (N_DOUBLES + N_INTS)

/* Fills src (dtype) with every representative value that dtype can hold:
 * float dtypes get the doubles rounded to themselves plus the integers
 * converted; integer dtypes get the integers saturated plus the doubles
 * rounded. Returns the count. */
static size_t representative_array(k_dtype_t dtype, void *src)
{
    size_t size = k_dtype_size(dtype), n = 0;
    for (size_t i = 0; i < N_DOUBLES; i++) {
        value_t v = {0, representative_doubles[i], 0};
        cds_store_value(dtype, (uint8_t *)src + n++ * size, ref_convert(v, dtype));
    }
    for (size_t i = 0; i < N_INTS; i++) {
        value_t v = {1, 0, representative_ints[i]};
        cds_store_value(dtype, (uint8_t *)src + n++ * size, ref_convert(v, dtype));
    }
    return n;
}

static void test_cast(void)
{
    for (int s = 0; s < K_DTYPE_COUNT; s++) {
        k_dtype_t src_dtype = (k_dtype_t)s;
        uint8_t src[N_VALUES * 8];
        size_t n = representative_array(src_dtype, src);
        for (int d = 0; d < K_DTYPE_COUNT; d++) {
            k_dtype_t dst_dtype = (k_dtype_t)d;
            size_t dsize = k_dtype_size(dst_dtype);
            uint8_t buf[2 * GUARD_BYTES + N_VALUES * 8];
            long checks = 0, failures = 0;
            memset(buf, POISON, sizeof(buf));
            k_cast(buf + GUARD_BYTES, dst_dtype, src, src_dtype, n);
            for (size_t i = 0; i < n; i++) {
                value_t v = cds_load_value(src_dtype, src + i * k_dtype_size(src_dtype));
                uint8_t want[8];
                cds_store_value(dst_dtype, want, ref_convert(v, dst_dtype));
                const uint8_t *got = buf + GUARD_BYTES + i * dsize;
                checks++;
                if (!cds_values_equal(dst_dtype, got, want) && failures++ < MAX_PRINTED) {
                    printf("  %s -> %s: %.17g / %lld: got ", dtype_names[s], dtype_names[d], v.f, (long long)v.i);
                    print_hex(got, dsize);
                    printf(" want ");
                    print_hex(want, dsize);
                    printf("\n");
                }
            }
            checks++;
            if (!guards_intact(buf, n * dsize))
                failures++, printf("  %s -> %s: guard overwritten\n", dtype_names[s], dtype_names[d]);
            report(checks, failures, "cast %s -> %s", dtype_names[s], dtype_names[d]);
        }
    }
}

/* k_div and k_scale share a driver: `divisor` > 0 selects k_div. */
value_t cds_ref_div_or_scale(k_dtype_t dtype, value_t x, int64_t divisor, double factor)
{
    value_t r = {0, 0, 0};
    const ref_fmt_t *fmt = cds_float_fmt(dtype);
    if (dtype == K_DTYPE_F64) {
        r.f = divisor ? x.f / (double)divisor : x.f * factor;
    } else if (fmt) {
        float fx = (float)x.f; /* f32, f16, bf16 compute in fp32 */
        float res = divisor ? fx / (float)divisor : fx * (float)factor;
        r.f = ref_round(res, *fmt);
    } else if (dtype == K_DTYPE_BOOL) {
        r.is_int = 1; /* k_cpu.h: truncating division of 0/1; scale: x AND factor != 0 */
        r.i = divisor ? x.i / divisor : (x.i && factor != 0.0);
    } else {
        r.is_int = 1;
        r.i = divisor ? x.i / divisor : ref_scale_to_int((double)x.i * factor, dtype);
    }
    return r;
}

void cds_div_or_scale(void *out, const void *src, size_t count, k_dtype_t dtype, int is_div, int64_t divisor,
                      double factor, int in_place)
{
    const void *in = src;
    if (in_place) {
        if (count) memcpy(out, src, count * k_dtype_size(dtype));
        in = out;
    }
    if (is_div)
        k_div(out, in, count, dtype, divisor);
    else
        k_scale(out, in, count, dtype, factor);
}

value_t cds_want(k_dtype_t dtype, const void *x_bytes, int64_t divisor, double factor, uint8_t *want)
{
    value_t x = cds_load_value(dtype, x_bytes);
    cds_store_value(dtype, want, cds_ref_div_or_scale(dtype, x, divisor, factor));
    return x;
}

static void test_div_scale(void)
{
    static const int64_t divisors[] = {1,        2, 3, 4, 7, 10, 255, 256, 1000, 1 << 20, 123456789, (1LL << 40) + 1,
                                       INT64_MAX};
    static const double factors[] = {1.0,  0.5,   -1.5,    3.0,   1.0 / 3.0, 1e-3, 2.5,    0.0,
                                     1e10, -1e10, 65536.0, 1e-30, 0.3,       -0.5, 2.9999, 0.9999};
    size_t n_div = sizeof(divisors) / sizeof(divisors[0]);
    size_t n_fac = sizeof(factors) / sizeof(factors[0]);

    for (int which = 0; which < 2; which++) {
        for (int dt = 0; dt < K_DTYPE_COUNT; dt++) {
            k_dtype_t dtype = (k_dtype_t)dt;
            size_t size = k_dtype_size(dtype);
            uint8_t src[N_VALUES * 8], buf[2 * GUARD_BYTES + N_VALUES * 8];
            size_t n = representative_array(dtype, src);
            long checks = 0, failures = 0;
            size_t cases = which == 0 ? n_div : n_fac;
            for (size_t c = 0; c < cases; c++) {
                int64_t divisor = which == 0 ? divisors[c] : 0;
                double factor = which == 0 ? 0 : factors[c];
                for (int in_place = 0; in_place < 2; in_place++) {
                    memset(buf, POISON, sizeof(buf));
                    uint8_t *out = buf + GUARD_BYTES;
                    cds_div_or_scale(out, src, n, dtype, which == 0, divisor, factor, in_place);
                    for (size_t i = 0; i < n; i++) {
                        uint8_t want[8];
                        value_t x = cds_want(dtype, src + i * size, divisor, factor, want);
                        checks++;
                        if (!cds_values_equal(dtype, out + i * size, want) && failures++ < MAX_PRINTED) {
                            printf("  %s %s %.17g / %lld by %lld / %g: got ", dtype_names[dt],
                                   which == 0 ? "div" : "scale", x.f, (long long)x.i, (long long)divisor, factor);
                            print_hex(out + i * size, size);
                            printf(" want ");
                            print_hex(want, size);
                            printf("\n");
                        }
                    }
                    checks++;
                    if (!guards_intact(buf, n * size)) failures++, printf("  guard overwritten\n");
                }
            }
            report(checks, failures, "%s %s", which == 0 ? "div" : "scale", dtype_names[dt]);
        }
    }
}

void test_cast_div_scale(void)
{
    test_cast();
    test_div_scale();
}
