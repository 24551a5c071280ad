/*
 * reduce_exact.c - k_reduce_n_exact on every ISA path, bit for bit against
 * a reference computed here: the inputs (f16/bf16 decoded exactly) summed
 * as one integer multiple of 2^-149 in 320-bit two's complement, rounded
 * once to the dtype (ties to even, subnormals, overflow to inf) from that
 * integer's bits; NaN (the dtype's default quiet NaN) for a NaN or +inf with
 * -inf, +-inf otherwise; -0 only when every input is -0; divisor > 1: the
 * f32 rounding divided in f32, then rounded to the dtype. Every path must
 * give those bits, which also makes the vector paths equal the scalar one.
 *
 * Inputs, per case, in one of three regimes (so the vector kernels both
 * certify most of their vectors and fall back on some):
 *  - tame: magnitudes within 2^+-10 of a random scale, some zeros;
 *  - mixed: tame, and one element in 64 adversarial: cancellation to zero
 *    or to a tiny rest, exponents 2^+-120 apart, subnormals, sums on a
 *    rounding tie of the dtype (plus or minus a tiny value, where a double
 *    rounding would go wrong), past FLT_MAX, +-0 only, inf, -inf, NaN;
 *  - ties: every element such a tie (n >= 2), pushed either way (n >= 3)
 *    by a value 2^23 to 2^26 below it (f16/bf16: 2^12 / 2^9 to 2^26),
 *    within the spans the vector kernels certify, the other sources zeros
 *    or pairs that cancel;
 *  - wide ties: the same with pushes 2^27 to 2^36 below (past it);
 *  - wild: every element of every source a random bit pattern.
 * f32, f16, bf16 x n = 1..8 x counts 0..100 and 511..513, 1000, 4099 x
 * divisors 1, 3, 7; every source and dst at its own element offset (0..3),
 * dst separate, == srcs[0] or == srcs[n-1]; guard bytes around dst; inputs
 * unchanged; and the sources given in reverse order give the same bits.
 * Inputs come from this file's own generator (the shared stream of the
 * other groups is untouched).
 */
#include "kernels_test.h"

#define X_N_MAX 8
#define X_OFFSETS 4

static const size_t x_large_counts[] = {511, 512, 513, 1000, 4099};
static const int64_t x_divisors[] = {1, 3, 1, 7};

static test_rng_t x_gen;

static ref_fmt_t x_fmt(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 ? REF_F32 : dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
}

/* ---- the reference ---------------------------------------------------------- */

#define X_LIMBS 10 /* 320 bits: 2^-149 .. 2^128 is 277 bits, plus sign and carries */

typedef struct {
    uint32_t limb[X_LIMBS]; /* two's complement, limb 0 least significant */
    int nan, pos_inf, neg_inf, all_neg_zero;
} x_acc_t;

/* acc += sign * m * 2^shift (in units of 2^-149), carries to the top. */
static void x_acc_add(x_acc_t *acc, uint64_t m, int shift, int negative)
{
    uint32_t t[X_LIMBS] = {0};
    const uint64_t w = m << (shift % 32); /* m < 2^24: fits */
    t[shift / 32] = (uint32_t)w;
    t[shift / 32 + 1] = (uint32_t)(w >> 32);
    uint64_t carry = negative; /* -t = ~t + 1 */
    for (int k = 0; k < X_LIMBS; k++) {
        const uint64_t v = (uint64_t)acc->limb[k] + (negative ? (uint32_t)~t[k] : t[k]) + carry;
        acc->limb[k] = (uint32_t)v;
        carry = v >> 32;
    }
}

