/*
 * test_twin_nn.c - the CPU twins of the layer kernels (k_twin_* of
 * k_cuda_nn.h) against straightforward double-precision references
 * written here (not k_nn.h's functions):
 *
 *  - batch norm, training forward (f32 / f16 / bf16, with and without
 *    relu and residual): the saved mean and invstd and the running
 *    statistics within k_cuda_nn.h's stated bounds (B = 32), y within its
 *    fp32 formula's error plus one ulp of the dtype; shapes of 2 .. 40000
 *    rows (one chunk, a partial one, more chunks than merge threads), C
 *    from 1 to 67 (odd, not a multiple of 8), data far from zero (mean 300
 *    sigma: the variance must not cancel), a NaN planted in one channel
 *    (that channel NaN, the others exact);
 *  - inference forward from running statistics; backward (dgamma, dbeta in
 *    f32 / f16 / bf16 within the bounds, dx, dresidual = the relu-masked
 *    dy exactly), also in place (dx = dy);
 *  - max pool (3x3 s2 p1 and others; ties and NaNs: the first wins):
 *    output and argmax exactly, backward within its fp32 sums; global
 *    average pool forward / backward; relu forward / backward; add (+relu).
 *
 * Outputs are filled with NaN bits before each call (a NaN never passes a
 * comparison: every test is !(|got - want| <= bound)), and guard bytes
 * after each output must stay. Bad arguments: K_CUDA_ERR_INVALID_VALUE,
 * nothing written. Inputs come from tests/common/rand.h's stream.
 *
 *   test_twin_nn      exit 0 pass, 1 fail
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "floats.h"
#include "k_cpu.h"
#include "k_cuda_nn.h"
#include "rand.h"

#define U 0x1p-24
#define BOUND_B 32.0
#define GUARD 64
#define GUARD_BYTE 0xC3

static test_rng_t rng;
static int printed; /* detailed failures so far */

static const k_dtype_t dtypes[3] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
static const char *const dtype_names[3] = {"f32", "f16", "bf16"};

static const char *dname(k_dtype_t dt) { return dtype_names[dt == K_DTYPE_F16 ? 1 : dt == K_DTYPE_BF16 ? 2 : 0]; }

/* ---- buffers with a guard ------------------------------------------------------- */

/* count elements of dtype (or bytes when size 1), NaN-poisoned, then a guard. */
static unsigned char *buf_new(size_t count, size_t size)
{
    unsigned char *p = malloc(count * size + GUARD);
    if (p == NULL) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    memset(p, 0xFF, count * size);
    memset(p + count * size, GUARD_BYTE, GUARD);
    return p;
}

static int guard_ok(const unsigned char *p, size_t bytes)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[bytes + i] != GUARD_BYTE) return 0;
    return 1;
}

/* got within bound of want; reports the first few failures. */
static int near(const char *what, size_t i, double got, double want, double bound)
{
    int ok = fabs(got - want) <= bound; /* false for any NaN */
    checks++;
    if (!ok) {
        failures++;
        if (printed++ < 30)
            fprintf(stderr, "FAIL %s: element %zu: got %.9g, want %.9g, bound %.3g\n", what, i, got, want, bound);
    }
    return ok;
}

/* Values mu + sigma * (uniform in [-1, 1)), rounded to dtype. */
static void fill(void *p, k_dtype_t dt, size_t count, double mu, double sigma)
{
    for (size_t i = 0; i < count; i++) test_float_put(p, dt, i, mu + sigma * (2.0 * test_rng_unit(&rng) - 1.0));
}

static float frand(double lo, double hi) { return (float)(lo + (hi - lo) * test_rng_unit(&rng)); }

/* ---- batch norm ----------------------------------------------------------------- */

typedef struct {
    size_t rows;
    int c;
    double mu, sigma;
} bn_case_t;

