/*
 * test_gpu_step.c - the training-step kernels of kernels/cuda (k_cuda_* of
 * k_cuda_step.h) against their CPU twins (k_twin_*), on a GPU:
 *
 *  - k_cuda_sgd_step_mixed: every gradient dtype x copy dtype (and none) x
 *    hyper-parameter mix, counts 0..70 and large odd ones, the buffers
 *    aligned alike (16-byte vectors), at element offsets (scalar path) and
 *    at odd byte offsets (bytewise), NaN/inf inputs: bit for bit, a NaN
 *    equal to any NaN (GPU arithmetic returns the canonical NaN);
 *  - k_cuda_nonfinite (f32, f16, bf16, f64; one inf/NaN planted anywhere
 *    or none; a set flag stays set; integer dtypes touch nothing) and
 *    k_cuda_unscale_nonfinite (values and flag, in place and out of place,
 *    every placement);
 *  - k_cuda_input_normalize: f16/bf16, 1..4 -> src..8 channels, every u8
 *    value, a ResNet-50 batch's worth of pixels, dst aligned (8/16-byte
 *    stores), at an element offset and at an odd byte: bit for bit;
 *  - k_cuda_softmax_xent: shapes 1x1 .. 256x1000, label smoothing 0 / 0.1
 *    / 1, loss scales, f32/f16/bf16 gradients, rows with NaN / +-inf, bad
 *    labels (label_error, NaN rows): within 1 ulp of the output dtype +
 *    2^-40 grad_scale / n of the twin (CUDA's and libm's double exp / log
 *    may differ in the last bit; the count of bit-identical elements is
 *    printed), label_error and NaN-ness exact;
 *  - bad arguments: K_CUDA_ERR_INVALID_VALUE, nothing written.
 * Device outputs are poisoned (the twin's with the other pattern), guard
 * bytes around every device buffer must stay.
 *
 *   test_gpu_step          exit 0 pass, 1 fail, 77 skip (no usable GPU)
 *   test_gpu_step bench    also times the kernels on ResNet-50 sizes
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "floats.h"
#include "cuda_ok.h"
#include "k_cpu.h"
#include "k_cuda_step.h"
#include "rand.h"
#include "twin_data.h"

#define SLOT_BYTES ((size_t)64 << 20)
#define SLOT_COUNT 6
#include "gpu_slots.h"

static test_rng_t rng;
static twin_report_t report = {"gpu", "twin", 30, 0};

static void sync_case(const char *what, int rc)
{
    CHECK(rc == 0, "%s: returned %d (%s)", what, rc, k_cuda_error_string(rc));
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL %s: cudaDeviceSynchronize: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
    cases++;
}

static void fill_random(unsigned char *p, k_dtype_t dtype, size_t count, int specials)
{
    const size_t size = k_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) twin_random_element(&rng, dtype, specials, p + i * size);
}

/* Offsets of a case's buffers: 0 (all alike: vectors), element multiples
 * (scalar where they differ), odd bytes (bytewise). */
enum { PLACE_ALIKE, PLACE_ELEMENT, PLACE_ODD, PLACE_COUNT };
static const char *const place_name[PLACE_COUNT] = {"aligned", "element offsets", "odd offsets"};

static size_t place_offset(int place, size_t size)
{
    switch (place) {
    case PLACE_ALIKE: return 0;
    case PLACE_ELEMENT: return twin_random_offset(&rng, size);
    default: return 1 + 2 * test_rng_below(&rng, 7);
    }
}

static const size_t large_counts[] = {1000, 4099, 65537, (1u << 20) + 3};
#define N_LARGE (sizeof(large_counts) / sizeof(large_counts[0]))
static const k_dtype_t half_or_f32[3] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

/* ---- SGD ------------------------------------------------------------------------------- */

