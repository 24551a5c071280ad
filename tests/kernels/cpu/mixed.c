/*
 * mixed.c - the mixed-precision kernels, bit for bit, on one ISA
 * (test_mixed_isa) and at the API's edges (test_mixed_api):
 *
 *  - k_nonfinite: a single +-inf or NaN (quiet and signalling payloads)
 *    planted at every position of counts 1..100 in f32, f16, bf16 and f64
 *    (first and last element, every vector tail), and around the block
 *    edges and in the tail of large counts; 0 for arrays of the largest
 *    finite values, subnormals, +-0; random arrays against a reference
 *    written here and against the scalar path;
 *  - k_unscale_nonfinite: values against widen, multiply once, round once
 *    (the scalar k_* conversions), the flag against the reference and
 *    against k_nonfinite, in place and out of place, with guards, and
 *    against the scalar path;
 *  - k_sgd_step_mixed: every grad dtype x copy dtype (or no copy) x weight
 *    decay x momentum x Nesterov against a reference written here and
 *    against the scalar path; k_sgd_step's bits for f32 gradients, scale 1
 *    and no copy; f16 / bf16 copies of values past their range are inf;
 *  - k_relu, k_relu_backward, k_add (the cpu backend's element-wise ops)
 *    against definitions written here and against the scalar path.
 *
 * Where an operation of the update meets two NaNs, k_cpu.h leaves the
 * payload of the result open; the reference notes where that happens and
 * there asks only for a NaN. Everything else must match exactly.
 */
#include "kernels_test.h"

#define SMALL_COUNT_MAX 70 /* counts 0..70: every vector tail of every path */
static const size_t large_counts[] = {127, 128, 129, 255, 1000, 4099, 65537};
#define N_LARGE (sizeof(large_counts) / sizeof(large_counts[0]))
#define N_COUNTS (SMALL_COUNT_MAX + 1 + N_LARGE)
#define MAX_COUNT 100003 /* the largest count any group here uses */

static size_t count_at(size_t k) { return k <= SMALL_COUNT_MAX ? k : large_counts[k - SMALL_COUNT_MAX - 1]; }

/* ---- elements as bits ----------------------------------------------------- */

static uint64_t get_bits(k_dtype_t dtype, const void *base, size_t i)
{
    const uint8_t *p = (const uint8_t *)base + i * k_dtype_size(dtype);
    switch (k_dtype_size(dtype)) {
    case 1: return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static void put_bits(k_dtype_t dtype, void *base, size_t i, uint64_t bits)
{
    uint8_t *p = (uint8_t *)base + i * k_dtype_size(dtype);
    switch (k_dtype_size(dtype)) {
    case 1: *p = (uint8_t)bits; return;
    case 2: {
        uint16_t v = (uint16_t)bits;
        memcpy(p, &v, 2);
        return;
    }
    case 4: {
        uint32_t v = (uint32_t)bits;
        memcpy(p, &v, 4);
        return;
    }
    default: memcpy(p, &bits, 8); return;
    }
}

/* +-inf or NaN, decided from the value (not from the exponent bits the
 * kernels look at). */
static int ref_nonfinite_elem(k_dtype_t dtype, uint64_t bits)
{
    switch (dtype) {
    case K_DTYPE_F32: return !isfinite(f32_from_bits((uint32_t)bits));
    case K_DTYPE_F16: return !isfinite(ref_decode16((uint16_t)bits, REF_F16));
    case K_DTYPE_BF16: return !isfinite(ref_decode16((uint16_t)bits, REF_BF16));
    case K_DTYPE_F64: {
        double d;
        memcpy(&d, &bits, 8);
        return !isfinite(d);
    }
    default: return 0;
    }
}

static int ref_nonfinite(k_dtype_t dtype, const void *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (ref_nonfinite_elem(dtype, get_bits(dtype, src, i))) return 1;
    return 0;
}

/* The fp32 value of an f32/f16/bf16 element, and fp32 rounded to one
 * (the scalar conversions of k_cpu.h, checked exhaustively in
 * conversions.c). */
static float widen(k_dtype_t dtype, uint64_t bits)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_f16_to_f32((uint16_t)bits);
    case K_DTYPE_BF16: return k_bf16_to_f32((uint16_t)bits);
    default: return f32_from_bits((uint32_t)bits);
    }
}

static uint64_t narrow(k_dtype_t dtype, float v)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_f32_to_f16(v);
    case K_DTYPE_BF16: return k_f32_to_bf16(v);
    default: return f32_bits(v);
    }
}

static int is_nan_elem(k_dtype_t dtype, uint64_t bits)
{
    return ref_nonfinite_elem(dtype, bits) && !isinf(widen(dtype, bits));
}

/* ---- interesting values --------------------------------------------------- */

/* Per float dtype (f32, f16, bf16, f64 in this order): inf, -inf, quiet
 * NaN, -quiet NaN, signalling NaNs with the smallest and the largest
 * payload, all ones, a quiet NaN with a payload. */
static const uint64_t nonfinite_bits[4][8] = {
    {0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC00001},
    {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0xFFFF, 0x7E01},
    {0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FBF, 0xFFFF, 0x7FC1},
    {UINT64_C(0x7FF0000000000000), UINT64_C(0xFFF0000000000000), UINT64_C(0x7FF8000000000000),
     UINT64_C(0xFFF8000000000000), UINT64_C(0x7FF0000000000001), UINT64_C(0x7FF7FFFFFFFFFFFF),
     UINT64_C(0xFFFFFFFFFFFFFFFF), UINT64_C(0x7FF8000000000001)},
};

/* Finite extremes: +-largest finite, smallest subnormal, -largest
 * subnormal, smallest normal, +0, -0, 1. */
