/* div_scale_isa.c - k_div and k_scale on every ISA against the exact-value
 * reference of cast_div_scale.c (cast_div_scale.h); cast_div_scale.c's top
 * comment says what is checked. */
#include "cast_div_scale.h"

/* ---- k_div / k_scale on every ISA -------------------------------------------
 * Random inputs (specials, integer extremes, and for k_div numerators next to
 * multiples of the divisor, where a wrong reciprocal shows first), odd counts,
 * unaligned offsets, in place and out of place. Every element must equal the
 * reference above, and its bits must equal the scalar path's (NaN payloads
 * included: the paths are meant to be interchangeable). */

#define UNARY_MAX_COUNT 65537

static const int64_t unary_divisors[] = {
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    16,
    25,
    100,
    127,
    128,
    255,
    256,
    257,
    641,
    1000,
    65535,
    65536,
    65537,
    1000003,
    123456789,
    0x7FFFFFFF,
    0x80000000LL,
    0x80000001LL,
    0xFFFFFFFFLL,
    0x100000000LL,
    0x100000001LL,
    (1LL << 40) + 1,
    (1LL << 53) + 1,
    (1LL << 62) - 1,
    1LL << 62,
    (1LL << 62) + 1,
    INT64_MAX - 1,
    INT64_MAX,
};
#define N_UNARY_DIVISORS (sizeof(unary_divisors) / sizeof(unary_divisors[0]))

static const double unary_factors[] = {
    1.0, 0.5,  0.25,  -1.0,  -1.5,     1.0 / 3.0, 0.1, 3.0,           1e-3,     1e10,         -1e10,
    0.0, -0.0, 1e-30, 1e300, INFINITY, -INFINITY, NAN, 255.0 / 254.0, 0x1p-149, 4294967296.5,
};
#define N_UNARY_FACTORS (sizeof(unary_factors) / sizeof(unary_factors[0]))

/* An integer of dtype at p next to a multiple of `divisor`, or an extreme. */
static void div_edge_element(k_dtype_t dtype, int64_t divisor, void *p)
{
    int64_t lo = cds_int_lo(dtype), hi = cds_int_hi(dtype);
    int64_t v;
    uint32_t kind = test_rng_below(&rng, 10);
    if (kind < 2) {
        static const int64_t extremes[] = {0, 1, -1};
        v = kind == 0 ? (test_rng_below(&rng, 2) ? lo : lo + 1)
                      : (test_rng_below(&rng, 2) ? hi : extremes[test_rng_below(&rng, 3)]);
    } else {
        /* k * divisor + delta with k * divisor inside [lo, hi] */
        int64_t k_max = hi / divisor, k_min = lo / divisor;
        uint64_t k_span = (uint64_t)k_max - (uint64_t)k_min + 1; /* 0: all of int64 */
        uint64_t k_offset = k_span ? test_rng_u64(&rng) % k_span : test_rng_u64(&rng);
        int64_t k = kind < 5   ? (test_rng_below(&rng, 2) ? k_max : k_min)
                    : kind < 7 ? (int64_t)test_rng_below(&rng, 5) - 2
                               : (int64_t)((uint64_t)k_min + k_offset);
        k = k < k_min ? k_min : k > k_max ? k_max : k;
        int64_t base = k * divisor;
        int64_t delta = (int64_t)test_rng_below(&rng, 3) - 1;
        v = (delta < 0 && base == lo) || (delta > 0 && base == hi) ? base : base + delta;
    }
    value_t value = {1, 0, v};
    cds_store_value(dtype, p, value);
}

/* A hash of n bytes: the input's, before and after a kernel reads it. */
static uint64_t bytes_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = test_mix64(h ^ p[i]);
    return h;
}

/* Runs k_div (is_div) or k_scale on `isa` and on the scalar path, checks
 * every element and the guards. Returns the number of failed checks. */
