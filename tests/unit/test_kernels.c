/*
 * test_kernels.c - checks hora's CPU kernels (kernels/include/k_cpu.h)
 * against references written here, independently of the library:
 *
 *  - f16/bf16 <-> f32: exhaustive over all 65536 halves, and f32 -> half
 *    rounding on millions of floats (halfway cases, subnormals, overflow)
 *    against a reference that rounds in double arithmetic;
 *  - k_reduce: every ISA this CPU has x every dtype x every op, counts
 *    0..300 and some large odd ones, unaligned offsets, dst == a and
 *    dst == b, poisoned guard bytes around dst to catch overruns;
 *  - k_div, k_scale, k_cast (all 49 pairs) on representative values;
 *  - k_sgd_step on every ISA: every hyper-parameter mix, bit for bit
 *    against a reference with one rounding per operation, with guards;
 *  - k_div and k_scale on every ISA x dtype: random values (specials,
 *    integer extremes, numerators next to multiples of the divisor),
 *    divisors 1..9 up to INT64_MAX, every count to 200 and large odd ones,
 *    unaligned, in place; equal to the reference and bit-identical to the
 *    scalar path. Integer division also exhaustively for u8 and near the
 *    largest multiples for i32.
 *
 * Results must be exact (a single rounded op per element is deterministic);
 * a NaN only passes where a NaN is expected.
 *
 * Build: linked against kernels_dep by meson, or by hand:
 *   gcc -std=gnu11 -O2 -Wall -Wextra -Ikernels/include kernels/cpu/\*.c \
 *       tests/unit/test_kernels.c -lm -o test_kernels
 * Exit status 0 = all passed, 1 = something failed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k_cpu.h"

static const char *const dtype_names[K_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64",
                                                       "i32", "i64", "u8"};
static const char *const op_names[K_OP_COUNT] = {"sum", "min", "max", "prod"};

static int groups_run;
static int groups_failed;

/* One summary line per group of checks; the first few failures of a group
 * are printed by the group itself. */
static void report(const char *what, long checks, long failures)
{
    groups_run++;
    if (failures)
        groups_failed++;
    printf("%s %-44s %10ld checks%s\n", failures ? "FAIL" : "ok  ", what, checks,
           failures ? " <--" : "");
}

#define MAX_PRINTED 5

/* ---- deterministic random numbers (xorshift64*, fixed seed) ------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t rng_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint32_t rng_below(uint32_t n) { return (uint32_t)(rng_u64() % n); }
static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }

/* ---- reference binary formats, in double arithmetic --------------------- */

typedef struct {
    int mant_bits; /* stored fraction bits */
    int emin;      /* exponent of the smallest normal */
    int emax;      /* exponent of the largest finite */
} ref_fmt_t;

static const ref_fmt_t REF_F16 = {10, -14, 15};
static const ref_fmt_t REF_BF16 = {7, -126, 127};
static const ref_fmt_t REF_F32 = {23, -126, 127};
static const ref_fmt_t REF_F64 = {52, -1022, 1023};

static double ref_round_half_even(double q) /* q >= 0 */
{
    double lo = floor(q);
    double frac = q - lo;
    if (frac > 0.5)
        return lo + 1;
    if (frac < 0.5)
        return lo;
    return fmod(lo, 2.0) == 0.0 ? lo : lo + 1;
}

/* x rounded to the nearest value of fmt, ties to even, overflow to inf.
 * Exact: scaling by a power of two is exact and x has at most 53 bits. */
static double ref_round(double x, ref_fmt_t fmt)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    double mag = fabs(x);
    int e = ilogb(mag);
    if (e < fmt.emin)
        e = fmt.emin;
    double quantum = ldexp(1.0, e - fmt.mant_bits);
    double r = ref_round_half_even(mag / quantum) * quantum;
    if (r > ldexp(2.0 - ldexp(1.0, -fmt.mant_bits), fmt.emax))
        r = INFINITY;
    return copysign(r, x);
}

/* int64 rounded to a format with mant_bits, exactly (no trip through double
 * precision first), ties to even, overflow to inf. */
static double ref_round_i64(int64_t v, ref_fmt_t fmt)
{
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int len = 0;
    while (len < 64 && (mag >> len) != 0)
        len++;
    double r;
    if (len <= fmt.mant_bits + 1) {
        r = (double)mag;
    } else {
        int shift = len - (fmt.mant_bits + 1);
        uint64_t q = mag >> shift;
        uint64_t rem = mag & ((UINT64_C(1) << shift) - 1);
        uint64_t half = UINT64_C(1) << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        r = ldexp((double)q, shift);
    }
    if (r > ldexp(2.0 - ldexp(1.0, -fmt.mant_bits), fmt.emax))
        r = INFINITY;
    return v < 0 ? -r : r;
}

/* 16-bit formats: 1 sign bit, 15 - mant_bits exponent bits. */
static double ref_decode16(uint16_t h, ref_fmt_t fmt)
{
    int exp_bits = 15 - fmt.mant_bits;
    unsigned exp_all = (1u << exp_bits) - 1;
    unsigned exp = (h >> fmt.mant_bits) & exp_all;
    unsigned mant = h & ((1u << fmt.mant_bits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == exp_all)
        return mant ? NAN : sign * INFINITY;
    if (exp == 0)
        return sign * ldexp(mant, fmt.emin - fmt.mant_bits);
    return sign * ldexp(mant + (1u << fmt.mant_bits), (int)exp - (1 - fmt.emin) - fmt.mant_bits);
}

/* v must be exactly representable in fmt (or +-inf); not NaN. */
static uint16_t ref_encode16(double v, ref_fmt_t fmt)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double mag = fabs(v);
    int bias = 1 - fmt.emin;
    unsigned exp_all = (1u << (15 - fmt.mant_bits)) - 1;
    if (isinf(mag))
        return (uint16_t)(sign | (exp_all << fmt.mant_bits));
    if (mag < ldexp(1.0, fmt.emin))
        return (uint16_t)(sign | (unsigned)(mag / ldexp(1.0, fmt.emin - fmt.mant_bits)));
    int e = ilogb(mag);
    unsigned mant = (unsigned)(mag / ldexp(1.0, e - fmt.mant_bits)) - (1u << fmt.mant_bits);
    return (uint16_t)(sign | ((unsigned)(e + bias) << fmt.mant_bits) | mant);
}

