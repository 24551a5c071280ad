/*
 * test_twin_step.c - the CPU twins of the training-step kernels
 * (k_twin_* of k_cuda_step.h) against what they reproduce:
 *
 *  - k_twin_sgd_step_mixed against k_sgd_step_mixed on every ISA path the
 *    CPU has, bit for bit (a NaN equals any NaN: k_cpu.h leaves the payload
 *    open where two NaNs meet): every gradient dtype x copy dtype (and no
 *    copy) x hyper-parameter mix, counts 0..70 and large odd ones, NaN/inf
 *    in params, gradients and momentum, the twin's buffers at odd byte
 *    offsets, its copy poisoned, guards around every output;
 *  - k_twin_nonfinite against k_nonfinite (f32, f16, bf16, f64; one inf or
 *    NaN of each kind planted anywhere, or none; the flag is only ever set;
 *    the integer dtypes leave it), and k_twin_unscale_nonfinite against
 *    k_unscale_nonfinite (values and flag; in place and out of place);
 *  - k_twin_input_normalize against tr_aug_store's normalisation
 *    (trainer/data/augment.c: (v / 255.0f - mean) / std in fp32, then
 *    k_f32_to_f16 / k_f32_to_bf16), bit for bit, every uint8 value in every
 *    channel, channels 1..4 -> src..8, std <= 0 (only / 255), padding +0;
 *  - k_twin_softmax_xent against k_softmax_xent (kernels/cpu, the cpu
 *    backend's loss: the same k_train_numeric.h functions with sequential
 *    sums), which sums in another order (the twin replays a warp's 32
 *    lanes), so within a
 *    bound: |twin - ref| <= 1 ulp of the output dtype at ref + 2^-40 *
 *    grad_scale / n for dlogits, 1 ulp of f32 + 2^-40 (|ref| + 1) for the
 *    loss; a NaN or inf must be the same NaN-ness / inf. Most elements come
 *    out bit-identical (the count is printed). Bad labels: the row's dlogits
 *    NaN, the loss NaN, label_error = 1 + the first bad row, other rows as
 *    without the bad label; k_softmax_xent returns 1 + the first bad row
 *    and writes nothing;
 *  - bad arguments: K_CUDA_ERR_INVALID_VALUE (k_softmax_xent: -1).
 *
 *   test_twin_step     exit 0 pass, 1 fail
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "floats.h"
#include "k_cpu.h"
#include "k_cuda_step.h"
#include "rand.h"
#include "twin_data.h"

#define GUARD 32

static test_rng_t rng;
static twin_report_t report = {"twin", "reference", 20, 0};

/* ---- buffers with guards ----------------------------------------------------------- */

typedef struct {
    unsigned char *base; /* malloc'ed */
    unsigned char *data; /* base + GUARD + offset */
    size_t bytes;
} buf_t;

static buf_t buf_new(size_t bytes, size_t offset)
{
    buf_t b;
    b.bytes = bytes;
    b.base = malloc(bytes + 2 * GUARD + 16);
    if (!b.base) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(b.base, TWIN_GUARD_BYTE, bytes + 2 * GUARD + 16);
    b.data = b.base + GUARD + offset;
    return b;
}

static int buf_guards_ok(const buf_t *b)
{
    for (const unsigned char *p = b->base; p < b->data; p++)
        if (*p != TWIN_GUARD_BYTE) return 0;
    for (size_t i = 0; i < GUARD; i++)
        if (b->data[b->bytes + i] != TWIN_GUARD_BYTE) return 0;
    return 1;
}

static void buf_free(buf_t *b) { free(b->base); }

static void fill_random(unsigned char *p, k_dtype_t dtype, size_t count, int specials)
{
    const size_t size = k_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) twin_random_element(&rng, dtype, specials, p + i * size);
}

static const size_t large_counts[] = {1000, 4099, 65537};
#define N_LARGE (sizeof(large_counts) / sizeof(large_counts[0]))

/* ---- SGD ----------------------------------------------------------------------------- */

