/*
 * ops_mixed_numeric.c - the ops of mixed-precision training outside the
 * layers, bit for bit: the rounding everything is checked against (the
 * kernels' scalar k_f32_to_bf16 / k_f32_to_f16, themselves checked against
 * a table of hand-worked cases and the double reference), cast between
 * f32, bf16 and f16, check_finite (every position of short tensors, and a
 * long one that the backend splits across threads), and the SGD step with
 * 16-bit gradients, a gradient scale and a low-precision copy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"

/* ---- the rounding reference ------------------------------------------------------ */

#define ANY_NAN 0xFFFFu /* in the table: any NaN of either sign */

/* f32 bits, then what bf16 and f16 must round them to (nearest, ties to even). */
static const struct {
    uint32_t f32;
    uint16_t bf16, f16;
} rounding_cases[] = {
    {0x00000000u, 0x0000, 0x0000}, /* 0 */
    {0x80000000u, 0x8000, 0x8000}, /* -0 */
    {0x3F800000u, 0x3F80, 0x3C00}, /* 1 */
    {0xBF800000u, 0xBF80, 0xBC00}, /* -1 */
    {0x40490FDBu, 0x4049, 0x4248}, /* pi */
    {0x3F808000u, 0x3F80, 0x3C04}, /* 1 + 2^-8: bf16 tie, to even (down) */
    {0x3F818000u, 0x3F82, 0x3C0C}, /* 1 + 2^-7 + 2^-8: bf16 tie, to even (up) */
    {0x3F808001u, 0x3F81, 0x3C04}, /* just above the tie */
    {0x3F807FFFu, 0x3F80, 0x3C04}, /* just below it */
    {0xBF818000u, 0xBF82, 0xBC0C}, /* negative tie, up in magnitude */
    {0x3F801000u, 0x3F80, 0x3C00}, /* 1 + 2^-11: f16 tie, to even (down) */
    {0x3F803000u, 0x3F80, 0x3C02}, /* 1 + 3 2^-11: f16 tie, to even (up) */
    {0x3F801001u, 0x3F80, 0x3C01}, /* just above the f16 tie */
    {0x477FE000u, 0x4780, 0x7BFF}, /* 65504: f16's largest */
    {0x477FEFFFu, 0x4780, 0x7BFF}, /* just below 65520 */
    {0x477FF000u, 0x4780, 0x7C00}, /* 65520: f16 tie, to even = inf */
    {0xC77FF000u, 0xC780, 0xFC00}, /* -65520: -inf */
    {0x47800000u, 0x4780, 0x7C00}, /* 65536 */
    {0x7F7F0000u, 0x7F7F, 0x7C00}, /* bf16's largest */
    {0x7F7F7FFFu, 0x7F7F, 0x7C00}, /* just below its tie */
    {0x7F7F8000u, 0x7F80, 0x7C00}, /* its tie: to even = inf */
    {0x7F7FFFFFu, 0x7F80, 0x7C00}, /* f32's largest */
    {0xFF7FFFFFu, 0xFF80, 0xFC00},
    {0x7F800000u, 0x7F80, 0x7C00},   /* inf */
    {0xFF800000u, 0xFF80, 0xFC00},   /* -inf */
    {0x7FC00000u, ANY_NAN, ANY_NAN}, /* quiet NaN */
    {0x7F800001u, ANY_NAN, ANY_NAN}, /* signalling NaN: truncating would give inf */
    {0xFF800001u, ANY_NAN, ANY_NAN},
    {0x7FBFFFFFu, ANY_NAN, ANY_NAN},
    {0x33800000u, 0x3380, 0x0001}, /* 2^-24: f16's smallest subnormal */
    {0x33000000u, 0x3300, 0x0000}, /* 2^-25: tie, to even (0) */
    {0xB3000000u, 0xB300, 0x8000}, /* -2^-25: -0 */
    {0x33000001u, 0x3300, 0x0001}, /* just above */
    {0x33400000u, 0x3340, 0x0001}, /* 3 2^-26 */
    {0x33C00000u, 0x33C0, 0x0002}, /* 1.5 2^-24: tie, to even (2) */
    {0x387FC000u, 0x3880, 0x03FF}, /* f16's largest subnormal */
    {0x38800000u, 0x3880, 0x0400}, /* f16's smallest normal */
    {0x00000001u, 0x0000, 0x0000}, /* f32's smallest subnormal */
    {0x00008000u, 0x0000, 0x0000}, /* bf16 tie among subnormals: to even */
    {0x00018000u, 0x0002, 0x0000}, /* and up */
    {0x00008001u, 0x0001, 0x0000},
    {0x807FFFFFu, 0x8080, 0x8000}, /* f32's largest subnormal rounds to the smallest normal */
};
#define ROUNDING_CASES (sizeof(rounding_cases) / sizeof(rounding_cases[0]))