static int is_nan16(uint16_t h, ref_fmt_t fmt) { return isnan(ref_decode16(h, fmt)); }

static float f32_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t f32_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* ---- scalar conversions -------------------------------------------------- */

static void test_half_exhaustive(const char *name, ref_fmt_t fmt, uint16_t quiet_bit,
                                 float (*to_f32)(uint16_t), uint16_t (*from_f32)(float))
{
    long checks = 0, failures = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = ref_decode16((uint16_t)h, fmt);
        float got = to_f32((uint16_t)h);
        uint16_t back = from_f32(got);
        int ok;
        if (isnan(want))
            ok = isnan(got) && back == (h | quiet_bit); /* quieted, payload kept */
        else
            ok = (double)got == want && !signbit(got) == !signbit(want) && back == h;
        checks++;
        if (!ok && failures++ < MAX_PRINTED)
            printf("  %s 0x%04x -> %a -> 0x%04x (want %a)\n", name, h, got, back, want);
    }
    char what[64];
    snprintf(what, sizeof(what), "%s <-> f32 round trip, all 65536", name);
    report(what, checks, failures);
}

/* One float: the library's narrowing must equal the double-arithmetic
 * reference bit for bit (any NaN for NaN input). */
static int check_narrow(float x, ref_fmt_t fmt, uint16_t (*from_f32)(float), long *failures,
                        const char *name)
{
    uint16_t got = from_f32(x);
    int ok = isnan(x) ? is_nan16(got, fmt) : got == ref_encode16(ref_round(x, fmt), fmt);
    if (!ok && (*failures)++ < MAX_PRINTED)
        printf("  f32 %a (0x%08x) -> %s 0x%04x, want 0x%04x\n", x, f32_bits(x), name, got,
               isnan(x) ? 0x7FFF : ref_encode16(ref_round(x, fmt), fmt));
    return 1;
}

static void test_half_rounding(const char *name, ref_fmt_t fmt, uint16_t (*from_f32)(float))
{
    long checks = 0, failures = 0;
    int dropped = 23 - fmt.mant_bits; /* f32 fraction bits the format lacks */
    uint32_t half = 1u << (dropped - 1), low_mask = (1u << dropped) - 1;
    uint32_t patterns[7] = {0, 1, half - 1, half, half + 1, low_mask, 0};

    /* every (sign, exponent, kept fraction) with the dropped bits at, just
     * below and just above the halfway point: exercises normal-range ties,
     * overflow to inf near the top, and the whole exponent range */
    for (uint32_t hi = 0; hi < (1u << (32 - dropped)); hi++) {
        patterns[6] = (uint32_t)rng_u64() & low_mask;
        for (int p = 0; p < 7; p++)
            checks += check_narrow(f32_from_bits((hi << dropped) | patterns[p]), fmt, from_f32,
                                   &failures, name);
    }
    /* results in the format's subnormal range round at a higher bit: put a
     * tie at every bit position k of every f32 exponent near there */
    int e_lo = fmt.emin - fmt.mant_bits - 3 + 127, e_hi = fmt.emin + 1 + 127;
    if (e_lo < 0)
        e_lo = 0;
    for (int e = e_lo; e <= e_hi; e++) {
        for (int k = 0; k < 23; k++) {
            for (int r = 0; r < 64; r++) {
                uint32_t upper = (uint32_t)(rng_u64() << (k + 1)) & 0x7FFFFFu;
                uint32_t mant = upper | (1u << k);
                uint32_t bits = ((uint32_t)e << 23) | mant;
                int32_t delta = r % 3 - 1; /* tie - 1, tie, tie + 1 */
                bits = (uint32_t)((int32_t)bits + delta);
                bits |= (r & 4) ? 0x80000000u : 0;
                checks += check_narrow(f32_from_bits(bits), fmt, from_f32, &failures, name);
            }
        }
    }
    char what[64];
    snprintf(what, sizeof(what), "f32 -> %s rounding (ties, subnormal, inf)", name);
    report(what, checks, failures);
}

/* ---- k_reduce ------------------------------------------------------------ */

#define GUARD_BYTES 64
#define POISON 0xA5

/* Random element of dtype at p. Floats mix ordinary values of both signs
 * over many magnitudes with specials (+-0, +-inf, NaNs, subnormals, huge);
 * integers mix full-range bits (to wrap) with small values and extremes. */
static void random_element(k_dtype_t dtype, void *p)
{
    uint32_t kind = rng_below(100);
    switch (dtype) {
    case K_DTYPE_F32:
    case K_DTYPE_F64: {
        double v;
        if (kind < 80) {
            v = (rng_unit() * 2 - 1) * ldexp(1.0, (int)rng_below(41) - 20);
        } else if (kind < 90) {
            static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN,
                                              1.0, -1.0, 0x1p-149, -0x1p-140, 3.4e38, -3.4e38,
                                              1e300, -1e-310};
            v = specials[rng_below(sizeof(specials) / sizeof(specials[0]))];
        } else {
            uint64_t bits = rng_u64();
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
        uint16_t h = (uint16_t)rng_u64();
        uint16_t exp_mask = dtype == K_DTYPE_F16 ? 0x7C00 : 0x7F80;
        if (kind < 75 && (h & exp_mask) == exp_mask)
            h &= (uint16_t)~0x4000u; /* mostly finite: clear the top exponent bit */
        if (kind >= 75 && kind < 85)
            h &= (uint16_t)~exp_mask; /* zero / subnormal */
        memcpy(p, &h, 2);
        return;
    }
    case K_DTYPE_I32: {
        static const int32_t extremes[] = {INT32_MIN, INT32_MAX, -1, 0, 1};
        int32_t v = kind < 50   ? (int32_t)rng_u64()
                    : kind < 90 ? (int32_t)rng_below(201) - 100
                                : extremes[rng_below(5)];
        memcpy(p, &v, 4);
        return;
    }
    case K_DTYPE_I64: {
        static const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0, 1};
        int64_t v = kind < 50   ? (int64_t)rng_u64()
                    : kind < 90 ? (int64_t)rng_below(2001) - 1000
                                : extremes[rng_below(5)];
        memcpy(p, &v, 8);
        return;
    }
    case K_DTYPE_U8: {
        uint8_t v = (uint8_t)rng_u64();
        memcpy(p, &v, 1);
        return;
    }
    case K_DTYPE_COUNT: return;
    }
}