static const twin_sgd_case_t sgd_cases[] = {
    {0.1f, 0.9f, 1e-4f, 1, 1.0f / 1024}, {0.1f, 0.9f, 1e-4f, 0, 1.0f}, {0.05f, 0.9f, 0.0f, 1, 0.5f},
    {0.2f, 0.0f, 1e-4f, 0, 1.0f / 1024}, {0.01f, 0.0f, 0.0f, 0, 1.0f}, {0.4f, 0.9f, 5e-4f, 1, 65536.0f},
    {-0.0f, 0.5f, -0.0f, 1, 3.0f},
};
#define N_SGD_CASES (sizeof(sgd_cases) / sizeof(sgd_cases[0]))

static const k_dtype_t half_or_f32[3] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

/* One case: the reference on aligned buffers, the twin on copies at odd
 * offsets; returns the number of mismatching elements. */
static long sgd_one(size_t count, k_dtype_t gd, int lp_choice, const twin_sgd_case_t *c, int specials, k_isa_t isa)
{
    const k_dtype_t ld = lp_choice < 3 ? half_or_f32[lp_choice] : K_DTYPE_F32;
    const int with_lp = lp_choice < 3, with_buf = c->momentum != 0.0f;
    const size_t gs = k_dtype_size(gd), ls = k_dtype_size(ld);
    buf_t p_ref = buf_new(count * 4, 0), p_tw = buf_new(count * 4, 1 + test_rng_below(&rng, 15));
    buf_t m_ref = buf_new(count * 4, 0), m_tw = buf_new(count * 4, 1 + test_rng_below(&rng, 15));
    buf_t g_ref = buf_new(count * gs, 0), g_tw = buf_new(count * gs, 1 + test_rng_below(&rng, 15));
    buf_t l_ref = buf_new(count * ls, 0), l_tw = buf_new(count * ls, 1 + test_rng_below(&rng, 15));
    fill_random(p_ref.data, K_DTYPE_F32, count, specials);
    fill_random(m_ref.data, K_DTYPE_F32, count, specials);
    fill_random(g_ref.data, gd, count, specials);
    memcpy(p_tw.data, p_ref.data, count * 4);
    memcpy(m_tw.data, m_ref.data, count * 4);
    memcpy(g_tw.data, g_ref.data, count * gs);
    memset(l_ref.data, TWIN_POISON_FINITE, count * ls);
    memset(l_tw.data, TWIN_POISON_NAN, count * ls);

    k_isa_set(isa);
    k_sgd_step_mixed((float *)p_ref.data, with_lp ? l_ref.data : NULL, ld, g_ref.data, gd, c->grad_scale,
                     with_buf ? (float *)m_ref.data : NULL, count, c->lr, c->momentum, c->weight_decay, c->nesterov);
    int rc = k_twin_sgd_step_mixed((float *)p_tw.data, with_lp ? l_tw.data : NULL, ld, g_tw.data, gd, c->grad_scale,
                                   with_buf ? (float *)m_tw.data : NULL, count, c->lr, c->momentum, c->weight_decay,
                                   c->nesterov);
    CHECK(rc == 0, "k_twin_sgd_step_mixed returned %d", rc);
    char what[160];
    snprintf(what, sizeof(what), "sgd %s grad, %s copy, count %zu, lr %g mom %g wd %g nesterov %d scale %g, %s",
             twin_dtype_name[gd], with_lp ? twin_dtype_name[ld] : "no", count, (double)c->lr, (double)c->momentum,
             (double)c->weight_decay, c->nesterov, (double)c->grad_scale, k_isa_name(isa));
    long bad = twin_compare(&report, what, K_DTYPE_F32, p_tw.data, p_ref.data, count, 1);
    bad += twin_compare(&report, what, K_DTYPE_F32, m_tw.data, m_ref.data, count, 1);
    if (with_lp)
        bad += twin_compare(&report, what, ld, l_tw.data, l_ref.data, count, 1);
    else
        for (size_t i = 0; i < count * ls; i++) bad += l_tw.data[i] != TWIN_POISON_NAN;
    CHECK(buf_guards_ok(&p_tw) && buf_guards_ok(&m_tw) && buf_guards_ok(&g_tw) && buf_guards_ok(&l_tw),
          "%s: a guard byte changed", what);
    buf_free(&p_ref), buf_free(&p_tw), buf_free(&m_ref), buf_free(&m_tw);
    buf_free(&g_ref), buf_free(&g_tw), buf_free(&l_ref), buf_free(&l_tw);
    return bad;
}