static const uint64_t finite_bits[4][8] = {
    {0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF, 0x00800000, 0, 0x80000000, 0x3F800000},
    {0x7BFF, 0xFBFF, 0x0001, 0x83FF, 0x0400, 0, 0x8000, 0x3C00},
    {0x7F7F, 0xFF7F, 0x0001, 0x807F, 0x0080, 0, 0x8000, 0x3F80},
    {UINT64_C(0x7FEFFFFFFFFFFFFF), UINT64_C(0xFFEFFFFFFFFFFFFF), 1, UINT64_C(0x800FFFFFFFFFFFFF),
     UINT64_C(0x0010000000000000), 0, UINT64_C(0x8000000000000000), UINT64_C(0x3FF0000000000000)},
};

static int float_row(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 ? 0 : dtype == K_DTYPE_F16 ? 1 : dtype == K_DTYPE_BF16 ? 2 : 3;
}

/* A finite element: one of the extremes, or random_element redrawn until
 * finite. */
static uint64_t random_finite(test_rng_t *gen, k_dtype_t dtype)
{
    if (test_rng_below(gen, 4) == 0) return finite_bits[float_row(dtype)][test_rng_below(gen, 8)];
    uint64_t bits;
    do {
        uint8_t e[8];
        random_element(gen, dtype, e);
        bits = get_bits(dtype, e, 0);
    } while (ref_nonfinite_elem(dtype, bits));
    return bits;
}

/* Any element: one in ten non-finite, the rest random_finite. */
static uint64_t random_any(test_rng_t *gen, k_dtype_t dtype)
{
    if (test_rng_below(gen, 10) == 0) return nonfinite_bits[float_row(dtype)][test_rng_below(gen, 8)];
    return random_finite(gen, dtype);
}

/* The path under test is k_isa_current(); this runs k_nonfinite on the
 * scalar path and switches back. */
static int nonfinite_scalar(const void *src, k_dtype_t dtype, size_t count)
{
    k_isa_t isa = k_isa_current();
    k_isa_set(K_ISA_SCALAR);
    int r = k_nonfinite(src, dtype, count);
    k_isa_set(isa);
    return r;
}

/* ---- k_nonfinite ---------------------------------------------------------- */

static const k_dtype_t float_dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16, K_DTYPE_F64};

/* One check: k_nonfinite(src) == want; pos is the element that matters. */
static void nonfinite_expect(const void *src, k_dtype_t dtype, size_t count, int want, const char *what, size_t pos,
                             long *checks, long *failures)
{
    (*checks)++;
    int got = k_nonfinite(src, dtype, count);
    if (got != want && (*failures)++ < MAX_PRINTED)
        printf("  nonfinite %s %s count %zu [%zu] = %llx: got %d want %d\n", dtype_names[dtype], what, count, pos,
               count ? (unsigned long long)get_bits(dtype, src, pos) : 0ull, got, want);
}

static void test_nonfinite_isa(k_isa_t isa)
{
    uint8_t *raw = malloc((MAX_COUNT + MAX_OFFSET) * 8);
    long checks = 0, failures = 0;
    for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
        k_dtype_t dtype = float_dtypes[d];
        size_t size = k_dtype_size(dtype);
        const uint64_t *bad = nonfinite_bits[float_row(dtype)];

        /* one non-finite at every position of a finite array */
        for (size_t count = 1; count <= 100; count++) {
            uint8_t *src = raw + (count % (MAX_OFFSET + 1)) * size;
            for (size_t i = 0; i < count; i++) put_bits(dtype, src, i, random_finite(&rng, dtype));
            nonfinite_expect(src, dtype, count, 0, "background", 0, &checks, &failures);
            for (size_t pos = 0; pos < count; pos++) {
                uint64_t keep = get_bits(dtype, src, pos);
                for (int s = 0; s < 8; s++) {
                    put_bits(dtype, src, pos, bad[s]);
                    nonfinite_expect(src, dtype, count, 1, "planted", pos, &checks, &failures);
                }
                put_bits(dtype, src, pos, keep);
            }
        }

        /* large counts: around every block edge up to 8 KiB elements in,
         * the middle, and each of the last 70 elements */
        static const size_t big[] = {4133, 8195, MAX_COUNT};
        for (size_t b = 0; b < sizeof(big) / sizeof(big[0]); b++) {
            size_t count = big[b];
            uint8_t *src = raw + (b + 1) * size;
            for (size_t i = 0; i < count; i++) put_bits(dtype, src, i, random_finite(&rng, dtype));
            nonfinite_expect(src, dtype, count, 0, "large background", 0, &checks, &failures);
            size_t positions[128], n = 0;
            for (size_t edge = 512; edge <= 8192 && edge < count; edge += 512) {
                positions[n++] = edge - 1;
                positions[n++] = edge;
            }
            positions[n++] = 0;
            positions[n++] = count / 2;
            for (size_t k = count - SMALL_COUNT_MAX; k < count; k++) positions[n++] = k;
            for (size_t k = 0; k < n; k++) {
                size_t pos = positions[k];
                uint64_t keep = get_bits(dtype, src, pos);
                for (int s = 0; s < 8; s += 3) { /* inf, -quiet NaN, all-ones NaN */
                    put_bits(dtype, src, pos, bad[s]);
                    nonfinite_expect(src, dtype, count, 1, "large planted", pos, &checks, &failures);
                }
                put_bits(dtype, src, pos, keep);
            }
        }

        /* finite extremes, each alone and mixed: never a hit */
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = count_at(k);
            uint8_t *src = raw + (k % (MAX_OFFSET + 1)) * size;
            for (int e = 0; e <= 8; e++) {
                for (size_t i = 0; i < count; i++)
                    put_bits(dtype, src, i, finite_bits[float_row(dtype)][e < 8 ? (size_t)e : test_rng_below(&rng, 8)]);
                nonfinite_expect(src, dtype, count, 0, "finite extremes", 0, &checks, &failures);
            }
        }

        /* random arrays (one element in ten non-finite, so small counts
         * have both answers): the reference and the scalar path */
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = count_at(k);
            uint8_t *src = raw + (k % (MAX_OFFSET + 1)) * size;
            int sparse = k % 2; /* odd k: one in ten thousand non-finite */
            for (size_t i = 0; i < count; i++)
                put_bits(dtype, src, i,
                         sparse && test_rng_below(&rng, 1000) ? random_finite(&rng, dtype) : random_any(&rng, dtype));
            int want = ref_nonfinite(dtype, src, count);
            nonfinite_expect(src, dtype, count, want, "random", 0, &checks, &failures);
            checks++;
            int scalar = nonfinite_scalar(src, dtype, count);
            if (scalar != want && failures++ < MAX_PRINTED)
                printf("  nonfinite %s random count %zu: scalar path %d want %d\n", dtype_names[dtype], count, scalar,
                       want);
        }
    }
    free(raw);
    char what[64];
    snprintf(what, sizeof(what), "nonfinite %-6s planted, finite, random", k_isa_name(isa));
    report(what, checks, failures);
}