/* Expected a op b for one element, written to out. Also says whether the
 * result is a NaN whose exact bits are not specified (SUM/PROD). */
static void ref_reduce(k_dtype_t dtype, k_op_t op, const void *pa, const void *pb, void *out,
                       int *any_nan_ok)
{
    *any_nan_ok = 0;
    switch (dtype) {
    case K_DTYPE_F32: {
        float a, b, r;
        memcpy(&a, pa, 4);
        memcpy(&b, pb, 4);
        if (op == K_OP_SUM) r = a + b;
        else if (op == K_OP_PROD) r = a * b;
        else if (isnan(a)) r = a;
        else if (isnan(b)) r = b;
        else r = op == K_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
        *any_nan_ok = (op == K_OP_SUM || op == K_OP_PROD) && isnan(r);
        memcpy(out, &r, 4);
        return;
    }
    case K_DTYPE_F64: {
        double a, b, r;
        memcpy(&a, pa, 8);
        memcpy(&b, pb, 8);
        if (op == K_OP_SUM) r = a + b;
        else if (op == K_OP_PROD) r = a * b;
        else if (isnan(a)) r = a;
        else if (isnan(b)) r = b;
        else r = op == K_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
        *any_nan_ok = (op == K_OP_SUM || op == K_OP_PROD) && isnan(r);
        memcpy(out, &r, 8);
        return;
    }
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
            if (fa == fb)
                r = b; /* ties (incl. +-0) return b; callers accept either zero */
        }
        memcpy(out, &r, 2);
        return;
    }
    case K_DTYPE_I32: {
        int32_t a, b, r;
        memcpy(&a, pa, 4);
        memcpy(&b, pb, 4);
        int64_t wide = op == K_OP_SUM ? (int64_t)a + b : (int64_t)a * b; /* exact */
        if (op == K_OP_MIN) r = a < b ? a : b;
        else if (op == K_OP_MAX) r = a > b ? a : b;
        else r = (int32_t)(uint32_t)((uint64_t)wide & 0xFFFFFFFFu);
        memcpy(out, &r, 4);
        return;
    }
    case K_DTYPE_I64: {
        int64_t a, b, r;
        memcpy(&a, pa, 8);
        memcpy(&b, pb, 8);
        if (op == K_OP_MIN) r = a < b ? a : b;
        else if (op == K_OP_MAX) r = a > b ? a : b;
#if defined(__SIZEOF_INT128__)
        /* exact 128-bit product, then keep the low 64 bits */
        else if (op == K_OP_PROD) r = (int64_t)(uint64_t)(__extension__(unsigned __int128)(
            (__extension__(__int128)a) * b));
#else
        else if (op == K_OP_PROD) r = (int64_t)((uint64_t)a * (uint64_t)b);
#endif
        else r = (int64_t)((uint64_t)a + (uint64_t)b);
        memcpy(out, &r, 8);
        return;
    }
    case K_DTYPE_U8: {
        uint8_t a = *(const uint8_t *)pa, b = *(const uint8_t *)pb, r;
        unsigned wide = op == K_OP_SUM ? (unsigned)a + b : (unsigned)a * b;
        if (op == K_OP_MIN) r = a < b ? a : b;
        else if (op == K_OP_MAX) r = a > b ? a : b;
        else r = (uint8_t)(wide & 0xFF);
        memcpy(out, &r, 1);
        return;
    }
    case K_DTYPE_COUNT: return;
    }
}

static int is_zero_bits(k_dtype_t dtype, const void *p)
{
    switch (dtype) {
    case K_DTYPE_F32: { float f; memcpy(&f, p, 4); return f == 0; }
    case K_DTYPE_F64: { double d; memcpy(&d, p, 8); return d == 0; }
    case K_DTYPE_F16: case K_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return (h & 0x7FFF) == 0; }
    default: return 0;
    }
}

static int is_nan_bits(k_dtype_t dtype, const void *p)
{
    switch (dtype) {
    case K_DTYPE_F32: { float f; memcpy(&f, p, 4); return isnan(f); }
    case K_DTYPE_F64: { double d; memcpy(&d, p, 8); return isnan(d); }
    case K_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); return is_nan16(h, REF_F16); }
    case K_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return is_nan16(h, REF_BF16); }
    default: return 0;
    }
}

static int element_ok(k_dtype_t dtype, k_op_t op, const void *got, const void *want,
                      int any_nan_ok, const void *a, const void *b)
{
    size_t size = k_dtype_size(dtype);
    if (any_nan_ok)
        return is_nan_bits(dtype, got);
    /* the header allows either zero for min/max of two zeros */
    if ((op == K_OP_MIN || op == K_OP_MAX) && is_zero_bits(dtype, a) && is_zero_bits(dtype, b))
        return is_zero_bits(dtype, got);
    return memcmp(got, want, size) == 0;
}

static void print_hex(const void *p, size_t size)
{
    const uint8_t *bytes = p;
    for (size_t i = size; i-- > 0;)
        printf("%02x", bytes[i]);
}

enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B };

static const size_t large_counts[] = {1021, 4099, 65537, 100003};
#define SMALL_COUNT_MAX 300
#define MAX_COUNT 100003
#define MAX_OFFSET 7

/* Runs one k_reduce call and checks every element and the guards.
 * Returns the number of failed checks. */
