/*
 * mixed.c - the mixed-precision kernels, bit for bit, on one ISA
 * (test_mixed_isa) and at the API's edges (test_mixed_api); the groups
 * live in this file (k_nonfinite, k_unscale_nonfinite), mixed_sgd.c and
 * mixed_eltwise.c, their helpers in mixed_common.c (mixed.h):
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
#include "mixed.h"

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
               count ? (unsigned long long)mixed_get_bits(dtype, src, pos) : 0ull, got, want);
}

static void test_nonfinite_isa(k_isa_t isa)
{
    uint8_t *raw = malloc((MAX_COUNT + MAX_OFFSET) * 8);
    long checks = 0, failures = 0;
    for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
        k_dtype_t dtype = float_dtypes[d];
        size_t size = k_dtype_size(dtype);
        const uint64_t *bad = mixed_nonfinite_bits[mixed_float_row(dtype)];

        /* one non-finite at every position of a finite array */
        for (size_t count = 1; count <= 100; count++) {
            uint8_t *src = raw + (count % (MAX_OFFSET + 1)) * size;
            for (size_t i = 0; i < count; i++) mixed_put_bits(dtype, src, i, mixed_random_finite(&rng, dtype));
            nonfinite_expect(src, dtype, count, 0, "background", 0, &checks, &failures);
            for (size_t pos = 0; pos < count; pos++) {
                uint64_t keep = mixed_get_bits(dtype, src, pos);
                for (int s = 0; s < 8; s++) {
                    mixed_put_bits(dtype, src, pos, bad[s]);
                    nonfinite_expect(src, dtype, count, 1, "planted", pos, &checks, &failures);
                }
                mixed_put_bits(dtype, src, pos, keep);
            }
        }

        /* large counts: around every block edge up to 8 KiB elements in,
         * the middle, and each of the last 70 elements */
        static const size_t big[] = {4133, 8195, MAX_COUNT};
        for (size_t b = 0; b < sizeof(big) / sizeof(big[0]); b++) {
            size_t count = big[b];
            uint8_t *src = raw + (b + 1) * size;
            for (size_t i = 0; i < count; i++) mixed_put_bits(dtype, src, i, mixed_random_finite(&rng, dtype));
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
                uint64_t keep = mixed_get_bits(dtype, src, pos);
                for (int s = 0; s < 8; s += 3) { /* inf, -quiet NaN, all-ones NaN */
                    mixed_put_bits(dtype, src, pos, bad[s]);
                    nonfinite_expect(src, dtype, count, 1, "large planted", pos, &checks, &failures);
                }
                mixed_put_bits(dtype, src, pos, keep);
            }
        }

        /* finite extremes, each alone and mixed: never a hit */
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = mixed_count_at(k);
            uint8_t *src = raw + (k % (MAX_OFFSET + 1)) * size;
            for (int e = 0; e <= 8; e++) {
                for (size_t i = 0; i < count; i++)
                    mixed_put_bits(
                        dtype, src, i,
                        mixed_finite_bits[mixed_float_row(dtype)][e < 8 ? (size_t)e : test_rng_below(&rng, 8)]);
                nonfinite_expect(src, dtype, count, 0, "finite extremes", 0, &checks, &failures);
            }
        }

        /* random arrays (one element in ten non-finite, so small counts
         * have both answers): the reference and the scalar path */
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = mixed_count_at(k);
            uint8_t *src = raw + (k % (MAX_OFFSET + 1)) * size;
            int sparse = k % 2; /* odd k: one in ten thousand non-finite */
            for (size_t i = 0; i < count; i++)
                mixed_put_bits(dtype, src, i,
                               sparse && test_rng_below(&rng, 1000) ? mixed_random_finite(&rng, dtype)
                                                                    : mixed_random_any(&rng, dtype));
            int want = mixed_ref_nonfinite(dtype, src, count);
            nonfinite_expect(src, dtype, count, want, "random", 0, &checks, &failures);
            checks++;
            int scalar = mixed_nonfinite_scalar(src, dtype, count);
            if (scalar != want && failures++ < MAX_PRINTED)
                printf("  nonfinite %s random count %zu: scalar path %d want %d\n", dtype_names[dtype], count, scalar,
                       want);
        }
    }
    free(raw);
    report(checks, failures, "nonfinite %-6s planted, finite, random", k_isa_name(isa));
}

/* ---- k_unscale_nonfinite -------------------------------------------------- */

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

    int want_flag = mixed_ref_nonfinite(dtype, pool, count);
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
        uint64_t want = mixed_narrow(dtype, ref_mul_f32(mixed_widen(dtype, mixed_get_bits(dtype, pool, i)), factor));
        uint64_t have = mixed_get_bits(dtype, dst, i), scalar = mixed_get_bits(dtype, scalar_out, i);
        (*checks)++;
        if ((have != want || scalar != want) && (*failures)++ < MAX_PRINTED)
            printf("  unscale %s count %zu factor %a in_place %d [%zu]: src %llx got %llx scalar path %llx "
                   "want %llx\n",
                   dtype_names[dtype], count, (double)factor, in_place, i,
                   (unsigned long long)mixed_get_bits(dtype, pool, i), (unsigned long long)have,
                   (unsigned long long)scalar, (unsigned long long)want);
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
    for (size_t d = 0; d < N_GRAD_DTYPES; d++) {
        k_dtype_t dtype = mixed_grad_dtypes[d];
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = mixed_count_at(k);
            for (int finite_only = 0; finite_only < 2; finite_only++) {
                for (size_t i = 0; i < count; i++)
                    mixed_put_bits(dtype, pool, i,
                                   finite_only ? mixed_random_finite(&rng, dtype) : mixed_random_any(&rng, dtype));
                float factor = unscale_factors[(k + (size_t)finite_only * 3) % N_FACTORS];
                for (int in_place = 0; in_place < 2; in_place++)
                    unscale_case(dtype, count, factor, in_place, (k + (size_t)in_place) % (MAX_OFFSET + 1), pool,
                                 buf_src, buf_dst, scalar_out, &checks, &failures);
            }
        }
        /* one non-finite at every position: the flag of every lane and tail */
        for (size_t count = 1; count <= SMALL_COUNT_MAX; count++) {
            for (size_t pos = 0; pos < count; pos++) {
                for (size_t i = 0; i < count; i++) mixed_put_bits(dtype, pool, i, mixed_random_finite(&rng, dtype));
                mixed_put_bits(dtype, pool, pos, mixed_nonfinite_bits[mixed_float_row(dtype)][(pos + count) % 8]);
                unscale_case(dtype, count, unscale_factors[pos % N_FACTORS], (int)(pos % 2), count % 8, pool, buf_src,
                             buf_dst, scalar_out, &checks, &failures);
            }
        }
    }
    free(pool);
    free(buf_src);
    free(buf_dst);
    free(scalar_out);
    report(checks, failures, "unscale %-6s f32/f16/bf16, in/out of place", k_isa_name(isa));
}

void test_mixed_isa(k_isa_t isa)
{
    test_nonfinite_isa(isa);
    test_unscale_isa(isa);
    mixed_test_sgd_isa(isa);
    mixed_test_eltwise_isa(isa);
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
        EXPECT(k_unscale_nonfinite(NULL, NULL, mixed_grad_dtypes[d], 0, 2.0f) == 0, "unscale count 0 %s",
               dtype_names[mixed_grad_dtypes[d]]);
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
    report(checks, failures, "mixed api: count 0, refused dtypes");
}