/* ---- k_unscale_nonfinite -------------------------------------------------- */

static const k_dtype_t unscale_dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

/* 2^-16 and 1/1000 unscale; 65536 overflows f16 (and 2^100 f32) from
 * finite inputs, which must not raise the flag; 2^-126 makes subnormals. */
static const float unscale_factors[] = {0x1p-16f, 1.0f / 1000.0f, 0.5f, 1.0f, 3.0f, 65536.0f, 0x1p-126f, 0x1p100f};
#define N_FACTORS (sizeof(unscale_factors) / sizeof(unscale_factors[0]))

/* One call on pool's count elements (copied into src), in place or out of place, at
 * offset off, checked element by element against the reference and the
 * scalar path, flag against the reference and k_nonfinite, guards. */
static void unscale_case(k_dtype_t dtype, size_t count, float factor, int in_place, size_t off, const uint8_t *pool,
                         uint8_t *buf_src, uint8_t *buf_dst, uint8_t *scalar_out, long *checks, long *failures)
{
    size_t size = k_dtype_size(dtype), bytes = count * size;
    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    memset(buf_src, POISON, span);
    memset(buf_dst, POISON, span);
    uint8_t *src = buf_src + GUARD_BYTES + off * size;
    uint8_t *dst = in_place ? src : buf_dst + GUARD_BYTES + ((off + 3) % (MAX_OFFSET + 1)) * size;
    if (count) memcpy(src, pool, bytes);

    int want_flag = ref_nonfinite(dtype, pool, count);
    int got = k_unscale_nonfinite(dst, src, dtype, count, factor);
    (*checks) += 2;
    if (got != want_flag && (*failures)++ < MAX_PRINTED)
        printf("  unscale %s count %zu factor %a in_place %d: flag %d want %d\n", dtype_names[dtype], count,
               (double)factor, in_place, got, want_flag);
    int nf = k_nonfinite(pool, dtype, count);
    if (nf != got && (*failures)++ < MAX_PRINTED)
        printf("  unscale %s count %zu: flag %d but k_nonfinite %d\n", dtype_names[dtype], count, got, nf);

    /* the scalar path on a copy, for the bit-for-bit comparison */
    k_isa_t isa = k_isa_current();
    if (count) memcpy(scalar_out, pool, bytes);
    k_isa_set(K_ISA_SCALAR);
    int scalar_flag = k_unscale_nonfinite(scalar_out, scalar_out, dtype, count, factor);
    k_isa_set(isa);
    (*checks)++;
    if (scalar_flag != got && (*failures)++ < MAX_PRINTED)
        printf("  unscale %s count %zu: flag %d, scalar path %d\n", dtype_names[dtype], count, got, scalar_flag);

    for (size_t i = 0; i < count; i++) {
        uint64_t want = narrow(dtype, ref_mul_f32(widen(dtype, get_bits(dtype, pool, i)), factor));
        uint64_t have = get_bits(dtype, dst, i), scalar = get_bits(dtype, scalar_out, i);
        (*checks)++;
        if ((have != want || scalar != want) && (*failures)++ < MAX_PRINTED)
            printf("  unscale %s count %zu factor %a in_place %d [%zu]: src %llx got %llx scalar path %llx "
                   "want %llx\n",
                   dtype_names[dtype], count, (double)factor, in_place, i, (unsigned long long)get_bits(dtype, pool, i),
                   (unsigned long long)have, (unsigned long long)scalar, (unsigned long long)want);
    }

    (*checks)++;
    if (!guards_intact(dst - GUARD_BYTES, bytes) && (*failures)++ < MAX_PRINTED)
        printf("  unscale %s count %zu in_place %d: guard overwritten\n", dtype_names[dtype], count, in_place);
    if (!in_place) {
        (*checks)++;
        if (count && memcmp(src, pool, bytes) != 0 && (*failures)++ < MAX_PRINTED)
            printf("  unscale %s count %zu: src changed\n", dtype_names[dtype], count);
    }
}

static void test_unscale_isa(k_isa_t isa)
{
    size_t span = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * 4;
    uint8_t *pool = malloc(MAX_COUNT * 4), *buf_src = malloc(span), *buf_dst = malloc(span);
    uint8_t *scalar_out = malloc(MAX_COUNT * 4);
    long checks = 0, failures = 0;
    for (size_t d = 0; d < sizeof(unscale_dtypes) / sizeof(unscale_dtypes[0]); d++) {
        k_dtype_t dtype = unscale_dtypes[d];
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = count_at(k);
            for (int finite_only = 0; finite_only < 2; finite_only++) {
                for (size_t i = 0; i < count; i++)
                    put_bits(dtype, pool, i, finite_only ? random_finite(&rng, dtype) : random_any(&rng, dtype));
                float factor = unscale_factors[(k + (size_t)finite_only * 3) % N_FACTORS];
                for (int in_place = 0; in_place < 2; in_place++)
                    unscale_case(dtype, count, factor, in_place, (k + (size_t)in_place) % (MAX_OFFSET + 1), pool,
                                 buf_src, buf_dst, scalar_out, &checks, &failures);
            }
        }
        /* one non-finite at every position: the flag of every lane and tail */
        for (size_t count = 1; count <= SMALL_COUNT_MAX; count++) {
            for (size_t pos = 0; pos < count; pos++) {
                for (size_t i = 0; i < count; i++) put_bits(dtype, pool, i, random_finite(&rng, dtype));
                put_bits(dtype, pool, pos, nonfinite_bits[float_row(dtype)][(pos + count) % 8]);
                unscale_case(dtype, count, unscale_factors[pos % N_FACTORS], (int)(pos % 2), count % 8, pool, buf_src,
                             buf_dst, scalar_out, &checks, &failures);
            }
        }
    }
    free(pool);
    free(buf_src);
    free(buf_dst);
    free(scalar_out);
    char what[64];
    snprintf(what, sizeof(what), "unscale %-6s f32/f16/bf16, in/out of place", k_isa_name(isa));
    report(what, checks, failures);
}