static const bn_case_t bn_cases[] = {
    {2, 1, 0.0, 1.0},      {3, 5, 1.0, 2.0},     {127, 3, -2.0, 0.5},     {128, 7, 0.0, 1.0},
    {129, 13, 5.0, 1.0},   {1000, 33, 0.0, 3.0}, {4097, 10, 300.0, 1.0},  {300, 64, 0.1, 0.01},
    {40000, 3, -1.0, 2.0}, {257, 67, 0.0, 1.0},  {33000, 9, 1000.0, 1.0}, {20000, 5, 3000.0, 0.1},
};
#define N_BN_CASES (sizeof(bn_cases) / sizeof(bn_cases[0]))

/* The forward's fp32 formula bound: (x - mean) * scale + beta [+ res]. */
static double apply_bound(k_dtype_t dt, double x, double mean, double scale, double beta, double res, double want)
{
    double e = 6.0 * U * (fabs(x - mean) * fabs(scale) + fabs(beta) + fabs(res));
    return e + test_float_ulp(dt, fabs(want) + e);
}

/* One channel ch of batch norm's y (rows rows of c channels) against (x - mean) * scale + beta (+ res, then
 * relu), within apply_bound plus stat_err * |x - mean| * |scale| (for statistics the kernel reads rounded).
 * Stops at the first miss. */
static void check_bn_y(const char *what, const unsigned char *x, const unsigned char *res, const unsigned char *y,
                       k_dtype_t dt, size_t rows, int c, int ch, double mean, double scale, double beta, int relu,
                       double stat_err)
{
    for (size_t r = 0; r < rows; r++) {
        size_t i = r * c + ch;
        double xv = test_float_get(x, dt, i), rr = res ? test_float_get(res, dt, i) : 0.0;
        double want = (xv - mean) * scale + beta + rr;
        if (relu && want < 0) want = 0;
        double b = apply_bound(dt, xv, mean, scale, beta, rr, want);
        if (stat_err != 0) b += stat_err * fabs(xv - mean) * fabs(scale);
        if (!near(what, i, test_float_get(y, dt, i), want, b)) break;
    }
}