static const twin_sgd_case_t sgd_cases[] = {
    {0.1f, 0.9f, 1e-4f, 1, 1.0f / 1024}, {0.1f, 0.9f, 1e-4f, 0, 1.0f},     {0.05f, 0.9f, 0.0f, 1, 0.5f},
    {0.2f, 0.0f, 1e-4f, 0, 1.0f / 1024}, {0.4f, 0.9f, 5e-4f, 1, 65536.0f},
};
#define N_SGD_CASES (sizeof(sgd_cases) / sizeof(sgd_cases[0]))

static long sgd_one(size_t count, k_dtype_t gd, int lp_choice, const twin_sgd_case_t *c, int place, int specials)
{
    const k_dtype_t ld = lp_choice < 3 ? half_or_f32[lp_choice] : K_DTYPE_F32;
    const int with_lp = lp_choice < 3, with_buf = c->momentum != 0.0f;
    const size_t gs = k_dtype_size(gd), ls = k_dtype_size(ld);
    unsigned char *p = xmalloc(count * 4), *m = xmalloc(count * 4), *g = xmalloc(count * gs), *l = xmalloc(count * ls);
    unsigned char *pg = xmalloc(count * 4), *mg = xmalloc(count * 4), *lg = xmalloc(count * ls);
    fill_random(p, K_DTYPE_F32, count, specials);
    fill_random(m, K_DTYPE_F32, count, specials);
    fill_random(g, gd, count, specials);
    const size_t op = place_offset(place, 4), om = place_offset(place, 4), og = place_offset(place, gs),
                 ol = place_offset(place, ls);
    float *dp = (float *)slot_fill(0, op, count * 4, p, 0);
    float *dm = (float *)slot_fill(1, om, count * 4, m, 0);
    void *dg = slot_fill(2, og, count * gs, g, 0);
    void *dl = slot_fill(3, ol, count * ls, NULL, TWIN_POISON_NAN);
    memset(l, TWIN_POISON_FINITE, count * ls);
    k_twin_sgd_step_mixed((float *)p, with_lp ? l : NULL, ld, g, gd, c->grad_scale, with_buf ? (float *)m : NULL, count,
                          c->lr, c->momentum, c->weight_decay, c->nesterov);
    char what[160];
    snprintf(what, sizeof(what), "sgd %s grad, %s copy, count %zu, mom %g wd %g nesterov %d scale %g, %s",
             twin_dtype_name[gd], with_lp ? twin_dtype_name[ld] : "no", count, (double)c->momentum,
             (double)c->weight_decay, c->nesterov, (double)c->grad_scale, place_name[place]);
    sync_case(what, k_cuda_sgd_step_mixed(dp, with_lp ? dl : NULL, ld, dg, gd, c->grad_scale, with_buf ? dm : NULL,
                                          count, c->lr, c->momentum, c->weight_decay, c->nesterov, case_stream()));
    int guards = slot_read_into(0, op, count * 4, pg) & slot_read_into(1, om, count * 4, mg) &
                 slot_read_into(3, ol, count * ls, lg);
    long bad = twin_compare(&report, what, K_DTYPE_F32, pg, p, count, 1);
    bad += twin_compare(&report, what, K_DTYPE_F32, mg, m, count, 1);
    if (with_lp)
        bad += twin_compare(&report, what, ld, lg, l, count, 1);
    else
        for (size_t i = 0; i < count * ls; i++) bad += lg[i] != TWIN_POISON_NAN;
    CHECK(guards, "%s: a guard byte changed", what);
    free(p), free(m), free(g), free(l), free(pg), free(mg), free(lg);
    return bad;
}

static void test_sgd(void)
{
    long bad = 0, n = 0;
    for (int g = 0; g < 3; g++)
        for (int l = 0; l < 4; l++)
            for (size_t c = 0; c < N_SGD_CASES; c++)
                for (int place = 0; place < PLACE_COUNT; place++) {
                    for (size_t count = 0; count <= 70; count += 1 + (count > 20) * 8, n++)
                        bad += sgd_one(count, half_or_f32[g], l, &sgd_cases[c], place, (int)(count % 2));
                    for (size_t i = 0; i < N_LARGE; i++, n++)
                        bad += sgd_one(large_counts[i], half_or_f32[g], l, &sgd_cases[c], place, (int)(i % 2));
                }
    CHECK(bad == 0, "sgd: %ld elements differ", bad);
    printf("%s sgd_step_mixed: gpu == twin in %ld cases\n", bad ? "FAIL" : "ok  ", n);
}