/* ---- k_sgd_step_mixed ----------------------------------------------------- */

typedef struct {
    float lr, momentum, weight_decay;
    int nesterov;
} hyper_t;

/* Every combination of weight decay, momentum and Nesterov (which only
 * counts with momentum, and must be ignored without). */
static const hyper_t hypers[] = {
    {0.1f, 0.0f, 0.0f, 0}, {0.05f, 0.0f, 0.0f, 1}, {1.5f, 0.0f, 5e-4f, 0}, {0.01f, 0.0f, 0.25f, 1},
    {0.1f, 0.9f, 0.0f, 0}, {0.05f, 0.9f, 0.0f, 1}, {0.1f, 0.9f, 5e-4f, 0}, {1.5f, 0.5f, 0.25f, 1},
};
#define N_HYPERS (sizeof(hypers) / sizeof(hypers[0]))

static const float grad_scales[] = {1.0f, 0x1p-10f, 1.0f / 3.0f, 65536.0f};

/* One rounded operation, noting whether it met two NaNs (see the top). */
static float op_mul(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_mul_f32(a, b);
}
static float op_add(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_add_f32(a, b);
}
static float op_sub(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_sub_f32(a, b);
}

/* One element of k_sgd_step_mixed as k_cpu.h states it: updates *p and
 * (with momentum) *m; *meet_m / *meet_p say whether two NaNs met on the way
 * to the new m / p. */
static void sgd_mixed_ref(float *p, float *m, float grad, float scale, const hyper_t *h, int *meet_m, int *meet_p)
{
    int meet = 0;
    float g = op_mul(grad, scale, &meet);
    if (h->weight_decay != 0.0f) g = op_add(g, op_mul(h->weight_decay, *p, &meet), &meet);
    float step = g;
    *meet_m = 0;
    if (h->momentum != 0.0f) {
        float mv = op_add(op_mul(h->momentum, *m, &meet), g, &meet);
        *m = mv;
        *meet_m = meet;
        step = h->nesterov ? op_add(g, op_mul(h->momentum, mv, &meet), &meet) : mv;
    }
    *p = op_sub(*p, op_mul(h->lr, step, &meet), &meet);
    *meet_p = meet;
}

/* Parameters: random_element's f32 mix (specials, NaN payloads, huge and
 * tiny values) plus values at the edges of f16 and bf16. */
static float random_param(test_rng_t *gen)
{
    static const float edges[] = {
        65504.0f,
        -65504.0f,
        0x1.ffdffep+15f /* rounds to 65504 in f16 */,
        65520.0f /* to inf */,
        -65520.0f,
        70000.0f,
        1e10f,
        0x1.002p0f /* f16 tie */,
        0x1.01p0f /* bf16 tie */,
        0x1p-24f,
        0x1p-25f,
        0x1.8p-25f,
        3e38f,
        -0.0f,
        0x1p-149f,
        0x1.ffp127f /* bf16 tie to inf */,
    };
    if (test_rng_below(gen, 8) == 0) return edges[test_rng_below(gen, sizeof(edges) / sizeof(edges[0]))];
    float f;
    random_element(gen, K_DTYPE_F32, &f);
    return f;
}

/* Compares an output element: exact bits, or (where two NaNs met) any NaN. */
static int out_ok(k_dtype_t dtype, uint64_t got, uint64_t want, int meet)
{
    return meet ? is_nan_elem(dtype, got) : got == want;
}

/* Buffers for one sgd case: param, momentum and the copy sit in guarded,
 * poisoned buffers; the scalar path's outputs in plain arrays. */
typedef struct {
    uint8_t *param_buf, *mom_buf, *lp_buf, *grad;
    float *param0, *mom0;       /* inputs */
    float *want_p, *want_m;     /* reference */
    float *scalar_p, *scalar_m; /* scalar path */
    uint8_t *scalar_lp;
    uint8_t *meet_m, *meet_p;
    long met; /* elements where two NaNs met: any NaN passes there */
} sgd_bufs_t;