static void test_sgd(void)
{
    long cases = 0, bad = 0;
    for (int isa = 0; isa < K_ISA_COUNT; isa++) {
        if (k_isa_set((k_isa_t)isa) != 0) continue;
        for (int g = 0; g < 3; g++)
            for (int l = 0; l < 4; l++)
                for (size_t c = 0; c < N_SGD_CASES; c++) {
                    for (size_t count = 0; count <= 70; count += 1 + (count > 20) * 6) {
                        bad += sgd_one(count, half_or_f32[g], l, &sgd_cases[c], (int)(count % 2), (k_isa_t)isa);
                        cases++;
                    }
                    for (size_t i = 0; i < N_LARGE; i++) {
                        bad += sgd_one(large_counts[i], half_or_f32[g], l, &sgd_cases[c], (int)(i % 2), (k_isa_t)isa);
                        cases++;
                    }
                }
    }
    k_isa_set(k_isa_best());
    CHECK(bad == 0, "sgd: %ld elements differ", bad);
    printf("%s sgd_step_mixed: twin == k_sgd_step_mixed in %ld cases (3 grad x 4 copy dtypes, %zu hyper-parameter "
           "mixes, every ISA path)\n",
           bad ? "FAIL" : "ok  ", cases, N_SGD_CASES);
}

/* ---- finite check and unscale -------------------------------------------------------- */

static const k_dtype_t check_dtypes[4] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16, K_DTYPE_F64};

