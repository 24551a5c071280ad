/*
 * test_ops.c - checks every op of a compute backend (trainer/backend.h),
 * on small shapes, against references written here:
 *
 *  - forward results against naive double-precision loops (direct
 *    convolution, batch norm with the batch's or the running statistics,
 *    max / global average pooling, linear, relu, add, softmax
 *    cross-entropy with label smoothing), and the running statistics
 *    update (unbiased variance, as PyTorch);
 *  - every gradient against central finite differences of the backend's
 *    own forward pass, through a random projection L = sum(y * r) computed
 *    in double. Linear ops (conv, linear, average pooling, add) use a large
 *    step, which is exact for them; max pooling uses inputs spaced further
 *    apart than the step (no argmax flips); relu-like ops keep inputs away
 *    from the kink; batch norm uses a step small enough for its curvature;
 *  - the SGD step bit for bit against a scalar reference (torch.optim.SGD);
 *  - tensor import/export round trips, and the blocked layouts' element
 *    positions, for every layout.
 *
 * Outputs are poisoned with NaN before each op, so an element an op forgets
 * to write fails (NaN never passes). One line per check group gives its
 * max abs error and max error relative to the largest reference value.
 *
 * Usage: test_ops [--block 0|1|8|16] [--threads N] [-v]
 *   --block forces the cpu backend's activation layout (0 = its choice),
 *   -v prints the oneDNN implementation of every primitive.
 * Exit status 0 = all passed, 1 = something failed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"

static const struct tr_backend_ops *ops;
static tr_backend_t *be;

/* ---- random numbers (xorshift64*, fixed seed) ---------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }
static float rng_sym(float scale) { return (float)((2.0 * rng_unit() - 1.0) * scale); }

static float *rand_array(size_t count, float scale)
{
    float *a = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++)
        a[i] = rng_sym(scale);
    return a;
}

static float *nan_array(size_t count)
{
    float *a = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++)
        a[i] = NAN;
    return a;
}

static double dot(const float *y, const float *r, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += (double)y[i] * (double)r[i];
    return s;
}

/* ---- error bookkeeping ----------------------------------------------------- */

typedef struct {
    double max_abs; /* max |got - want| */
    double max_ref; /* max |want| */
    long count, bad; /* elements, and NaN / non-finite results */
} err_t;

static void err_add(err_t *e, double got, double want)
{
    e->count++;
    if (!isfinite(got)) {
        e->bad++;
        return;
    }
    double d = fabs(got - want);
    if (d > e->max_abs)
        e->max_abs = d;
    if (fabs(want) > e->max_ref)
        e->max_ref = fabs(want);
}

/* Pass when max_abs <= tol * max_ref (an error relative to the tensor's
 * scale, so tiny elements do not need an impossible relative accuracy). */
static void err_report(const char *what, const err_t *e, double tol)
{
    double rel = e->max_ref > 0 ? e->max_abs / e->max_ref : e->max_abs;
    int ok = e->bad == 0 && e->count > 0 && rel <= tol;
    CHECK(ok, "%s: max abs %.3g, rel %.3g > %.1g or %ld non-finite of %ld", what, e->max_abs, rel, tol, e->bad,
          e->count);
    printf("%s %-58s max abs %9.3g  rel %9.3g  (tol %.0e, %ld values)\n", ok ? "ok  " : "FAIL", what, e->max_abs,
           rel, tol, e->count);
}

static void compare(const char *what, const float *got, const double *want, size_t count, double tol)
{
    err_t e = {0};
    for (size_t i = 0; i < count; i++)
        err_add(&e, got[i], want[i]);
    err_report(what, &e, tol);
}

#define STATUS_OK(call)                                                                  \
    do {                                                                                 \
        hora_status_t st_ = (call);                                                      \
        CHECK(st_ == HORA_OK, "%s returned %d", #call, (int)st_);                        \
    } while (0)

/* ---- tensors --------------------------------------------------------------- */

static tr_tensor_t tensor_make(int n, int c, int h, int w)
{
    tr_tensor_t t;
    memset(&t, 0, sizeof(t));
    STATUS_OK(ops->tensor_alloc(be, n, c, h, w, &t));
    return t;
}

static void tensor_put(tr_tensor_t *t, const float *host) { STATUS_OK(ops->tensor_import(be, host, t)); }
static void tensor_get(const tr_tensor_t *t, float *host) { STATUS_OK(ops->tensor_export(be, t, host)); }

static void tensor_poison(tr_tensor_t *t)
{
    float *nan = nan_array(tr_tensor_count(t));
    tensor_put(t, nan);
    free(nan);
}

/* ---- finite differences ------------------------------------------------- */

typedef double (*loss_fn)(void *ctx);

#define FD_SAMPLES 48

/* Compare analytic[i] with (L(p + eps e_i) - L(p - eps e_i)) / 2 eps for
 * all i (small tensors) or FD_SAMPLES random ones plus both ends; the loss
 * reads p, which this perturbs in place and restores. skip[i] != 0 leaves
 * an element out (next to a kink). */
static void fd_check(const char *what, float *p, size_t count, const float *analytic, double eps, loss_fn loss,
                     void *ctx, const unsigned char *skip, double tol)
{
    err_t e = {0};
    /* The scale: the largest analytic gradient over the whole tensor. */
    for (size_t i = 0; i < count; i++)
        if (isfinite(analytic[i]) && fabs(analytic[i]) > e.max_ref)
            e.max_ref = fabs(analytic[i]);
    size_t samples = count <= 2 * FD_SAMPLES ? count : FD_SAMPLES + 2;
    for (size_t k = 0; k < samples; k++) {
        size_t i = count <= 2 * FD_SAMPLES ? k : k == 0 ? 0 : k == 1 ? count - 1 : rng_u64() % count;
        if (skip != NULL && skip[i])
            continue;
        float v = p[i];
        p[i] = (float)(v + eps);
        double up_eps = (double)p[i] - v; /* the step actually taken, after rounding */
        double lp = loss(ctx);
        p[i] = (float)(v - eps);
        double down_eps = v - (double)p[i];
        double lm = loss(ctx);
        p[i] = v;
        double numeric = (lp - lm) / (up_eps + down_eps);
        e.count++;
        if (!isfinite(analytic[i]) || !isfinite(numeric)) {
            e.bad++;
            continue;
        }
        double d = fabs(analytic[i] - numeric);
        if (d > e.max_abs)
            e.max_abs = d;
    }
    err_report(what, &e, tol);
}

/* ---- convolution ---------------------------------------------------------- */

static void conv_ref(const tr_conv_desc_t *d, int ho, int wo, const float *x, const float *w, double *y)
{
    for (int n = 0; n < d->n; n++)
        for (int o = 0; o < d->c_out; o++)
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    double s = 0.0;
                    for (int i = 0; i < d->c_in; i++)
                        for (int kh = 0; kh < d->kernel; kh++)
                            for (int kw = 0; kw < d->kernel; kw++) {
                                int ih = oh * d->stride - d->pad + kh, iw = ow * d->stride - d->pad + kw;
                                if (ih < 0 || ih >= d->h_in || iw < 0 || iw >= d->w_in)
                                    continue;
                                s += (double)x[((size_t)(n * d->c_in + i) * d->h_in + ih) * d->w_in + iw] *
                                     w[((size_t)(o * d->c_in + i) * d->kernel + kh) * d->kernel + kw];
                            }
                    y[((size_t)(n * d->c_out + o) * ho + oh) * wo + ow] = s;
                }
}