static long reduce_case(k_dtype_t dtype, k_op_t op, size_t count, int alias, size_t off_a,
                        size_t off_b, size_t off_d, const uint8_t *pool_a, const uint8_t *pool_b,
                        uint8_t *buf_a, uint8_t *buf_b, uint8_t *buf_d, long *checks,
                        long *printed)
{
    size_t size = k_dtype_size(dtype);
    long failures = 0;

    /* only the span this case can touch is poisoned and checked: scanning
     * whole buffers for every small case would dominate the run time */
    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    memset(buf_d, POISON, span);
    memset(buf_a, POISON, span);
    memset(buf_b, POISON, span);
    uint8_t *d = buf_d + GUARD_BYTES + off_d * size;
    uint8_t *a = buf_a + GUARD_BYTES + off_a * size;
    uint8_t *b = buf_b + GUARD_BYTES + off_b * size;
    if (alias == ALIAS_DST_A)
        a = d;
    if (alias == ALIAS_DST_B)
        b = d;
    if (count) {
        memcpy(a, pool_a, count * size);
        memcpy(b, pool_b, count * size);
    }

    k_reduce(d, a, b, count, dtype, op);

    for (size_t i = 0; i < count; i++) {
        uint8_t want[8];
        int any_nan_ok;
        const uint8_t *ea = pool_a + i * size, *eb = pool_b + i * size;
        ref_reduce(dtype, op, ea, eb, want, &any_nan_ok);
        (*checks)++;
        if (!element_ok(dtype, op, d + i * size, want, any_nan_ok, ea, eb)) {
            failures++;
            if ((*printed)++ < MAX_PRINTED) {
                printf("  count %zu alias %d elem %zu: a=", count, alias, i);
                print_hex(ea, size);
                printf(" b=");
                print_hex(eb, size);
                printf(" got=");
                print_hex(d + i * size, size);
                printf(" want=");
                print_hex(want, size);
                printf("\n");
            }
        }
    }
    /* everything outside dst[0, count) must still be poison, and inputs
     * that are not dst must be unchanged */
    uint8_t *d_end = d + count * size;
    for (uint8_t *p = buf_d; p < buf_d + span; p++) {
        if (p >= d && p < d_end)
            continue;
        (*checks)++;
        if (*p != POISON) {
            failures++;
            if ((*printed)++ < MAX_PRINTED)
                printf("  count %zu alias %d: byte %td outside dst overwritten\n", count, alias,
                       p - d);
            break;
        }
    }
    if (alias != ALIAS_DST_A && count && memcmp(a, pool_a, count * size) != 0)
        failures++, printf("  count %zu: input a modified\n", count);
    if (alias != ALIAS_DST_B && count && memcmp(b, pool_b, count * size) != 0)
        failures++, printf("  count %zu: input b modified\n", count);
    return failures;
}


static void test_reduce_isa(k_isa_t isa)
{
    size_t buf_bytes = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * 8;
    uint8_t *pool_a = malloc((MAX_COUNT + SMALL_COUNT_MAX) * 8);
    uint8_t *pool_b = malloc((MAX_COUNT + SMALL_COUNT_MAX) * 8);
    uint8_t *buf_a = malloc(buf_bytes), *buf_b = malloc(buf_bytes), *buf_d = malloc(buf_bytes);
    if (!pool_a || !pool_b || !buf_a || !buf_b || !buf_d) {
        printf("out of memory\n");
        exit(1);
    }

    for (int dt = 0; dt < K_DTYPE_COUNT; dt++) {
        k_dtype_t dtype = (k_dtype_t)dt;
        size_t size = k_dtype_size(dtype);
        size_t pool_count = MAX_COUNT + SMALL_COUNT_MAX;
        for (size_t i = 0; i < pool_count; i++) {
            random_element(dtype, pool_a + i * size);
            /* some equal and +-0 pairs, so MIN/MAX ties are exercised */
            uint32_t kind = rng_below(100);
            if (kind < 4)
                memcpy(pool_b + i * size, pool_a + i * size, size);
            else
                random_element(dtype, pool_b + i * size);
        }
        for (int o = 0; o < K_OP_COUNT; o++) {
            k_op_t op = (k_op_t)o;
            long checks = 0, failures = 0, printed = 0;
            for (size_t count = 0; count <= SMALL_COUNT_MAX + 4; count++) {
                size_t n = count <= SMALL_COUNT_MAX ? count
                                                    : large_counts[count - SMALL_COUNT_MAX - 1];
                for (int alias = ALIAS_NONE; alias <= ALIAS_DST_B; alias++) {
                    /* offsets in elements: vectors start misaligned in
                     * varying ways, different for a, b and dst */
                    size_t off_a = (n + (size_t)alias) % (MAX_OFFSET + 1);
                    size_t off_b = (n / 3 + 1) % (MAX_OFFSET + 1);
                    size_t off_d = (n / 7 + 2 * (size_t)alias) % (MAX_OFFSET + 1);
                    size_t start = n <= SMALL_COUNT_MAX ? (n * 37) % SMALL_COUNT_MAX : 0;
                    failures += reduce_case(dtype, op, n, alias, off_a, off_b, off_d,
                                            pool_a + start * size, pool_b + start * size, buf_a,
                                            buf_b, buf_d, &checks, &printed);
                }
            }
            char what[64];
            snprintf(what, sizeof(what), "reduce %-6s %-4s %s", k_isa_name(isa),
                     dtype_names[dtype], op_names[op]);
            report(what, checks, failures);
        }
    }
    free(pool_a);
    free(pool_b);
    free(buf_a);
    free(buf_b);
    free(buf_d);
}

/* max(x, x) over every half goes through the vector conversions of each
 * path; the result must be x, NaNs quieted (payload kept). */
static void test_reduce_half_exhaustive(k_isa_t isa, k_dtype_t dtype)
{
    ref_fmt_t fmt = dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
    uint16_t quiet_bit = dtype == K_DTYPE_F16 ? 0x0200 : 0x0040;
    static uint16_t all[65536], out[65536];
    long checks = 0, failures = 0;
    for (uint32_t h = 0; h < 65536; h++)
        all[h] = (uint16_t)h;
    k_reduce(out, all, all, 65536, dtype, K_OP_MAX);
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t want = is_nan16((uint16_t)h, fmt) ? (uint16_t)(h | quiet_bit) : (uint16_t)h;
        checks++;
        if (out[h] != want && failures++ < MAX_PRINTED)
            printf("  max(0x%04x, same) = 0x%04x, want 0x%04x\n", h, out[h], want);
    }
    char what[64];
    snprintf(what, sizeof(what), "reduce %-6s %-4s max(x,x), all 65536", k_isa_name(isa),
             dtype_names[dtype]);
    report(what, checks, failures);
}

/* ---- k_div, k_scale, k_cast ----------------------------------------------
 * Values are held as "exact value" records: a double for float dtypes, an
 * int64 for integer dtypes. */

typedef struct {
    int is_int;
    double f;
    int64_t i;
} value_t;

static const ref_fmt_t *float_fmt(k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F32: return &REF_F32;
    case K_DTYPE_F16: return &REF_F16;
    case K_DTYPE_BF16: return &REF_BF16;
    case K_DTYPE_F64: return &REF_F64;
    default: return NULL;
    }
}