static void test_nonfinite(void)
{
    long cases = 0;
    const int before = failures;
    for (int isa = 0; isa < K_ISA_COUNT; isa++) {
        if (k_isa_set((k_isa_t)isa) != 0) continue;
        for (int d = 0; d < 4; d++) {
            const k_dtype_t dt = check_dtypes[d];
            const size_t size = k_dtype_size(dt);
            for (int big = 0; big < 2; big++)
                for (size_t count = 1; count <= (big ? 3 : 100); count++) {
                    const size_t n = big ? large_counts[count - 1] : count;
                    buf_t b = buf_new(n * size, 1 + test_rng_below(&rng, 15));
                    buf_t a = buf_new(n * size, 0);
                    fill_random(b.data, dt, n, 0);
                    for (int kind = -1; kind < 4; kind++) {
                        size_t at = test_rng_below(&rng, (uint32_t)n);
                        unsigned char saved[8];
                        memcpy(saved, b.data + at * size, size);
                        if (kind >= 0) twin_plant_special(b.data + at * size, dt, kind);
                        memcpy(a.data, b.data, n * size);
                        int want = k_nonfinite(a.data, dt, n);
                        int32_t flag = 0, set = 1;
                        CHECK(k_twin_nonfinite(b.data, dt, n, &flag) == 0 && flag == want,
                              "nonfinite %s count %zu kind %d at %zu: twin %d, k_nonfinite %d", twin_dtype_name[dt], n,
                              kind, at, flag, want);
                        CHECK(k_twin_nonfinite(b.data, dt, n, &set) == 0 && set == 1, "nonfinite cleared a set flag");
                        CHECK(want == (kind >= 0), "nonfinite %s: k_nonfinite %d, planted %d", twin_dtype_name[dt],
                              want, kind);
                        memcpy(b.data + at * size, saved, size);
                        cases++;
                    }
                    buf_free(&a), buf_free(&b);
                }
        }
    }
    int32_t flag = 5;
    unsigned char ints[64];
    memset(ints, 0xFF, sizeof(ints));
    CHECK(k_twin_nonfinite(ints, K_DTYPE_I32, 16, &flag) == 0 && flag == 5, "nonfinite i32 touched the flag");
    for (int dt = K_DTYPE_U8; dt < K_DTYPE_COUNT; dt++) /* u8, i8, i16, u16, bool: no inf or NaN */
        CHECK(k_twin_nonfinite(ints, (k_dtype_t)dt, 16, &flag) == 0 && flag == 5, "nonfinite %d touched the flag", dt);
    CHECK(k_twin_nonfinite(ints, K_DTYPE_COUNT, 16, &flag) == K_CUDA_ERR_INVALID_VALUE,
          "nonfinite: bad dtype accepted");
    CHECK(k_twin_nonfinite(NULL, K_DTYPE_F32, 0, NULL) == 0, "nonfinite: count 0 refused");
    printf("%s nonfinite: twin == k_nonfinite in %ld cases (f32/f16/bf16/f64, every ISA path)\n",
           failures == before ? "ok  " : "FAIL", cases);

    static const float factors[] = {1.0f / 1024, 1.0f / 65536, 0.5f, 3.0f, 1e-30f, 65536.0f, -1.0f, INFINITY, NAN};
    const int nf = (int)(sizeof(factors) / sizeof(factors[0]));
    long bad = 0;
    cases = 0;
    for (int isa = 0; isa < K_ISA_COUNT; isa++) {
        if (k_isa_set((k_isa_t)isa) != 0) continue;
        for (int d = 0; d < 3; d++) {
            const k_dtype_t dt = check_dtypes[d];
            const size_t size = k_dtype_size(dt);
            for (int f = 0; f < nf; f++)
                for (size_t ci = 0; ci < 40 + N_LARGE; ci++) {
                    const size_t n = ci < 40 ? ci * 2 + 1 : large_counts[ci - 40];
                    const int in_place = ci % 2;
                    buf_t src = buf_new(n * size, 0), ref = buf_new(n * size, 0);
                    buf_t tsrc = buf_new(n * size, 1 + test_rng_below(&rng, 15));
                    buf_t tdst = buf_new(n * size, 1 + test_rng_below(&rng, 15));
                    fill_random(src.data, dt, n, ci % 3 == 0);
                    memcpy(tsrc.data, src.data, n * size);
                    memset(ref.data, TWIN_POISON_FINITE, n * size);
                    memset(tdst.data, TWIN_POISON_NAN, n * size);
                    int want = k_unscale_nonfinite(ref.data, src.data, dt, n, factors[f]);
                    int32_t flag = 0;
                    unsigned char *out = in_place ? tsrc.data : tdst.data;
                    int rc = k_twin_unscale_nonfinite(out, tsrc.data, dt, n, factors[f], &flag);
                    char what[96];
                    snprintf(what, sizeof(what), "unscale %s count %zu factor %g %s, %s", twin_dtype_name[dt], n,
                             (double)factors[f], in_place ? "in place" : "out of place", k_isa_name((k_isa_t)isa));
                    CHECK(rc == 0 && flag == want, "%s: flag %d, k_unscale_nonfinite %d", what, flag, want);
                    bad += twin_compare(&report, what, dt, out, ref.data, n, 1);
                    CHECK(buf_guards_ok(&tsrc) && buf_guards_ok(&tdst), "%s: a guard byte changed", what);
                    buf_free(&src), buf_free(&ref), buf_free(&tsrc), buf_free(&tdst);
                    cases++;
                }
        }
    }
    k_isa_set(k_isa_best());
    CHECK(bad == 0, "unscale: %ld elements differ", bad);
    CHECK(k_twin_unscale_nonfinite(ints, ints, K_DTYPE_F64, 4, 1.0f, &flag) == K_CUDA_ERR_INVALID_VALUE,
          "unscale: f64 accepted");
    printf("%s unscale_nonfinite: twin == k_unscale_nonfinite in %ld cases (values and flag, in and out of place)\n",
           bad ? "FAIL" : "ok  ", cases);
}

/* ---- input step ------------------------------------------------------------------------------- */

/* trainer/data/augment.c's tr_aug_store, the value of one channel. */
static float aug_store_value(float v, float mean, float std)
{
    return std > 0.0f ? (v / 255.0f - mean) / std : v / 255.0f;
}