static int code_matches(uint16_t got, uint16_t want, tr_dtype_t dtype)
{
    return want == ANY_NAN ? isnan(widen(got, dtype)) : got == want;
}

/* f16 bits -> value, from the format's definition. */
static double f16_value(uint16_t h)
{
    int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v = exponent == 0    ? ldexp(mantissa, -24)
               : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                : ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

/* The reference everything else leans on: the kernels' scalar rounding
 * against the table, and against ref_round on many f32 values; the
 * widenings against the formats' definitions on every code. */
void mixed_rounding_reference(void)
{
    long wrong = 0;
    for (size_t i = 0; i < ROUNDING_CASES; i++) {
        float x = f32_from_bits(rounding_cases[i].f32);
        uint16_t b = k_f32_to_bf16(x), h = k_f32_to_f16(x);
        int ok = code_matches(b, rounding_cases[i].bf16, TR_DTYPE_BF16) &&
                 code_matches(h, rounding_cases[i].f16, TR_DTYPE_F16);
        double rb = ref_round_dtype(x, TR_DTYPE_BF16), rh = ref_round_dtype(x, TR_DTYPE_F16);
        ok = ok &&
             (isnan(x) ? isnan(rb) && isnan(rh)
                       : rb == widen(rounding_cases[i].bf16, TR_DTYPE_BF16) && rh == f16_value(rounding_cases[i].f16) &&
                             !sign_differs(rb, x) && !sign_differs(rh, x));
        CHECK(ok, "rounding f32 0x%08X: bf16 0x%04X (want 0x%04X), f16 0x%04X (want 0x%04X), reference %a / %a",
              rounding_cases[i].f32, b, rounding_cases[i].bf16, h, rounding_cases[i].f16, rb, rh);
        wrong += !ok;
    }
    /* Random f32 bit patterns, and values in f16's range. */
    long random_wrong = 0;
    const long samples = 400000;
    for (long i = 0; i < samples; i++) {
        uint64_t r = rng_u64();
        uint32_t bits = (uint32_t)r;
        if (i % 2) /* exponent within f16's range, give or take */
            bits = (bits & 0x807FFFFFu) | (uint32_t)(127 - 28 + (r >> 32) % 48) << 23;
        float x = f32_from_bits(bits);
        for (int d = 0; d < 2; d++) {
            tr_dtype_t dt = d ? TR_DTYPE_F16 : TR_DTYPE_BF16;
            float g = widen(bits_of(x, dt), dt);
            double ref = ref_round_dtype(x, dt);
            random_wrong += isnan(x) ? !isnan(g) : (double)g != ref || sign_differs(g, ref);
        }
    }
    CHECK(random_wrong == 0, "k_f32_to_bf16 / k_f32_to_f16: %ld of %ld random values differ from the reference",
          random_wrong, 2 * samples);
    /* Widening, every code. */
    long widen_wrong = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        float b = k_bf16_to_f32((uint16_t)c), h = k_f16_to_f32((uint16_t)c);
        widen_wrong += f32_bits(b) >> 16 != c && !(isnan(b) && (c & 0x7F80) == 0x7F80 && (c & 0x7F));
        double hv = f16_value((uint16_t)c);
        widen_wrong += isnan(hv) ? !isnan(h) : (double)h != hv || sign_differs(h, hv);
    }
    CHECK(widen_wrong == 0, "k_bf16_to_f32 / k_f16_to_f32: %ld codes widened wrong", widen_wrong);
    printf("%s rounding reference: %zu hand-worked cases (%ld wrong), %ld random (%ld wrong), every code "
           "widened (%ld wrong)\n",
           wrong || random_wrong || widen_wrong ? "FAIL" : "ok  ", ROUNDING_CASES, wrong, 2 * samples, random_wrong,
           widen_wrong);
    summary_exact("rounding reference (k_f32_to_bf16/f16)", wrong + random_wrong + widen_wrong,
                  (long)ROUNDING_CASES + 2 * samples + 2 * 65536);
}

