/*
 * twin_data.c - the cases' values, random elements and bitwise comparison
 * that test_twin (tests/kernels/cpu) and test_gpu_kernels
 * (tests/kernels/cuda) share; twin_data.h says what each one is.
 */
#include "twin_data.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const twin_dtype_name[K_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i32", "i64",
                                                    "u8",  "i8",  "i16",  "u16", "bool"};
const char *const twin_op_name[K_OP_COUNT] = {"sum", "min", "max", "prod"};

/* 2^62 + 2^38 + 1 goes to fp32 as 2^62 + 2^39; 16777217 is not a float. */
const int64_t twin_divisors[] = {
    1, 3, 2, 7, 1, 10, 255, 256, 16777217, (1LL << 32) + 5, (1LL << 40) + 1, (1LL << 62) + (1LL << 38) + 1, INT64_MAX};

const double twin_factors[] = {1.0,   0.5, -1.0,  0.0,     -0.0,  1.0 / 3,  2.5,       -1.5, 1e-3,  3.7,         1e10,
                               -1e30, 0.1, 1e-40, 65504.0, 1e300, INFINITY, -INFINITY, NAN,  255.5, 4294967296.5};

const double twin_cast_f64s[] = {2.5,
                                 3.5,
                                 -2.5,
                                 -0.5,
                                 0.5,
                                 255.5,
                                 256.0,
                                 -1.0,
                                 1e300,
                                 -1e300,
                                 2147483647.5,
                                 -2147483648.5,
                                 9.3e18,
                                 -9.3e18,
                                 1.0 + 0x1p-11 + 0x1p-40,
                                 1.0 + 0x1p-8 + 0x1p-40,
                                 65520.0,
                                 65519.99,
                                 0x1p-25,
                                 0x1.8p-25,
                                 3.5e38,
                                 NAN,
                                 -INFINITY,
                                 0x1p-1074};

const int64_t twin_cast_i64s[] = {INT64_MAX,
                                  INT64_MIN,
                                  (1LL << 24) + 1,
                                  (1LL << 53) + 1,
                                  65520,
                                  65519,
                                  -65520,
                                  (1LL << 11) + 1,
                                  ((1LL << 11) + 1) << 20 | 1,
                                  256,
                                  -1,
                                  4294967296LL};

/* (The arrays above are declared with their counts in twin_data.h: a count
 * that no longer matches its initializer is a compile error.) */

/* ---- elements --------------------------------------------------------------------- */

int twin_is_float(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16 || dtype == K_DTYPE_F64;
}

uint64_t twin_raw_at(const unsigned char *p, size_t size)
{
    uint64_t raw = 0;
    memcpy(&raw, p, size); /* little endian: the low bytes */
    return raw;
}