static void test_input(void)
{
    const int before = failures;
    long cases = 0;
    const float imagenet_mean[4] = {0.485f, 0.456f, 0.406f, 0.5f}, imagenet_std[4] = {0.229f, 0.224f, 0.225f, 0.25f};
    const float odd_mean[4] = {0.2860f, -1.0f, 0.0f, 1e30f}, odd_std[4] = {0.3530f, 0.0f, -2.0f, 1e-30f};
    for (int dti = 0; dti < 3; dti++) {
        const k_dtype_t dt = half_or_f32[dti];
        const size_t esize = dt == K_DTYPE_F32 ? 4 : 2;
        for (int stats = 0; stats < 2; stats++)
            for (int sc = 1; sc <= 4; sc++)
                for (int dc = sc; dc <= K_CUDA_INPUT_MAX_CHANNELS; dc++)
                    for (int pi = 0; pi < 4; pi++) {
                        /* 256 pixels hold every value in every channel; plus random ones. */
                        const size_t pixels = (size_t[]){0, 1, 256, 256 + 7 * 64 + 3}[pi];
                        const float *mean = stats ? odd_mean : imagenet_mean, *std = stats ? odd_std : imagenet_std;
                        uint8_t *src = malloc(pixels * (size_t)sc + 1);
                        for (size_t p = 0; p < pixels; p++)
                            for (int c = 0; c < sc; c++)
                                src[p * sc + c] =
                                    p < 256 ? (uint8_t)((p + 37 * c) & 0xFF) : (uint8_t)test_rng_below(&rng, 256);
                        const size_t bytes = pixels * (size_t)dc * esize;
                        buf_t out = buf_new(bytes, test_rng_below(&rng, 16));
                        memset(out.data, TWIN_POISON_NAN, bytes);
                        int rc = k_twin_input_normalize(out.data, dt, dc, src, sc, pixels, mean, std);
                        long bad = 0;
                        for (size_t p = 0; p < pixels; p++)
                            for (int c = 0; c < dc; c++) {
                                uint32_t want = 0, got = 0;
                                if (c < sc) {
                                    float r = aug_store_value((float)src[p * sc + c], mean[c], std[c]);
                                    if (dt == K_DTYPE_F32)
                                        memcpy(&want, &r, 4);
                                    else
                                        want = dt == K_DTYPE_F16 ? k_f32_to_f16(r) : k_f32_to_bf16(r);
                                }
                                if (dt == K_DTYPE_F32) {
                                    memcpy(&got, out.data + (p * dc + c) * 4, 4);
                                } else {
                                    uint16_t h;
                                    memcpy(&h, out.data + (p * dc + c) * 2, 2);
                                    got = h;
                                }
                                if (got != want && bad++ == 0)
                                    fprintf(stderr,
                                            "FAIL input %s %d -> %d channels, pixel %zu channel %d: twin 0x%08x, "
                                            "tr_aug_store 0x%08x\n",
                                            twin_dtype_name[dt], sc, dc, p, c, got, want);
                            }
                        CHECK(rc == 0 && bad == 0 && buf_guards_ok(&out), "input %s %d -> %d channels, %zu pixels",
                              twin_dtype_name[dt], sc, dc, pixels);
                        buf_free(&out);
                        free(src);
                        cases++;
                    }
    }
    uint16_t dst[8];
    uint8_t src[3] = {1, 2, 3};
    CHECK(k_twin_input_normalize(dst, K_DTYPE_I32, 4, src, 3, 1, imagenet_mean, imagenet_std) ==
              K_CUDA_ERR_INVALID_VALUE,
          "input: i32 accepted");
    CHECK(k_twin_input_normalize(dst, K_DTYPE_F16, 2, src, 3, 1, imagenet_mean, imagenet_std) ==
              K_CUDA_ERR_INVALID_VALUE,
          "input: fewer dst channels accepted");
    CHECK(k_twin_input_normalize(dst, K_DTYPE_F16, 9, src, 3, 1, imagenet_mean, imagenet_std) ==
              K_CUDA_ERR_INVALID_VALUE,
          "input: 9 channels accepted");
    printf("%s input_normalize: twin == tr_aug_store's formula in %ld cases (f16/bf16, 1..4 -> ..8 channels, every "
           "u8 value)\n",
           failures == before ? "ok  " : "FAIL", cases);
}

/* ---- softmax cross-entropy ----------------------------------------------------------------------- */

static long xent_exact, xent_total;