/* ---- finite check and unscale ----------------------------------------------------------------- */

static const k_dtype_t check_dtypes[4] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16, K_DTYPE_F64};

static int32_t *device_flag(void) { return (int32_t *)(slots[5] + GUARD); }

static int32_t flag_get(void)
{
    int32_t v;
    CUDA_OK(cudaMemcpy(&v, device_flag(), sizeof(v), cudaMemcpyDeviceToHost));
    return v;
}

static void flag_set(int32_t v)
{
    CUDA_OK(cudaMemcpy(device_flag(), &v, sizeof(v), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
}

static void test_nonfinite(void)
{
    const int before = failures;
    long n = 0;
    for (int d = 0; d < 4; d++) {
        const k_dtype_t dt = check_dtypes[d];
        const size_t size = k_dtype_size(dt);
        for (size_t ci = 0; ci < 70 + N_LARGE; ci++) {
            const size_t count = ci < 70 ? ci + 1 : large_counts[ci - 70];
            unsigned char *h = xmalloc(count * size);
            fill_random(h, dt, count, 0);
            for (int kind = -1; kind < 4; kind++)
                for (int place = 0; place < PLACE_COUNT; place += 2) {
                    const size_t at = test_rng_below(&rng, (uint32_t)count);
                    unsigned char saved[8];
                    memcpy(saved, h + at * size, size);
                    if (kind >= 0) twin_plant_special(h + at * size, dt, kind);
                    const size_t off = place_offset(place, size);
                    const void *dsrc = slot_fill(0, off, count * size, h, 0);
                    int32_t want = 0, got;
                    k_twin_nonfinite(h, dt, count, &want);
                    char what[96];
                    snprintf(what, sizeof(what), "nonfinite %s count %zu kind %d at %zu, %s", twin_dtype_name[dt],
                             count, kind, at, place_name[place]);
                    flag_set(0);
                    sync_case(what, k_cuda_nonfinite(dsrc, dt, count, device_flag(), case_stream()));
                    got = flag_get();
                    CHECK(got == want && want == (kind >= 0), "%s: gpu %d, twin %d", what, got, want);
                    flag_set(1);
                    sync_case(what, k_cuda_nonfinite(dsrc, dt, count, device_flag(), case_stream()));
                    CHECK(flag_get() == 1, "%s: a set flag was cleared", what);
                    memcpy(h + at * size, saved, size);
                    n++;
                }
            free(h);
        }
    }
    flag_set(7);
    sync_case("nonfinite i32", k_cuda_nonfinite(slots[0], K_DTYPE_I32, 100, device_flag(), NULL));
    CHECK(flag_get() == 7, "nonfinite i32 touched the flag");
    printf("%s nonfinite: gpu == twin in %ld cases\n", failures == before ? "ok  " : "FAIL", n);

    static const float factors[] = {1.0f / 1024, 0.5f, 3.0f, 1e-30f, 65536.0f, INFINITY, NAN};
    const int nf = (int)(sizeof(factors) / sizeof(factors[0]));
    long bad = 0;
    n = 0;
    for (int d = 0; d < 3; d++) {
        const k_dtype_t dt = check_dtypes[d];
        const size_t size = k_dtype_size(dt);
        for (int f = 0; f < nf; f++)
            for (int place = 0; place < PLACE_COUNT; place++)
                for (size_t ci = 0; ci < 30 + N_LARGE; ci++) {
                    const size_t count = ci < 30 ? ci * 3 + 1 : large_counts[ci - 30];
                    const int in_place = ci % 2;
                    unsigned char *src = xmalloc(count * size), *want = xmalloc(count * size),
                                  *got = xmalloc(count * size);
                    fill_random(src, dt, count, ci % 3 == 0);
                    memset(want, TWIN_POISON_FINITE, count * size);
                    int32_t want_flag = 0;
                    k_twin_unscale_nonfinite(want, src, dt, count, factors[f], &want_flag);
                    const size_t os = place_offset(place, size), od = in_place ? os : place_offset(place, size);
                    unsigned char *dsrc = slot_fill(0, os, count * size, src, 0);
                    unsigned char *ddst = in_place ? dsrc : slot_fill(1, od, count * size, NULL, TWIN_POISON_NAN);
                    char what[128];
                    snprintf(what, sizeof(what), "unscale %s count %zu factor %g %s, %s", twin_dtype_name[dt], count,
                             (double)factors[f], in_place ? "in place" : "out of place", place_name[place]);
                    flag_set(0);
                    sync_case(what, k_cuda_unscale_nonfinite(ddst, dsrc, dt, count, factors[f], device_flag(),
                                                             case_stream()));
                    CHECK(slot_read_into(in_place ? 0 : 1, od, count * size, got), "%s: a guard byte changed", what);
                    bad += twin_compare(&report, what, dt, got, want, count, 1);
                    CHECK(flag_get() == want_flag, "%s: gpu flag %d, twin %d", what, flag_get(), want_flag);
                    free(src), free(want), free(got);
                    n++;
                }
    }
    CHECK(bad == 0, "unscale: %ld elements differ", bad);
    printf("%s unscale_nonfinite: gpu == twin in %ld cases\n", bad ? "FAIL" : "ok  ", n);
}

/* ---- input step --------------------------------------------------------------------------------- */

static void test_input(void)
{
    const int before = failures;
    long n = 0;
    const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f}, std[4] = {0.229f, 0.224f, 0.0f, -1.0f};
    for (int d = 0; d < 3; d++)
        for (int sc = 1; sc <= 4; sc++)
            for (int dc = sc; dc <= K_CUDA_INPUT_MAX_CHANNELS; dc++)
                for (int pi = 0; pi < 4; pi++)
                    for (int place = 0; place < PLACE_COUNT; place++) {
                        const k_dtype_t dt = half_or_f32[d];
                        const size_t esize = dt == K_DTYPE_F32 ? 4 : 2;
                        const size_t pixels = (size_t[]){0, 1, 256 + 77, (size_t)224 * 224 * 8 + 5}[pi];
                        if (pi == 3 && (sc != 3 || (dc != 4 && dc != 8)))
                            continue; /* the large batch for the real shapes only */
                        uint8_t *src = xmalloc(pixels * sc);
                        for (size_t p = 0; p < pixels; p++)
                            for (int c = 0; c < sc; c++)
                                src[p * sc + c] = p < 256 ? (uint8_t)(p + 41 * c) : (uint8_t)test_rng_below(&rng, 256);
                        const size_t bytes = pixels * dc * esize;
                        unsigned char *want = xmalloc(bytes), *got = xmalloc(bytes);
                        memset(want, TWIN_POISON_FINITE, bytes);
                        k_twin_input_normalize(want, dt, dc, src, sc, pixels, mean, std);
                        const size_t od = place == PLACE_ALIKE ? 0 : place == PLACE_ELEMENT ? esize : 1;
                        const size_t os = test_rng_below(&rng, 16);
                        const uint8_t *dsrc = slot_fill(0, os, pixels * sc, src, 0);
                        unsigned char *ddst = slot_fill(1, od, bytes, NULL, TWIN_POISON_NAN);
                        char what[128];
                        snprintf(what, sizeof(what), "input %s %d -> %d channels, %zu pixels, dst %s",
                                 twin_dtype_name[dt], sc, dc, pixels, place_name[place]);
                        sync_case(what,
                                  k_cuda_input_normalize(ddst, dt, dc, dsrc, sc, pixels, mean, std, case_stream()));
                        CHECK(slot_read_into(1, od, bytes, got), "%s: a guard byte changed", what);
                        CHECK(twin_compare(&report, what, dt, got, want, pixels * dc, 0) == 0, "%s: differs", what);
                        free(src), free(want), free(got);
                        n++;
                    }
    printf("%s input_normalize: gpu == twin in %ld cases\n", failures == before ? "ok  " : "FAIL", n);
}

/* ---- softmax cross-entropy ---------------------------------------------------------------------- */

static long xent_exact, xent_total;

static void xent_one(int n, int k, float s, float scale, k_dtype_t dt, int variant)
{
    const size_t count = (size_t)n * k, size = k_dtype_size(dt);
    float *logits = xmalloc(count * sizeof(float));
    int32_t *labels = xmalloc((size_t)n * sizeof(int32_t));
    unsigned char *want = xmalloc(count * size), *got = xmalloc(count * size);
    for (size_t i = 0; i < count; i++) logits[i] = (float)((test_rng_unit(&rng) * 2.0 - 1.0) * 6.0);
    for (int i = 0; i < n; i++) labels[i] = (int32_t)test_rng_below(&rng, (uint32_t)k);
    logits[test_rng_below(&rng, (uint32_t)count)] += 40.0f;
    if (variant == 1 && n >= 4) {
        logits[(size_t)1 * k + test_rng_below(&rng, (uint32_t)k)] = NAN;
        logits[(size_t)2 * k + test_rng_below(&rng, (uint32_t)k)] = -INFINITY;
        logits[(size_t)3 * k + test_rng_below(&rng, (uint32_t)k)] = INFINITY;
    }
    if (variant == 2) { /* bad labels */
        labels[n / 2] = test_rng_below(&rng, 2) ? k : -1;
        if (n > 2) labels[n - 1] = k + 5;
    }
    memset(want, TWIN_POISON_FINITE, count * size);
    float want_loss = 0.0f, got_loss;
    int32_t want_err = -1, got_err;
    k_twin_softmax_xent(logits, labels, n, k, s, scale, &want_loss, want, dt, &want_err);
    const float *dlog = (const float *)slot_fill(0, 0, count * 4, logits, 0);
    const int32_t *dlab = (const int32_t *)slot_fill(1, 0, (size_t)n * 4, labels, 0);
    const size_t od = twin_random_offset(&rng, size);
    unsigned char *dd = slot_fill(2, od, count * size, NULL, TWIN_POISON_NAN);
    float *dloss = (float *)slot_fill(3, 0, 4, NULL, TWIN_POISON_NAN);
    void *dws = slot_fill(4, 0, K_CUDA_XENT_WORKSPACE_BYTES(n), NULL, TWIN_POISON_NAN);
    flag_set(-1);
    char what[128];
    snprintf(what, sizeof(what), "softmax_xent %dx%d s %g scale %g %s%s", n, k, (double)s, (double)scale,
             twin_dtype_name[dt],
             variant == 1   ? " with NaN/inf"
             : variant == 2 ? " with bad labels"
                            : "");
    sync_case(what, k_cuda_softmax_xent(dlog, dlab, n, k, s, scale, dloss, dd, dt, dws, device_flag(), case_stream()));
    CHECK(slot_read_into(2, od, count * size, got), "%s: a guard byte changed", what);
    CHECK(slot_read_into(3, 0, 4, &got_loss), "%s: a guard byte changed (loss)", what);
    got_err = flag_get();
    CHECK(got_err == want_err, "%s: label_error gpu %d, twin %d", what, got_err, want_err);
    const double abs_bound = 0x1p-40 * scale / n;
    long bad = 0;
    for (size_t i = 0; i < count; i++) {
        const double g = test_float_get(got, dt, i), w = test_float_get(want, dt, i);
        xent_total++;
        xent_exact += memcmp(got + i * size, want + i * size, size) == 0 || (isnan(g) && isnan(w));
        if (!test_float_within(g, w, test_float_ulp(dt, w), abs_bound) && bad++ == 0)
            fprintf(stderr, "FAIL %s: dlogits[%zu] gpu %.17g, twin %.17g\n", what, i, g, w);
    }
    CHECK(bad == 0, "%s: %ld dlogits out of bound", what, bad);
    CHECK(
        test_float_within(got_loss, want_loss, test_float_ulp(K_DTYPE_F32, want_loss), 0x1p-40 * (fabs(want_loss) + 1)),
        "%s: loss gpu %.9g, twin %.9g", what, (double)got_loss, (double)want_loss);
    free(logits), free(labels), free(want), free(got);
}

static void test_xent(void)
{
    const int before = failures;
    static const int shapes[][2] = {{1, 1},    {1, 2},    {3, 10},     {7, 33},   {5, 64}, {4, 1000},
                                    {17, 100}, {256, 10}, {256, 1000}, {1500, 7}, {9, 65}};
    static const float smoothing[] = {0.0f, 0.1f, 1.0f};
    static const float scales[] = {1.0f, 1024.0f, 1.0f / 3};
    long n = 0;
    for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
        for (int si = 0; si < 3; si++)
            for (int sc = 0; sc < 3; sc++)
                for (int d = 0; d < 3; d++)
                    for (int variant = 0; variant < 3; variant++, n++)
                        xent_one(shapes[sh][0], shapes[sh][1], smoothing[si], scales[sc], half_or_f32[d], variant);
    printf("%s softmax_xent: gpu within 1 ulp + 2^-40 scale/n of the twin in %ld cases; %ld of %ld dlogits "
           "bit-identical\n",
           failures == before ? "ok  " : "FAIL", n, xent_exact, xent_total);
}

/* ---- bad arguments ---------------------------------------------------------------------------------- */

static void test_api(void)
{
    const int before = failures;
    unsigned char *d = slot_fill(0, 0, 256, NULL, 0x77);
    float *f = (float *)d;
    int32_t *flag = device_flag();
    const float mean[3] = {0}, std[3] = {1, 1, 1};
    CHECK(k_cuda_sgd_step_mixed(f, NULL, K_DTYPE_F32, d, K_DTYPE_F64, 1.0f, f, 8, 0.1f, 0.9f, 0, 0, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "sgd: f64 gradient accepted");
    CHECK(k_cuda_sgd_step_mixed(f, d, K_DTYPE_I32, d, K_DTYPE_F32, 1.0f, f, 8, 0.1f, 0.9f, 0, 0, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "sgd: i32 copy accepted");
    CHECK(k_cuda_sgd_step_mixed(f, NULL, K_DTYPE_F32, d, K_DTYPE_F32, 1.0f, NULL, 8, 0.1f, 0.9f, 0, 0, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "sgd: momentum without a buffer accepted");
    CHECK(k_cuda_sgd_step_mixed(NULL, NULL, K_DTYPE_F32, NULL, K_DTYPE_F32, 1.0f, NULL, 0, 0.1f, 0.9f, 0, 0, NULL) == 0,
          "sgd: count 0 refused");
    CHECK(k_cuda_nonfinite(d, K_DTYPE_COUNT, 8, flag, NULL) == K_CUDA_ERR_INVALID_VALUE, "nonfinite: bad dtype");
    CHECK(k_cuda_unscale_nonfinite(d, d, K_DTYPE_F64, 8, 1.0f, flag, NULL) == K_CUDA_ERR_INVALID_VALUE,
          "unscale: f64 accepted");
    CHECK(k_cuda_input_normalize(d, K_DTYPE_I32, 4, d, 3, 8, mean, std, NULL) == K_CUDA_ERR_INVALID_VALUE,
          "input: i32 accepted");
    CHECK(k_cuda_input_normalize(d, K_DTYPE_F16, 9, d, 3, 8, mean, std, NULL) == K_CUDA_ERR_INVALID_VALUE,
          "input: 9 channels accepted");
    CHECK(k_cuda_softmax_xent(f, (int32_t *)d, 0, 4, 0.0f, 1.0f, f, d, K_DTYPE_F16, d, flag, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: n 0 accepted");
    CHECK(k_cuda_softmax_xent(f, (int32_t *)d, 2, 4, 0.0f, NAN, f, d, K_DTYPE_F16, d, flag, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: NaN scale accepted");
    CHECK(k_cuda_softmax_xent(f, (int32_t *)d, 2, 4, 0.0f, 1.0f, f, d + 1, K_DTYPE_F16, d, flag, NULL) ==
              K_CUDA_ERR_INVALID_VALUE,
          "xent: misaligned dlogits accepted");
    CUDA_OK(cudaDeviceSynchronize());
    unsigned char back[256];
    slot_read_into(0, 0, 256, back);
    int untouched = 1;
    for (int i = 0; i < 256; i++) untouched &= back[i] == 0x77;
    CHECK(untouched, "a refused call wrote its output");
    printf("%s api: bad arguments refused, empty calls accepted\n", failures == before ? "ok  " : "FAIL");
}

/* ---- bench --------------------------------------------------------------------------------------------- */

static void bench_one(const char *what, double bytes, int (*run)(void))
{
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) run();
    float best = 1e30f;
    for (int rep = 0; rep < 10; rep++) {
        CUDA_OK(cudaEventRecord(a, stream));
        int rc = run();
        CUDA_OK(cudaEventRecord(b, stream));
        CUDA_OK(cudaEventSynchronize(b));
        float ms;
        CUDA_OK(cudaEventElapsedTime(&ms, a, b));
        if (rc == 0 && ms < best) best = ms;
    }
    printf("bench %-48s %8.3f ms  %7.1f GB/s\n", what, (double)best, bytes / (best * 1e-3) / 1e9);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

#define BENCH_PARAMS ((size_t)25557032) /* ResNet-50 */
static int bench_sgd(void)
{
    return k_cuda_sgd_step_mixed((float *)slots[0], slots[3], K_DTYPE_F16, slots[1], K_DTYPE_F16, 1.0f / 1024,
                                 (float *)slots[2], BENCH_PARAMS / 2, 0.1f, 0.9f, 1e-4f, 1, stream);
}
static int bench_nonfinite(void)
{
    return k_cuda_nonfinite(slots[1], K_DTYPE_F16, BENCH_PARAMS, device_flag(), stream);
}
static int bench_input(void)
{
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    return k_cuda_input_normalize(slots[1], K_DTYPE_F16, 4, slots[0], 3, (size_t)64 * 224 * 224, mean, std, stream);
}
static int bench_xent(void)
{
    return k_cuda_softmax_xent((float *)slots[0], (int32_t *)slots[1], 256, 1000, 0.1f, 1024.0f, (float *)slots[3],
                               slots[2], K_DTYPE_F16, slots[4], device_flag(), stream);
}

static void bench(void)
{
    /* Every buffer finite: zeros (labels 0). */
    for (int s = 0; s < 5; s++) CUDA_OK(cudaMemset(slots[s], 0, SLOT_BYTES));
    bench_one("sgd_step_mixed f16 grad, f16 copy, 12.8M params", (double)BENCH_PARAMS / 2 * 16, bench_sgd);
    bench_one("nonfinite f16, 25.6M", (double)BENCH_PARAMS * 2, bench_nonfinite);
    bench_one("input_normalize 64x224x224 u8x3 -> f16x4", 64.0 * 224 * 224 * 11, bench_input);
    bench_one("softmax_xent 256x1000 -> f16", 256.0 * 1000 * 6, bench_xent);
}

int main(int argc, char **argv)
{
    slots_open("test_gpu_step");
    rng = test_rng_seeded(TEST_RNG_SEED);

    test_api();
    test_sgd();
    test_nonfinite();
    test_input();
    test_xent();
    if (argc > 1 && strcmp(argv[1], "bench") == 0) bench();

    slots_close();
    printf("test_gpu_step: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