static value_t load_value(k_dtype_t dtype, const void *p)
{
    value_t v = {0, 0, 0};
    switch (dtype) {
    case K_DTYPE_F32: { float f; memcpy(&f, p, 4); v.f = f; break; }
    case K_DTYPE_F64: memcpy(&v.f, p, 8); break;
    case K_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); v.f = ref_decode16(h, REF_F16); break; }
    case K_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); v.f = ref_decode16(h, REF_BF16); break; }
    case K_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); v.is_int = 1; v.i = x; break; }
    case K_DTYPE_I64: v.is_int = 1; memcpy(&v.i, p, 8); break;
    case K_DTYPE_U8: v.is_int = 1; v.i = *(const uint8_t *)p; break;
    case K_DTYPE_COUNT: break;
    }
    return v;
}

/* Stores an exactly representable value (already rounded / saturated). */
static void store_value(k_dtype_t dtype, void *p, value_t v)
{
    switch (dtype) {
    case K_DTYPE_F32: { float f = isnan(v.f) ? NAN : (float)v.f; memcpy(p, &f, 4); break; }
    case K_DTYPE_F64: memcpy(p, &v.f, 8); break;
    case K_DTYPE_F16: case K_DTYPE_BF16: {
        ref_fmt_t fmt = *float_fmt(dtype);
        uint16_t h = isnan(v.f) ? (uint16_t)0x7FFF : ref_encode16(v.f, fmt);
        memcpy(p, &h, 2);
        break;
    }
    case K_DTYPE_I32: { int32_t x = (int32_t)v.i; memcpy(p, &x, 4); break; }
    case K_DTYPE_I64: memcpy(p, &v.i, 8); break;
    case K_DTYPE_U8: *(uint8_t *)p = (uint8_t)v.i; break;
    case K_DTYPE_COUNT: break;
    }
}

static int64_t saturate(int64_t x, k_dtype_t dtype)
{
    int64_t lo = dtype == K_DTYPE_I32 ? INT32_MIN : dtype == K_DTYPE_U8 ? 0 : INT64_MIN;
    int64_t hi = dtype == K_DTYPE_I32 ? INT32_MAX : dtype == K_DTYPE_U8 ? 255 : INT64_MAX;
    return x < lo ? lo : x > hi ? hi : x;
}

/* double -> integer dtype: round half even, saturate, NaN -> 0 */
static int64_t ref_double_to_int(double x, k_dtype_t dtype)
{
    if (isnan(x))
        return 0;
    double r = copysign(ref_round_half_even(fabs(x)), x);
    if (r >= 0x1p63)
        return saturate(INT64_MAX, dtype);
    if (r < -0x1p63)
        return saturate(INT64_MIN, dtype);
    return saturate((int64_t)r, dtype);
}

/* The value `v` converted to dtype exactly as k_cast must do it. */
static value_t ref_convert(value_t v, k_dtype_t dtype)
{
    value_t r = {0, 0, 0};
    const ref_fmt_t *fmt = float_fmt(dtype);
    if (fmt) {
        r.f = v.is_int ? ref_round_i64(v.i, *fmt) : ref_round(v.f, *fmt);
    } else {
        r.is_int = 1;
        r.i = v.is_int ? saturate(v.i, dtype) : ref_double_to_int(v.f, dtype);
    }
    return r;
}

static int values_equal(k_dtype_t dtype, const void *got, const void *want)
{
    if (float_fmt(dtype)) {
        value_t g = load_value(dtype, got), w = load_value(dtype, want);
        if (isnan(w.f))
            return isnan(g.f);
        return g.f == w.f && !signbit(g.f) == !signbit(w.f);
    }
    return memcmp(got, want, k_dtype_size(dtype)) == 0;
}

static const double representative_doubles[] = {
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.49999999999999994, 100.25, -7.75,
    127.0, 128.0, 255.0, 255.5, 256.0, -300.0, 1000.0, 65504.0, 65519.99, 65520.0, 1e5,
    2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0, 4294967296.5, 0x1p53 + 2,
    0x1p63, -0x1p63, 0x1p64, 1e30, -1e30, 3.4028234663852886e38, 3.5e38, 1e300, -1e300,
    0x1p-14, 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1p-126, 0x1p-133, 0x1p-149, 0x1p-150, 1e-310,
    1.0 + 0x1p-11 + 0x1p-40,       /* f16 tie + tiny: must round up (double rounding trap) */
    -(1.0 + 0x1p-11 + 0x1p-40),
    1.0 + 0x1p-8 + 0x1p-40,        /* same trap for bf16 */
    1.0 + 0x1p-24 + 0x1p-50,       /* and for f32 */
    0.1, -0.1, 1.0 / 3.0, INFINITY, -INFINITY, NAN,
};

static const int64_t representative_ints[] = {
    0, 1, -1, 2, -2, 3, 7, 100, -100, 127, 128, 200, 255, 256, -255, -256, 1000, 65504, 65519,
    65520, 65535, 65536, -65520, (1 << 24) + 1, (1 << 24) + 3, 2147483647, -2147483647 - 1,
    2147483648LL, -2147483649LL, (1LL << 40) + (1LL << 32) + 1, /* bf16 double-rounding trap */
    -((1LL << 40) + (1LL << 32) + 1), (1LL << 53) + 1, (1LL << 62) + (1LL << 38) + 1,
    INT64_MAX, INT64_MIN, INT64_MIN + 1, 0x7FFFFF7FFFFFFFFFLL,
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
        store_value(dtype, (uint8_t *)src + n++ * size, ref_convert(v, dtype));
    }
    for (size_t i = 0; i < N_INTS; i++) {
        value_t v = {1, 0, representative_ints[i]};
        store_value(dtype, (uint8_t *)src + n++ * size, ref_convert(v, dtype));
    }
    return n;
}

static int guards_intact(const uint8_t *buf, size_t data_bytes)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (buf[i] != POISON || buf[GUARD_BYTES + data_bytes + i] != POISON)
            return 0;
    return 1;
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
                value_t v = load_value(src_dtype, src + i * k_dtype_size(src_dtype));
                uint8_t want[8];
                store_value(dst_dtype, want, ref_convert(v, dst_dtype));
                const uint8_t *got = buf + GUARD_BYTES + i * dsize;
                checks++;
                if (!values_equal(dst_dtype, got, want) && failures++ < MAX_PRINTED) {
                    printf("  %s -> %s: %.17g / %lld: got ", dtype_names[s], dtype_names[d],
                           v.f, (long long)v.i);
                    print_hex(got, dsize);
                    printf(" want ");
                    print_hex(want, dsize);
                    printf("\n");
                }
            }
            checks++;
            if (!guards_intact(buf, n * dsize))
                failures++, printf("  %s -> %s: guard overwritten\n", dtype_names[s],
                                   dtype_names[d]);
            char what[64];
            snprintf(what, sizeof(what), "cast %s -> %s", dtype_names[s], dtype_names[d]);
            report(what, checks, failures);
        }
    }
}