static void sgd_case(k_dtype_t grad_dtype, int lp_dtype /* -1: no copy */, const hyper_t *h, float scale, size_t count,
                     size_t off, sgd_bufs_t *b, long *checks, long *failures)
{
    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * sizeof(float);
    int use_mom = h->momentum != 0.0f;
    k_dtype_t lp_dt = lp_dtype < 0 ? K_DTYPE_F32 : (k_dtype_t)lp_dtype;
    size_t lp_size = k_dtype_size(lp_dt);
    memset(b->param_buf, POISON, span);
    memset(b->mom_buf, POISON, span);
    memset(b->lp_buf, POISON, span);
    float *param = (float *)(b->param_buf + GUARD_BYTES) + off;
    float *mom = use_mom ? (float *)(b->mom_buf + GUARD_BYTES) + (off + 1) % (MAX_OFFSET + 1) : NULL;
    uint8_t *lp = lp_dtype < 0 ? NULL : b->lp_buf + GUARD_BYTES + ((off + 2) % (MAX_OFFSET + 1)) * lp_size;

    for (size_t i = 0; i < count; i++) {
        b->param0[i] = random_param(&rng);
        b->mom0[i] = use_mom ? random_param(&rng) : 0.0f;
        put_bits(grad_dtype, b->grad, i, random_any(&rng, grad_dtype));
        b->want_p[i] = b->param0[i];
        b->want_m[i] = b->mom0[i];
        int mm, mp;
        sgd_mixed_ref(&b->want_p[i], &b->want_m[i], widen(grad_dtype, get_bits(grad_dtype, b->grad, i)), scale, h, &mm,
                      &mp);
        b->meet_m[i] = (uint8_t)mm;
        b->meet_p[i] = (uint8_t)mp;
        b->met += mp;
    }
    size_t fbytes = count * sizeof(float);
    if (count) {
        memcpy(param, b->param0, fbytes);
        if (mom) memcpy(mom, b->mom0, fbytes);
        memcpy(b->scalar_p, b->param0, fbytes);
        memcpy(b->scalar_m, b->mom0, fbytes);
    }
    k_sgd_step_mixed(param, lp, lp_dt, b->grad, grad_dtype, scale, mom, count, h->lr, h->momentum, h->weight_decay,
                     h->nesterov);
    k_isa_t isa = k_isa_current();
    k_isa_set(K_ISA_SCALAR);
    k_sgd_step_mixed(b->scalar_p, lp ? b->scalar_lp : NULL, lp_dt, b->grad, grad_dtype, scale,
                     use_mom ? b->scalar_m : NULL, count, h->lr, h->momentum, h->weight_decay, h->nesterov);
    k_isa_set(isa);

    const char *lp_name = lp_dtype < 0 ? "none" : dtype_names[lp_dt];
    for (size_t i = 0; i < count; i++) {
        int mp = b->meet_p[i], mm = b->meet_m[i];
        uint64_t want_p = f32_bits(b->want_p[i]);
        int ok = out_ok(K_DTYPE_F32, f32_bits(param[i]), want_p, mp) &&
                 out_ok(K_DTYPE_F32, f32_bits(b->scalar_p[i]), want_p, mp);
        if (use_mom)
            ok = ok && out_ok(K_DTYPE_F32, f32_bits(mom[i]), f32_bits(b->want_m[i]), mm) &&
                 out_ok(K_DTYPE_F32, f32_bits(b->scalar_m[i]), f32_bits(b->want_m[i]), mm);
        uint64_t want_lp = narrow(lp_dt, b->want_p[i]);
        if (lp)
            ok = ok && out_ok(lp_dt, get_bits(lp_dt, lp, i), want_lp, mp) &&
                 out_ok(lp_dt, get_bits(lp_dt, b->scalar_lp, i), want_lp, mp);
        (*checks)++;
        if (!ok && (*failures)++ < MAX_PRINTED)
            printf("  sgd_mixed grad %s lp %s lr %g mom %g wd %g nesterov %d scale %a count %zu [%zu]: "
                   "p %a m %a g %llx -> p %a m %a lp %llx (scalar path p %a m %a lp %llx), want p %a m %a "
                   "lp %llx (NaNs met: %d %d)\n",
                   dtype_names[grad_dtype], lp_name, (double)h->lr, (double)h->momentum, (double)h->weight_decay,
                   h->nesterov, (double)scale, count, i, (double)b->param0[i], (double)b->mom0[i],
                   (unsigned long long)get_bits(grad_dtype, b->grad, i), (double)param[i],
                   use_mom ? (double)mom[i] : 0.0, lp ? (unsigned long long)get_bits(lp_dt, lp, i) : 0ull,
                   (double)b->scalar_p[i], (double)b->scalar_m[i],
                   lp ? (unsigned long long)get_bits(lp_dt, b->scalar_lp, i) : 0ull, (double)b->want_p[i],
                   (double)b->want_m[i], lp ? (unsigned long long)want_lp : 0ull, mm, mp);
    }

    (*checks)++;
    int guards = guards_intact(b->param_buf + off * sizeof(float), fbytes) &&
                 guards_intact(b->mom_buf + ((off + 1) % (MAX_OFFSET + 1)) * sizeof(float), use_mom ? fbytes : 0) &&
                 guards_intact(b->lp_buf + ((off + 2) % (MAX_OFFSET + 1)) * lp_size, lp ? count * lp_size : 0);
    if (!use_mom) /* no momentum: the (unused) buffer is not ours to touch */
        for (size_t i = 0; i < span; i++) guards &= b->mom_buf[i] == POISON;
    if (!guards && (*failures)++ < MAX_PRINTED)
        printf("  sgd_mixed grad %s lp %s count %zu: guard overwritten\n", dtype_names[grad_dtype], lp_name, count);
}

/* Every grad dtype x copy dtype (or none) x hyper-parameter mix x count. */
static void test_sgd_mixed_isa(k_isa_t isa, sgd_bufs_t *b)
{
    long checks = 0, failures = 0;
    b->met = 0;
    for (size_t gd = 0; gd < 3; gd++) {
        for (int lp = -1; lp < 3; lp++) {
            for (size_t h = 0; h < N_HYPERS; h++) {
                for (size_t k = 0; k < N_COUNTS; k++) {
                    float scale = grad_scales[(k + h) % (sizeof(grad_scales) / sizeof(grad_scales[0]))];
                    sgd_case(unscale_dtypes[gd], lp < 0 ? -1 : (int)unscale_dtypes[lp], &hypers[h], scale, count_at(k),
                             (k + h) % (MAX_OFFSET + 1), b, &checks, &failures);
                }
            }
        }
    }
    char what[64];
    snprintf(what, sizeof(what), "sgd_mixed %-6s grad x copy dtype x hyper", k_isa_name(isa));
    report(what, checks, failures);
    printf("     (of which %ld elements met two NaNs in one operation: any NaN passes there)\n", b->met);
}

/* With f32 gradients, scale 1 and no copy the step is k_sgd_step, bit for
 * bit. Inputs with at most one NaN per element (and then no inf, which
 * could make a second one), so that no operation meets two NaNs and every
 * bit is specified. */
