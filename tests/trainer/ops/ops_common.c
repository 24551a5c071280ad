/*
 * ops_common.c - the helpers every test_ops file uses (ops_test.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

int failures, checks;

const struct tr_backend_ops *ops;
tr_backend_t *be;
test_rng_t ops_rng = {0x9E3779B97F4A7C15ull};

float *rand_array(size_t count, float scale)
{
    float *a = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++) a[i] = rng_sym(scale);
    return a;
}

float *nan_array(size_t count)
{
    float *a = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++) a[i] = NAN;
    return a;
}

double dot(const float *y, const float *r, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++) s += (double)y[i] * (double)r[i];
    return s;
}

double fd_layer_loss(void *p)
{
    fd_layer_t *c = p;
    tensor_put(&c->x, c->x_host);
    c->forward(c);
    tensor_get(&c->y, c->y_host);
    return dot(c->y_host, c->r, c->y_count);
}

void fd_layer_free(fd_layer_t *c, const tr_layer_t *layer)
{
    if (layer == NULL) ops->layer_free(c->layer);
    ops->tensor_free(be, &c->x);
    ops->tensor_free(be, &c->y);
    free(c->x_host);
    free(c->w.data);
    free(c->r);
    free(c->y_host);
}

/* Errors of got against want; pass when max_abs <= tol * max_ref and every
 * value is finite. */
typedef struct {
    double max_abs;  /* max |got - want| */
    double max_ref;  /* max |want| */
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
    if (d > e->max_abs) e->max_abs = d;
    if (fabs(want) > e->max_ref) e->max_ref = fabs(want);
}

static void err_report(const char *what, const err_t *e, double tol)
{
    double rel = e->max_ref > 0 ? e->max_abs / e->max_ref : e->max_abs;
    int ok = e->bad == 0 && e->count > 0 && rel <= tol;
    CHECK(ok, "%s: max abs %.3g, rel %.3g > %.1g or %ld non-finite of %ld", what, e->max_abs, rel, tol, e->bad,
          e->count);
    printf("%s %-62s max abs %9.3g  rel %9.3g  (tol %.0e, %ld values)\n", ok ? "ok  " : "FAIL", what, e->max_abs, rel,
           tol, e->count);
}

void compare(const char *what, const float *got, const double *want, size_t count, double tol)
{
    err_t e = {0};
    for (size_t i = 0; i < count; i++) err_add(&e, got[i], want[i]);
    err_report(what, &e, tol);
}

tr_tensor_t tensor_make(int n, int c, int h, int w)
{
    tr_tensor_t t;
    memset(&t, 0, sizeof(t));
    STATUS_OK(ops->tensor_alloc(be, n, c, h, w, TR_DTYPE_F32, &t));
    return t;
}

tr_tensor_t host_tensor(void *data, tr_dtype_t dtype, int ndim, const int *dims)
{
    return tr_tensor_plain(data, dtype, TR_MEMORY_HOST, ndim, dims);
}

void tensor_put(tr_tensor_t *t, const float *host)
{
    tr_tensor_t h = host_tensor((void *)host, TR_DTYPE_F32, 4, (const int[]){t->n, t->c, t->h, t->w});
    STATUS_OK(ops->tensor_import(be, &h, t));
}

void tensor_get(const tr_tensor_t *t, float *host)
{
    tr_tensor_t h = host_tensor(host, TR_DTYPE_F32, 4, (const int[]){t->n, t->c, t->h, t->w});
    STATUS_OK(ops->tensor_export(be, t, &h));
}

int tensor_layout_block(const tr_tensor_t *t)
{
    /* NHWC, (n, h, w, c) row-major, is nChw<C>c: one block of all channels. */
    return t->layout == TR_LAYOUT_NCHW8C    ? 8
           : t->layout == TR_LAYOUT_NCHW16C ? 16
           : t->layout == TR_LAYOUT_NHWC    ? t->c
                                            : 1;
}

long tensor_prefix_wrong(tr_tensor_t *t, const float *in, const float *expect)
{
    const int n = t->n, c = t->c, h = t->h, w = t->w;
    const size_t count = tr_tensor_count(t), per = count / (size_t)n;
    float *zeros = calloc(count, sizeof(float)), *out = nan_array(count);
    long wrong = 0;
    tr_tensor_t head = host_tensor(out, TR_DTYPE_F32, 4, (const int[]){n - 1, c, h, w});
    STATUS_OK(ops->tensor_export(be, t, &head));
    wrong += memcmp(out, expect, (count - per) * sizeof(float)) != 0 || !isnan(out[count - per]);
    tensor_put(t, zeros);
    tr_tensor_t src = host_tensor((void *)in, TR_DTYPE_F32, 4, (const int[]){n - 1, c, h, w});
    STATUS_OK(ops->tensor_import(be, &src, t));
    tensor_get(t, out);
    wrong += memcmp(out, expect, (count - per) * sizeof(float)) != 0 ||
             memcmp(out + count - per, zeros, per * sizeof(float)) != 0;
    free(zeros);
    free(out);
    return wrong;
}

void tensor_poison(tr_tensor_t *t)
{
    float *nan = nan_array(tr_tensor_count(t));
    tensor_put(t, nan);
    free(nan);
}