static void test_bn_forward(const bn_case_t *bc, k_dtype_t dt, int relu, int with_res, int plant_nan)
{
    const size_t rows = bc->rows, count = rows * (size_t)bc->c, size = k_dtype_size(dt);
    const int c = bc->c;
    char what[128];
    snprintf(what, sizeof(what), "bn forward %zux%d %s%s%s%s", rows, c, dname(dt), relu ? " relu" : "",
             with_res ? " +res" : "", plant_nan ? " nan" : "");
    unsigned char *x = buf_new(count, size), *res = buf_new(count, size), *y = buf_new(count, size);
    fill(x, dt, count, bc->mu, bc->sigma);
    fill(res, dt, count, 0.0, 1.0);
    const int nan_ch = plant_nan ? (int)test_rng_below(&rng, (uint32_t)c) : -1;
    if (plant_nan) test_float_put(x, dt, test_rng_below(&rng, (uint32_t)rows) * (size_t)c + (size_t)nan_ch, NAN);
    float *gamma = malloc(c * sizeof(float)), *beta = malloc(c * sizeof(float));
    float *rm = malloc(c * sizeof(float)), *rv = malloc(c * sizeof(float));
    float *rm0 = malloc(c * sizeof(float)), *rv0 = malloc(c * sizeof(float));
    unsigned char *mean = buf_new((size_t)c, 4), *invstd = buf_new((size_t)c, 4);
    for (int i = 0; i < c; i++) {
        gamma[i] = frand(0.5, 2.0), beta[i] = frand(-1.0, 1.0);
        rm0[i] = rm[i] = frand(-1.0, 1.0), rv0[i] = rv[i] = frand(0.5, 2.0);
    }
    const float momentum = 0.1f, eps = 1e-5f;
    int status = k_twin_bn_forward_train(y, x, with_res ? res : NULL, dt, rows, c, gamma, beta, rm, rv, momentum, eps,
                                         relu, (float *)mean, (float *)invstd);
    CHECK(status == 0, "%s: status %d", what, status);
    CHECK(guard_ok(y, count * size) && guard_ok(mean, 4 * (size_t)c) && guard_ok(invstd, 4 * (size_t)c),
          "%s: a guard changed", what);
    const float *fm = (const float *)mean, *fi = (const float *)invstd;
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, sa = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double v = test_float_get(x, dt, r * c + ch);
            s += v, sa += fabs(v);
        }
        const double m = (double)rows, mu = s / m;
        double q = 0.0, dev = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double d = test_float_get(x, dt, r * c + ch) - mu;
            q += d * d, dev += fabs(d);
        }
        const double var = q / m;
        if (ch == nan_ch) {
            CHECK(isnan(fm[ch]) && isnan(fi[ch]), "%s: channel %d with a NaN: mean %g invstd %g", what, ch,
                  (double)fm[ch], (double)fi[ch]);
            continue;
        }
        near(what, (size_t)ch, fm[ch], mu, BOUND_B * U * dev / m + U * fabs(mu));
        const double dvar = BOUND_B * U * (var + pow(BOUND_B * U * sa / m, 2));
        const double inv = 1.0 / sqrt(var + eps);
        near(what, (size_t)ch, fi[ch], inv, 0.5 * dvar * inv * inv * inv + 2.0 * U * inv);
        near(what, (size_t)ch, rm[ch], 0.1 * mu + 0.9 * rm0[ch],
             0.1 * (BOUND_B * U * dev / m + U * fabs(mu)) + 2 * U * (fabs(mu) + fabs(rm0[ch])));
        const double unb = m / (m - 1.0);
        near(what, (size_t)ch, rv[ch], 0.1 * var * unb + 0.9 * rv0[ch],
             0.1 * unb * (dvar + U * var) + 2 * U * (var * unb + rv0[ch]));
        /* y from the twin's own statistics. */
        const double scale = (double)gamma[ch] * fi[ch];
        check_bn_y(what, x, with_res ? res : NULL, y, dt, rows, c, ch, fm[ch], scale, beta[ch], relu, 0.0);
    }
    if (nan_ch >= 0) /* every y of that channel NaN (relu keeps NaN) */
        for (size_t r = 0; r < rows; r++)
            if (!isnan(test_float_get(y, dt, r * c + nan_ch))) {
                CHECK(0, "%s: y of the NaN channel is %g at row %zu", what, test_float_get(y, dt, r * c + nan_ch), r);
                break;
            }

    /* Inference from the running statistics. */
    memset(y, 0xFF, count * size);
    status = k_twin_bn_forward_infer(y, x, with_res ? res : NULL, dt, rows, c, gamma, beta, rm, rv, eps, relu);
    CHECK(status == 0 && guard_ok(y, count * size), "%s: inference status %d or guard", what, status);
    for (int ch = 0; ch < c && ch != nan_ch; ch++) {
        const double inv = 1.0 / sqrt((double)rv[ch] + eps), scale = (double)gamma[ch] * inv;
        check_bn_y(what, x, with_res ? res : NULL, y, dt, rows, c, ch, rm[ch], scale, beta[ch], relu, 2 * U);
    }
    free(x), free(res), free(y), free(gamma), free(beta), free(rm), free(rv), free(rm0), free(rv0);
    free(mean), free(invstd);
}

/* Batch norm backward's inputs at element i: dy through the relu's mask (returned) and x normalised (*xh). */
static double bn_g_xh(const unsigned char *dy, const unsigned char *y, const unsigned char *x, k_dtype_t dt, int relu,
                      size_t i, float mean, float invstd, double *xh)
{
    double g = test_float_get(dy, dt, i);
    if (relu && !(test_float_get(y, dt, i) > 0)) g = 0;
    *xh = (test_float_get(x, dt, i) - mean) * (double)invstd;
    return g;
}