static void test_sgd_mixed_identity(k_isa_t isa, sgd_bufs_t *b)
{
    long checks = 0, failures = 0;
    float *grad = (float *)b->grad;
    for (size_t h = 0; h < N_HYPERS; h++) {
        const hyper_t *hp = &hypers[h];
        int use_mom = hp->momentum != 0.0f;
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = count_at(k), off = k % (MAX_OFFSET + 1);
            float *p1 = b->want_p, *m1 = b->want_m, *p2 = b->scalar_p + off, *m2 = b->scalar_m + off;
            for (size_t i = 0; i < count; i++) {
                float v[3] = {random_param(&rng), f32_from_bits((uint32_t)random_any(&rng, K_DTYPE_F32)),
                              random_param(&rng)};
                int nan_at = -1;
                for (int j = 0; j < 3; j++)
                    if (isnan(v[j]) && nan_at < 0) nan_at = j;
                for (int j = 0; j < 3 && nan_at >= 0; j++)
                    if (j != nan_at && !isfinite(v[j])) v[j] = 1.5f;
                p1[i] = p2[i] = v[0];
                grad[i] = v[1];
                m1[i] = m2[i] = use_mom ? v[2] : 0.0f;
            }
            k_sgd_step(p1, grad, use_mom ? m1 : NULL, count, hp->lr, hp->momentum, hp->weight_decay, hp->nesterov);
            k_sgd_step_mixed(p2, NULL, K_DTYPE_F32, grad, K_DTYPE_F32, 1.0f, use_mom ? m2 : NULL, count, hp->lr,
                             hp->momentum, hp->weight_decay, hp->nesterov);
            for (size_t i = 0; i < count; i++) {
                checks++;
                if ((f32_bits(p1[i]) != f32_bits(p2[i]) || f32_bits(m1[i]) != f32_bits(m2[i])) &&
                    failures++ < MAX_PRINTED)
                    printf("  sgd_mixed = sgd_step hyper %zu count %zu [%zu]: p %a, k_sgd_step %a; m %a, "
                           "k_sgd_step "
                           "%a\n",
                           h, count, i, (double)p2[i], (double)p1[i], (double)m2[i], (double)m1[i]);
            }
        }
    }
    char what[64];
    snprintf(what, sizeof(what), "sgd_mixed %-6s = k_sgd_step (f32, scale 1)", k_isa_name(isa));
    report(what, checks, failures);
}

/* Copies of values past a format's range: f16 rounds to inf from 65520
 * (65504 + half an ulp, a tie that goes to even = inf) on, bf16 from
 * 0x1.ffp127; just below, the largest finite value. The step leaves the
 * parameters as they are (zero gradients, no decay or momentum), so the
 * expected copies are constants. 37 elements: vector body and tail. */
static void test_sgd_mixed_overflow(k_isa_t isa)
{
    static const struct {
        float p;
        uint16_t f16, bf16;
    } cases[] = {
        {65504.0f, 0x7BFF, 0x4780},    {-65504.0f, 0xFBFF, 0xC780},        {0x1.ffdffep+15f, 0x7BFF, 0x4780},
        {65520.0f, 0x7C00, 0x4780},    {-65520.0f, 0xFC00, 0xC780},        {70000.0f, 0x7C00, 0x4789},
        {1e5f, 0x7C00, 0x47C3},        {-1e10f, 0xFC00, 0xD015},           {0x1.fefffep127f, 0x7C00, 0x7F7F},
        {0x1.ffp127f, 0x7C00, 0x7F80}, {-0x1.fffffep127f, 0xFC00, 0xFF80}, {INFINITY, 0x7C00, 0x7F80},
        {-INFINITY, 0xFC00, 0xFF80},
    };
    enum { N = 37 };
    size_t n_cases = sizeof(cases) / sizeof(cases[0]);
    float param[N];
    uint16_t grad[N], lp[N];
    long checks = 0, failures = 0;
    for (int lp_dtype = K_DTYPE_F16; lp_dtype <= K_DTYPE_BF16; lp_dtype++) {
        for (size_t i = 0; i < N; i++) {
            param[i] = cases[i % n_cases].p;
            grad[i] = (uint16_t)(i % 2 ? 0x8000 : 0); /* +-0 */
        }
        memset(lp, 0xA5, sizeof(lp));
        k_sgd_step_mixed(param, lp, (k_dtype_t)lp_dtype, grad, K_DTYPE_BF16, 0.5f, NULL, N, 0.5f, 0.0f, 0.0f, 0);
        for (size_t i = 0; i < N; i++) {
            uint16_t want = lp_dtype == K_DTYPE_F16 ? cases[i % n_cases].f16 : cases[i % n_cases].bf16;
            checks += 2;
            if (f32_bits(param[i]) != f32_bits(cases[i % n_cases].p) && failures++ < MAX_PRINTED)
                printf("  overflow [%zu]: param %a changed to %a\n", i, (double)cases[i % n_cases].p, (double)param[i]);
            if (lp[i] != want && failures++ < MAX_PRINTED)
                printf("  overflow %s [%zu]: %a -> %04x want %04x\n", dtype_names[lp_dtype], i,
                       (double)cases[i % n_cases].p, lp[i], want);
        }
    }
    char what[64];
    snprintf(what, sizeof(what), "sgd_mixed %-6s f16/bf16 copies past range", k_isa_name(isa));
    report(what, checks, failures);
}

static void test_eltwise_isa(k_isa_t isa); /* below */