/* k_div and k_scale share a driver: `divisor` > 0 selects k_div. */
static value_t ref_div_or_scale(k_dtype_t dtype, value_t x, int64_t divisor, double factor)
{
    value_t r = {0, 0, 0};
    const ref_fmt_t *fmt = float_fmt(dtype);
    if (dtype == K_DTYPE_F64) {
        r.f = divisor ? x.f / (double)divisor : x.f * factor;
    } else if (fmt) {
        float fx = (float)x.f; /* f32, f16, bf16 compute in fp32 */
        float res = divisor ? fx / (float)divisor : fx * (float)factor;
        r.f = ref_round(res, *fmt);
    } else {
        r.is_int = 1;
        r.i = divisor ? x.i / divisor : ref_double_to_int((double)x.i * factor, dtype);
    }
    return r;
}

static void test_div_scale(void)
{
    static const int64_t divisors[] = {1, 2, 3, 4, 7, 10, 255, 256, 1000, 1 << 20, 123456789,
                                       (1LL << 40) + 1, INT64_MAX};
    static const double factors[] = {1.0, 0.5, -1.5, 3.0, 1.0 / 3.0, 1e-3, 2.5, 0.0, 1e10,
                                     -1e10, 65536.0, 1e-30};
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
                    const void *in = src;
                    if (in_place) {
                        memcpy(out, src, n * size);
                        in = out;
                    }
                    if (which == 0)
                        k_div(out, in, n, dtype, divisor);
                    else
                        k_scale(out, in, n, dtype, factor);
                    for (size_t i = 0; i < n; i++) {
                        value_t x = load_value(dtype, src + i * size);
                        uint8_t want[8];
                        store_value(dtype, want, ref_div_or_scale(dtype, x, divisor, factor));
                        checks++;
                        if (!values_equal(dtype, out + i * size, want) &&
                            failures++ < MAX_PRINTED) {
                            printf("  %s %s %.17g / %lld by %lld / %g: got ", dtype_names[dt],
                                   which == 0 ? "div" : "scale", x.f, (long long)x.i,
                                   (long long)divisor, factor);
                            print_hex(out + i * size, size);
                            printf(" want ");
                            print_hex(want, size);
                            printf("\n");
                        }
                    }
                    checks++;
                    if (!guards_intact(buf, n * size))
                        failures++, printf("  guard overwritten\n");
                }
            }
            char what[64];
            snprintf(what, sizeof(what), "%s %s", which == 0 ? "div" : "scale", dtype_names[dt]);
            report(what, checks, failures);
        }
    }
}

/* ---- k_div / k_scale on every ISA -------------------------------------------
 * Random inputs (specials, integer extremes, and for k_div numerators next to
 * multiples of the divisor, where a wrong reciprocal shows first), odd counts,
 * unaligned offsets, in place and out of place. Every element must equal the
 * reference above, and its bits must equal the scalar path's (NaN payloads
 * included: the paths are meant to be interchangeable). */

#define UNARY_MAX_COUNT 65537

static const int64_t unary_divisors[] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 25, 100, 127, 128, 255, 256, 257, 641,
    1000, 65535, 65536, 65537, 1000003, 123456789, 0x7FFFFFFF, 0x80000000LL, 0x80000001LL,
    0xFFFFFFFFLL, 0x100000000LL, 0x100000001LL, (1LL << 40) + 1, (1LL << 53) + 1,
    (1LL << 62) - 1, 1LL << 62, (1LL << 62) + 1, INT64_MAX - 1, INT64_MAX,
};
#define N_UNARY_DIVISORS (sizeof(unary_divisors) / sizeof(unary_divisors[0]))

static const double unary_factors[] = {
    1.0, 0.5, 0.25, -1.0, -1.5, 1.0 / 3.0, 0.1, 3.0, 1e-3, 1e10, -1e10, 0.0, -0.0, 1e-30,
    1e300, INFINITY, -INFINITY, NAN, 255.0 / 254.0, 0x1p-149, 4294967296.5,
};
#define N_UNARY_FACTORS (sizeof(unary_factors) / sizeof(unary_factors[0]))

/* An integer of dtype at p next to a multiple of `divisor`, or an extreme. */
static void div_edge_element(k_dtype_t dtype, int64_t divisor, void *p)
{
    int64_t lo = dtype == K_DTYPE_I32 ? INT32_MIN : dtype == K_DTYPE_U8 ? 0 : INT64_MIN;
    int64_t hi = dtype == K_DTYPE_I32 ? INT32_MAX : dtype == K_DTYPE_U8 ? 255 : INT64_MAX;
    int64_t v;
    uint32_t kind = rng_below(10);
    if (kind < 2) {
        static const int64_t extremes[] = {0, 1, -1};
        v = kind == 0 ? (rng_below(2) ? lo : lo + 1) : (rng_below(2) ? hi : extremes[rng_below(3)]);
    } else {
        /* k * divisor + delta with k * divisor inside [lo, hi] */
        int64_t k_max = hi / divisor, k_min = lo / divisor;
        uint64_t k_span = (uint64_t)k_max - (uint64_t)k_min + 1; /* 0: all of int64 */
        uint64_t k_offset = k_span ? rng_u64() % k_span : rng_u64();
        int64_t k = kind < 5   ? (rng_below(2) ? k_max : k_min)
                    : kind < 7 ? (int64_t)rng_below(5) - 2
                               : (int64_t)((uint64_t)k_min + k_offset);
        k = k < k_min ? k_min : k > k_max ? k_max : k;
        int64_t base = k * divisor;
        int64_t delta = (int64_t)rng_below(3) - 1;
        v = (delta < 0 && base == lo) || (delta > 0 && base == hi) ? base : base + delta;
    }
    value_t value = {1, 0, v};
    store_value(dtype, p, value);
}

/* Runs k_div (is_div) or k_scale on `isa` and on the scalar path, checks
 * every element and the guards. Returns the number of failed checks. */