static void xent_one(int n, int k, float s, float scale, k_dtype_t dt, int specials)
{
    const size_t count = (size_t)n * k, size = k_dtype_size(dt);
    float *logits = malloc(count * sizeof(float));
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    unsigned char *ref = malloc(count * size);
    for (size_t i = 0; i < count; i++) logits[i] = (float)((test_rng_unit(&rng) * 2.0 - 1.0) * 6.0);
    for (int i = 0; i < n; i++) labels[i] = (int32_t)test_rng_below(&rng, (uint32_t)k);
    logits[test_rng_below(&rng, (uint32_t)count)] += 40.0f; /* exp overflows without the max subtracted */
    if (specials && n >= 4) {
        logits[(size_t)1 * k + test_rng_below(&rng, (uint32_t)k)] = NAN;
        logits[(size_t)2 * k + test_rng_below(&rng, (uint32_t)k)] = -INFINITY;
        logits[(size_t)3 * k + test_rng_below(&rng, (uint32_t)k)] = INFINITY;
    }
    buf_t out = buf_new(count * size, twin_random_offset(&rng, size));
    memset(out.data, TWIN_POISON_NAN, count * size);
    float loss = 123.0f;
    int32_t label_error = -1;
    int rc = k_twin_softmax_xent(logits, labels, n, k, s, scale, &loss, out.data, dt, &label_error);
    float loss_ref = 456.0f;
    const int ref_rc = k_softmax_xent(logits, labels, n, k, s, scale, &loss_ref, ref, dt);
    char what[128];
    snprintf(what, sizeof(what), "softmax_xent %dx%d s %g scale %g %s%s", n, k, (double)s, (double)scale,
             twin_dtype_name[dt], specials ? " with NaN/inf" : "");
    CHECK(rc == 0 && label_error == 0, "%s: rc %d, label_error %d", what, rc, label_error);
    CHECK(ref_rc == 0, "%s: k_softmax_xent rc %d", what, ref_rc);
    const double abs_bound = 0x1p-40 * scale / n;
    long bad = 0;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *want_raw = ref + i * size;
        const double got = test_float_get(out.data, dt, i), want = test_float_get(want_raw, dt, 0);
        xent_total++;
        xent_exact += memcmp(out.data + i * size, want_raw, size) == 0 || (isnan(got) && isnan(want));
        if (!test_float_within(got, want, test_float_ulp(dt, want), abs_bound) && bad++ == 0)
            fprintf(stderr, "FAIL %s: dlogits[%zu] twin %.17g, k_softmax_xent %.17g\n", what, i, got, want);
    }
    CHECK(bad == 0, "%s: %ld dlogits out of bound", what, bad);
    CHECK(test_float_within(loss, loss_ref, test_float_ulp(K_DTYPE_F32, loss_ref), 0x1p-40 * (fabs(loss_ref) + 1)),
          "%s: loss twin %.9g, k_softmax_xent %.9g", what, (double)loss, (double)loss_ref);
    CHECK(buf_guards_ok(&out), "%s: a guard byte changed", what);

    /* A bad label in one row (and, n > 2, another after it). */
    if (!specials) {
        unsigned char *first = malloc(count * size);
        memcpy(first, out.data, count * size);
        const int row = n / 2;
        const int32_t saved = labels[row];
        labels[row] = test_rng_below(&rng, 2) ? k : -1;
        if (n > 2) labels[n - 1] = k + 5;
        memset(out.data, TWIN_POISON_FINITE, count * size);
        rc = k_twin_softmax_xent(logits, labels, n, k, s, scale, &loss, out.data, dt, &label_error);
        CHECK(rc == 0 && label_error == row + 1 && isnan(loss),
              "%s, bad label in row %d: rc %d, label_error %d, loss %g", what, row, rc, label_error, (double)loss);
        long wrong = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < k; j++) {
                const size_t at = ((size_t)i * k + j) * size;
                const int is_bad = i == row || (n > 2 && i == n - 1);
                wrong += is_bad ? !isnan(test_float_get(out.data + at, dt, 0))
                                : memcmp(out.data + at, first + at, size) != 0;
            }
        CHECK(wrong == 0, "%s, bad label in row %d: %ld dlogits wrong", what, row, wrong);
        /* k_softmax_xent: 1 + the first bad row, nothing written. */
        memset(ref, TWIN_POISON_FINITE, count * size);
        float loss_cpu = 789.0f;
        rc = k_softmax_xent(logits, labels, n, k, s, scale, &loss_cpu, ref, dt);
        long touched = 0;
        for (size_t i = 0; i < count * size; i++) touched += ref[i] != TWIN_POISON_FINITE;
        CHECK(rc == row + 1 && loss_cpu == 789.0f && touched == 0,
              "%s, bad label in row %d: k_softmax_xent rc %d, loss %g, %ld bytes written", what, row, rc,
              (double)loss_cpu, touched);
        labels[row] = saved;
        free(first);
    }
    buf_free(&out);
    free(logits), free(labels), free(ref);
}