void test_mixed_isa(k_isa_t isa)
{
    test_nonfinite_isa(isa);
    test_unscale_isa(isa);

    size_t span = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * sizeof(float);
    size_t fbytes = (MAX_COUNT + MAX_OFFSET) * sizeof(float);
    sgd_bufs_t b = {
        .param_buf = malloc(span),
        .mom_buf = malloc(span),
        .lp_buf = malloc(span),
        .grad = malloc(fbytes),
        .param0 = malloc(fbytes),
        .mom0 = malloc(fbytes),
        .want_p = malloc(fbytes),
        .want_m = malloc(fbytes),
        .scalar_p = malloc(fbytes),
        .scalar_m = malloc(fbytes),
        .scalar_lp = malloc(fbytes),
        .meet_m = malloc(MAX_COUNT),
        .meet_p = malloc(MAX_COUNT),
    };
    test_sgd_mixed_isa(isa, &b);
    test_sgd_mixed_identity(isa, &b);
    void *all[] = {b.param_buf, b.mom_buf,  b.lp_buf,   b.grad,      b.param0, b.mom0,  b.want_p,
                   b.want_m,    b.scalar_p, b.scalar_m, b.scalar_lp, b.meet_m, b.meet_p};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) free(all[i]);
    test_sgd_mixed_overflow(isa);
    test_eltwise_isa(isa);
}

/* ---- k_relu, k_relu_backward, k_add -------------------------------------------
 *
 * The cpu backend's element-wise ops against the definitions written here:
 * relu keeps an element unless it is below 0 (NaN and -0 pass with their
 * bits), which then becomes +0; relu's gradient is dy where y > 0, else
 * +0; add widens both, adds once in fp32, then (relu) the same relu,
 * rounded once. A NaN sum may be any NaN; everything else exact, and the
 * path under test must give the scalar path's bits (NaNs included, but for
 * the sum of two NaNs, whose payload k_cpu.h leaves open). Every
 * count 0..70 and the large ones, misaligned, out of place and in place,
 * guards checked. Its own random stream, so the groups before it keep
 * their inputs. */

enum { ELT_RELU, ELT_RELU_BACKWARD, ELT_ADD, ELT_ADD_RELU, ELT_OPS };
static const char *const elt_names[ELT_OPS] = {"relu", "relu backward", "add", "add+relu"};

static int elt_run(int op, void *y, const void *a, const void *b, k_dtype_t dtype, size_t count)
{
    switch (op) {
    case ELT_RELU: return k_relu(y, a, dtype, count);
    case ELT_RELU_BACKWARD: return k_relu_backward(y, a, b, dtype, count);
    default: return k_add(y, a, b, dtype, count, op == ELT_ADD_RELU);
    }
}

/* The expected bits of element (a, b); *any_nan: only a NaN is asked for;
 * *meet: an addition of two NaNs, whose payload k_cpu.h leaves open (so
 * not compared with the scalar path either). */
static uint64_t elt_ref(int op, k_dtype_t dtype, uint64_t a, uint64_t b, int *any_nan, int *meet)
{
    *any_nan = 0;
    *meet = 0;
    const float va = widen(dtype, a), vb = widen(dtype, b);
    switch (op) {
    case ELT_RELU: return va < 0.0f ? 0 : a;
    case ELT_RELU_BACKWARD: return va > 0.0f ? b : 0;
    default: {
        float sum = ref_add_f32(va, vb);
        if (op == ELT_ADD_RELU && sum < 0.0f) sum = 0.0f;
        *any_nan = isnan(sum);
        *meet = isnan(va) && isnan(vb);
        return narrow(dtype, sum);
    }
    }
}

static void test_eltwise_isa(k_isa_t isa)
{
    static const k_dtype_t dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
    test_rng_t gen = test_rng_seeded(TEST_RNG_SEED ^ UINT64_C(0xE17));
    const size_t max_bytes = (65537 + MAX_OFFSET) * 4;
    uint8_t *a = malloc(max_bytes), *b = malloc(max_bytes), *buf = malloc(2 * GUARD_BYTES + max_bytes);
    uint8_t *scalar = malloc(max_bytes);
    long checks = 0, failures = 0;
    for (size_t d = 0; d < 3; d++) {
        const k_dtype_t dt = dtypes[d];
        const size_t size = k_dtype_size(dt);
        for (size_t k = 0; k < N_COUNTS; k++) {
            const size_t count = count_at(k), off = k % (MAX_OFFSET + 1);
            for (size_t i = 0; i < count; i++) {
                /* Mostly random; every 5th a pair that cancels (a zero sum). */
                const uint64_t x = random_any(&gen, dt);
                put_bits(dt, a, i, x);
                put_bits(dt, b, i, i % 5 == 4 ? x ^ (UINT64_C(1) << (size * 8 - 1)) : random_any(&gen, dt));
            }
            for (int op = 0; op < ELT_OPS; op++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    uint8_t *y = buf + GUARD_BYTES + off * size;
                    memset(buf, POISON, 2 * GUARD_BYTES + max_bytes);
                    /* in place: the output is the last input (x, dy or b) */
                    const uint8_t *in_a = a, *in_b = b;
                    if (in_place) {
                        memcpy(y, op == ELT_RELU ? a : b, count * size);
                        if (op == ELT_RELU)
                            in_a = y;
                        else
                            in_b = y;
                    }
                    int rc = elt_run(op, y, in_a, in_b, dt, count);
                    k_isa_set(K_ISA_SCALAR);
                    int rc_scalar = elt_run(op, scalar, a, b, dt, count);
                    k_isa_set(isa);
                    checks++;
                    long wrong = rc != 0 || rc_scalar != 0 || !guards_intact(buf + off * size, count * size);
                    for (size_t i = 0; i < count; i++) {
                        int any_nan, meet;
                        const uint64_t want = elt_ref(op, dt, get_bits(dt, a, i), get_bits(dt, b, i), &any_nan, &meet);
                        const uint64_t got = get_bits(dt, y, i);
                        wrong += (any_nan ? !is_nan_elem(dt, got) : got != want) ||
                                 (!meet && got != get_bits(dt, scalar, i));
                        checks++;
                    }
                    if (wrong && failures++ < MAX_PRINTED)
                        printf("  %s %s count %zu%s on %s: %ld wrong\n", elt_names[op], dtype_names[dt], count,
                               in_place ? " in place" : "", k_isa_name(isa), wrong);
                }
        }
    }
    free(a), free(b), free(buf), free(scalar);
    char what[64];
    snprintf(what, sizeof(what), "relu/relu backward/add %s", k_isa_name(isa));
    report(what, checks, failures);
}