static void test_bn_backward(const bn_case_t *bc, k_dtype_t dt, k_dtype_t gdt, int relu, int with_dres, int in_place)
{
    const size_t rows = bc->rows, count = rows * (size_t)bc->c, size = k_dtype_size(dt), gsize = k_dtype_size(gdt);
    const int c = bc->c;
    char what[128];
    snprintf(what, sizeof(what), "bn backward %zux%d %s grad %s%s%s%s", rows, c, dname(dt), dname(gdt),
             relu ? " relu" : "", with_dres ? " dres" : "", in_place ? " in place" : "");
    unsigned char *x = buf_new(count, size), *y = buf_new(count, size), *dy = buf_new(count, size);
    unsigned char *dx = buf_new(count, size), *dres = buf_new(count, size), *dy0 = buf_new(count, size);
    fill(x, dt, count, bc->mu, bc->sigma);
    fill(dy, dt, count, 0.0, 1.0);
    memcpy(dy0, dy, count * size);
    float *gamma = malloc(c * sizeof(float)), *beta = malloc(c * sizeof(float));
    float *rm = calloc(c, sizeof(float)), *rv = calloc(c, sizeof(float));
    float *mean = malloc(c * sizeof(float)), *invstd = malloc(c * sizeof(float));
    for (int i = 0; i < c; i++) gamma[i] = frand(0.5, 2.0), beta[i] = frand(-1.0, 1.0), rv[i] = 1.0f;
    CHECK(k_twin_bn_forward_train(y, x, NULL, dt, rows, c, gamma, beta, rm, rv, 0.1f, 1e-5f, relu, mean, invstd) == 0,
          "%s: forward", what);
    unsigned char *dgamma = buf_new((size_t)c, gsize), *dbeta = buf_new((size_t)c, gsize);
    unsigned char *out = in_place ? dy : dx;
    int status = k_twin_bn_backward(out, with_dres ? dres : NULL, x, dy, relu ? y : NULL, dt, rows, c, gamma, mean,
                                    invstd, dgamma, dbeta, gdt);
    CHECK(status == 0, "%s: status %d", what, status);
    CHECK(guard_ok(out, count * size) && guard_ok(dres, count * size) && guard_ok(dgamma, gsize * c) &&
              guard_ok(dbeta, gsize * c),
          "%s: a guard changed", what);
    const double m = (double)rows;
    for (int ch = 0; ch < c; ch++) {
        double sg = 0, sgx = 0, ag = 0, agx = 0;
        for (size_t r = 0; r < rows; r++) {
            size_t i = r * c + ch;
            double xh, g = bn_g_xh(dy0, y, x, dt, relu, i, mean[ch], invstd[ch], &xh);
            sg += g, sgx += g * xh, ag += fabs(g), agx += fabs(g * xh);
        }
        const double eb = BOUND_B * U * ag, egx = BOUND_B * U * agx;
        near(what, (size_t)ch, test_float_get(dbeta, gdt, ch), sg, eb + test_float_ulp(gdt, fabs(sg) + eb));
        near(what, (size_t)ch, test_float_get(dgamma, gdt, ch), sgx, egx + test_float_ulp(gdt, fabs(sgx) + egx));
        const double a = (double)gamma[ch] * invstd[ch], k1 = sg / m, k2 = sgx / m;
        for (size_t r = 0; r < rows; r++) {
            size_t i = r * c + ch;
            double xh, g = bn_g_xh(dy0, y, x, dt, relu, i, mean[ch], invstd[ch], &xh);
            double want = (g - k1 - xh * k2) * a;
            double e = fabs(a) * (4 * U * (fabs(g) + fabs(k1) + fabs(xh * k2)) + eb / m + U * fabs(k1) +
                                  fabs(xh) * (egx / m + U * fabs(k2)) + 3 * U * fabs(xh * k2));
            if (!near(what, i, test_float_get(out, dt, i), want, e + test_float_ulp(dt, fabs(want) + e))) break;
            if (with_dres && test_float_get(dres, dt, i) != g) {
                CHECK(0, "%s: dresidual %zu is %g, want %g", what, i, test_float_get(dres, dt, i), g);
                break;
            }
        }
    }
    if (with_dres) { /* dresidual may be dy exactly: the same bits */
        unsigned char *dy2 = buf_new(count, size), *dx2 = buf_new(count, size);
        unsigned char *dg2 = buf_new((size_t)c, gsize), *db2 = buf_new((size_t)c, gsize);
        memcpy(dy2, dy0, count * size);
        status = k_twin_bn_backward(dx2, dy2, x, dy2, relu ? y : NULL, dt, rows, c, gamma, mean, invstd, dg2, db2, gdt);
        CHECK(status == 0 && memcmp(dx2, out, count * size) == 0 && memcmp(dy2, dres, count * size) == 0 &&
                  memcmp(dg2, dgamma, gsize * c) == 0 && memcmp(db2, dbeta, gsize * c) == 0,
              "%s: dresidual = dy differs (status %d)", what, status);
        free(dy2), free(dx2), free(dg2), free(db2);
    }
    free(x), free(y), free(dy), free(dx), free(dres), free(dy0), free(gamma), free(beta), free(rm), free(rv);
    free(mean), free(invstd), free(dgamma), free(dbeta);
}