/* One input, given as the f32 it widens to. */
static void x_acc_input(x_acc_t *acc, float v)
{
    const uint32_t b = f32_bits(v);
    const uint32_t e = (b >> 23) & 0xFF, f = b & 0x7FFFFF;
    if (b != 0x80000000u) acc->all_neg_zero = 0;
    if (e == 0xFF) {
        if (f)
            acc->nan = 1;
        else if (b >> 31)
            acc->neg_inf = 1;
        else
            acc->pos_inf = 1;
        return;
    }
    if (e == 0 && f == 0) return;
    /* value = mantissa * 2^(e - 150) = mantissa * 2^(e - 1) units; subnormals: f * 1 unit */
    x_acc_add(acc, e ? (f | 0x800000u) : f, e ? (int)e - 1 : 0, (int)(b >> 31));
}

static int x_bit(const uint32_t *limb, int k) { return k >= 0 ? (limb[k / 32] >> (k % 32)) & 1 : 0; }

/* The accumulated exact sum rounded once to fmt (a double holding it). */
static double x_acc_round(const x_acc_t *acc, ref_fmt_t fmt)
{
    if (acc->nan || (acc->pos_inf && acc->neg_inf)) return NAN;
    if (acc->pos_inf) return INFINITY;
    if (acc->neg_inf) return -INFINITY;
    uint32_t mag[X_LIMBS];
    const int negative = (int)(acc->limb[X_LIMBS - 1] >> 31);
    uint64_t carry = negative;
    for (int k = 0; k < X_LIMBS; k++) {
        const uint64_t v = (uint64_t)(negative ? ~acc->limb[k] : acc->limb[k]) + carry;
        mag[k] = (uint32_t)v;
        carry = v >> 32;
    }
    int top = 32 * X_LIMBS - 1;
    while (top >= 0 && !x_bit(mag, top)) top--;
    if (top < 0) return acc->all_neg_zero ? -0.0 : 0.0;
    /* Keep mant_bits + 1 bits, but none below the format's smallest quantum. */
    int lsb = top - fmt.mant_bits;
    const int quantum = fmt.emin - fmt.mant_bits + 149;
    if (lsb < quantum) lsb = quantum;
    uint64_t q = 0;
    for (int k = top; k >= lsb; k--) q = (q << 1) | (uint64_t)x_bit(mag, k);
    int sticky = 0;
    for (int k = 0; k < lsb - 1; k++) sticky |= x_bit(mag, k);
    if (x_bit(mag, lsb - 1) && (sticky || (q & 1))) q++;
    const double r = ref_round(ldexp((double)q, lsb - 149), fmt); /* exact, or inf past the largest finite */
    return negative ? -r : r;
}

/* The expected bits of element i (f32 in *out32, f16/bf16 in *out16). */
static void x_expect(k_dtype_t dtype, const float *widened, int n, int64_t divisor, uint32_t *out)
{
    x_acc_t acc = {.all_neg_zero = 1};
    for (int k = 0; k < n; k++) x_acc_input(&acc, widened[k]);
    const ref_fmt_t fmt = x_fmt(dtype);
    double r;
    if (divisor > 1) {
        const double f = x_acc_round(&acc, REF_F32);
        r = isnan(f) ? NAN : ref_round(ref_round(f / (double)(float)divisor, REF_F32), fmt);
    } else {
        r = x_acc_round(&acc, fmt);
    }
    if (dtype == K_DTYPE_F32)
        *out = isnan(r) ? 0x7FC00000u : f32_bits((float)r);
    else
        *out = isnan(r) ? (dtype == K_DTYPE_F16 ? 0x7E00u : 0x7FC0u) : ref_encode16(r, fmt);
}

/* ---- inputs --------------------------------------------------------------------- */

enum { X_TAME, X_MIXED, X_TIES, X_TIES_WIDE, X_WILD, X_REGIMES };

/* +-m * 2^e with a random 24-bit m (a normal f32 unless e is very small). */
static double x_random_value(int e)
{
    const double m = (double)((test_rng_u64(&x_gen) >> 40) | 0x800000u) * 0x1p-23;
    return (test_rng_u64(&x_gen) & 1 ? -1.0 : 1.0) * ldexp(m, e);
}