typedef struct {
    tr_layer_t *layer;
    tr_tensor_t x, y;
    float *x_host, *w, *y_host, *r;
    size_t y_count;
} conv_ctx_t;

static double conv_loss(void *p)
{
    conv_ctx_t *c = p;
    tensor_put(&c->x, c->x_host);
    STATUS_OK(ops->conv_forward(c->layer, &c->x, c->w, &c->y));
    tensor_get(&c->y, c->y_host);
    return dot(c->y_host, c->r, c->y_count);
}

static void test_conv(tr_conv_desc_t d)
{
    char what[128], name[96];
    snprintf(name, sizeof(name), "conv %dx%dx%dx%d->%d k%d s%d p%d", d.n, d.c_in, d.h_in, d.w_in, d.c_out,
             d.kernel, d.stride, d.pad);
    int ho = (d.h_in + 2 * d.pad - d.kernel) / d.stride + 1, wo = (d.w_in + 2 * d.pad - d.kernel) / d.stride + 1;
    size_t x_count = (size_t)d.n * d.c_in * d.h_in * d.w_in, y_count = (size_t)d.n * d.c_out * ho * wo;
    size_t w_count = (size_t)d.c_out * d.c_in * d.kernel * d.kernel;

    conv_ctx_t c = {0};
    STATUS_OK(ops->conv_create(be, &d, &c.layer));
    if (c.layer == NULL)
        return;
    c.x = tensor_make(d.n, d.c_in, d.h_in, d.w_in);
    c.y = tensor_make(d.n, d.c_out, ho, wo);
    tr_tensor_t dy = tensor_make(d.n, d.c_out, ho, wo), dx = tensor_make(d.n, d.c_in, d.h_in, d.w_in);
    c.x_host = rand_array(x_count, 1.0f);
    c.w = rand_array(w_count, 0.5f);
    c.r = rand_array(y_count, 1.0f);
    c.y_host = malloc(y_count * sizeof(float));
    c.y_count = y_count;
    float *dx_host = malloc(x_count * sizeof(float)), *dw = nan_array(w_count);
    double *y_ref = malloc(y_count * sizeof(double));

    /* forward against the direct loops */
    tensor_poison(&c.y);
    conv_loss(&c);
    conv_ref(&d, ho, wo, c.x_host, c.w, y_ref);
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y_host, y_ref, y_count, 1e-5);

    /* gradients of sum(y * r): dy = r */
    tensor_put(&dy, c.r);
    tensor_poison(&dx);
    STATUS_OK(ops->conv_backward_data(c.layer, &dy, c.w, &dx));
    tensor_get(&dx, dx_host);
    STATUS_OK(ops->conv_backward_weights(c.layer, &c.x, &dy, dw));

    /* Linear in x and in w: a step of 0.5 is exact up to float noise. */
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, 0.5, conv_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward weights (fd)", name);
    fd_check(what, c.w, w_count, dw, 0.5, conv_loss, &c, NULL, 1e-4);

    /* Shape checks: a y of the wrong size is refused. */
    tr_tensor_t wrong = tensor_make(d.n, d.c_out, ho + 1, wo);
    CHECK(ops->conv_forward(c.layer, &c.x, c.w, &wrong) == HORA_ERR_INVALID_ARG, "%s: wrong y accepted", name);
    ops->tensor_free(be, &wrong);

    ops->layer_free(c.layer);
    ops->tensor_free(be, &c.x);
    ops->tensor_free(be, &c.y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(c.x_host);
    free(c.w);
    free(c.r);
    free(c.y_host);
    free(dx_host);
    free(dw);
    free(y_ref);
}

/* ---- batch norm ------------------------------------------------------------ */

/* y = gamma (x - mean) / sqrt(var + eps) + beta per channel, relu if asked;
 * mean, var: the batch's (biased) when stats_in is NULL, else stats_in. */