/* ---- pooling -------------------------------------------------------------------- */

static void test_maxpool(k_cuda_pool_t p, k_dtype_t dt, int ties, int nans)
{
    const size_t size = k_dtype_size(dt);
    const int ho = (p.h + 2 * p.pad - p.kernel) / p.stride + 1, wo = (p.w + 2 * p.pad - p.kernel) / p.stride + 1;
    const size_t in_count = (size_t)p.n * p.h * p.w * p.c, out_count = (size_t)p.n * ho * wo * p.c;
    char what[128];
    snprintf(what, sizeof(what), "maxpool %dx%dx%dx%d k%d s%d p%d %s%s%s", p.n, p.h, p.w, p.c, p.kernel, p.stride,
             p.pad, dname(dt), ties ? " ties" : "", nans ? " nans" : "");
    unsigned char *x = buf_new(in_count, size), *y = buf_new(out_count, size), *am = buf_new(out_count, 1);
    unsigned char *dy = buf_new(out_count, size), *dx = buf_new(in_count, size);
    for (size_t i = 0; i < in_count; i++)
        test_float_put(x, dt, i, ties ? (double)test_rng_below(&rng, 3) - 1.0 : 4.0 * test_rng_unit(&rng) - 2.0);
    if (nans)
        for (int k = 0; k < 3; k++) test_float_put(x, dt, test_rng_below(&rng, (uint32_t)in_count), NAN);
    fill(dy, dt, out_count, 0.0, 1.0);
    CHECK(k_twin_maxpool_forward(y, am, x, dt, &p) == 0, "%s: status", what);
    CHECK(guard_ok(y, out_count * size) && guard_ok(am, out_count), "%s: a guard changed", what);
    for (int n = 0; n < p.n; n++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++)
                for (int ch = 0; ch < p.c; ch++) {
                    size_t o = (((size_t)n * ho + oh) * wo + ow) * p.c + ch;
                    int best = -1;
                    double bv = 0;
                    for (int kh = 0; kh < p.kernel; kh++)
                        for (int kw = 0; kw < p.kernel; kw++) {
                            int ih = oh * p.stride - p.pad + kh, iw = ow * p.stride - p.pad + kw;
                            if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w) continue;
                            double v = test_float_get(x, dt, (((size_t)n * p.h + ih) * p.w + iw) * p.c + ch);
                            if (best >= 0 && isnan(bv)) continue;
                            if (best < 0 || isnan(v) || v > bv) best = kh * p.kernel + kw, bv = v;
                        }
                    double got = test_float_get(y, dt, o);
                    int same = isnan(bv) ? isnan(got) : got == bv;
                    CHECK(same && am[o] == best, "%s: output %zu: %g argmax %d, want %g at %d", what, o, got, am[o], bv,
                          best);
                }
    CHECK(k_twin_maxpool_backward(dx, dy, am, dt, &p) == 0, "%s: backward status", what);
    CHECK(guard_ok(dx, in_count * size), "%s: backward guard", what);
    double *want = calloc(in_count, sizeof(double)), *mag = calloc(in_count, sizeof(double));
    int *hits = calloc(in_count, sizeof(int));
    for (int n = 0; n < p.n; n++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++)
                for (int ch = 0; ch < p.c; ch++) {
                    size_t o = (((size_t)n * ho + oh) * wo + ow) * p.c + ch;
                    int ih = oh * p.stride - p.pad + am[o] / p.kernel, iw = ow * p.stride - p.pad + am[o] % p.kernel;
                    size_t i = (((size_t)n * p.h + ih) * p.w + iw) * p.c + ch;
                    want[i] += test_float_get(dy, dt, o), mag[i] += fabs(test_float_get(dy, dt, o)), hits[i]++;
                }
    for (size_t i = 0; i < in_count; i++) {
        double e = hits[i] * U * mag[i];
        if (!near(what, i, test_float_get(dx, dt, i), want[i], e + test_float_ulp(dt, fabs(want[i]) + e))) break;
    }
    free(want), free(mag), free(hits), free(x), free(y), free(am), free(dy), free(dx);
}