static long unary_case(k_isa_t isa, int is_div, k_dtype_t dtype, int64_t divisor, double factor,
                       size_t count, size_t off, int in_place, uint8_t *src, uint8_t *buf,
                       uint8_t *scalar_out, long *checks, long *printed)
{
    size_t size = k_dtype_size(dtype);
    int is_int = !float_fmt(dtype);
    long failures = 0;

    for (size_t i = 0; i < count; i++) {
        if (is_div && is_int && rng_below(2))
            div_edge_element(dtype, divisor, src + i * size);
        else
            random_element(dtype, src + i * size);
    }

    /* scalar path, out of place */
    k_isa_set(K_ISA_SCALAR);
    if (is_div)
        k_div(scalar_out, src, count, dtype, divisor);
    else
        k_scale(scalar_out, src, count, dtype, factor);

    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    memset(buf, POISON, span);
    uint8_t *out = buf + GUARD_BYTES + off * size;
    const uint8_t *in = src;
    if (in_place) {
        if (count)
            memcpy(out, src, count * size);
        in = out;
    }
    k_isa_set(isa);
    if (is_div)
        k_div(out, in, count, dtype, divisor);
    else
        k_scale(out, in, count, dtype, factor);

    for (size_t i = 0; i < count; i++) {
        value_t x = load_value(dtype, src + i * size);
        uint8_t want[8];
        store_value(dtype, want, ref_div_or_scale(dtype, x, is_div ? divisor : 0, factor));
        const uint8_t *got = out + i * size;
        *checks += 2;
        int ok_ref = values_equal(dtype, got, want);
        int ok_scalar = memcmp(got, scalar_out + i * size, size) == 0;
        if (ok_ref && ok_scalar)
            continue;
        failures += !ok_ref + !ok_scalar;
        if ((*printed)++ < MAX_PRINTED) {
            printf("  %s %s count %zu off %zu%s elem %zu: x=", dtype_names[dtype],
                   is_div ? "div" : "scale", count, off, in_place ? " in place" : "", i);
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
        if ((*printed)++ < MAX_PRINTED)
            printf("  %s count %zu: guard overwritten\n", dtype_names[dtype], count);
    }
    if (!in_place && count && memcmp(in, src, count * size) != 0)
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
                        failures += unary_case(isa, is_div, dtype, divisor, factor, count,
                                               count % (MAX_OFFSET + 1), (int)(count & 1), src,
                                               buf, scalar_out, &checks, &printed);
                for (int in_place = 0; in_place < 2; in_place++)
                    failures += unary_case(isa, is_div, dtype, divisor, factor,
                                           1021 + rng_below(64), rng_below(MAX_OFFSET + 1),
                                           in_place, src, buf, scalar_out, &checks, &printed);
            }
            failures += unary_case(isa, is_div, dtype, is_div ? 3 : 0, is_div ? 0 : 1.0 / 3.0,
                                   UNARY_MAX_COUNT, 3, 1, src, buf, scalar_out, &checks,
                                   &printed);
            char what[64];
            snprintf(what, sizeof(what), "%s %-6s %s, random", is_div ? "div" : "scale",
                     k_isa_name(isa), dtype_names[dt]);
            report(what, checks, failures);
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
    for (int x = 0; x < 256; x++)
        u8_src[x] = (uint8_t)x;
    for (int64_t d = 1; d <= 1024; d++) {
        k_div(u8_out, u8_src, 256, K_DTYPE_U8, d);
        for (int x = 0; x < 256; x++, checks++)
            if (u8_out[x] != x / d && failures++ < MAX_PRINTED)
                printf("  u8 %d / %lld: got %d\n", x, (long long)d, u8_out[x]);
    }

    int64_t divisors[4096 + 3 * 34];
    size_t n_div = 0;
    for (int64_t d = 1; d <= 4096; d++)
        divisors[n_div++] = d;
    for (int k = 1; k <= 34; k++) {
        divisors[n_div++] = (1LL << k) - 1;
        divisors[n_div++] = 1LL << k;
        divisors[n_div++] = (1LL << k) + 1;
    }
    for (size_t j = 0; j < n_div; j++) {
        int64_t d = divisors[j];
        int64_t top = INT32_MAX / d * d, bottom = INT32_MIN / d * d; /* largest multiples */
        const int64_t candidates[] = {INT32_MIN, INT32_MIN + 1, INT32_MAX, INT32_MAX - 1, 0, 1,
                                      -1, d - 1, d, d + 1, 1 - d, -d, -d - 1, top, top - 1,
                                      top + 1, bottom, bottom - 1, bottom + 1, 2 * d - 1,
                                      1 - 2 * d};
        int32_t src[32], out[32];
        size_t n = 0;
        for (size_t c = 0; c < sizeof(candidates) / sizeof(candidates[0]); c++)
            if (candidates[c] >= INT32_MIN && candidates[c] <= INT32_MAX)
                src[n++] = (int32_t)candidates[c];
        while (n < 32) /* fill whole vectors so the SIMD body, not the tail, runs */
            src[n++] = (int32_t)rng_u64();
        k_div(out, src, n, K_DTYPE_I32, d);
        for (size_t i = 0; i < n; i++, checks++)
            if (out[i] != (int32_t)(src[i] / d) && failures++ < MAX_PRINTED)
                printf("  i32 %d / %lld: got %d\n", src[i], (long long)d, out[i]);
    }
    char what[64];
    snprintf(what, sizeof(what), "div %-6s u8 all, i32 near multiples", k_isa_name(isa));
    report(what, checks, failures);
}

/* ---- k_sgd_step ----------------------------------------------------------- */

/* One rounded f32 operation each: the volatile store is a rounding point
 * the compiler may not fuse across (this file builds without
 * -ffp-contract=off, and GCC would otherwise make FMAs where it can). */
static float sgd_mul(float a, float b) { volatile float r = a * b; return r; }
static float sgd_add(float a, float b) { volatile float r = a + b; return r; }
static float sgd_sub(float a, float b) { volatile float r = a - b; return r; }

/* torch.optim.SGD (dampening 0), as k_cpu.h specifies it. */
static void sgd_reference(float *p, const float *grad, float *m, size_t count, float lr, float momentum,
                          float wd, int nesterov)
{
    for (size_t i = 0; i < count; i++) {
        float g = wd != 0.0f ? sgd_add(grad[i], sgd_mul(wd, p[i])) : grad[i];
        float step = g;
        if (momentum != 0.0f) {
            m[i] = sgd_add(sgd_mul(momentum, m[i]), g);
            step = nesterov ? sgd_add(g, sgd_mul(momentum, m[i])) : m[i];
        }
        p[i] = sgd_sub(p[i], sgd_mul(lr, step));
    }
}