static long unary_case(k_isa_t isa, int is_div, k_dtype_t dtype, int64_t divisor, double factor, size_t count,
                       size_t off, int in_place, uint8_t *src, uint8_t *buf, uint8_t *scalar_out, long *checks,
                       long *printed)
{
    size_t size = k_dtype_size(dtype);
    int is_int = !cds_float_fmt(dtype);
    long failures = 0;

    for (size_t i = 0; i < count; i++) {
        if (is_div && is_int && test_rng_below(&rng, 2))
            div_edge_element(dtype, divisor, src + i * size);
        else
            random_element(&rng, dtype, src + i * size);
    }

    /* scalar path, out of place */
    k_isa_set(K_ISA_SCALAR);
    cds_div_or_scale(scalar_out, src, count, dtype, is_div, divisor, factor, 0);

    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    memset(buf, POISON, span);
    uint8_t *out = buf + GUARD_BYTES + off * size;
    uint64_t src_hash = bytes_hash(src, count * size);
    k_isa_set(isa);
    cds_div_or_scale(out, src, count, dtype, is_div, divisor, factor, in_place);

    for (size_t i = 0; i < count; i++) {
        uint8_t want[8];
        cds_want(dtype, src + i * size, is_div ? divisor : 0, factor, want);
        const uint8_t *got = out + i * size;
        *checks += 2;
        int ok_ref = cds_values_equal(dtype, got, want);
        int ok_scalar = memcmp(got, scalar_out + i * size, size) == 0;
        if (ok_ref && ok_scalar) continue;
        failures += !ok_ref + !ok_scalar;
        if ((*printed)++ < MAX_PRINTED) {
            printf("  %s %s count %zu off %zu%s elem %zu: x=", dtype_names[dtype], is_div ? "div" : "scale", count, off,
                   in_place ? " in place" : "", i);
            print_hex(src + i * size, size);
            printf(" by %lld / %g: got ", (long long)divisor, factor);
            print_hex(got, size);
            printf(" want ");
            print_hex(want, size);
            printf(" scalar ");
            print_hex(scalar_out + i * size, size);
            printf("\n");
        }
    }
    (*checks)++;
    if (!guards_intact(buf + off * size, count * size)) {
        failures++;
        if ((*printed)++ < MAX_PRINTED) printf("  %s count %zu: guard overwritten\n", dtype_names[dtype], count);
    }
    if (bytes_hash(src, count * size) != src_hash)
        failures++, printf("  %s count %zu: input modified\n", dtype_names[dtype], count);
    return failures;
}

static void test_unary_isa(k_isa_t isa)
{
    uint8_t *src = malloc(UNARY_MAX_COUNT * 8);
    uint8_t *scalar_out = malloc(UNARY_MAX_COUNT * 8);
    uint8_t *buf = malloc(2 * GUARD_BYTES + (UNARY_MAX_COUNT + MAX_OFFSET) * 8);
    if (!src || !scalar_out || !buf) {
        printf("test_unary_isa: out of memory\n");
        exit(1);
    }
    for (int is_div = 1; is_div >= 0; is_div--) {
        size_t n_cases = is_div ? N_UNARY_DIVISORS : N_UNARY_FACTORS;
        for (int dt = 0; dt < K_DTYPE_COUNT; dt++) {
            k_dtype_t dtype = (k_dtype_t)dt;
            long checks = 0, failures = 0, printed = 0;
            for (size_t c = 0; c < n_cases; c++) {
                int64_t divisor = is_div ? unary_divisors[c] : 0;
                double factor = is_div ? 0 : unary_factors[c];
                /* every count up to a few vectors (all tail lengths), for
                 * divisors 1..9 and the first factors */
                if (c < 10)
                    for (size_t count = 0; count <= 200; count++)
                        failures += unary_case(isa, is_div, dtype, divisor, factor, count, count % (MAX_OFFSET + 1),
                                               (int)(count & 1), src, buf, scalar_out, &checks, &printed);
                for (int in_place = 0; in_place < 2; in_place++)
                    failures += unary_case(isa, is_div, dtype, divisor, factor, 1021 + test_rng_below(&rng, 64),
                                           test_rng_below(&rng, MAX_OFFSET + 1), in_place, src, buf, scalar_out,
                                           &checks, &printed);
            }
            failures += unary_case(isa, is_div, dtype, is_div ? 3 : 0, is_div ? 0 : 1.0 / 3.0, UNARY_MAX_COUNT, 3, 1,
                                   src, buf, scalar_out, &checks, &printed);
            report(checks, failures, "%s %-6s %s, random", is_div ? "div" : "scale", k_isa_name(isa), dtype_names[dt]);
        }
    }
    k_isa_set(isa);
    free(buf);
    free(scalar_out);
    free(src);
}

/* Integer k_div against C's division: all 256 u8 by every divisor up to
 * 1024; i32 numerators at the extremes and around the largest multiples of
 * every divisor up to 4096 and of 2^k - 1, 2^k, 2^k + 1 up to 2^34. */