static void test_avgpool(int n, int hw, int c, k_dtype_t dt)
{
    const size_t size = k_dtype_size(dt), in_count = (size_t)n * hw * c, out_count = (size_t)n * c;
    char what[96];
    snprintf(what, sizeof(what), "avgpool %dx%dx%d %s", n, hw, c, dname(dt));
    unsigned char *x = buf_new(in_count, size), *y = buf_new(out_count, size);
    unsigned char *dx = buf_new(in_count, size);
    fill(x, dt, in_count, 0.5, 2.0);
    CHECK(k_twin_avgpool_forward(y, x, dt, n, hw, c) == 0 && guard_ok(y, out_count * size), "%s: status", what);
    for (size_t o = 0; o < out_count; o++) {
        size_t s = o / c, ch = o % c;
        double sum = 0, mag = 0;
        for (int i = 0; i < hw; i++) {
            double v = test_float_get(x, dt, (s * hw + i) * c + ch);
            sum += v, mag += fabs(v);
        }
        double want = sum / hw, e = (hw + 2) * U * mag / hw;
        if (!near(what, o, test_float_get(y, dt, o), want, e + test_float_ulp(dt, fabs(want) + e))) break;
    }
    /* backward with y as dy */
    CHECK(k_twin_avgpool_backward(dx, y, dt, n, hw, c) == 0 && guard_ok(dx, in_count * size), "%s: bwd status", what);
    for (size_t i = 0; i < in_count; i++) {
        size_t s = i / ((size_t)hw * c), ch = i % c;
        double want = test_float_get(y, dt, s * c + ch) / hw, e = U * fabs(want);
        if (!near(what, i, test_float_get(dx, dt, i), want, e + test_float_ulp(dt, fabs(want) + e))) break;
    }
    free(x), free(y), free(dx);
}

/* ---- relu, add ------------------------------------------------------------------ */