/* One element's n values (as doubles, any value; x_store rounds them to
 * the dtype) in the regime; scale is the case's magnitude. */
static void x_element(int regime, int scale, int n, double *v, ref_fmt_t fmt)
{
    for (int k = 0; k < n; k++)
        v[k] = test_rng_below(&x_gen, 50) == 0 ? 0.0 : x_random_value(scale - 10 + (int)test_rng_below(&x_gen, 21));
    if (regime == X_TAME || (regime == X_MIXED && test_rng_below(&x_gen, 64) != 0)) return;
    const int a = (int)test_rng_below(&x_gen, n), b = (a + 1) % n, c = (a + 2) % n;
    if (v[a] == 0) v[a] = x_random_value(scale);
    const double ulp = ldexp(1.0, ilogb(fabs(v[a])) - fmt.mant_bits);
    if (regime == X_TIES || regime == X_TIES_WIDE) {
        /* a + half its ulp (a tie), a push 2^23..2^26 (ties; f16/bf16:
         * from 2^(mantissa bits + 2) on, through the spans their fp32 sums
         * are certified for) or 2^27..2^36 (wide) below a, and pairs that
         * cancel: the narrow spans are what the vector kernels certify
         * (fp32 rounding to nearest would lose the push of an f16/bf16 tie
         * there), the wide ones what they must not (fp64 would lose it). */
        const int below = regime == X_TIES_WIDE ? 27 + (int)test_rng_below(&x_gen, 10)
                          : fmt.mant_bits == 23 ? 23 + (int)test_rng_below(&x_gen, 4)
                                                : fmt.mant_bits + 2 + (int)test_rng_below(&x_gen, 25 - fmt.mant_bits);
        const int e = ilogb(fabs(v[a])) - below;
        for (int k = 0; k < n; k++)
            if (k != a) /* (zeros only in wide f16/bf16 ties, whose steps must pass the fp32 span) */
                v[k] = k + 1 < n && k + 1 != a && (regime == X_TIES || fmt.mant_bits == 23) && test_rng_below(&x_gen, 2)
                           ? x_random_value(scale)
                           : 0.0;
        for (int k = 0; k + 1 < n; k++)
            if (k != a && k + 1 != a && v[k] != 0) v[k + 1] = -v[k], k++;
        if (n >= 2) v[b] = copysign(ulp / 2, v[a]);
        if (n >= 3) v[c] = x_random_value(e > fmt.emin - fmt.mant_bits ? e : fmt.emin - fmt.mant_bits);
        if (n >= 3 && regime == X_TIES_WIDE) {
            /* b = tie + P and c = -(P -+ 2^-m P) (m mantissa bits), so the
             * exact sum is the tie +- 2^-m P, which the fp64 sum of f32
             * inputs loses from 2^53 below a on (spans 2^27..2^36), and the
             * fp32 sum of f16 / bf16 ones from 2^24 on (P 2^(m + 2) to
             * 2^(m + 15) below a): where only a too generous certificate
             * would go wrong. */
            const int pe =
                fmt.mant_bits == 23 ? e : ilogb(fabs(v[a])) - fmt.mant_bits - 2 - (int)test_rng_below(&x_gen, 14);
            const double p = ldexp(1.0, pe);
            const double tiny = copysign(ldexp(p, -fmt.mant_bits), test_rng_below(&x_gen, 2) ? 1.0 : -1.0);
            v[b] = copysign(ulp / 2 + p, v[a]);
            v[c] = copysign(p - tiny, -v[a]);
        }
        return;
    }
    switch (test_rng_below(&x_gen, 10)) {
    case 0: v[b] = -v[a]; break; /* cancellation */
    case 1:
        v[b] = -v[a];
        v[c] = x_random_value(-100);
        break; /* cancellation, tiny rest */
    case 2:
        v[a] = x_random_value(100);
        v[b] = x_random_value(-100);
        break;                                                                            /* exponents far apart */
    case 3: v[a] = x_random_value(fmt.emin - 1 - (int)test_rng_below(&x_gen, 10)); break; /* subnormal */
    case 4: /* a tie of the dtype, then (n >= 3) a tiny push either way, 2^3
             * to 2^32 below the ulp: within the vector kernels' certified
             * span and past it, where fp64 rounding would lose it */
        v[b] = copysign(ulp / 2, v[a]);
        if (n >= 3) {
            const int e = ilogb(ulp) - 32 + (int)test_rng_below(&x_gen, 30);
            v[c] = x_random_value(e > fmt.emin - fmt.mant_bits ? e : fmt.emin - fmt.mant_bits);
        }
        break;
    case 5:
        v[a] = 0x1.fffffep127;
        v[b] = 0x1.fffffep127;
        break; /* past FLT_MAX */
    case 6:
        for (int k = 0; k < n; k++) v[k] = test_rng_below(&x_gen, 2) ? -0.0 : 0.0;
        break;
    case 7: v[a] = INFINITY; break;
    case 8:
        v[a] = -INFINITY;
        if (n >= 2 && test_rng_below(&x_gen, 2)) v[b] = INFINITY;
        break;
    default: v[a] = NAN; break;
    }
}