static void test_div_int_exhaustive(k_isa_t isa)
{
    long checks = 0, failures = 0;
    uint8_t u8_src[256], u8_out[256];
    for (int x = 0; x < 256; x++) u8_src[x] = (uint8_t)x;
    for (int64_t d = 1; d <= 1024; d++) {
        k_div(u8_out, u8_src, 256, K_DTYPE_U8, d);
        for (int x = 0; x < 256; x++, checks++)
            if (u8_out[x] != x / d && failures++ < MAX_PRINTED)
                printf("  u8 %d / %lld: got %d\n", x, (long long)d, u8_out[x]);
    }

    /* i8, i16, u16: every value by divisors 1..70 and a few large ones;
     * bool: every byte (normalised first) by the same */
    static const int64_t narrow_divisors[] = {127,   128,   129,   255,       256,       32767,    32768,
                                              32769, 65535, 65536, 1LL << 31, 1LL << 32, INT64_MAX};
    int16_t *n_src = malloc(65536 * 2), *n_out = malloc(65536 * 2);
    if (!n_src || !n_out) {
        printf("test_div_int_exhaustive: out of memory\n");
        exit(1);
    }
    for (size_t dj = 0; dj < 70 + sizeof(narrow_divisors) / sizeof(narrow_divisors[0]); dj++) {
        int64_t d = dj < 70 ? (int64_t)dj + 1 : narrow_divisors[dj - 70];
        int8_t *s8 = (int8_t *)n_src, *o8 = (int8_t *)n_out;
        uint8_t *sb = (uint8_t *)n_src, *ob = (uint8_t *)n_out;
        uint16_t *su = (uint16_t *)n_src, *ou = (uint16_t *)n_out;
        for (int x = 0; x < 256; x++) s8[x] = (int8_t)(x - 128);
        k_div(o8, s8, 256, K_DTYPE_I8, d);
        for (int x = 0; x < 256; x++, checks++)
            if (o8[x] != (x - 128) / d && failures++ < MAX_PRINTED)
                printf("  i8 %d / %lld: got %d\n", x - 128, (long long)d, o8[x]);
        for (int x = 0; x < 256; x++) sb[x] = (uint8_t)x;
        k_div(ob, sb, 256, K_DTYPE_BOOL, d);
        for (int x = 0; x < 256; x++, checks++)
            if (ob[x] != (x != 0) / d && failures++ < MAX_PRINTED)
                printf("  bool %d / %lld: got %d\n", x, (long long)d, ob[x]);
        for (int x = 0; x < 65536; x++) n_src[x] = (int16_t)(x - 32768);
        k_div(n_out, n_src, 65536, K_DTYPE_I16, d);
        for (int x = 0; x < 65536; x++, checks++)
            if (n_out[x] != (x - 32768) / d && failures++ < MAX_PRINTED)
                printf("  i16 %d / %lld: got %d\n", x - 32768, (long long)d, n_out[x]);
        for (int x = 0; x < 65536; x++) su[x] = (uint16_t)x;
        k_div(ou, su, 65536, K_DTYPE_U16, d);
        for (int x = 0; x < 65536; x++, checks++)
            if (ou[x] != x / d && failures++ < MAX_PRINTED) printf("  u16 %d / %lld: got %d\n", x, (long long)d, ou[x]);
    }
    free(n_src);
    free(n_out);

    int64_t divisors[4096 + 3 * 34];
    size_t n_div = 0;
    for (int64_t d = 1; d <= 4096; d++) divisors[n_div++] = d;
    for (int k = 1; k <= 34; k++) {
        divisors[n_div++] = (1LL << k) - 1;
        divisors[n_div++] = 1LL << k;
        divisors[n_div++] = (1LL << k) + 1;
    }
    for (size_t j = 0; j < n_div; j++) {
        int64_t d = divisors[j];
        int64_t top = INT32_MAX / d * d, bottom = INT32_MIN / d * d; /* largest multiples */
        const int64_t candidates[] = {INT32_MIN,  INT32_MIN + 1, INT32_MAX, INT32_MAX - 1, 0,      1,
                                      -1,         d - 1,         d,         d + 1,         1 - d,  -d,
                                      -d - 1,     top,           top - 1,   top + 1,       bottom, bottom - 1,
                                      bottom + 1, 2 * d - 1,     1 - 2 * d};
        int32_t src[32], out[32];
        size_t n = 0;
        for (size_t c = 0; c < sizeof(candidates) / sizeof(candidates[0]); c++)
            if (candidates[c] >= INT32_MIN && candidates[c] <= INT32_MAX) src[n++] = (int32_t)candidates[c];
        while (n < 32) /* fill whole vectors so the SIMD body, not the tail, runs */
            src[n++] = (int32_t)test_rng_u64(&rng);
        k_div(out, src, n, K_DTYPE_I32, d);
        for (size_t i = 0; i < n; i++, checks++)
            if (out[i] != (int32_t)(src[i] / d) && failures++ < MAX_PRINTED)
                printf("  i32 %d / %lld: got %d\n", src[i], (long long)d, out[i]);
    }
    report(checks, failures, "div %-6s u8/i8/i16/u16/bool all, i32 near multiples", k_isa_name(isa));
}