static void test_elementwise(k_dtype_t dt, size_t count)
{
    const size_t size = k_dtype_size(dt);
    char what[64];
    snprintf(what, sizeof(what), "relu/add %s %zu", dname(dt), count);
    unsigned char *a = buf_new(count, size), *b = buf_new(count, size), *y = buf_new(count, size);
    unsigned char *dx = buf_new(count, size);
    fill(a, dt, count, 0.0, 2.0);
    fill(b, dt, count, 0.0, 2.0);
    if (count > 3) {
        test_float_put(a, dt, 0, NAN), test_float_put(a, dt, 1, -0.0), test_float_put(a, dt, 2, 0.0);
    }
    CHECK(k_twin_relu_forward(y, a, dt, count) == 0 && guard_ok(y, count * size), "%s: relu status", what);
    for (size_t i = 0; i < count; i++) {
        double v = test_float_get(a, dt, i), got = test_float_get(y, dt, i);
        int ok = isnan(v) ? isnan(got) : v > 0 ? got == v : (got == 0 && !signbit(got));
        CHECK(ok, "%s: relu(%g) = %g", what, v, got);
        if (!ok) break;
    }
    CHECK(k_twin_relu_backward(dx, y, b, dt, count) == 0 && guard_ok(dx, count * size), "%s: relu bwd", what);
    for (size_t i = 0; i < count; i++) {
        double want = test_float_get(y, dt, i) > 0 ? test_float_get(b, dt, i) : 0.0, got = test_float_get(dx, dt, i);
        CHECK(got == want, "%s: relu backward %zu: %g, want %g", what, i, got, want);
        if (got != want) break;
    }
    for (int relu = 0; relu < 2; relu++) {
        memset(y, 0xFF, count * size);
        CHECK(k_twin_add_forward(y, a, b, dt, count, relu) == 0 && guard_ok(y, count * size), "%s: add", what);
        for (size_t i = 3; i < count; i++) {
            double want = test_float_get(a, dt, i) + test_float_get(b, dt, i);
            if (relu && want < 0) want = 0;
            if (!near(what, i, test_float_get(y, dt, i), want, U * fabs(want) + test_float_ulp(dt, fabs(want)))) break;
        }
        CHECK(count <= 3 || isnan(test_float_get(y, dt, 0)), "%s: add of a NaN", what);
    }
    /* in place: y = relu(y) */
    memcpy(y, a, count * size);
    CHECK(k_twin_relu_forward(y, y, dt, count) == 0, "%s: relu in place", what);
    free(a), free(b), free(y), free(dx);
}