/* v rounded to the dtype (inf past its range) at element i of p. */
static void x_store(k_dtype_t dtype, void *p, size_t i, double v)
{
    if (dtype == K_DTYPE_F32) {
        ((float *)p)[i] = (float)v; /* the values are f32 already, or inf / NaN */
        return;
    }
    const ref_fmt_t fmt = x_fmt(dtype);
    ((uint16_t *)p)[i] = isnan(v) ? (dtype == K_DTYPE_F16 ? 0x7E01 : 0x7F81) : ref_encode16(ref_round(v, fmt), fmt);
}

static float x_widen(k_dtype_t dtype, const void *p, size_t i)
{
    if (dtype == K_DTYPE_F32) return ((const float *)p)[i];
    return (float)ref_decode16(((const uint16_t *)p)[i], x_fmt(dtype));
}

static uint32_t x_bits(k_dtype_t dtype, const void *p, size_t i)
{
    if (dtype == K_DTYPE_F32) return f32_bits(((const float *)p)[i]);
    return ((const uint16_t *)p)[i];
}

/* ---- the group ------------------------------------------------------------------ */

void test_reduce_exact(void)
{
    x_gen = test_rng_seeded(0x5EED0E8AC7ULL);
    const size_t max_count = x_large_counts[sizeof(x_large_counts) / sizeof(x_large_counts[0]) - 1];
    const size_t slot = max_count + X_OFFSETS;
    uint8_t *pristine = malloc(X_N_MAX * slot * 4), *work = malloc(X_N_MAX * slot * 4);
    uint8_t *out = malloc(2 * GUARD_BYTES + slot * 4);
    uint32_t *want = malloc(max_count * 4);
    if (!pristine || !work || !out || !want) {
        report(1, 1, "k_reduce_n_exact: out of memory");
        return;
    }
    long checks[K_ISA_COUNT] = {0}, failures[K_ISA_COUNT] = {0};
    int printed = 0;
    const k_dtype_t dtypes[3] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
    int case_no = 0;
    for (int d = 0; d < 3; d++)
        for (int n = 1; n <= X_N_MAX; n++)
            for (size_t c = 0; c <= 100 + sizeof(x_large_counts) / sizeof(x_large_counts[0]); c++, case_no++) {
                const k_dtype_t dtype = dtypes[d];
                const size_t es = k_dtype_size(dtype);
                const size_t count = c <= 100 ? c : x_large_counts[c - 101];
                const int regime = case_no % X_REGIMES;
                const int64_t divisor = x_divisors[case_no / X_REGIMES % 4];
                const int alias = case_no / 16 % 3; /* dst separate, == srcs[0], == srcs[n-1] */
                const ref_fmt_t fmt = x_fmt(dtype);
                const int scale = fmt.emin + 12 + (int)test_rng_below(&x_gen, (unsigned)(fmt.emax - fmt.emin - 23));
                size_t offset[X_N_MAX + 1];
                for (int k = 0; k <= n; k++) offset[k] = test_rng_below(&x_gen, X_OFFSETS);
                for (size_t i = 0; i < count; i++) {
                    double v[X_N_MAX];
                    x_element(regime, scale, n, v, fmt);
                    float widened[X_N_MAX];
                    for (int k = 0; k < n; k++) {
                        uint8_t *src = pristine + (size_t)k * slot * 4 + offset[k] * es;
                        if (regime == X_WILD) {
                            const uint32_t r = (uint32_t)test_rng_u64(&x_gen);
                            if (dtype == K_DTYPE_F32)
                                memcpy(src + i * 4, &r, 4);
                            else
                                memcpy(src + i * 2, &r, 2);
                        } else {
                            x_store(dtype, src, i, v[k]);
                        }
                        widened[k] = x_widen(dtype, src, i);
                    }
                    x_expect(dtype, widened, n, divisor, &want[i]);
                }
                for (int isa = 0; isa < K_ISA_COUNT; isa++) {
                    if (k_isa_set((k_isa_t)isa) != 0) continue;
                    for (int reversed = 0; reversed < (isa == (int)k_isa_best() ? 2 : 1); reversed++) {
                        memcpy(work, pristine, X_N_MAX * slot * 4);
                        memset(out, POISON, 2 * GUARD_BYTES + slot * 4);
                        const void *srcs[X_N_MAX];
                        for (int k = 0; k < n; k++)
                            srcs[reversed ? n - 1 - k : k] = work + (size_t)k * slot * 4 + offset[k] * es;
                        void *dst = out + GUARD_BYTES + offset[n] * es;
                        const int src_of_dst = alias == 1 ? 0 : alias == 2 ? n - 1 : -1; /* the unreversed source */
                        if (src_of_dst >= 0) dst = work + (size_t)src_of_dst * slot * 4 + offset[src_of_dst] * es;
                        k_reduce_n_exact(dst, srcs, n, count, dtype, divisor);
                        long bad = 0;
                        size_t first = 0;
                        for (size_t i = 0; i < count; i++)
                            if (x_bits(dtype, dst, i) != want[i] && bad++ == 0) first = i;
                        /* Guards, and the inputs that are not dst unchanged. */
                        bad += src_of_dst < 0 && !guards_intact(out + offset[n] * es, count * es);
                        for (int k = 0; k < n; k++)
                            if (k != src_of_dst &&
                                memcmp(work + (size_t)k * slot * 4, pristine + (size_t)k * slot * 4, slot * 4))
                                bad++;
                        checks[isa] += (long)count + 1;
                        failures[isa] += bad;
                        if (bad && printed++ < MAX_PRINTED)
                            printf("  %s %s n %d count %zu divisor %lld regime %d alias %d%s: %ld wrong, "
                                   "first %zu: 0x%x, expected 0x%x\n",
                                   k_isa_name((k_isa_t)isa), dtype_names[dtype], n, count, (long long)divisor, regime,
                                   alias, reversed ? " reversed" : "", bad, first,
                                   count ? x_bits(dtype, dst, first) : 0, count ? want[first] : 0);
                    }
                }
            }
    k_isa_set(k_isa_best());
    for (int isa = 0; isa < K_ISA_COUNT; isa++) {
        char what[64];
        snprintf(what, sizeof(what), "k_reduce_n_exact %s", k_isa_name((k_isa_t)isa));
        if (k_isa_set((k_isa_t)isa) != 0) {
            printf("skip %s: not supported by this CPU\n", what);
            continue;
        }
        report(checks[isa], failures[isa], "%s", what);
    }
    k_isa_set(k_isa_best());
    free(pristine);
    free(work);
    free(out);
    free(want);
}