/* ---- cast ------------------------------------------------------------------------ */

static tr_tensor_t plain_1d(tr_dtype_t dtype, size_t count) { return plain_make(dtype, 1, (const int[]){(int)count}); }

static void cast_run(const tr_tensor_t *src, tr_tensor_t *dst)
{
    plain_poison(dst);
    STATUS_OK(ops->cast(be, src, dst));
}

/* f32 -> bf16 / f16 -> f32 and f32 -> f32 on count values: the table's
 * cases (at the start and around where two threads split the tensor),
 * random bit patterns, values in f16's range and near ties of both. */
void mixed_cast(size_t count)
{
    float *in = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        uint64_t r = rng_u64();
        uint32_t bits = (uint32_t)r;
        switch ((r >> 32) % 4) {
        case 0: break; /* any pattern */
        case 1: bits = (bits & 0x807FFFFFu) | (uint32_t)(127 - 28 + (r >> 40) % 48) << 23; break;
        case 2: bits = (bits & 0xFFFF0000u) | (0x8000u + (uint32_t)((r >> 40) % 3) - 1); break; /* bf16 ties */
        default: /* f16 ties, within f16's range */
            bits = ((bits & 0x807FE000u) | (uint32_t)(127 - 14 + (r >> 40) % 30) << 23) |
                   (0x1000u + (uint32_t)((r >> 48) % 3) - 1);
        }
        in[i] = f32_from_bits(bits);
    }
    size_t split = count / 2 > ROUNDING_CASES ? count / 2 - ROUNDING_CASES / 2 : 0;
    for (size_t i = 0; i < ROUNDING_CASES && i < count; i++) {
        in[i] = f32_from_bits(rounding_cases[i].f32);
        if (split + i < count) in[split + i] = f32_from_bits(rounding_cases[i].f32);
    }
    tr_tensor_t src = plain_1d(TR_DTYPE_F32, count), back = plain_1d(TR_DTYPE_F32, count);
    memcpy(src.data, in, count * sizeof(float));
    static const tr_dtype_t dtypes[] = {TR_DTYPE_BF16, TR_DTYPE_F16, TR_DTYPE_F32};
    for (int d = 0; d < 3; d++) {
        const tr_dtype_t dt = dtypes[d];
        tr_tensor_t lp = plain_1d(dt, count);
        cast_run(&src, &lp);
        cast_run(&lp, &back);
        long down = 0, up = 0;
        const uint16_t *codes = lp.data;
        const uint32_t *wide = back.data;
        for (size_t i = 0; i < count; i++) {
            if (dt == TR_DTYPE_F32) {
                down += f32_bits(((const float *)lp.data)[i]) != f32_bits(in[i]);
                up += wide[i] != f32_bits(in[i]);
                continue;
            }
            down += codes[i] != bits_of(in[i], dt);
            up += wide[i] != f32_bits(widen(codes[i], dt));
        }
        char what[96];
        snprintf(what, sizeof(what), "cast f32 -> %s -> f32, %zu values", tr_dtype_name(dt), count);
        CHECK(down == 0 && up == 0, "%s: %ld wrong going down, %ld coming back (bit for bit against k_cast's scalars)",
              what, down, up);
        printf("%s %-64s %ld + %ld wrong (bit for bit)\n", down || up ? "FAIL" : "ok  ", what, down, up);
        snprintf(what, sizeof(what), "cast f32 <-> %s", tr_dtype_name(dt));
        summary_exact(what, down + up, 2 * (long)count);
        free(lp.data);
    }
    free(src.data);
    free(back.data);
    free(in);
}

/* Every bf16 and f16 code through cast: to f32 exactly, and to the other
 * 16-bit dtype as widening then rounding once would (a NaN: any NaN). */