static void bn_ref(const tr_bn_desc_t *d, const float *x, const float *gamma, const float *beta,
                   const float *mean_in, const float *var_in, double *mean_out, double *var_out, double *y,
                   int relu)
{
    size_t hw = (size_t)d->h * d->w, m = (size_t)d->n * hw;
    for (int c = 0; c < d->c; c++) {
        double mean = 0, var = 0;
        if (mean_in == NULL) {
            for (int n = 0; n < d->n; n++)
                for (size_t i = 0; i < hw; i++)
                    mean += x[((size_t)n * d->c + c) * hw + i];
            mean /= (double)m;
            for (int n = 0; n < d->n; n++)
                for (size_t i = 0; i < hw; i++) {
                    double v = x[((size_t)n * d->c + c) * hw + i] - mean;
                    var += v * v;
                }
            var /= (double)m;
        } else {
            mean = mean_in[c];
            var = var_in[c];
        }
        if (mean_out) {
            mean_out[c] = mean;
            var_out[c] = var;
        }
        double inv = 1.0 / sqrt(var + d->epsilon);
        for (int n = 0; n < d->n; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t k = ((size_t)n * d->c + c) * hw + i;
                double v = gamma[c] * (x[k] - mean) * inv + beta[c];
                y[k] = relu && v < 0 ? 0.0 : v;
            }
    }
}

typedef struct {
    tr_layer_t *layer;
    tr_tensor_t x, y;
    float *x_host, *gamma, *beta, *rm, *rv, *y_host, *r;
    size_t count;
} bn_ctx_t;

static double bn_loss(void *p)
{
    bn_ctx_t *b = p;
    tensor_put(&b->x, b->x_host);
    STATUS_OK(ops->bn_forward_train(b->layer, &b->x, b->gamma, b->beta, b->rm, b->rv, &b->y));
    tensor_get(&b->y, b->y_host);
    return dot(b->y_host, b->r, b->count);
}

static void test_bn(tr_bn_desc_t d)
{
    char what[128], name[96];
    snprintf(name, sizeof(name), "bn %dx%dx%dx%d%s", d.n, d.c, d.h, d.w, d.fuse_relu ? " +relu" : "");
    size_t count = (size_t)d.n * d.c * d.h * d.w, m = (size_t)d.n * d.h * d.w;

    bn_ctx_t b = {0};
    STATUS_OK(ops->bn_create(be, &d, &b.layer));
    if (b.layer == NULL)
        return;
    b.x = tensor_make(d.n, d.c, d.h, d.w);
    b.y = tensor_make(d.n, d.c, d.h, d.w);
    tr_tensor_t dy = tensor_make(d.n, d.c, d.h, d.w), dx = tensor_make(d.n, d.c, d.h, d.w);
    b.count = count;
    b.x_host = malloc(count * sizeof(float));
    b.gamma = malloc(d.c * sizeof(float));
    b.beta = malloc(d.c * sizeof(float));
    b.rm = rand_array(d.c, 1.0f);
    b.rv = malloc(d.c * sizeof(float));
    b.y_host = malloc(count * sizeof(float));
    b.r = rand_array(count, 1.0f);
    double *y_ref = malloc(count * sizeof(double)), *mean = malloc(d.c * sizeof(double));
    double *var = malloc(d.c * sizeof(double));
    float *dx_host = malloc(count * sizeof(float)), *dgamma = nan_array(d.c), *dbeta = nan_array(d.c);
    unsigned char *skip = calloc(count, 1);

    /* Channels with their own offset and scale. With the relu fused, draw
     * again until no value before the relu lies within 6e-3 of the kink:
     * a step of 1e-3 in gamma or beta moves every value of the channel by
     * up to |x_hat| * 1e-3 (|x_hat| stays below 3 here), which must not
     * carry any across. */
    int drawn = 0;
    for (int attempt = 0; attempt < 5000 && !drawn; attempt++) {
        for (int c = 0; c < d.c; c++) {
            b.gamma[c] = 0.5f + (float)rng_unit();
            b.beta[c] = rng_sym(0.5f);
            b.rv[c] = 0.5f + (float)rng_unit();
            float offset = rng_sym(2.0f), scale = 0.5f + 2.0f * (float)rng_unit();
            for (int n = 0; n < d.n; n++)
                for (int i = 0; i < d.h * d.w; i++)
                    b.x_host[((size_t)n * d.c + c) * d.h * d.w + i] = offset + scale * rng_sym(1.0f);
        }
        bn_ref(&d, b.x_host, b.gamma, b.beta, NULL, NULL, mean, var, y_ref, 0);
        double closest = INFINITY;
        for (size_t i = 0; i < count; i++)
            closest = fmin(closest, fabs(y_ref[i]));
        drawn = !d.fuse_relu || closest > 6e-3;
    }
    CHECK(drawn, "%s: no input found that keeps away from the relu's kink", name);
    /* The perturbed element itself moves by about eps * gamma / sigma. */
    for (size_t i = 0; i < count; i++)
        skip[i] = d.fuse_relu && fabs(y_ref[i]) < 0.02;

    /* forward (training) and the running statistics */
    float *rm0 = malloc(d.c * sizeof(float)), *rv0 = malloc(d.c * sizeof(float));
    memcpy(rm0, b.rm, d.c * sizeof(float));
    memcpy(rv0, b.rv, d.c * sizeof(float));
    tensor_poison(&b.y);
    bn_loss(&b);
    bn_ref(&d, b.x_host, b.gamma, b.beta, NULL, NULL, mean, var, y_ref, d.fuse_relu);
    snprintf(what, sizeof(what), "%s forward train", name);
    compare(what, b.y_host, y_ref, count, 1e-5);
    double *run_ref = malloc(2 * d.c * sizeof(double));
    for (int c = 0; c < d.c; c++) {
        run_ref[c] = (1.0 - d.momentum) * rm0[c] + d.momentum * mean[c];
        run_ref[d.c + c] = (1.0 - d.momentum) * rv0[c] + d.momentum * var[c] * (double)m / (double)(m - 1);
    }
    snprintf(what, sizeof(what), "%s running mean", name);
    compare(what, b.rm, run_ref, d.c, 1e-5);
    snprintf(what, sizeof(what), "%s running var (unbiased)", name);
    compare(what, b.rv, run_ref + d.c, d.c, 1e-5);

    /* forward (inference) with the running statistics just updated */
    tensor_poison(&b.y);
    STATUS_OK(ops->bn_forward_infer(b.layer, &b.x, b.gamma, b.beta, b.rm, b.rv, &b.y));
    tensor_get(&b.y, b.y_host);
    bn_ref(&d, b.x_host, b.gamma, b.beta, b.rm, b.rv, NULL, NULL, y_ref, d.fuse_relu);
    snprintf(what, sizeof(what), "%s forward inference", name);
    compare(what, b.y_host, y_ref, count, 1e-5);

    /* backward after a training forward on the same x */
    bn_loss(&b);
    tensor_put(&dy, b.r);
    tensor_poison(&dx);
    STATUS_OK(ops->bn_backward(b.layer, &b.x, &dy, b.gamma, &dx, dgamma, dbeta));
    tensor_get(&dx, dx_host);

    /* The fused relu's backward is the plain one's on dy masked by y > 0;
     * checked through the layer's own output, it needs no step at all. */
    double eps = d.fuse_relu ? 1e-3 : 1e-2;
    double tol = d.fuse_relu ? 3e-3 : 5e-4;
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, b.x_host, count, dx_host, eps, bn_loss, &b, skip, tol);
    snprintf(what, sizeof(what), "%s backward gamma (fd)", name);
    fd_check(what, b.gamma, d.c, dgamma, eps, bn_loss, &b, NULL, tol);
    snprintf(what, sizeof(what), "%s backward beta (fd)", name);
    fd_check(what, b.beta, d.c, dbeta, eps, bn_loss, &b, NULL, tol);

    if (d.fuse_relu) {
        /* Against an unfused layer fed dy * (y > 0). */
        tr_bn_desc_t plain_d = d;
        plain_d.fuse_relu = 0;
        tr_layer_t *plain = NULL;
        STATUS_OK(ops->bn_create(be, &plain_d, &plain));
        float *masked = malloc(count * sizeof(float)), *dx2 = malloc(count * sizeof(float));
        float *dg2 = nan_array(d.c), *db2 = nan_array(d.c);
        bn_loss(&b); /* y_host = relu(bn(x)) */
        for (size_t i = 0; i < count; i++)
            masked[i] = b.y_host[i] > 0 ? b.r[i] : 0.0f;
        STATUS_OK(ops->bn_forward_train(plain, &b.x, b.gamma, b.beta, b.rm, b.rv, &b.y));
        tensor_put(&dy, masked);
        STATUS_OK(ops->bn_backward(plain, &b.x, &dy, b.gamma, &dx, dg2, db2));
        tensor_get(&dx, dx2);
        double *want = malloc((count + 2 * d.c) * sizeof(double));
        for (size_t i = 0; i < count; i++)
            want[i] = dx2[i];
        snprintf(what, sizeof(what), "%s backward = unfused on masked dy", name);
        compare(what, dx_host, want, count, 1e-5);
        for (int c = 0; c < d.c; c++) {
            want[c] = dg2[c];
            want[d.c + c] = db2[c];
        }
        snprintf(what, sizeof(what), "%s dgamma = unfused on masked dy", name);
        compare(what, dgamma, want, d.c, 1e-5);
        snprintf(what, sizeof(what), "%s dbeta = unfused on masked dy", name);
        compare(what, dbeta, want + d.c, d.c, 1e-5);
        ops->layer_free(plain);
        free(masked);
        free(dx2);
        free(dg2);
        free(db2);
        free(want);
    }

    ops->layer_free(b.layer);
    ops->tensor_free(be, &b.x);
    ops->tensor_free(be, &b.y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(b.x_host);
    free(b.gamma);
    free(b.beta);
    free(b.rm);
    free(b.rv);
    free(b.y_host);
    free(b.r);
    free(rm0);
    free(rv0);
    free(run_ref);
    free(y_ref);
    free(mean);
    free(var);
    free(dx_host);
    free(dgamma);
    free(dbeta);
    free(skip);
}

