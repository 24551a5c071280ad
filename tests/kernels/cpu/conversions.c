/*
 * conversions.c - the scalar f16/bf16 <-> f32 conversions: exhaustive over
 * all 65536 halves (round trip, NaNs quieted with their payload kept), and
 * f32 -> half rounding on millions of floats (halfway cases, subnormals,
 * overflow) against a reference that rounds in double arithmetic.
 */
#include "kernels_test.h"

static void test_half_exhaustive(const char *name, ref_fmt_t fmt, uint16_t quiet_bit, float (*to_f32)(uint16_t),
                                 uint16_t (*from_f32)(float))
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
    report(checks, failures, "%s <-> f32 round trip, all 65536", name);
}

/* One float: the library's narrowing must equal the double-arithmetic
 * reference bit for bit (any NaN for NaN input). */
static int check_narrow(float x, ref_fmt_t fmt, uint16_t (*from_f32)(float), long *failures, const char *name)
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
        patterns[6] = (uint32_t)test_rng_u64(&rng) & low_mask;
        for (int p = 0; p < 7; p++)
            checks += check_narrow(f32_from_bits((hi << dropped) | patterns[p]), fmt, from_f32, &failures, name);
    }
    /* results in the format's subnormal range round at a higher bit: put a
     * tie at every bit position k of every f32 exponent near there */
    int e_lo = fmt.emin - fmt.mant_bits - 3 + 127, e_hi = fmt.emin + 1 + 127;
    if (e_lo < 0) e_lo = 0;
    for (int e = e_lo; e <= e_hi; e++) {
        for (int k = 0; k < 23; k++) {
            for (int r = 0; r < 64; r++) {
                uint32_t upper = (uint32_t)(test_rng_u64(&rng) << (k + 1)) & 0x7FFFFFu;
                uint32_t mant = upper | (1u << k);
                uint32_t bits = ((uint32_t)e << 23) | mant;
                int32_t delta = r % 3 - 1; /* tie - 1, tie, tie + 1 */
                bits = (uint32_t)((int32_t)bits + delta);
                bits |= (r & 4) ? 0x80000000u : 0;
                checks += check_narrow(f32_from_bits(bits), fmt, from_f32, &failures, name);
            }
        }
    }
    report(checks, failures, "f32 -> %s rounding (ties, subnormal, inf)", name);
}

void test_conversions(void)
{
    test_half_exhaustive("f16", REF_F16, 0x0200, k_f16_to_f32, k_f32_to_f16);
    test_half_exhaustive("bf16", REF_BF16, 0x0040, k_bf16_to_f32, k_f32_to_bf16);
    test_half_rounding("f16", REF_F16, k_f32_to_f16);
    test_half_rounding("bf16", REF_BF16, k_f32_to_bf16);
}