void mixed_cast_exhaustive(void)
{
    const size_t count = 65536;
    static const tr_dtype_t dtypes[] = {TR_DTYPE_BF16, TR_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        const tr_dtype_t dt = dtypes[d], other = dtypes[1 - d];
        tr_tensor_t codes = plain_1d(dt, count), wide = plain_1d(TR_DTYPE_F32, count), cross = plain_1d(other, count);
        uint16_t *c = codes.data;
        for (size_t i = 0; i < count; i++) c[i] = (uint16_t)i;
        cast_run(&codes, &wide);
        cast_run(&codes, &cross);
        long wrong = 0;
        const float *w = wide.data;
        const uint16_t *x = cross.data;
        for (size_t i = 0; i < count; i++) {
            float v = widen((uint16_t)i, dt);
            wrong += f32_bits(w[i]) != f32_bits(v);
            wrong += isnan(v) ? !isnan(widen(x[i], other)) : x[i] != bits_of(v, other);
        }
        char what[96];
        snprintf(what, sizeof(what), "cast every %s code -> f32 and -> %s", tr_dtype_name(dt), tr_dtype_name(other));
        CHECK(wrong == 0, "%s: %ld wrong", what, wrong);
        printf("%s %-64s %ld wrong (bit for bit)\n", wrong ? "FAIL" : "ok  ", what, wrong);
        snprintf(what, sizeof(what), "cast %s -> f32, %s", tr_dtype_name(dt), tr_dtype_name(other));
        summary_exact(what, wrong, 2 * (long)count);
        free(codes.data);
        free(wide.data);
        free(cross.data);
    }
}

/* ---- check_finite ------------------------------------------------------------------- */

/* Values of dtype, as bit patterns: finite ones check_finite must pass
 * (the largest finite of both signs, subnormals, zeros, anything), and the
 * non-finite ones it must find (infinities, quiet and signalling NaNs). */
static uint32_t finite_code(tr_dtype_t dt)
{
    static const uint32_t edge32[] = {0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x807FFFFFu, 0x00000000u, 0x80000000u};
    static const uint32_t edge16[] = {0x7F7F, 0xFF7F, 0x0001, 0x807F, 0x0000, 0x8000}; /* bf16 */
    static const uint32_t edge_h[] = {0x7BFF, 0xFBFF, 0x0001, 0x83FF, 0x0000, 0x8000}; /* f16 */
    uint64_t r = rng_u64();
    if (r % 3 == 0) {
        const uint32_t *e = dt == TR_DTYPE_F32 ? edge32 : dt == TR_DTYPE_BF16 ? edge16 : edge_h;
        return e[(r >> 8) % 6];
    }
    uint32_t bits = (uint32_t)(r >> 16);
    if (dt == TR_DTYPE_F32)
        return (bits & 0x7F800000u) == 0x7F800000u ? bits & 0xBFFFFFFFu : bits; /* exponent all ones: clear one */
    bits &= 0xFFFFu;
    uint32_t exp_mask = dt == TR_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    return (bits & exp_mask) == exp_mask ? bits & ~(exp_mask & (exp_mask >> 1)) : bits;
}

static uint32_t nonfinite_code(tr_dtype_t dt, int which)
{
    static const uint32_t c32[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu};
    static const uint32_t c16[] = {0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF};
    static const uint32_t ch[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF};
    return (dt == TR_DTYPE_F32 ? c32 : dt == TR_DTYPE_BF16 ? c16 : ch)[which];
}
#define NONFINITE_KINDS 5

static void code_store(void *data, tr_dtype_t dt, size_t i, uint32_t code)
{
    if (dt == TR_DTYPE_F32)
        ((uint32_t *)data)[i] = code;
    else
        ((uint16_t *)data)[i] = (uint16_t)code;
}

static uint32_t code_load(const void *data, tr_dtype_t dt, size_t i)
{
    return dt == TR_DTYPE_F32 ? ((const uint32_t *)data)[i] : ((const uint16_t *)data)[i];
}

/* check_finite's answer for t, or -1 when it failed. */
static int finite_run(const tr_tensor_t *t)
{
    int nonfinite = -7;
    hora_status_t status = ops->check_finite(be, t, &nonfinite);
    return status == HORA_OK ? nonfinite : -1;
}

/* One tensor of count elements: all finite gives 0; one non-finite value
 * of each kind at each of positions[] (or every position) gives 1. */