static void test_xent(void)
{
    const int before = failures;
    static const int shapes[][2] = {{1, 1},    {1, 2},    {3, 10},   {7, 33}, {5, 64},
                                    {4, 1000}, {17, 100}, {256, 10}, {2, 31}, {9, 65}};
    static const float smoothing[] = {0.0f, 0.1f, 1.0f};
    static const float scales[] = {1.0f, 1024.0f, 1.0f / 3};
    long cases = 0;
    for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
        for (int si = 0; si < 3; si++)
            for (int sc = 0; sc < 3; sc++)
                for (int d = 0; d < 3; d++)
                    for (int specials = 0; specials < 2; specials++) {
                        xent_one(shapes[sh][0], shapes[sh][1], smoothing[si], scales[sc], half_or_f32[d], specials);
                        cases++;
                    }
    float logits[4] = {0}, loss;
    int32_t labels[2] = {0, 1}, err;
    uint16_t d[4];
    CHECK(k_twin_softmax_xent(logits, labels, 0, 2, 0.0f, 1.0f, &loss, d, K_DTYPE_F16, &err) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: n 0 accepted");
    CHECK(k_twin_softmax_xent(logits, labels, 2, 2, 1.5f, 1.0f, &loss, d, K_DTYPE_F16, &err) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: smoothing 1.5 accepted");
    CHECK(k_twin_softmax_xent(logits, labels, 2, 2, 0.1f, INFINITY, &loss, d, K_DTYPE_F16, &err) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: scale inf accepted");
    CHECK(k_twin_softmax_xent(logits, labels, 2, 2, 0.1f, 1.0f, &loss, d, K_DTYPE_F64, &err) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: f64 dlogits accepted");
    CHECK(k_softmax_xent(logits, labels, 0, 2, 0.0f, 1.0f, &loss, d, K_DTYPE_F16) == -1,
          "k_softmax_xent: n 0 accepted");
    CHECK(k_softmax_xent(logits, labels, 2, 0, 0.0f, 1.0f, &loss, d, K_DTYPE_F16) == -1,
          "k_softmax_xent: k 0 accepted");
    CHECK(k_softmax_xent(logits, labels, 2, 2, -0.5f, 1.0f, &loss, d, K_DTYPE_F16) == -1,
          "k_softmax_xent: smoothing -0.5 accepted");
    CHECK(k_softmax_xent(logits, labels, 2, 2, 0.1f, NAN, &loss, d, K_DTYPE_F16) == -1,
          "k_softmax_xent: scale NaN accepted");
    CHECK(k_softmax_xent(logits, labels, 2, 2, 0.1f, 1.0f, &loss, d, K_DTYPE_F64) == -1,
          "k_softmax_xent: f64 dlogits accepted");
    CHECK(k_softmax_xent(logits, labels, 2, 2, 0.1f, 1.0f, NULL, d, K_DTYPE_F16) == -1,
          "k_softmax_xent: NULL loss accepted");
    printf("%s softmax_xent: twin within 1 ulp + 2^-40 scale/n of k_softmax_xent in %ld cases; %ld of %ld dlogits "
           "bit-identical\n",
           failures == before ? "ok  " : "FAIL", cases, xent_exact, xent_total);
}

int main(void)
{
    rng = test_rng_seeded(TEST_RNG_SEED);
    test_sgd();
    test_nonfinite();
    test_input();
    test_xent();
    printf("%s test_twin_step: %d checks, %d failures\n", failures ? "FAIL" : "ok  ", checks, failures);
    return failures ? 1 : 0;
}