/* ---- the API's edges -------------------------------------------------------- */

static int all_poison(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != POISON) return 0;
    return 1;
}

void test_mixed_api(void)
{
    long checks = 0, failures = 0;
#define EXPECT(cond, ...)                          \
    do {                                           \
        checks++;                                  \
        if (!(cond) && failures++ < MAX_PRINTED) { \
            printf("  ");                          \
            printf(__VA_ARGS__);                   \
            printf("\n");                          \
        }                                          \
    } while (0)

    /* count 0: nothing read or written, NULL allowed */
    for (int dt = 0; dt < K_DTYPE_COUNT; dt++)
        EXPECT(k_nonfinite(NULL, (k_dtype_t)dt, 0) == 0, "k_nonfinite(NULL, %s, 0) != 0", dtype_names[dt]);
    for (size_t d = 0; d < 3; d++)
        EXPECT(k_unscale_nonfinite(NULL, NULL, unscale_dtypes[d], 0, 2.0f) == 0, "unscale count 0 %s",
               dtype_names[unscale_dtypes[d]]);
    k_sgd_step_mixed(NULL, NULL, K_DTYPE_F16, NULL, K_DTYPE_BF16, 1.0f, NULL, 0, 0.1f, 0.9f, 1e-4f, 1);
    EXPECT(k_relu(NULL, NULL, K_DTYPE_BF16, 0) == 0 && k_relu_backward(NULL, NULL, NULL, K_DTYPE_F16, 0) == 0 &&
               k_add(NULL, NULL, NULL, K_DTYPE_F32, 0, 1) == 0,
           "relu/add count 0");
    {
        uint8_t out[16];
        memset(out, POISON, sizeof(out));
        const uint8_t in[16] = {0};
        EXPECT(k_relu(out, in, K_DTYPE_F64, 2) == -1 && k_relu_backward(out, in, in, K_DTYPE_I32, 2) == -1 &&
                   k_add(out, in, in, K_DTYPE_U8, 2, 0) == -1 && all_poison(out, sizeof(out)),
               "relu/add: another dtype accepted or written");
    }

    /* out-of-range dtypes: -1 */
    uint8_t any[64];
    memset(any, 0xFF, sizeof(any));
    EXPECT(k_nonfinite(any, K_DTYPE_COUNT, 4) == -1, "k_nonfinite(K_DTYPE_COUNT) != -1");
    EXPECT(k_nonfinite(any, (k_dtype_t)-1, 4) == -1, "k_nonfinite(-1) != -1");

    /* the integers are always finite, whatever their bits look like */
    static const uint64_t looks_bad[] = {0xFFFFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7F8000007F800000,
                                         0x7C007C007C007C00};
    uint64_t ints[41];
    for (size_t i = 0; i < 41; i++) ints[i] = looks_bad[i % 4];
    for (int dt = K_DTYPE_I32; dt < K_DTYPE_COUNT; dt++) /* i32 .. bool */
        EXPECT(k_nonfinite(ints, (k_dtype_t)dt, 41) == 0, "k_nonfinite(%s) != 0", dtype_names[dt]);

    /* unscale refuses the other dtypes and writes nothing */
    static const int refused[] = {K_DTYPE_F64, K_DTYPE_I32, K_DTYPE_I64,  K_DTYPE_U8,    K_DTYPE_I8,
                                  K_DTYPE_I16, K_DTYPE_U16, K_DTYPE_BOOL, K_DTYPE_COUNT, -1};
    uint8_t dst[2 * GUARD_BYTES + 64];
    for (size_t r = 0; r < sizeof(refused) / sizeof(refused[0]); r++) {
        memset(dst, POISON, sizeof(dst));
        int got = k_unscale_nonfinite(dst + GUARD_BYTES, any, (k_dtype_t)refused[r], 8, 0.5f);
        EXPECT(got == -1 && all_poison(dst, sizeof(dst)), "unscale dtype %d: returned %d or wrote", refused[r], got);
    }

    /* sgd_mixed refuses bad grad dtypes, and bad copy dtypes when there is
     * a copy: nothing written */
    float param[8], mom[8], grad[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t lp[64];
    for (size_t r = 0; r < sizeof(refused) / sizeof(refused[0]); r++) {
        memset(param, POISON, sizeof(param));
        memset(mom, POISON, sizeof(mom));
        memset(lp, POISON, sizeof(lp));
        k_sgd_step_mixed(param, lp, K_DTYPE_F16, grad, (k_dtype_t)refused[r], 1.0f, mom, 8, 0.1f, 0.9f, 0.0f, 0);
        EXPECT(all_poison((uint8_t *)param, sizeof(param)) && all_poison((uint8_t *)mom, sizeof(mom)) &&
                   all_poison(lp, sizeof(lp)),
               "sgd_mixed grad dtype %d wrote", refused[r]);
        k_sgd_step_mixed(param, lp, (k_dtype_t)refused[r], grad, K_DTYPE_F32, 1.0f, mom, 8, 0.1f, 0.9f, 0.0f, 0);
        EXPECT(all_poison((uint8_t *)param, sizeof(param)) && all_poison((uint8_t *)mom, sizeof(mom)) &&
                   all_poison(lp, sizeof(lp)),
               "sgd_mixed lp dtype %d wrote", refused[r]);
    }
    /* ... but without a copy the copy's dtype is ignored */
    float p1[8], p2[8];
    for (size_t i = 0; i < 8; i++) p1[i] = p2[i] = (float)i - 3.5f;
    k_sgd_step(p1, grad, NULL, 8, 0.1f, 0.0f, 0.0f, 0);
    k_sgd_step_mixed(p2, NULL, K_DTYPE_COUNT, grad, K_DTYPE_F32, 1.0f, NULL, 8, 0.1f, 0.0f, 0.0f, 0);
    EXPECT(memcmp(p1, p2, sizeof(p1)) == 0, "sgd_mixed without a copy looked at its dtype");
#undef EXPECT
    report("mixed api: count 0, refused dtypes", checks, failures);
}