static long finite_tensor(tr_dtype_t dt, size_t count, const size_t *positions, size_t position_count, long *calls)
{
    tr_tensor_t t = plain_1d(dt, count);
    for (size_t i = 0; i < count; i++) code_store(t.data, dt, i, finite_code(dt));
    long wrong = finite_run(&t) != 0;
    ++*calls;
    size_t n = positions != NULL ? position_count : count;
    for (size_t k = 0; k < n; k++) {
        size_t p = positions != NULL ? positions[k] : k;
        if (p >= count) continue;
        uint32_t keep = code_load(t.data, dt, p);
        for (int which = 0; which < NONFINITE_KINDS; which++) {
            code_store(t.data, dt, p, nonfinite_code(dt, which));
            int got = finite_run(&t);
            ++*calls;
            if (got != 1) {
                wrong++;
                if (wrong < 5)
                    fprintf(stderr, "check_finite %s count %zu: 0x%X at %zu gives %d\n", tr_dtype_name(dt), count,
                            nonfinite_code(dt, which), p, got);
            }
        }
        code_store(t.data, dt, p, keep);
    }
    free(t.data);
    return wrong;
}

/* A tensor of count copies of one finite code (the largest, a subnormal). */
static long finite_uniform(tr_dtype_t dt, size_t count, uint32_t code)
{
    tr_tensor_t t = plain_1d(dt, count);
    for (size_t i = 0; i < count; i++) code_store(t.data, dt, i, code);
    long wrong = finite_run(&t) != 0;
    free(t.data);
    return wrong;
}

void mixed_check_finite(void)
{
    static const tr_dtype_t dtypes[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};
    for (int d = 0; d < 3; d++) {
        const tr_dtype_t dt = dtypes[d];
        long wrong = 0, calls = 0;
        for (size_t count = 1; count <= 80; count++) wrong += finite_tensor(dt, count, NULL, 0, &calls);
        /* Long enough for the threaded path (the cpu backend splits from
         * 2^16 elements in chunks of whole 32-element groups): the ends,
         * around the split of 2, 3 and 4 threads, and random places. */
        const size_t big = 70001;
        size_t pos[48] = {0,     1,     2,     31,    32,    33,    big - 1, big - 2, big - 33, 35007, 35008,  35009,
                          35039, 35040, 23359, 23360, 46719, 46720, 17503,   17504,   52511,    52512, big / 2};
        size_t np = 23;
        while (np < 48) pos[np++] = rng_u64() % big;
        wrong += finite_tensor(dt, big, pos, np, &calls);
        uint32_t max_finite = dt == TR_DTYPE_F32 ? 0x7F7FFFFFu : dt == TR_DTYPE_BF16 ? 0x7F7F : 0x7BFF;
        uint32_t neg_max = dt == TR_DTYPE_F32 ? 0xFF7FFFFFu : dt == TR_DTYPE_BF16 ? 0xFF7F : 0xFBFF;
        uint32_t subnormal = dt == TR_DTYPE_F32 ? 0x00400001u : dt == TR_DTYPE_BF16 ? 0x0041 : 0x0201;
        const size_t sizes[] = {1, 7, 80, big};
        for (int s = 0; s < 4; s++) {
            wrong += finite_uniform(dt, sizes[s], max_finite) + finite_uniform(dt, sizes[s], neg_max) +
                     finite_uniform(dt, sizes[s], subnormal) +
                     finite_uniform(dt, sizes[s], subnormal | (dt == TR_DTYPE_F32 ? 0x80000000u : 0x8000u));
            calls += 4;
        }
        char what[96];
        snprintf(what, sizeof(what), "check_finite %s, lengths 1..80 and %zu", tr_dtype_name(dt), big);
        CHECK(wrong == 0, "%s: %ld of %ld answers wrong", what, wrong, calls);
        printf("%s %-64s %ld of %ld calls wrong\n", wrong ? "FAIL" : "ok  ", what, wrong, calls);
        snprintf(what, sizeof(what), "check_finite %s", tr_dtype_name(dt));
        summary_exact(what, wrong, calls);
    }
}

/* ---- SGD ------------------------------------------------------------------------ */

/* Three steps on count parameters; returns the mismatches of param,
 * momentum and param_lp against the reference. lp_dtype < 0: no param_lp. */