/* ---- pooling ---------------------------------------------------------------- */

static void pool_ref(const tr_pool_desc_t *d, int ho, int wo, const float *x, double *y)
{
    for (int n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++) {
            const float *xc = x + ((size_t)n * d->c + c) * d->h * d->w;
            double *yc = y + ((size_t)n * d->c + c) * ho * wo;
            if (d->kind == TR_POOL_GLOBAL_AVERAGE) {
                double s = 0;
                for (int i = 0; i < d->h * d->w; i++)
                    s += xc[i];
                yc[0] = s / (d->h * d->w);
                continue;
            }
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    double m = -INFINITY;
                    for (int kh = 0; kh < d->kernel; kh++)
                        for (int kw = 0; kw < d->kernel; kw++) {
                            int ih = oh * d->stride - d->pad + kh, iw = ow * d->stride - d->pad + kw;
                            if (ih >= 0 && ih < d->h && iw >= 0 && iw < d->w && xc[ih * d->w + iw] > m)
                                m = xc[ih * d->w + iw];
                        }
                    yc[oh * wo + ow] = m;
                }
        }
}

typedef struct {
    tr_layer_t *layer;
    tr_tensor_t x, y;
    float *x_host, *y_host, *r;
    size_t y_count;
} pool_ctx_t;

static double pool_loss(void *p)
{
    pool_ctx_t *c = p;
    tensor_put(&c->x, c->x_host);
    STATUS_OK(ops->pool_forward(c->layer, &c->x, &c->y));
    tensor_get(&c->y, c->y_host);
    return dot(c->y_host, c->r, c->y_count);
}