tr_tensor_t param_rand(int ndim, const int *dims, float scale)
{
    tr_tensor_t t = host_tensor(NULL, TR_DTYPE_F32, ndim, dims);
    t.data = rand_array(tr_tensor_count(&t), scale);
    return t;
}

tr_tensor_t param_nan(int ndim, const int *dims)
{
    tr_tensor_t t = host_tensor(NULL, TR_DTYPE_F32, ndim, dims);
    t.data = nan_array(tr_tensor_count(&t));
    return t;
}

#define FD_SAMPLES 48

void fd_check(const char *what, float *p, size_t count, const float *analytic, double eps, loss_fn loss, void *ctx,
              const unsigned char *skip, double tol)
{
    err_t e = {0};
    /* The scale: the largest analytic gradient over the whole tensor. */
    for (size_t i = 0; i < count; i++)
        if (isfinite(analytic[i]) && fabs(analytic[i]) > e.max_ref) e.max_ref = fabs(analytic[i]);
    size_t samples = count <= 2 * FD_SAMPLES ? count : FD_SAMPLES + 2;
    for (size_t k = 0; k < samples; k++) {
        size_t i = count <= 2 * FD_SAMPLES ? k : k == 0 ? 0 : k == 1 ? count - 1 : rng_u64() % count;
        if (skip != NULL && skip[i]) continue;
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
        if (d > e.max_abs) e.max_abs = d;
    }
    err_report(what, &e, tol);
}

/* sgd_ref (ops_test.h). One rounding per operation: a volatile store is a
 * rounding point the compiler may not fuse across (no FMA), whatever
 * -ffp-contract says. */
static float f_mul(float a, float b)
{
    volatile float r = a * b;
    return r;
}
static float f_add(float a, float b)
{
    volatile float r = a + b;
    return r;
}
static float f_sub(float a, float b)
{
    volatile float r = a - b;
    return r;
}

void sgd_ref(float *p, const float *g_in, float *m_buf, size_t count, const tr_sgd_args_t *a)
{
    const float scale = a->grad_scale == 0.0f ? 1.0f : a->grad_scale;
    for (size_t i = 0; i < count; i++) {
        float g = f_mul(g_in[i], scale);
        if (a->weight_decay != 0.0f) g = f_add(g, f_mul(a->weight_decay, p[i]));
        float step = g;
        if (a->momentum != 0.0f) {
            m_buf[i] = f_add(f_mul(a->momentum, m_buf[i]), g);
            step = a->nesterov ? f_add(g, f_mul(a->momentum, m_buf[i])) : m_buf[i];
        }
        p[i] = f_sub(p[i], f_mul(a->lr, step));
    }
}

/* The convolution in double, in NCHW: y = conv(x, w) and, with dy, the
 * other two directions at once, dx = conv^T(dy, w), dw = corr(x, dy) (dy,
 * dx and dw all NULL for the forward alone); the outputs are zeroed here.
 * Every sum runs over (input channel, kernel row, kernel column) in that
 * order. */
void conv_ref(const tr_conv_desc_t *d, int batch, int ho, int wo, const float *x, const float *w, const float *dy,
              double *y, double *dx, double *dw)
{
    size_t y_count = (size_t)batch * d->c_out * ho * wo, x_count = (size_t)batch * d->c_in * d->h_in * d->w_in;
    size_t w_count = (size_t)d->c_out * d->c_in * d->kernel * d->kernel;
    memset(y, 0, y_count * sizeof(double));
    if (dy) {
        memset(dx, 0, x_count * sizeof(double));
        memset(dw, 0, w_count * sizeof(double));
    }
    for (int n = 0; n < batch; n++)
        for (int o = 0; o < d->c_out; o++)
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    size_t yi = ((size_t)(n * d->c_out + o) * ho + oh) * wo + ow;
                    for (int i = 0; i < d->c_in; i++)
                        for (int kh = 0; kh < d->kernel; kh++)
                            for (int kw = 0; kw < d->kernel; kw++) {
                                int ih = oh * d->stride - d->pad + kh, iw = ow * d->stride - d->pad + kw;
                                if (ih < 0 || ih >= d->h_in || iw < 0 || iw >= d->w_in) continue;
                                size_t xi = ((size_t)(n * d->c_in + i) * d->h_in + ih) * d->w_in + iw;
                                size_t wi = ((size_t)(o * d->c_in + i) * d->kernel + kh) * d->kernel + kw;
                                y[yi] += (double)x[xi] * w[wi];
                                if (dy) {
                                    dx[xi] += (double)dy[yi] * w[wi];
                                    dw[wi] += (double)dy[yi] * x[xi];
                                }
                            }
                }
}

/* Batch statistics of channel c of an NCHW array (batch x channels x hw):
 * the mean, then the biased variance around it, both summed in double in
 * (image, position) order. */
void bn_stats_ref(const float *x, int batch, int channels, size_t hw, int c, double *mean, double *var)
{
    const double m = (double)batch * (double)hw;
    double sum = 0, sq = 0;
    for (int n = 0; n < batch; n++)
        for (size_t i = 0; i < hw; i++) sum += x[((size_t)n * channels + c) * hw + i];
    sum /= m;
    for (int n = 0; n < batch; n++)
        for (size_t i = 0; i < hw; i++) {
            double v = x[((size_t)n * channels + c) * hw + i] - sum;
            sq += v * v;
        }
    *mean = sum;
    *var = sq / m;
}