static long sgd_case(size_t count, tr_dtype_t grad_dtype, int lp_dtype, const tr_sgd_args_t *a)
{
    const int dims[1] = {(int)count};
    float *p = rand_array(count, 1.0f), *p_ref = malloc(count * sizeof(float));
    float *m = calloc(count + 1, sizeof(float)), *m_ref = calloc(count + 1, sizeof(float));
    float *g_wide = malloc(count * sizeof(float) + 1);
    memcpy(p_ref, p, count * sizeof(float));
    tr_tensor_t pt = host_tensor(p, TR_DTYPE_F32, 1, dims), mt = host_tensor(m, TR_DTYPE_F32, 1, dims);
    tr_tensor_t gt = plain_make(grad_dtype, 1, dims);
    tr_tensor_t lpt = plain_make(lp_dtype >= 0 ? (tr_dtype_t)lp_dtype : TR_DTYPE_F32, 1, dims);
    const float scale = a->grad_scale == 0.0f ? 1.0f : a->grad_scale;
    long wrong = 0;
    for (int step = 0; step < 3; step++) {
        /* Gradients of a loss scaled by 1 / grad_scale, in their dtype
         * (within f16's range: an infinity would make NaNs, whose payloads
         * the contract leaves open). */
        float *g = rand_array(count, fminf(1.0f / scale, 32768.0f));
        plain_put(&gt, g);
        plain_get(&gt, g_wide);
        plain_poison(&lpt);
        STATUS_OK(ops->sgd_step(be, &pt, lp_dtype >= 0 ? &lpt : NULL, &gt, a->momentum != 0.0f ? &mt : NULL, a));
        sgd_ref(p_ref, g_wide, m_ref, count, a);
        for (size_t i = 0; i < count; i++) {
            wrong +=
                f32_bits(p[i]) != f32_bits(p_ref[i]) || (a->momentum != 0.0f && f32_bits(m[i]) != f32_bits(m_ref[i]));
            if (lp_dtype == TR_DTYPE_F32)
                wrong += f32_bits(((const float *)lpt.data)[i]) != f32_bits(p_ref[i]);
            else if (lp_dtype >= 0)
                wrong += ((const uint16_t *)lpt.data)[i] != bits_of(p_ref[i], (tr_dtype_t)lp_dtype);
        }
        free(g);
    }
    free(p);
    free(p_ref);
    free(m);
    free(m_ref);
    free(g_wide);
    free(gt.data);
    free(lpt.data);
    return wrong;
}

void mixed_sgd(void)
{
    static const tr_sgd_args_t cases[] = {
        {0.1f, 0.9f, 5e-4f, 1, 0}, {0.1f, 0.9f, 5e-4f, 0, 0}, {0.05f, 0.9f, 0.0f, 1, 0},
        {0.2f, 0.0f, 1e-4f, 0, 0}, {0.01f, 0.5f, 0.0f, 0, 0},
    };
    static const tr_dtype_t grads[] = {TR_DTYPE_BF16, TR_DTYPE_F16, TR_DTYPE_F32};
    static const int lps[] = {TR_DTYPE_BF16, TR_DTYPE_F16, TR_DTYPE_F32, -1};
    static const float scales[] = {1.0f / 1024.0f, 1.0f, 0.0f /* means 1 */, 1.0f / 65536.0f};
    static const size_t counts[] = {1, 1003, 70001}; /* the last for the threaded path */
    for (int ci = 0; ci < 3; ci++)
        for (int gi = 0; gi < 3; gi++)
            for (int li = 0; li < 4; li++) {
                long wrong = 0, runs = 0;
                for (int si = 0; si < 4; si++)
                    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                        /* The long tensor: the 16-bit pairs with the usual scale, two cases. */
                        if (ci == 2 && (gi == 2 || li >= 2 || si != 0 || (k != 0 && k != 3))) continue;
                        tr_sgd_args_t a = cases[k];
                        a.grad_scale = scales[si];
                        wrong += sgd_case(counts[ci], grads[gi], lps[li], &a);
                        runs++;
                    }
                if (runs == 0) continue;
                char what[128];
                snprintf(what, sizeof(what), "sgd grad %s, param_lp %s, %zu params, %ld cases x 3 steps",
                         tr_dtype_name(grads[gi]), lps[li] >= 0 ? tr_dtype_name((tr_dtype_t)lps[li]) : "none",
                         counts[ci], runs);
                CHECK(wrong == 0, "%s: %ld bit mismatches (param, momentum or param_lp)", what, wrong);
                printf("%s %-64s %ld bit mismatches\n", wrong ? "FAIL" : "ok  ", what, wrong);
                snprintf(what, sizeof(what), "sgd grad %s param_lp %s", tr_dtype_name(grads[gi]),
                         lps[li] >= 0 ? tr_dtype_name((tr_dtype_t)lps[li]) : "none");
                summary_exact(what, wrong, runs * 3 * (long)counts[ci]);
            }
}