/* ---- bad arguments -------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, s[8] = {0}, out[8];
    memset(out, 0xFF, sizeof(out));
    const int E = K_CUDA_ERR_INVALID_VALUE;
    CHECK(k_twin_bn_forward_train(out, v, NULL, K_DTYPE_F32, 1, 1, v, v, s, s, 0.1f, 1e-5f, 0, s, s) == E, "rows 1");
    CHECK(k_twin_bn_forward_train(out, v, NULL, K_DTYPE_F64, 4, 2, v, v, s, s, 0.1f, 1e-5f, 0, s, s) == E, "f64");
    CHECK(k_twin_bn_forward_train(out, v, NULL, K_DTYPE_F32, 4, 2, v, v, s, s, 0.1f, 0.0f, 0, s, s) == E, "eps 0");
    CHECK(k_twin_bn_forward_train(out, v, NULL, K_DTYPE_F32, 4, 2, v, v, s, s, 1.5f, 1e-5f, 0, s, s) == E, "momentum");
    CHECK(k_twin_bn_forward_train(out, v, NULL, K_DTYPE_F32, 4, 0, v, v, s, s, 0.1f, 1e-5f, 0, s, s) == E, "c 0");
    CHECK(k_twin_bn_forward_train((char *)out + 1, v, NULL, K_DTYPE_F32, 4, 2, v, v, s, s, 0.1f, 1e-5f, 0, s, s) == E,
          "unaligned");
    CHECK(k_twin_bn_forward_infer(out, v, NULL, K_DTYPE_F32, 4, 2, NULL, v, s, s, 1e-5f, 0) == E, "NULL gamma");
    CHECK(k_twin_bn_backward(out, v, v, v, NULL, K_DTYPE_F32, 4, 2, v, s, s, s, s, K_DTYPE_F32) == E,
          "dresidual without y");
    CHECK(k_twin_bn_backward(out, out, v, v, v, K_DTYPE_F32, 4, 2, v, s, s, s, s, K_DTYPE_F32) == E, "dresidual == dx");
    CHECK(k_twin_bn_backward(out, NULL, v, v, NULL, K_DTYPE_F32, 4, 2, v, s, s, s, s, K_DTYPE_I32) == E,
          "grad dtype i32");
    k_cuda_pool_t bad[] = {{1, 4, 4, 1, 3, 2, 2}, {1, 4, 4, 1, 0, 1, 0}, {1, 4, 4, 1, 3, 0, 1},
                           {1, 1, 1, 1, 3, 1, 0}, {0, 4, 4, 1, 3, 2, 1}, {1, 20, 20, 1, 16, 1, 0}};
    uint8_t am[8];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(k_twin_maxpool_forward(out, am, v, K_DTYPE_F32, &bad[i]) == E, "bad pool %zu", i);
        CHECK(k_twin_maxpool_backward(out, v, am, K_DTYPE_F32, &bad[i]) == E, "bad pool bwd %zu", i);
    }
    CHECK(k_twin_maxpool_forward(out, am, v, K_DTYPE_F32, NULL) == E, "NULL pool");
    CHECK(k_twin_avgpool_forward(out, v, K_DTYPE_F32, 1, 0, 1) == E, "hw 0");
    CHECK(k_twin_avgpool_backward(out, v, K_DTYPE_U8, 1, 1, 1) == E, "avg u8");
    CHECK(k_twin_relu_forward(out, v, K_DTYPE_I64, 2) == E, "relu i64");
    CHECK(k_twin_relu_forward(NULL, NULL, K_DTYPE_F32, 0) == 0, "relu of nothing");
    CHECK(k_twin_add_forward(out, v, NULL, K_DTYPE_F32, 2, 0) == E, "add NULL b");
    int untouched = 1;
    for (int i = 0; i < 8; i++) untouched &= isnan(out[i]);
    CHECK(untouched, "a refused call wrote its output");
}

int main(void)
{
    rng = test_rng_seeded(TEST_RNG_SEED ^ 0x6E6E); /* "nn" */
    for (size_t k = 0; k < N_BN_CASES; k++)
        for (int d = 0; d < 3; d++) {
            const bn_case_t *bc = &bn_cases[k];
            if (dtypes[d] != K_DTYPE_F32 && bc->mu >= 300.0) /* f16 / bf16 cannot hold sigma 1 at 300 */
                continue;
            test_bn_forward(bc, dtypes[d], 0, 0, 0);
            test_bn_forward(bc, dtypes[d], 1, 0, 0);
            test_bn_forward(bc, dtypes[d], 1, 1, k % 3 == 0);
            test_bn_forward(bc, dtypes[d], 0, 1, 0);
            test_bn_backward(bc, dtypes[d], K_DTYPE_F32, 0, 0, 0);
            test_bn_backward(bc, dtypes[d], dtypes[(d + k) % 3], 1, 1, 0);
            test_bn_backward(bc, dtypes[d], K_DTYPE_F32, 1, 0, 1);
        }
    const k_cuda_pool_t pools[] = {
        {2, 7, 5, 3, 3, 2, 1}, {1, 9, 9, 10, 3, 2, 1},   {3, 8, 6, 5, 2, 2, 0}, {1, 6, 7, 9, 3, 1, 1},
        {2, 3, 4, 2, 1, 1, 0}, {1, 16, 16, 17, 3, 2, 1}, {1, 5, 5, 1, 5, 1, 2}, {2, 11, 13, 3, 4, 3, 2},
        {1, 8, 9, 2, 2, 3, 0}, /* stride past the kernel: inputs no window covers */
    };
    for (size_t k = 0; k < sizeof(pools) / sizeof(pools[0]); k++)
        for (int d = 0; d < 3; d++)
            for (int ties = 0; ties < 2; ties++) test_maxpool(pools[k], dtypes[d], ties, k % 2);
    for (int d = 0; d < 3; d++) {
        test_avgpool(1, 1, 1, dtypes[d]);
        test_avgpool(3, 49, 67, dtypes[d]);
        test_avgpool(2, 64, 8, dtypes[d]);
        test_avgpool(5, 7, 2048, dtypes[d]);
        for (size_t count = 0; count < 40; count += 13) test_elementwise(dtypes[d], count);
        test_elementwise(dtypes[d], 100003);
    }
    test_bad_arguments();
    printf("%s: %d checks, %d failures\n", failures ? "FAIL" : "ok", checks, failures);
    return failures ? 1 : 0;
}