/* ---- integer k_scale truncates, by hand --------------------------------------
 * k_cpu.h: (double)x * factor truncated toward zero (as Horovod's C
 * conversion), NaN -> 0, saturated at the type's limits. The results are
 * written out by hand (worked in exact decimal from the double product),
 * not computed; "round:" notes what rounding to nearest even would have
 * given where it differs. Each case runs at its own count and, its values
 * repeated, at 67 and 300 elements (every value in the vector body and in
 * the scalar tail; 300 takes u8's table path), at offsets 0 and 3, out of
 * place and in place. */

#define TRUNC_MAX_VALUES 12

typedef struct {
    k_dtype_t dtype;
    double factor;
    size_t count;
    int64_t x[TRUNC_MAX_VALUES];
    int64_t want[TRUNC_MAX_VALUES];
} scale_trunc_case_t;

static const scale_trunc_case_t scale_trunc_cases[] = {
    /* i32. 3.5 -> 3, -3.5 -> -3, 1.5 -> 1, 1073741823.5 -> 1073741823
     * (round: 4, -4, 2, 1073741824) */
    {K_DTYPE_I32,
     0.5,
     11,
     {7, -7, 5, -5, 3, -3, 1, -1, 0, INT32_MAX, INT32_MIN},
     {3, -3, 2, -2, 1, -1, 0, 0, 0, 1073741823, -1073741824}},
    /* 1.5 -> 1, 2.6999.. -> 2, 3.0 stays (round: 2, 3, 3) */
    {K_DTYPE_I32, 0.3, 7, {5, -5, 9, -9, 10, -10, 1}, {1, -1, 2, -2, 3, -3, 0}},
    /* 2.9999 -> 2, 5.9998 -> 5 (round: 3, 6) */
    {K_DTYPE_I32, 2.9999, 4, {1, -1, 2, -2}, {2, -2, 5, -5}},
    /* 2.9997 -> 2 (round: 3); 9999.0 is exact */
    {K_DTYPE_I32, 0.9999, 4, {3, -3, 10000, -10000}, {2, -2, 9999, -9999}},
    /* just past the limits, +-0.2147..: the truncation still fits */
    {K_DTYPE_I32, 1.0000000001, 3, {INT32_MAX, INT32_MIN, INT32_MAX - 1}, {INT32_MAX, INT32_MIN, INT32_MAX - 1}},
    /* saturation at both ends; 2147483646 and 2147483649 exactly */
    {K_DTYPE_I32,
     3.0,
     8,
     {INT32_MAX, INT32_MIN, 1000000000, -1000000000, 715827882, -715827882, 715827883, -715827883},
     {INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 2147483646, -2147483646, INT32_MAX, INT32_MIN}},
    {K_DTYPE_I32, -1e10, 3, {1, -1, 0}, {INT32_MIN, INT32_MAX, 0}},
    {K_DTYPE_I32, -1.0, 2, {INT32_MIN, INT32_MAX}, {INT32_MAX, -INT32_MAX}},
    {K_DTYPE_I32, INFINITY, 3, {5, -5, 0}, {INT32_MAX, INT32_MIN, 0}}, /* 0 * inf is NaN */
    {K_DTYPE_I32, NAN, 6, {1, -1, 0, INT32_MAX, INT32_MIN, 7}, {0, 0, 0, 0, 0, 0}},
    /* i64: (double)x rounds first, INT64_MAX to 2^63 (so x 0.5 gives 2^62) */
    {K_DTYPE_I64,
     0.5,
     10,
     {7, -7, 5, -5, 3, -3, 1, -1, INT64_MAX, INT64_MIN},
     {3, -3, 2, -2, 1, -1, 0, 0, 4611686018427387904LL, -4611686018427387904LL}},
    /* 1.5 -> 1, 2.1 -> 2, 2.6999.. -> 2 (round: 2, 2, 3) */
    {K_DTYPE_I64, 0.3, 6, {5, -5, 7, -7, 9, -9}, {1, -1, 2, -2, 2, -2}},
    {K_DTYPE_I64, -0.5, 2, {7, -7}, {-3, 3}},   /* round: -4, 4 */
    {K_DTYPE_I64, 2.9999, 2, {1, -1}, {2, -2}}, /* round: 3, -3 */
    /* 2^63 and beyond cds_saturate, -2^63 itself fits */
    {K_DTYPE_I64,
     2.0,
     6,
     {INT64_MAX, INT64_MIN, 1LL << 62, -(1LL << 62), 3, -3},
     {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 6, -6}},
    {K_DTYPE_I64, -1.0, 2, {INT64_MIN, INT64_MAX}, {INT64_MAX, INT64_MIN}},
    {K_DTYPE_I64, -INFINITY, 3, {5, -5, 0}, {INT64_MIN, INT64_MAX, 0}},
    {K_DTYPE_I64, NAN, 6, {1, -1, 0, INT64_MAX, INT64_MIN, 7}, {0, 0, 0, 0, 0, 0}},
    /* u8. 127.5 -> 127, 3.5 -> 3, 1.5 -> 1 (round: 128, 4, 2) */
    {K_DTYPE_U8, 0.5, 8, {255, 254, 7, 5, 3, 1, 0, 128}, {127, 127, 3, 2, 1, 0, 0, 64}},
    /* 1.5 -> 1, 2.6999.. -> 2, 76.5 -> 76 (round: 2, 3, 76) */
    {K_DTYPE_U8, 0.3, 5, {5, 10, 9, 255, 1}, {1, 3, 2, 76, 0}},
    /* 382.5 and 256.5 cds_saturate, 255.0 exact, 253.5 -> 253, 7.5 -> 7 (round: 254, 8) */
    {K_DTYPE_U8, 1.5, 6, {255, 170, 171, 169, 3, 5}, {255, 255, 255, 253, 4, 7}},
    {K_DTYPE_U8, 0.9999, 2, {3, 255}, {2, 254}},         /* 2.9997, 254.9745 (round: 3, 255) */
    {K_DTYPE_U8, -0.5, 4, {1, 0, 255, 2}, {0, 0, 0, 0}}, /* -0.5 truncates to 0, the rest cds_saturate */
    {K_DTYPE_U8, INFINITY, 3, {0, 1, 255}, {0, 255, 255}},
    {K_DTYPE_U8, NAN, 4, {0, 1, 128, 255}, {0, 0, 0, 0}},
    /* i8. 63.5 -> 63, 3.5 -> 3 (round: 64, 4) */
    {K_DTYPE_I8, 0.5, 8, {127, -128, 7, -7, 5, -5, 1, -1}, {63, -64, 3, -3, 2, -2, 0, 0}},
    /* -127.5 -> -127 (round: -128), 7.5 -> 7 (round: 8); 190.5, 129 cds_saturate */
    {K_DTYPE_I8, 1.5, 10, {127, -128, 85, -85, 86, -86, 3, -3, 5, -5}, {127, -128, 127, -127, 127, -128, 4, -4, 7, -7}},
    {K_DTYPE_I8, 0.3, 4, {5, -5, 9, -9}, {1, -1, 2, -2}}, /* round: 2, -2, 3, -3 */
    {K_DTYPE_I8, -1.0, 3, {-128, 127, 0}, {127, -127, 0}},
    {K_DTYPE_I8, INFINITY, 3, {1, -1, 0}, {127, -128, 0}},
    {K_DTYPE_I8, NAN, 5, {1, -1, 0, 127, -128}, {0, 0, 0, 0, 0}},
    /* i16. 16383.5 -> 16383 (round: 16384) */
    {K_DTYPE_I16, 0.5, 6, {32767, -32768, 7, -7, 3, -3}, {16383, -16384, 3, -3, 1, -1}},
    /* 32767.5 -> 32767, -32767.5 -> -32767 (round: -32768); +-32769 cds_saturate */
    {K_DTYPE_I16, 1.5, 6, {21845, -21845, 21846, -21846, 5, -5}, {32767, -32767, 32767, -32768, 7, -7}},
    /* 32763.72.. -> 32763, -32764.72.. -> -32764 (round: 32764, -32765) */
    {K_DTYPE_I16, 0.9999, 4, {3, -3, 32767, -32768}, {2, -2, 32763, -32764}},
    {K_DTYPE_I16, -INFINITY, 3, {1, -1, 0}, {-32768, 32767, 0}},
    {K_DTYPE_I16, NAN, 5, {1, -1, 0, 32767, -32768}, {0, 0, 0, 0, 0}},
    /* u16. 32767.5 -> 32767 (round: 32768) */
    {K_DTYPE_U16, 0.5, 8, {65535, 65534, 7, 5, 3, 1, 0, 40000}, {32767, 32767, 3, 2, 1, 0, 0, 20000}},
    /* 65535.0 exact, 65536.5 saturates, 7.5 -> 7 (round: 8) */
    {K_DTYPE_U16, 1.5, 5, {43690, 43691, 65535, 3, 5}, {65535, 65535, 65535, 4, 7}},
    {K_DTYPE_U16, 0.3, 2, {5, 9}, {1, 2}}, /* round: 2, 3 */
    {K_DTYPE_U16, -2.0, 3, {1, 0, 65535}, {0, 0, 0}},
    {K_DTYPE_U16, NAN, 4, {0, 1, 40000, 65535}, {0, 0, 0, 0}},
};
#define N_SCALE_TRUNC_CASES (sizeof(scale_trunc_cases) / sizeof(scale_trunc_cases[0]))
#define TRUNC_MAX_COUNT 300