int twin_raw_is_nan(k_dtype_t dtype, uint64_t raw)
{
    switch (dtype) {
    case K_DTYPE_F32: return (raw & 0x7FFFFFFFu) > 0x7F800000u;
    case K_DTYPE_F16: return (raw & 0x7FFFu) > 0x7C00u;
    case K_DTYPE_BF16: return (raw & 0x7FFFu) > 0x7F80u;
    case K_DTYPE_F64: return (raw & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
    default: return 0;
    }
}

int twin_raw_same(k_dtype_t dtype, uint64_t a, uint64_t b, int loose_nan)
{
    if (a == b) return 1;
    return loose_nan && twin_raw_is_nan(dtype, a) && twin_raw_is_nan(dtype, b);
}

/* A random float pattern, exp_bits / mant_bits wide (twin_random_element
 * says which values). */
static uint64_t random_float_bits(test_rng_t *rng, int exp_bits, int mant_bits, int specials)
{
    const uint64_t mant_mask = ((uint64_t)1 << mant_bits) - 1, exp_max = ((uint64_t)1 << exp_bits) - 1;
    const uint64_t bias = exp_max / 2;
    uint64_t sign = test_rng_u64(rng) & 1, mant = test_rng_u64(rng) & mant_mask, exp;
    uint32_t kind = test_rng_below(rng, 32);
    if (specials && kind < 8) {
        switch (kind) {
        case 0: exp = 0, mant = 0; break;                                     /* +-0 */
        case 1: exp = exp_max, mant = 0; break;                               /* +-inf */
        case 2: exp = exp_max, mant |= (uint64_t)1 << (mant_bits - 1); break; /* quiet NaN */
        case 3: exp = exp_max, mant = (mant >> 1) | 1; break;                 /* signalling NaN */
        case 4:
        case 5: exp = 0, mant |= 1; break;                          /* subnormal */
        default: exp = exp_max - 1 - test_rng_below(rng, 2); break; /* huge */
        }
    } else if (kind == 31) {
        exp = 0, mant = 0;
    } else {
        exp = bias - 12 + test_rng_below(rng, 25);
    }
    return (sign << (exp_bits + mant_bits)) | (exp << mant_bits) | mant;
}

/* A random signed integer (twin_random_element's kind picks): any value (kind < 40), one within +-small
 * (kind < 90), or one of the six extremes. The caller cuts it to its width. */
static int64_t random_signed(test_rng_t *rng, uint32_t kind, uint32_t small, const int64_t extremes[6])
{
    return kind < 40   ? (int64_t)test_rng_u64(rng)
           : kind < 90 ? (int64_t)test_rng_below(rng, 2 * small + 1) - small
                       : extremes[test_rng_below(rng, 6)];
}

void twin_random_element(test_rng_t *rng, k_dtype_t dtype, int specials, unsigned char *p)
{
    uint32_t kind = test_rng_below(rng, 100); /* drawn for every dtype: the stream stays the same */
    uint64_t v;
    switch (dtype) {
    case K_DTYPE_F32: v = random_float_bits(rng, 8, 23, specials); break;
    case K_DTYPE_F16: v = random_float_bits(rng, 5, 10, specials); break;
    case K_DTYPE_BF16: v = random_float_bits(rng, 8, 7, specials); break;
    case K_DTYPE_F64: v = random_float_bits(rng, 11, 52, specials); break;
    case K_DTYPE_I32: {
        static const int64_t extremes[] = {INT32_MIN, INT32_MAX, -1, 0, 1, INT32_MIN + 1};
        v = (uint32_t)(int32_t)random_signed(rng, kind, 100, extremes);
        break;
    }
    case K_DTYPE_I64: {
        static const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0, 1, INT64_MIN + 1};
        v = (uint64_t)random_signed(rng, kind, 1000, extremes);
        break;
    }
    case K_DTYPE_I16:
    case K_DTYPE_U16: {
        /* random bits, small values around 0, and both types' limits */
        static const uint16_t extremes[] = {0x8000, 0x7FFF, 0xFFFF, 0, 1, 0x8001, 0xFFFE};
        v = kind < 50   ? test_rng_u64(rng) & 0xFFFF
            : kind < 85 ? (uint16_t)(test_rng_below(rng, 401) - 200)
                        : extremes[test_rng_below(rng, 7)];
        break;
    }
    case K_DTYPE_BOOL:
        /* 0 and 1 mostly, the rest other bytes that read as true */
        v = kind < 70 ? kind & 1 : test_rng_u64(rng) & 0xFF;
        break;
    default: v = test_rng_u64(rng) & 0xFF; break; /* u8, i8: every byte is as likely */
    }
    memcpy(p, &v, k_dtype_size(dtype)); /* little endian: the low bytes */
}

size_t twin_random_offset(test_rng_t *rng, size_t size) { return test_rng_below(rng, (uint32_t)(16 / size)) * size; }

/* ---- comparing outputs ------------------------------------------------------------ */

long twin_compare(twin_report_t *report, const char *what, k_dtype_t dtype, const unsigned char *got,
                  const unsigned char *want, size_t count, int loose_nan)
{
    const size_t size = k_dtype_size(dtype);
    long bad = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t g = twin_raw_at(got + i * size, size), w = twin_raw_at(want + i * size, size);
        if (twin_raw_same(dtype, g, w, loose_nan)) continue;
        if (bad == 0 && report->printed < report->print_max) {
            report->printed++;
            fprintf(stderr, "FAIL %s: element %zu of %zu: %s 0x%0*llx, %s 0x%0*llx\n", what, i, count, report->got_name,
                    (int)(2 * size), (unsigned long long)g, report->want_name, (int)(2 * size), (unsigned long long)w);
        }
        bad++;
    }
    return bad;
}

void twin_plant_special(unsigned char *p, k_dtype_t dtype, int kind)
{
    uint64_t raw;
    switch (dtype) {
    case K_DTYPE_F16: raw = (uint64_t[]){0x7C00u, 0xFC00u, 0x7E01u, 0x7C01u}[kind]; break;
    case K_DTYPE_BF16: raw = (uint64_t[]){0x7F80u, 0xFF80u, 0xFFC1u, 0x7F81u}[kind]; break;
    case K_DTYPE_F64:
        raw = (uint64_t[]){0x7FF0000000000000u, 0xFFF0000000000000u, 0x7FF8000000000001u, 0xFFF0000000000001u}[kind];
        break;
    default: raw = (uint64_t[]){0x7F800000u, 0xFF800000u, 0x7FC00001u, 0xFF800001u}[kind]; break;
    }
    memcpy(p, &raw, k_dtype_size(dtype));
}