static void test_pool(tr_pool_desc_t d)
{
    char what[128], name[96];
    int is_max = d.kind == TR_POOL_MAX;
    if (is_max)
        snprintf(name, sizeof(name), "max pool %dx%dx%dx%d k%d s%d p%d", d.n, d.c, d.h, d.w, d.kernel, d.stride,
                 d.pad);
    else
        snprintf(name, sizeof(name), "global avg pool %dx%dx%dx%d", d.n, d.c, d.h, d.w);
    int ho = is_max ? (d.h + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    int wo = is_max ? (d.w + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    size_t x_count = (size_t)d.n * d.c * d.h * d.w, y_count = (size_t)d.n * d.c * ho * wo;

    pool_ctx_t c = {0};
    STATUS_OK(ops->pool_create(be, &d, &c.layer));
    if (c.layer == NULL)
        return;
    c.x = tensor_make(d.n, d.c, d.h, d.w);
    c.y = tensor_make(d.n, d.c, ho, wo);
    tr_tensor_t dy = tensor_make(d.n, d.c, ho, wo), dx = tensor_make(d.n, d.c, d.h, d.w);
    c.x_host = malloc(x_count * sizeof(float));
    c.y_host = malloc(y_count * sizeof(float));
    c.r = rand_array(y_count, 1.0f);
    c.y_count = y_count;
    /* Max pooling: distinct values 0.05 apart in random order, so a step of
     * 0.01 never changes which element wins a window. */
    for (size_t i = 0; i < x_count; i++)
        c.x_host[i] = is_max ? 0.05f * (float)i - 0.025f * (float)x_count : rng_sym(1.0f);
    for (size_t i = x_count; is_max && i > 1; i--) {
        size_t j = rng_u64() % i;
        float t = c.x_host[i - 1];
        c.x_host[i - 1] = c.x_host[j];
        c.x_host[j] = t;
    }
    float *dx_host = malloc(x_count * sizeof(float));
    double *y_ref = malloc(y_count * sizeof(double));

    tensor_poison(&c.y);
    pool_loss(&c);
    pool_ref(&d, ho, wo, c.x_host, y_ref);
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y_host, y_ref, y_count, 1e-6);

    tensor_put(&dy, c.r);
    tensor_poison(&dx);
    STATUS_OK(ops->pool_backward(c.layer, &dy, &dx));
    tensor_get(&dx, dx_host);
    snprintf(what, sizeof(what), "%s backward (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, is_max ? 1e-2 : 0.5, pool_loss, &c, NULL, 1e-4);

    ops->layer_free(c.layer);
    ops->tensor_free(be, &c.x);
    ops->tensor_free(be, &c.y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(c.x_host);
    free(c.y_host);
    free(c.r);
    free(dx_host);
    free(y_ref);
}

/* ---- linear ----------------------------------------------------------------- */

typedef struct {
    tr_layer_t *layer;
    tr_tensor_t x;
    float *x_host, *w, *bias, *y, *r;
    size_t y_count;
} linear_ctx_t;

static double linear_loss(void *p)
{
    linear_ctx_t *c = p;
    tensor_put(&c->x, c->x_host);
    STATUS_OK(ops->linear_forward(c->layer, &c->x, c->w, c->bias, c->y));
    return dot(c->y, c->r, c->y_count);
}

static void test_linear(tr_linear_desc_t d)
{
    char what[128], name[64];
    snprintf(name, sizeof(name), "linear %dx%d->%d", d.n, d.c_in, d.c_out);
    size_t x_count = (size_t)d.n * d.c_in, y_count = (size_t)d.n * d.c_out, w_count = (size_t)d.c_out * d.c_in;

    linear_ctx_t c = {0};
    STATUS_OK(ops->linear_create(be, &d, &c.layer));
    if (c.layer == NULL)
        return;
    c.x = tensor_make(d.n, d.c_in, 1, 1);
    tr_tensor_t dx = tensor_make(d.n, d.c_in, 1, 1);
    c.x_host = rand_array(x_count, 1.0f);
    c.w = rand_array(w_count, 0.5f);
    c.bias = rand_array(d.c_out, 0.5f);
    c.y = nan_array(y_count);
    c.r = rand_array(y_count, 1.0f);
    c.y_count = y_count;
    float *dx_host = malloc(x_count * sizeof(float)), *dw = nan_array(w_count), *db = nan_array(d.c_out);
    double *y_ref = malloc(y_count * sizeof(double));

    linear_loss(&c);
    for (int n = 0; n < d.n; n++)
        for (int o = 0; o < d.c_out; o++) {
            double s = c.bias[o];
            for (int i = 0; i < d.c_in; i++)
                s += (double)c.x_host[n * d.c_in + i] * c.w[o * d.c_in + i];
            y_ref[n * d.c_out + o] = s;
        }
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y, y_ref, y_count, 1e-5);

    tensor_poison(&dx);
    STATUS_OK(ops->linear_backward_data(c.layer, c.r, c.w, &dx));
    tensor_get(&dx, dx_host);
    STATUS_OK(ops->linear_backward_weights(c.layer, &c.x, c.r, dw, db));
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, 0.5, linear_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward weights (fd)", name);
    fd_check(what, c.w, w_count, dw, 0.5, linear_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward bias (fd)", name);
    fd_check(what, c.bias, d.c_out, db, 0.5, linear_loss, &c, NULL, 1e-4);

    ops->layer_free(c.layer);
    ops->tensor_free(be, &c.x);
    ops->tensor_free(be, &dx);
    free(c.x_host);
    free(c.w);
    free(c.bias);
    free(c.y);
    free(c.r);
    free(dx_host);
    free(dw);
    free(db);
    free(y_ref);
}

/* ---- relu, add -------------------------------------------------------------- */

typedef struct {
    tr_tensor_t a, b, y;
    float *a_host, *b_host, *y_host, *r;
    size_t count;
    int op; /* 0 relu(a), 1 a + b, 2 relu(a + b) */
} elt_ctx_t;

static double elt_loss(void *p)
{
    elt_ctx_t *e = p;
    tensor_put(&e->a, e->a_host);
    if (e->op == 0) {
        STATUS_OK(ops->relu_forward(be, &e->a, &e->y));
    } else {
        tensor_put(&e->b, e->b_host);
        STATUS_OK(ops->add_forward(be, &e->a, &e->b, e->op == 2, &e->y));
    }
    tensor_get(&e->y, e->y_host);
    return dot(e->y_host, e->r, e->count);
}

static void test_eltwise(int n, int c, int h, int w)
{
    char what[128];
    static const char *const names[] = {"relu", "add", "add+relu"};
    elt_ctx_t e = {0};
    e.count = (size_t)n * c * h * w;
    e.a = tensor_make(n, c, h, w);
    e.b = tensor_make(n, c, h, w);
    e.y = tensor_make(n, c, h, w);
    tr_tensor_t dx = tensor_make(n, c, h, w);
    e.a_host = rand_array(e.count, 1.0f);
    e.b_host = rand_array(e.count, 1.0f);
    e.y_host = malloc(e.count * sizeof(float));
    e.r = rand_array(e.count, 1.0f);
    float *dx_host = malloc(e.count * sizeof(float));
    double *ref = malloc(e.count * sizeof(double));

    for (e.op = 0; e.op < 3; e.op++) {
        /* Keep the relu's input at least 0.05 from 0 (steps are 0.01). */
        for (size_t i = 0; i < e.count; i++) {
            float s = e.a_host[i] + (e.op ? e.b_host[i] : 0.0f);
            if (fabsf(s) < 0.05f)
                e.a_host[i] += s < 0 ? -0.1f : 0.1f;
        }
        tensor_poison(&e.y);
        elt_loss(&e);
        for (size_t i = 0; i < e.count; i++) {
            float s = e.op ? e.a_host[i] + e.b_host[i] : e.a_host[i]; /* exact: one f32 add */
            ref[i] = e.op != 1 && s < 0 ? 0.0 : s;
        }
        snprintf(what, sizeof(what), "%s %dx%dx%dx%d forward", names[e.op], n, c, h, w);
        compare(what, e.y_host, ref, e.count, 0.0);

        /* The gradient with respect to a: relu_backward (for add: dy, times
         * the mask when the relu is fused, which is relu_backward on y). */
        tensor_put(&dx, e.r);
        if (e.op != 1) {
            tr_tensor_t dy = tensor_make(n, c, h, w);
            tensor_put(&dy, e.r);
            tensor_poison(&dx);
            STATUS_OK(ops->relu_backward(be, &e.y, &dy, &dx));
            ops->tensor_free(be, &dy);
        }
        tensor_get(&dx, dx_host);
        snprintf(what, sizeof(what), "%s %dx%dx%dx%d backward a (fd)", names[e.op], n, c, h, w);
        fd_check(what, e.a_host, e.count, dx_host, e.op == 1 ? 0.5 : 1e-2, elt_loss, &e, NULL, 1e-4);
        if (e.op) {
            snprintf(what, sizeof(what), "%s %dx%dx%dx%d backward b (fd)", names[e.op], n, c, h, w);
            fd_check(what, e.b_host, e.count, dx_host, e.op == 1 ? 0.5 : 1e-2, elt_loss, &e, NULL, 1e-4);
        }
    }

    /* In place: y = x, and dx = dy. */
    tensor_put(&e.a, e.a_host);
    STATUS_OK(ops->relu_forward(be, &e.a, &e.a));
    tensor_get(&e.a, e.y_host);
    for (size_t i = 0; i < e.count; i++)
        ref[i] = e.a_host[i] < 0 ? 0.0 : e.a_host[i];
    snprintf(what, sizeof(what), "relu %dx%dx%dx%d in place", n, c, h, w);
    compare(what, e.y_host, ref, e.count, 0.0);
    tensor_put(&dx, e.r);
    STATUS_OK(ops->relu_backward(be, &e.a, &dx, &dx));
    tensor_get(&dx, dx_host);
    for (size_t i = 0; i < e.count; i++)
        ref[i] = e.a_host[i] > 0 ? e.r[i] : 0.0;
    snprintf(what, sizeof(what), "relu backward %dx%dx%dx%d in place", n, c, h, w);
    compare(what, dx_host, ref, e.count, 0.0);
    /* A NaN goes through relu, as in torch.relu. */
    e.a_host[0] = NAN;
    tensor_put(&e.a, e.a_host);
    STATUS_OK(ops->relu_forward(be, &e.a, &e.y));
    tensor_get(&e.y, e.y_host);
    CHECK(isnan(e.y_host[0]), "relu(NaN) = %g", (double)e.y_host[0]);
    /* Mismatched shapes are refused. */
    tr_tensor_t other = tensor_make(n, c, h + 1, w);
    CHECK(ops->add_forward(be, &e.a, &other, 0, &e.y) == HORA_ERR_INVALID_ARG, "add: shape mismatch accepted");
    ops->tensor_free(be, &other);

    ops->tensor_free(be, &e.a);
    ops->tensor_free(be, &e.b);
    ops->tensor_free(be, &e.y);
    ops->tensor_free(be, &dx);
    free(e.a_host);
    free(e.b_host);
    free(e.y_host);
    free(e.r);
    free(dx_host);
    free(ref);
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

typedef struct {
    float *logits, *dlogits, smoothing;
    int32_t *labels;
    int n, k;
} xent_ctx_t;

static double xent_loss(void *p)
{
    xent_ctx_t *x = p;
    float loss = NAN;
    float *scratch = malloc((size_t)x->n * x->k * sizeof(float));
    STATUS_OK(ops->softmax_xent(be, x->logits, x->labels, x->n, x->k, x->smoothing, &loss, scratch));
    free(scratch);
    return loss;
}

static void test_softmax_xent(int n, int k, float smoothing)
{
    char what[128];
    size_t count = (size_t)n * k;
    xent_ctx_t x = {rand_array(count, 3.0f), nan_array(count), smoothing, malloc(n * sizeof(int32_t)), n, k};
    for (int i = 0; i < n; i++)
        x.labels[i] = (int32_t)(rng_u64() % k);
    x.logits[0] += 40.0f; /* exp would overflow without the max subtracted */
    double *dref = malloc(count * sizeof(double)), loss_ref = 0;
    for (int i = 0; i < n; i++) {
        const float *z = x.logits + (size_t)i * k;
        double lse = 0, m = z[0];
        for (int j = 0; j < k; j++)
            m = fmax(m, z[j]);
        for (int j = 0; j < k; j++)
            lse += exp(z[j] - m);
        lse = m + log(lse);
        for (int j = 0; j < k; j++) {
            double t = (1.0 - smoothing) * (j == x.labels[i]) + smoothing / k;
            loss_ref -= t * (z[j] - lse);
            dref[(size_t)i * k + j] = (exp(z[j] - lse) - t) / n;
        }
    }
    loss_ref /= n;

    float loss = NAN;
    STATUS_OK(ops->softmax_xent(be, x.logits, x.labels, n, k, smoothing, &loss, x.dlogits));
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f loss", n, k, (double)smoothing);
    compare(what, &loss, &loss_ref, 1, 1e-6);
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f gradient", n, k, (double)smoothing);
    compare(what, x.dlogits, dref, count, 1e-6);
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f gradient (fd)", n, k, (double)smoothing);
    fd_check(what, x.logits, count, x.dlogits, 1e-2, xent_loss, &x, NULL, 1e-3);

    x.labels[n - 1] = k; /* out of range: refused, loss untouched */
    loss = 123.0f;
    CHECK(ops->softmax_xent(be, x.logits, x.labels, n, k, smoothing, &loss, x.dlogits) == HORA_ERR_INVALID_ARG &&
              loss == 123.0f,
          "softmax_xent: label k accepted");
    free(x.logits);
    free(x.dlogits);
    free(x.labels);
    free(dref);
}

/* ---- SGD ----------------------------------------------------------------------- */

/* One rounding per operation: a volatile store is a rounding point the
 * compiler may not fuse across (no FMA), whatever -ffp-contract says. */
static float f_mul(float a, float b) { volatile float r = a * b; return r; }
static float f_add(float a, float b) { volatile float r = a + b; return r; }
static float f_sub(float a, float b) { volatile float r = a - b; return r; }

static void sgd_ref(float *p, const float *g_in, float *m_buf, size_t count, const tr_sgd_args_t *a)
{
    for (size_t i = 0; i < count; i++) {
        float g = g_in[i];
        if (a->weight_decay != 0.0f)
            g = f_add(g, f_mul(a->weight_decay, p[i]));
        float step = g;
        if (a->momentum != 0.0f) {
            m_buf[i] = f_add(f_mul(a->momentum, m_buf[i]), g);
            step = a->nesterov ? f_add(g, f_mul(a->momentum, m_buf[i])) : m_buf[i];
        }
        p[i] = f_sub(p[i], f_mul(a->lr, step));
    }
}

static void test_sgd(size_t count)
{
    static const tr_sgd_args_t cases[] = {
        {0.1f, 0.9f, 5e-4f, 1}, {0.1f, 0.9f, 5e-4f, 0}, {0.05f, 0.9f, 0.0f, 1}, {0.2f, 0.0f, 1e-4f, 0},
        {0.01f, 0.5f, 0.0f, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const tr_sgd_args_t *a = &cases[c];
        float *p = rand_array(count, 1.0f), *p_ref = malloc(count * sizeof(float));
        float *m = calloc(count + 1, sizeof(float)), *m_ref = calloc(count + 1, sizeof(float));
        memcpy(p_ref, p, count * sizeof(float));
        long mismatches = 0;
        for (int step = 0; step < 3; step++) {
            float *g = rand_array(count, 1.0f);
            STATUS_OK(ops->sgd_step(be, p, g, a->momentum != 0.0f ? m : NULL, count, a));
            sgd_ref(p_ref, g, m_ref, count, a);
            for (size_t i = 0; i < count; i++)
                mismatches += memcmp(&p[i], &p_ref[i], sizeof(float)) != 0 ||
                              memcmp(&m[i], &m_ref[i], sizeof(float)) != 0;
            free(g);
        }
        CHECK(mismatches == 0, "sgd case %zu count %zu: %ld elements differ from the reference", c, count,
              mismatches);
        printf("%s sgd lr %.2f momentum %.1f wd %.0e nesterov %d, %zu x 3 steps: %ld bit mismatches\n",
               mismatches ? "FAIL" : "ok  ", (double)a->lr, (double)a->momentum, (double)a->weight_decay,
               a->nesterov, count, mismatches);
        free(p);
        free(p_ref);
        free(m);
        free(m_ref);
    }
    tr_sgd_args_t bad = {0.1f, 0.0f, 0.0f, 1};
    float one = 1.0f;
    CHECK(ops->sgd_step(be, &one, &one, NULL, 1, &bad) == HORA_ERR_INVALID_ARG, "sgd: nesterov without momentum");
}

/* ---- tensors ---------------------------------------------------------------------- */

static void test_tensor_roundtrip(int n, int c, int h, int w)
{
    size_t count = (size_t)n * c * h * w;
    tr_tensor_t t = tensor_make(n, c, h, w);
    float *in = rand_array(count, 1.0f), *out = nan_array(count);
    tensor_put(&t, in);
    tensor_get(&t, out);
    int block = t.layout == TR_LAYOUT_NCHW8C ? 8 : t.layout == TR_LAYOUT_NCHW16C ? 16 : 1;
    long wrong = memcmp(in, out, count * sizeof(float)) != 0;
    /* Where each element sits: nChw<B>c puts (n, c, h, w) at
     * ((n * C/B + c/B) * H*W + h*W + w) * B + c%B; nchw at the usual place. */
    CHECK(t.layout == TR_LAYOUT_NCHW || c % block == 0, "layout %s for C %d", tr_layout_name(t.layout), c);
    CHECK(t.bytes >= count * sizeof(float) && t.dtype == TR_DTYPE_F32, "tensor %zu bytes", t.bytes);
    const float *data = t.data;
    size_t hw = (size_t)h * w;
    for (int in_ = 0; in_ < n; in_++)
        for (int ic = 0; ic < c; ic++)
            for (size_t i = 0; i < hw; i++) {
                size_t pos = block == 1 ? ((size_t)in_ * c + ic) * hw + i
                                        : (((size_t)in_ * (c / block) + ic / block) * hw + i) * block + ic % block;
                wrong += memcmp(&data[pos], &in[((size_t)in_ * c + ic) * hw + i], sizeof(float)) != 0;
            }
    CHECK(wrong == 0, "tensor %dx%dx%dx%d %s: %ld misplaced", n, c, h, w, tr_layout_name(t.layout), wrong);
    printf("%s tensor %dx%dx%dx%d %-8s import/export round trip and element positions\n", wrong ? "FAIL" : "ok  ",
           n, c, h, w, tr_layout_name(t.layout));
    ops->tensor_free(be, &t);
    CHECK(t.data == NULL, "tensor_free left data");
    free(in);
    free(out);
}

static void test_api(void)
{
    CHECK(tr_backend_find("cpu") == ops, "tr_backend_find(cpu)");
    CHECK(tr_backend_find("no-such-backend") == NULL && tr_backend_find(NULL) == NULL, "unknown backend found");
    CHECK(strcmp(tr_layout_name(TR_LAYOUT_NCHW16C), "nChw16c") == 0, "layout name");
    tr_tensor_t t;
    CHECK(ops->tensor_alloc(be, 0, 1, 1, 1, &t) == HORA_ERR_INVALID_ARG, "tensor_alloc n = 0");
    tr_conv_desc_t bad = {1, 1, 2, 2, 1, 5, 1, 0};
    tr_layer_t *layer = NULL;
    CHECK(ops->conv_create(be, &bad, &layer) == HORA_ERR_INVALID_ARG && layer == NULL, "conv bigger than input");
    void *buf = NULL;
    STATUS_OK(ops->buffer_alloc(be, 100, &buf));
    CHECK(buf != NULL && ((const unsigned char *)buf)[99] == 0, "buffer_alloc not zeroed");
    ops->buffer_free(be, buf);
    STATUS_OK(ops->synchronize(be));
    printf("ok   api: find, layout names, argument checks, buffers\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with the backend's stderr */
    tr_backend_config_t config = {.threads = 1, .verbose = 0, .channel_block = 0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--block") == 0 && i + 1 < argc)
            config.channel_block = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            config.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "-v") == 0)
            config.verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--block 0|1|8|16] [--threads N] [-v]\n", argv[0]);
            return 2;
        }
    }
    ops = tr_backend_find("cpu");
    if (ops == NULL || ops->init(&config, &be) != HORA_OK) {
        fprintf(stderr, "test_ops: cannot start the cpu backend\n");
        return 1;
    }
    printf("test_ops: cpu backend, channel block %d (0 = auto), %d threads\n", config.channel_block,
           config.threads);

    test_api();
    static const int shapes[][4] = {{2, 1, 5, 5}, {2, 3, 7, 7}, {2, 8, 5, 6}, {1, 16, 3, 3}, {2, 24, 2, 3},
                                    {3, 32, 1, 1}, {2, 48, 4, 4}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        test_tensor_roundtrip(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);

    static const tr_conv_desc_t convs[] = {
        {2, 3, 7, 7, 16, 3, 1, 1},  /* stem, plain input */
        {2, 3, 9, 9, 8, 7, 2, 3},   /* ResNet-50 style stem */
        {2, 1, 6, 6, 16, 3, 1, 1},  /* one input channel (Fashion-MNIST) */
        {2, 16, 6, 6, 16, 3, 1, 1}, /* basic block */
        {2, 16, 7, 7, 32, 3, 2, 1}, /* strided */
        {2, 16, 7, 7, 32, 1, 2, 0}, /* projection shortcut */
        {2, 32, 5, 5, 8, 1, 1, 0},  /* bottleneck reduce */
        {2, 8, 5, 5, 16, 3, 1, 0},  /* no padding */
        {2, 5, 6, 6, 7, 3, 1, 1},   /* odd channels: plain layout */
    };
    for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++)
        test_conv(convs[i]);

    static const int bns[][4] = {{2, 8, 6, 6}, {2, 16, 5, 5}, {2, 3, 7, 7}, {4, 32, 3, 3}};
    for (size_t i = 0; i < sizeof(bns) / sizeof(bns[0]); i++)
        for (int relu = 0; relu < 2; relu++)
            test_bn((tr_bn_desc_t){bns[i][0], bns[i][1], bns[i][2], bns[i][3], 1e-5f, 0.1f, relu});

    static const tr_pool_desc_t pools[] = {
        {TR_POOL_MAX, 2, 16, 7, 7, 3, 2, 1},
        {TR_POOL_MAX, 2, 8, 6, 6, 3, 2, 1},
        {TR_POOL_MAX, 2, 3, 5, 5, 3, 2, 1},
        {TR_POOL_MAX, 2, 16, 6, 6, 2, 2, 0},
        {TR_POOL_GLOBAL_AVERAGE, 2, 16, 5, 5, 0, 0, 0},
        {TR_POOL_GLOBAL_AVERAGE, 2, 3, 4, 4, 0, 0, 0},
        {TR_POOL_GLOBAL_AVERAGE, 2, 32, 7, 7, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++)
        test_pool(pools[i]);

    test_linear((tr_linear_desc_t){2, 16, 10});
    test_linear((tr_linear_desc_t){3, 7, 5});
    test_linear((tr_linear_desc_t){2, 32, 10});

    test_eltwise(2, 16, 5, 5);
    test_eltwise(2, 3, 6, 6);

    test_softmax_xent(4, 10, 0.0f);
    test_softmax_xent(4, 10, 0.1f);
    test_softmax_xent(3, 7, 0.3f);

    test_sgd(1);
    test_sgd(1003);
    test_sgd(70001); /* large enough for the threaded path */

    ops->free(be);
    printf("test_ops: %s (%d checks, %d failed)\n", failures ? "FAIL" : "PASS", checks, failures);
    return failures ? 1 : 0;
}