static void test_scale_trunc_by_hand(k_isa_t isa)
{
    static const size_t repeated_counts[] = {67, TRUNC_MAX_COUNT};
    static uint8_t src[TRUNC_MAX_COUNT * 8], want[TRUNC_MAX_COUNT * 8];
    static uint8_t buf[2 * GUARD_BYTES + (TRUNC_MAX_COUNT + MAX_OFFSET) * 8];
    long checks = 0, failures = 0;
    int dtype_seen[K_DTYPE_COUNT] = {0};

    k_isa_set(isa);
    for (size_t c = 0; c < N_SCALE_TRUNC_CASES; c++) {
        const scale_trunc_case_t *t = &scale_trunc_cases[c];
        size_t size = k_dtype_size(t->dtype);
        dtype_seen[t->dtype] = 1;
        for (size_t k = 0; k < 1 + sizeof(repeated_counts) / sizeof(repeated_counts[0]); k++) {
            size_t count = k == 0 ? t->count : repeated_counts[k - 1];
            for (size_t i = 0; i < count; i++) {
                value_t x = {1, 0, t->x[i % t->count]}, w = {1, 0, t->want[i % t->count]};
                cds_store_value(t->dtype, src + i * size, x);
                cds_store_value(t->dtype, want + i * size, w);
            }
            for (int layout = 0; layout < 4; layout++) {
                size_t off = layout & 1 ? 3 : 0;
                int in_place = layout >> 1;
                memset(buf, POISON, sizeof(buf));
                uint8_t *out = buf + GUARD_BYTES + off * size;
                if (in_place) memcpy(out, src, count * size);
                k_scale(out, in_place ? out : src, count, t->dtype, t->factor);
                for (size_t i = 0; i < count; i++) {
                    checks++;
                    if (memcmp(out + i * size, want + i * size, size) == 0) continue;
                    if (failures++ < MAX_PRINTED)
                        printf("  %s scale %lld by %.17g (count %zu off %zu%s elem %zu): got %lld want %lld\n",
                               dtype_names[t->dtype], (long long)t->x[i % t->count], t->factor, count, off,
                               in_place ? " in place" : "", i, (long long)cds_load_value(t->dtype, out + i * size).i,
                               (long long)t->want[i % t->count]);
                }
                checks++;
                if (!guards_intact(buf + off * size, count * size))
                    failures++, printf("  %s scale by %g count %zu: guard overwritten\n", dtype_names[t->dtype],
                                       t->factor, count);
            }
        }
    }
    /* every integer dtype has its cases */
    static const k_dtype_t int_dtypes[] = {K_DTYPE_I32, K_DTYPE_I64, K_DTYPE_U8, K_DTYPE_I8, K_DTYPE_I16, K_DTYPE_U16};
    for (size_t d = 0; d < sizeof(int_dtypes) / sizeof(int_dtypes[0]); d++, checks++)
        if (!dtype_seen[int_dtypes[d]])
            failures++, printf("  no by-hand scale case for %s\n", dtype_names[int_dtypes[d]]);
    report(checks, failures, "scale %-6s integers truncate, by hand", k_isa_name(isa));
}

void test_div_scale_isa(k_isa_t isa)
{
    test_unary_isa(isa);
    test_div_int_exhaustive(isa);
    test_scale_trunc_by_hand(isa);
}