#define SGD_MAX_COUNT 4099

/* Every hyper-parameter mix, counts 0..100 and some odd large ones, at
 * unaligned offsets, two steps (the second reads a non-zero momentum),
 * against the reference bit for bit, with guard bytes around all three
 * arrays; momentum 0 with a NULL buffer. Values include -0, tiny and huge
 * numbers so that the skipped weight-decay term shows (-0 + 0 = +0). */
static void test_sgd_isa(k_isa_t isa)
{
    static const float hyper[][4] = {
        /* lr, momentum, weight decay, nesterov */
        {0.1f, 0.9f, 5e-4f, 1}, {0.1f, 0.9f, 5e-4f, 0}, {0.05f, 0.9f, 0.0f, 1},
        {0.2f, 0.0f, 1e-4f, 0}, {0.01f, 0.0f, 0.0f, 0}, {1.5f, 0.5f, 0.25f, 1},
    };
    static const float specials[] = {0.0f, -0.0f, 1e-30f, -3e38f, 1e-45f, 65504.0f};
    size_t span = 2 * GUARD_BYTES + (SGD_MAX_COUNT + MAX_OFFSET) * sizeof(float);
    uint8_t *bufs[3];
    float *want[3];
    for (int b = 0; b < 3; b++) {
        bufs[b] = malloc(span);
        want[b] = malloc(SGD_MAX_COUNT * sizeof(float));
    }
    long checks = 0, failures = 0, printed = 0;
    for (size_t h = 0; h < sizeof(hyper) / sizeof(hyper[0]); h++) {
        float lr = hyper[h][0], mom = hyper[h][1], wd = hyper[h][2];
        int nesterov = hyper[h][3] != 0.0f;
        for (size_t count = 0; count <= SGD_MAX_COUNT; count = count < 100 ? count + 1 : count * 2 + 1) {
            size_t off = (count + h) % (MAX_OFFSET + 1);
            float *arr[3]; /* param, grad, momentum */
            for (int b = 0; b < 3; b++) {
                memset(bufs[b], POISON, span);
                arr[b] = (float *)(bufs[b] + GUARD_BYTES) + off;
                for (size_t i = 0; i < count; i++) {
                    float v = rng_below(8) == 0 ? specials[rng_below(6)] : (float)(rng_unit() * 4.0 - 2.0);
                    arr[b][i] = b == 2 && mom == 0.0f ? 0.0f : v;
                }
                memcpy(want[b], arr[b], count * sizeof(float));
            }
            for (int step = 0; step < 2; step++) {
                k_sgd_step(arr[0], arr[1], mom != 0.0f ? arr[2] : NULL, count, lr, mom, wd, nesterov);
                sgd_reference(want[0], want[1], want[2], count, lr, mom, wd, nesterov);
            }
            for (int b = 0; b < 3; b++) {
                checks++;
                if (memcmp(arr[b], want[b], count * sizeof(float)) != 0) {
                    failures++;
                    for (size_t i = 0; i < count; i++)
                        if (f32_bits(arr[b][i]) != f32_bits(want[b][i]) && printed++ < MAX_PRINTED)
                            printf("  sgd hyper %zu count %zu array %d [%zu]: got %a want %a\n", h, count, b, i,
                                   (double)arr[b][i], (double)want[b][i]);
                }
                checks++;
                if (!guards_intact(bufs[b] + off * sizeof(float), count * sizeof(float))) {
                    failures++;
                    if (printed++ < MAX_PRINTED)
                        printf("  sgd hyper %zu count %zu array %d: guard overwritten\n", h, count, b);
                }
            }
        }
    }
    for (int b = 0; b < 3; b++) {
        free(bufs[b]);
        free(want[b]);
    }
    char what[64];
    snprintf(what, sizeof(what), "sgd %-6s all hyper-parameter mixes", k_isa_name(isa));
    report(what, checks, failures);
}

/* ---- API odds and ends ---------------------------------------------------- */

static void test_api(void)
{
    long checks = 0, failures = 0;
    static const size_t sizes[K_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 1};
    for (int dt = 0; dt < K_DTYPE_COUNT; dt++, checks++)
        failures += k_dtype_size((k_dtype_t)dt) != sizes[dt];
    checks += 3;
    failures += k_isa_set(K_ISA_COUNT) != -1;
    failures += k_isa_current() > k_isa_best();
    failures += k_isa_best() < K_ISA_AVX2 && k_isa_set(K_ISA_AVX512) != -1;
    k_reduce(NULL, NULL, NULL, 0, K_DTYPE_F32, K_OP_SUM); /* count 0 touches nothing */
    report("api: sizes, isa selection, empty reduce", checks, failures);
}

int main(void)
{
    printf("test_kernels: best isa %s, seed 0x%016llx\n", k_isa_name(k_isa_best()),
           (unsigned long long)rng_state);
    test_api();

    test_half_exhaustive("f16", REF_F16, 0x0200, k_f16_to_f32, k_f32_to_f16);
    test_half_exhaustive("bf16", REF_BF16, 0x0040, k_bf16_to_f32, k_f32_to_bf16);
    test_half_rounding("f16", REF_F16, k_f32_to_f16);
    test_half_rounding("bf16", REF_BF16, k_f32_to_bf16);

    for (int i = 0; i < K_ISA_COUNT; i++) {
        k_isa_t isa = (k_isa_t)i;
        if (k_isa_set(isa) != 0) {
            printf("skip reduce %s: not supported by this CPU\n", k_isa_name(isa));
            continue;
        }
        test_reduce_half_exhaustive(isa, K_DTYPE_F16);
        test_reduce_half_exhaustive(isa, K_DTYPE_BF16);
        test_reduce_isa(isa);
        test_unary_isa(isa);
        test_div_int_exhaustive(isa);
        test_sgd_isa(isa);
    }
    k_isa_set(k_isa_best());

    test_cast();
    test_div_scale();

    printf("test_kernels: %s (%d groups, %d failed)\n", groups_failed ? "FAIL" : "PASS",
           groups_run, groups_failed);
    return groups_failed ? 1 : 0;
}
