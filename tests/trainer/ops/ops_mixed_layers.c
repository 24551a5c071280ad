/*
 * ops_mixed_layers.c - the layers in a 16-bit compute dtype (bf16, or f16
 * where the backend has it) with parameter gradients in f32, bf16 or f16:
 * convolution (forward, backward data, backward weights), batch norm
 * (training with its running statistics, inference, backward, with and
 * without the fused relu), max and global average pooling, and the linear
 * layer, each against double loops computed from the same rounded inputs
 * (ops_mixed.h says why that leaves only the op's own error, and the bounds).
 *
 * An f16 parameter gradient is also run with inputs scaled by powers of two
 * (exact in every dtype) until some gradients pass 65504: those must come
 * out as infinities, the rest as before.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"

/* The largest |a[i]|. */
static double max_abs_d(const double *a, size_t count)
{
    double m = 0;
    for (size_t i = 0; i < count; i++) m = fmax(m, fabs(a[i]));
    return m;
}

static float max_abs_f(const float *a, size_t count)
{
    float m = 0;
    for (size_t i = 0; i < count; i++) m = fmaxf(m, fabsf(a[i]));
    return m;
}

/* For the f16 overflow runs: the power of two k that takes a gradient whose
 * largest value is `largest` to about four times f16's range. */
static int overflow_exponent(double largest) { return largest > 0 ? (int)ceil(log2(4.0 * 65520.0 / largest)) : 0; }

/* The most an input of dtype may be scaled up (2^k): within 2^15 in f16
 * (finite, 65504 being its largest), within 2^40 otherwise (the f32 sums
 * of products stay far from overflow). */
static int headroom(const float *a, size_t count, tr_dtype_t dtype)
{
    float m = max_abs_f(a, count);
    double limit = dtype == TR_DTYPE_F16 ? 0x1p15 : 0x1p40;
    return m > 0 ? (int)floor(log2(limit / m)) : 0;
}

static float *scaled(const float *a, size_t count, int k)
{
    float *s = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++) s[i] = ldexpf(a[i], k); /* exact: a power of two, within range (headroom) */
    return s;
}

static void scale_d(double *a, size_t count, int k)
{
    for (size_t i = 0; i < count; i++) a[i] = ldexp(a[i], k);
}

/* For a bilinear gradient (dw from x and dy) whose largest value is
 * `largest`: the overflow exponent split into 2^kx on x and 2^kdy on dy, each
 * within its headroom, and the scaled copies of both. */
typedef struct {
    int kx, kdy;
    float *xs, *dys;
} split_t;

static split_t split_scale(double largest, const float *x, size_t x_count, const float *dy, size_t y_count,
                           tr_dtype_t dt)
{
    int k = overflow_exponent(largest);
    int hx = headroom(x, x_count, dt), hdy = headroom(dy, y_count, dt);
    split_t sp;
    sp.kx = k / 2 < hx ? k / 2 : hx;
    sp.kdy = k - sp.kx < hdy ? k - sp.kx : hdy;
    sp.xs = scaled(x, x_count, sp.kx);
    sp.dys = scaled(dy, y_count, sp.kdy);
    return sp;
}

/* compare_dtype with what = "<name> <part>" and the key formatted from key_fmt. */
static long compare_part(const char *name, const char *part, const float *got, const double *want, size_t count,
                         tr_dtype_t dtype, double tol, const char *key_fmt, ...) __attribute__((format(printf, 8, 9)));
static long compare_part(const char *name, const char *part, const float *got, const double *want, size_t count,
                         tr_dtype_t dtype, double tol, const char *key_fmt, ...)
{
    char what[160], key[64];
    snprintf(what, sizeof(what), "%s %s", name, part);
    va_list ap;
    va_start(ap, key_fmt);
    vsnprintf(key, sizeof(key), key_fmt, ap);
    va_end(ap);
    return compare_dtype(what, key, got, want, count, dtype, tol);
}

/* ---- convolution ------------------------------------------------------------ */

/* layer: made for d by the caller (run at several batch sizes), or NULL:
 * made and freed here. */
void mixed_conv(tr_layer_t *layer, const tr_conv_desc_t *d, int n)
{
    const tr_dtype_t dt = d->dtype, gdt = d->grad_dtype;
    char what[160], name[112], key[64];
    snprintf(name, sizeof(name), "conv %dx%dx%dx%d->%d k%d s%d p%d %s/%s", n, d->c_in, d->h_in, d->w_in, d->c_out,
             d->kernel, d->stride, d->pad, tr_dtype_name(dt), tr_dtype_name(gdt));
    int ho = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1,
        wo = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    size_t x_count = (size_t)n * d->c_in * d->h_in * d->w_in, y_count = (size_t)n * d->c_out * ho * wo;
    const int w_dims[4] = {d->c_out, d->c_in, d->kernel, d->kernel};
    size_t w_count = (size_t)d->c_out * d->c_in * d->kernel * d->kernel;

    tr_layer_t *l = layer;
    if (l == NULL) STATUS_OK(ops->conv_create(be, d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(n, d->c_in, d->h_in, d->w_in, dt), dx = act_make(n, d->c_in, d->h_in, d->w_in, dt);
    tr_tensor_t y = act_make(n, d->c_out, ho, wo, dt), dy = act_make(n, d->c_out, ho, wo, dt);
    tr_tensor_t w = plain_make(dt, 4, w_dims), dw = plain_make(gdt, 4, w_dims);
    float *x_host = rand_rounded(x_count, 1.0f, dt), *w_host = rand_rounded(w_count, 0.5f, dt);
    float *dy_host = rand_rounded(y_count, 1.0f, dt);
    float *y_got = malloc(y_count * sizeof(float)), *dx_got = malloc(x_count * sizeof(float));
    float *dw_got = malloc(w_count * sizeof(float));
    double *y_ref = malloc(y_count * sizeof(double)), *dx_ref = malloc(x_count * sizeof(double));
    double *dw_ref = malloc(w_count * sizeof(double));
    conv_ref(d, n, ho, wo, x_host, w_host, dy_host, y_ref, dx_ref, dw_ref);

    tensor_put(&x, x_host);
    plain_put(&w, w_host);
    tensor_poison(&y);
    STATUS_OK(ops->conv_forward(l, &x, &w, &y));
    tensor_get(&y, y_got);
    compare_part(name, "forward", y_got, y_ref, y_count, dt, tol_for(dt), "conv forward y %s", tr_dtype_name(dt));

    tensor_put(&dy, dy_host);
    tensor_poison(&dx);
    STATUS_OK(ops->conv_backward_data(l, &dy, &w, &dx));
    tensor_get(&dx, dx_got);
    compare_part(name, "backward data", dx_got, dx_ref, x_count, dt, tol_for(dt), "conv backward data dx %s",
                 tr_dtype_name(dt));

    STATUS_OK(ops->conv_backward_weights(l, &x, &dy, &dw));
    plain_get(&dw, dw_got);
    compare_part(name, "backward weights", dw_got, dw_ref, w_count, gdt, tol_for(gdt), "conv dw %s (%s compute)",
                 tr_dtype_name(gdt), tr_dtype_name(dt));

    if (gdt == TR_DTYPE_F16) {
        /* dw = corr(x, dy) is bilinear: scale x by 2^kx and dy by 2^kdy. */
        split_t sp = split_scale(max_abs_d(dw_ref, w_count), x_host, x_count, dy_host, y_count, dt);
        tensor_put(&x, sp.xs);
        tensor_put(&dy, sp.dys);
        plain_poison(&dw);
        STATUS_OK(ops->conv_backward_weights(l, &x, &dy, &dw));
        plain_get(&dw, dw_got);
        scale_d(dw_ref, w_count, sp.kx + sp.kdy);
        snprintf(what, sizeof(what), "%s backward weights x 2^%d (overflow)", name, sp.kx + sp.kdy);
        snprintf(key, sizeof(key), "conv dw f16 overflow (%s compute)", tr_dtype_name(dt));
        long infs = compare_dtype(what, key, dw_got, dw_ref, w_count, gdt, tol_for(gdt));
        CHECK(infs > 0, "%s: no gradient beyond f16's range after scaling by 2^%d", name, sp.kx + sp.kdy);
        free(sp.xs);
        free(sp.dys);
    }

    if (layer == NULL) ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &dx, &y, &dy};
    for (int i = 0; i < 4; i++) ops->tensor_free(be, acts[i]);
    void *arrays[] = {w.data, dw.data, x_host, w_host, dy_host, y_got, dx_got, dw_got, y_ref, dx_ref, dw_ref};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) free(arrays[i]);
}

/* ---- batch norm --------------------------------------------------------------- */

typedef struct {
    double *mean, *var, *y, *dx, *dgamma, *dbeta; /* var biased */
} bn_refs_t;

/* Forward (batch statistics, or stats_mean/var when given) and backward
 * of y = [relu](gamma (x - mean) / sqrt(var + eps) + beta), in double. */
static void bn_refs(const tr_bn_desc_t *d, int batch, const float *x, const float *gamma, const float *beta,
                    const float *stats_mean, const float *stats_var, const float *dy, bn_refs_t *r)
{
    size_t hw = (size_t)d->h * d->w, m = (size_t)batch * hw;
    for (int c = 0; c < d->c; c++) {
        double mean, var;
        bn_stats_ref(x, batch, d->c, hw, c, &mean, &var);
        r->mean[c] = mean;
        r->var[c] = var;
        if (stats_mean != NULL) {
            mean = stats_mean[c];
            var = stats_var[c];
        }
        double inv = 1.0 / sqrt(var + d->epsilon), sum_g = 0, sum_gx = 0;
        for (int n = 0; n < batch; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t k = ((size_t)n * d->c + c) * hw + i;
                double xhat = (x[k] - mean) * inv, v = gamma[c] * xhat + beta[c];
                r->y[k] = d->fuse_relu && v < 0 ? 0.0 : v;
                double g = dy == NULL || (d->fuse_relu && !(v > 0)) ? 0.0 : dy[k];
                sum_g += g;
                sum_gx += g * xhat;
            }
        r->dgamma[c] = sum_gx;
        r->dbeta[c] = sum_g;
        for (int n = 0; n < batch && dy != NULL; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t k = ((size_t)n * d->c + c) * hw + i;
                double xhat = (x[k] - mean) * inv, v = gamma[c] * xhat + beta[c];
                double g = d->fuse_relu && !(v > 0) ? 0.0 : dy[k];
                r->dx[k] = gamma[c] * inv * (g - sum_g / (double)m - xhat * sum_gx / (double)m);
            }
    }
}

void mixed_bn(tr_layer_t *layer, const tr_bn_desc_t *dp, int n)
{
    const tr_bn_desc_t d = *dp;
    const tr_dtype_t dt = d.dtype, gdt = d.grad_dtype;
    char what[160], name[112], key[64];
    snprintf(name, sizeof(name), "bn %dx%dx%dx%d%s %s/%s", n, d.c, d.h, d.w, d.fuse_relu ? " +relu" : "",
             tr_dtype_name(dt), tr_dtype_name(gdt));
    size_t count = (size_t)n * d.c * d.h * d.w, m = (size_t)n * d.h * d.w;
    const int cdim[1] = {d.c};

    tr_layer_t *l = layer;
    if (l == NULL) STATUS_OK(ops->bn_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(n, d.c, d.h, d.w, dt), y = act_make(n, d.c, d.h, d.w, dt);
    tr_tensor_t dy = act_make(n, d.c, d.h, d.w, dt), dx = act_make(n, d.c, d.h, d.w, dt);
    float *x_host = malloc(count * sizeof(float)), *dy_host = rand_rounded(count, 1.0f, dt);
    float *gamma = malloc(d.c * sizeof(float)), *beta = malloc(d.c * sizeof(float));
    float *rm = rand_array(d.c, 1.0f), *rv = malloc(d.c * sizeof(float));
    float *rm0 = malloc(d.c * sizeof(float)), *rv0 = malloc(d.c * sizeof(float));
    tr_tensor_t gamma_t = host_tensor(gamma, TR_DTYPE_F32, 1, cdim), beta_t = host_tensor(beta, TR_DTYPE_F32, 1, cdim);
    tr_tensor_t rm_t = host_tensor(rm, TR_DTYPE_F32, 1, cdim), rv_t = host_tensor(rv, TR_DTYPE_F32, 1, cdim);
    tr_tensor_t dgamma = plain_make(gdt, 1, cdim), dbeta = plain_make(gdt, 1, cdim);
    float *got = malloc(count * sizeof(float)), *dg_got = malloc(d.c * sizeof(float));
    float *db_got = malloc(d.c * sizeof(float));
    bn_refs_t r = {malloc(d.c * sizeof(double)),   malloc(d.c * sizeof(double)), malloc(count * sizeof(double)),
                   malloc(count * sizeof(double)), malloc(d.c * sizeof(double)), malloc(d.c * sizeof(double))};
    double *run_ref = malloc(2 * d.c * sizeof(double));

    /* Channels with their own offset and scale, x rounded to the dtype.
     * With the relu fused, draw again until no value before the relu lies
     * within 1e-3 of 0: the backend's f32 statistics differ from the
     * reference's by about 1e-6, which must not move a value across the
     * kink (the mask would differ, not the precision). */
    int drawn = 0;
    for (int attempt = 0; attempt < 5000 && !drawn; attempt++) {
        for (int c = 0; c < d.c; c++) {
            gamma[c] = 0.5f + (float)rng_unit();
            beta[c] = rng_sym(0.5f);
            rv[c] = 0.5f + (float)rng_unit();
            float offset = rng_sym(2.0f), scale = 0.5f + 2.0f * (float)rng_unit();
            for (int s = 0; s < n; s++)
                for (int i = 0; i < d.h * d.w; i++)
                    x_host[((size_t)s * d.c + c) * d.h * d.w + i] = round_to(offset + scale * rng_sym(1.0f), dt);
        }
        tr_bn_desc_t plain = d;
        plain.fuse_relu = 0;
        bn_refs(&plain, n, x_host, gamma, beta, NULL, NULL, NULL, &r);
        double closest = INFINITY;
        for (size_t i = 0; i < count; i++) closest = fmin(closest, fabs(r.y[i]));
        drawn = !d.fuse_relu || closest > 1e-3;
    }
    CHECK(drawn, "%s: no input found that keeps away from the relu's kink", name);
    memcpy(rm0, rm, d.c * sizeof(float));
    memcpy(rv0, rv, d.c * sizeof(float));

    /* forward (training) and the running statistics */
    bn_refs(&d, n, x_host, gamma, beta, NULL, NULL, dy_host, &r);
    tensor_put(&x, x_host);
    tensor_poison(&y);
    STATUS_OK(ops->bn_forward_train(l, &x, &gamma_t, &beta_t, &rm_t, &rv_t, &y));
    tensor_get(&y, got);
    compare_part(name, "forward train", got, r.y, count, dt, tol_for(dt), "bn forward train y %s", tr_dtype_name(dt));
    for (int c = 0; c < d.c; c++) {
        run_ref[c] = (1.0 - d.momentum) * rm0[c] + d.momentum * r.mean[c];
        run_ref[d.c + c] = (1.0 - d.momentum) * rv0[c] + d.momentum * r.var[c] * (double)m / (double)(m - 1);
    }
    compare_part(name, "running mean", rm, run_ref, d.c, TR_DTYPE_F32, TOL_F32, "bn running mean f32 (%s x)",
                 tr_dtype_name(dt));
    compare_part(name, "running var (unbiased)", rv, run_ref + d.c, d.c, TR_DTYPE_F32, TOL_F32,
                 "bn running var f32 (%s x)", tr_dtype_name(dt));

    /* forward (inference) with the running statistics just updated */
    bn_refs_t ri = r;
    double *y_infer = malloc(count * sizeof(double)), *scratch = malloc((count + 4 * d.c) * sizeof(double));
    ri.y = y_infer;
    ri.mean = scratch;
    ri.var = scratch + d.c;
    ri.dgamma = scratch + 2 * d.c;
    ri.dbeta = scratch + 3 * d.c;
    ri.dx = NULL;
    bn_refs(&d, n, x_host, gamma, beta, rm, rv, NULL, &ri);
    tensor_poison(&y);
    STATUS_OK(ops->bn_forward_infer(l, &x, &gamma_t, &beta_t, &rm_t, &rv_t, &y));
    tensor_get(&y, got);
    compare_part(name, "forward inference", got, y_infer, count, dt, tol_for(dt), "bn forward infer y %s",
                 tr_dtype_name(dt));

    /* backward after a training forward on the same x */
    STATUS_OK(ops->bn_forward_train(l, &x, &gamma_t, &beta_t, &rm_t, &rv_t, &y));
    tensor_put(&dy, dy_host);
    tensor_poison(&dx);
    STATUS_OK(ops->bn_backward(l, &x, &dy, &gamma_t, &dx, &dgamma, &dbeta));
    tensor_get(&dx, got);
    plain_get(&dgamma, dg_got);
    plain_get(&dbeta, db_got);
    compare_part(name, "backward dx", got, r.dx, count, dt, tol_for(dt), "bn backward dx %s%s", tr_dtype_name(dt),
                 d.fuse_relu ? " +relu" : "");
    compare_part(name, "backward dgamma", dg_got, r.dgamma, d.c, gdt, tol_for(gdt), "bn dgamma %s (%s compute)",
                 tr_dtype_name(gdt), tr_dtype_name(dt));
    compare_part(name, "backward dbeta", db_got, r.dbeta, d.c, gdt, tol_for(gdt), "bn dbeta %s (%s compute)",
                 tr_dtype_name(gdt), tr_dtype_name(dt));

    if (gdt == TR_DTYPE_F16) {
        /* dgamma and dbeta are linear in dy. */
        double largest = fmax(max_abs_d(r.dgamma, d.c), max_abs_d(r.dbeta, d.c));
        int k = overflow_exponent(largest);
        if (k > headroom(dy_host, count, dt)) k = headroom(dy_host, count, dt);
        float *dys = scaled(dy_host, count, k);
        tensor_put(&dy, dys);
        plain_poison(&dgamma);
        plain_poison(&dbeta);
        STATUS_OK(ops->bn_backward(l, &x, &dy, &gamma_t, &dx, &dgamma, &dbeta));
        plain_get(&dgamma, dg_got);
        plain_get(&dbeta, db_got);
        scale_d(r.dgamma, d.c, k);
        scale_d(r.dbeta, d.c, k);
        snprintf(key, sizeof(key), "bn dgamma/dbeta f16 overflow (%s compute)", tr_dtype_name(dt));
        snprintf(what, sizeof(what), "%s backward dgamma x 2^%d (overflow)", name, k);
        long infs = compare_dtype(what, key, dg_got, r.dgamma, d.c, gdt, tol_for(gdt));
        snprintf(what, sizeof(what), "%s backward dbeta x 2^%d (overflow)", name, k);
        infs += compare_dtype(what, key, db_got, r.dbeta, d.c, gdt, tol_for(gdt));
        CHECK(infs > 0, "%s: no gradient beyond f16's range after scaling dy by 2^%d", name, k);
        free(dys);
    }

    if (layer == NULL) ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &y, &dy, &dx};
    for (int i = 0; i < 4; i++) ops->tensor_free(be, acts[i]);
    void *arrays[] = {x_host, dy_host, gamma,  beta,  rm,  rv,   rm0,      rv0,     dgamma.data, dbeta.data, got,
                      dg_got, db_got,  r.mean, r.var, r.y, r.dx, r.dgamma, r.dbeta, run_ref,     y_infer,    scratch};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) free(arrays[i]);
}

/* ---- pooling -------------------------------------------------------------------- */

/* count distinct values of dtype in random order and with random signs:
 * consecutive codes of the dtype from 2^-6 up (each a different magnitude),
 * so no window has a tie and the argmax is the same in any precision. */
static float *distinct_values(size_t count, tr_dtype_t dtype)
{
    float *a = malloc(count * sizeof(float) + 1);
    uint16_t code = bits_of(0x1p-6f, dtype);
    for (size_t i = 0; i < count; i++) a[i] = widen((uint16_t)(code + i), dtype) * (rng_unit() < 0.5 ? -1.0f : 1.0f);
    for (size_t i = count; i > 1; i--) {
        size_t j = rng_u64() % i;
        float t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
    return a;
}

void mixed_pool(tr_layer_t *layer, const tr_pool_desc_t *dp, int n)
{
    const tr_pool_desc_t d = *dp;
    const tr_dtype_t dt = d.dtype;
    char what[160], name[112], key[64];
    int is_max = d.kind == TR_POOL_MAX;
    if (is_max)
        snprintf(name, sizeof(name), "max pool %dx%dx%dx%d k%d s%d p%d %s", n, d.c, d.h, d.w, d.kernel, d.stride, d.pad,
                 tr_dtype_name(dt));
    else
        snprintf(name, sizeof(name), "global avg pool %dx%dx%dx%d %s", n, d.c, d.h, d.w, tr_dtype_name(dt));
    int ho = is_max ? (d.h + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    int wo = is_max ? (d.w + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    size_t x_count = (size_t)n * d.c * d.h * d.w, y_count = (size_t)n * d.c * ho * wo;

    tr_layer_t *l = layer;
    if (l == NULL) STATUS_OK(ops->pool_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(n, d.c, d.h, d.w, dt), dx = act_make(n, d.c, d.h, d.w, dt);
    tr_tensor_t y = act_make(n, d.c, ho, wo, dt), dy = act_make(n, d.c, ho, wo, dt);
    float *x_host = is_max ? distinct_values(x_count, dt) : rand_rounded(x_count, 1.0f, dt);
    float *dy_host = rand_rounded(y_count, 1.0f, dt);
    float *y_got = malloc(y_count * sizeof(float)), *dx_got = malloc(x_count * sizeof(float));
    double *y_ref = malloc(y_count * sizeof(double)), *dx_ref = calloc(x_count, sizeof(double));

    for (int s = 0; s < n; s++)
        for (int c = 0; c < d.c; c++) {
            size_t xo = ((size_t)s * d.c + c) * d.h * d.w, yo = ((size_t)s * d.c + c) * ho * wo;
            if (!is_max) {
                double sum = 0;
                for (int i = 0; i < d.h * d.w; i++) sum += x_host[xo + i];
                y_ref[yo] = sum / (d.h * d.w);
                for (int i = 0; i < d.h * d.w; i++) dx_ref[xo + i] = dy_host[yo] / (double)(d.h * d.w);
                continue;
            }
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    size_t best = 0;
                    double m = -INFINITY;
                    for (int kh = 0; kh < d.kernel; kh++)
                        for (int kw = 0; kw < d.kernel; kw++) {
                            int ih = oh * d.stride - d.pad + kh, iw = ow * d.stride - d.pad + kw;
                            if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w && x_host[xo + ih * d.w + iw] > m) {
                                m = x_host[xo + ih * d.w + iw];
                                best = xo + ih * d.w + iw;
                            }
                        }
                    y_ref[yo + oh * wo + ow] = m;
                    dx_ref[best] += dy_host[yo + oh * wo + ow];
                }
        }

    tensor_put(&x, x_host);
    tensor_poison(&y);
    STATUS_OK(ops->pool_forward(l, &x, &y));
    tensor_get(&y, y_got);
    snprintf(what, sizeof(what), "%s forward", name);
    /* Max pooling selects one of its inputs: exact. */
    snprintf(key, sizeof(key), "%s forward y %s%s", is_max ? "max pool" : "avg pool", tr_dtype_name(dt),
             is_max ? " (exact)" : "");
    compare_dtype(what, key, y_got, y_ref, y_count, dt, is_max ? 0.0 : tol_for(dt));

    tensor_put(&dy, dy_host);
    tensor_poison(&dx);
    STATUS_OK(ops->pool_backward(l, &dy, &dx));
    tensor_get(&dx, dx_got);
    compare_part(name, "backward", dx_got, dx_ref, x_count, dt, tol_for(dt), "%s backward dx %s",
                 is_max ? "max pool" : "avg pool", tr_dtype_name(dt));

    if (layer == NULL) ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &dx, &y, &dy};
    for (int i = 0; i < 4; i++) ops->tensor_free(be, acts[i]);
    free(x_host);
    free(dy_host);
    free(y_got);
    free(dx_got);
    free(y_ref);
    free(dx_ref);
}

/* ---- linear ----------------------------------------------------------------------- */

void mixed_linear(tr_layer_t *layer, const tr_linear_desc_t *dp, int n)
{
    const tr_linear_desc_t d = *dp;
    const tr_dtype_t dt = d.dtype, gdt = d.grad_dtype;
    char what[160], name[112], key[64];
    snprintf(name, sizeof(name), "linear %dx%d->%d %s/%s", n, d.c_in, d.c_out, tr_dtype_name(dt), tr_dtype_name(gdt));
    size_t x_count = (size_t)n * d.c_in, y_count = (size_t)n * d.c_out, w_count = (size_t)d.c_out * d.c_in;
    const int w_dims[2] = {d.c_out, d.c_in}, y_dims[2] = {n, d.c_out}, b_dims[1] = {d.c_out};

    tr_layer_t *l = layer;
    if (l == NULL) STATUS_OK(ops->linear_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(n, d.c_in, 1, 1, dt), dx = act_make(n, d.c_in, 1, 1, dt);
    tr_tensor_t w = plain_make(dt, 2, w_dims), dy = plain_make(dt, 2, y_dims);
    tr_tensor_t bias = plain_make(TR_DTYPE_F32, 1, b_dims), y = plain_make(TR_DTYPE_F32, 2, y_dims);
    tr_tensor_t dw = plain_make(gdt, 2, w_dims), db = plain_make(gdt, 1, b_dims);
    float *x_host = rand_rounded(x_count, 1.0f, dt), *w_host = rand_rounded(w_count, 0.5f, dt);
    float *dy_host = rand_rounded(y_count, 1.0f, dt), *b_host = rand_array(d.c_out, 0.5f); /* the bias stays f32 */
    float *y_got = malloc(y_count * sizeof(float)), *dx_got = malloc(x_count * sizeof(float));
    float *dw_got = malloc(w_count * sizeof(float)), *db_got = malloc(d.c_out * sizeof(float));
    double *y_ref = malloc(y_count * sizeof(double)), *dx_ref = calloc(x_count, sizeof(double));
    double *dw_ref = calloc(w_count, sizeof(double)), *db_ref = calloc(d.c_out, sizeof(double));
    for (int s = 0; s < n; s++)
        for (int o = 0; o < d.c_out; o++) {
            double v = b_host[o], g = dy_host[s * d.c_out + o];
            for (int i = 0; i < d.c_in; i++) {
                v += (double)x_host[s * d.c_in + i] * w_host[o * d.c_in + i];
                dx_ref[s * d.c_in + i] += g * w_host[o * d.c_in + i];
                dw_ref[o * d.c_in + i] += g * x_host[s * d.c_in + i];
            }
            y_ref[s * d.c_out + o] = v;
            db_ref[o] += g;
        }

    tensor_put(&x, x_host);
    plain_put(&w, w_host);
    plain_put(&bias, b_host);
    STATUS_OK(ops->linear_forward(l, &x, &w, &bias, &y));
    plain_get(&y, y_got);
    compare_part(name, "forward (f32 logits)", y_got, y_ref, y_count, TR_DTYPE_F32, TOL_F32,
                 "linear forward y f32 (%s x, w)", tr_dtype_name(dt));

    plain_put(&dy, dy_host);
    tensor_poison(&dx);
    STATUS_OK(ops->linear_backward_data(l, &dy, &w, &dx));
    tensor_get(&dx, dx_got);
    compare_part(name, "backward data", dx_got, dx_ref, x_count, dt, tol_for(dt), "linear backward data dx %s",
                 tr_dtype_name(dt));

    STATUS_OK(ops->linear_backward_weights(l, &x, &dy, &dw, &db));
    plain_get(&dw, dw_got);
    plain_get(&db, db_got);
    compare_part(name, "backward weights", dw_got, dw_ref, w_count, gdt, tol_for(gdt), "linear dw %s (%s compute)",
                 tr_dtype_name(gdt), tr_dtype_name(dt));
    compare_part(name, "backward bias", db_got, db_ref, d.c_out, gdt, tol_for(gdt), "linear dbias %s (%s compute)",
                 tr_dtype_name(gdt), tr_dtype_name(dt));

    if (gdt == TR_DTYPE_F16) {
        /* dw = dy^T x is bilinear, dbias = sum dy linear: scale both. */
        split_t sp = split_scale(max_abs_d(dw_ref, w_count), x_host, x_count, dy_host, y_count, dt);
        tensor_put(&x, sp.xs);
        plain_put(&dy, sp.dys);
        plain_poison(&dw);
        plain_poison(&db);
        STATUS_OK(ops->linear_backward_weights(l, &x, &dy, &dw, &db));
        plain_get(&dw, dw_got);
        plain_get(&db, db_got);
        scale_d(dw_ref, w_count, sp.kx + sp.kdy);
        scale_d(db_ref, d.c_out, sp.kdy);
        snprintf(key, sizeof(key), "linear dw/dbias f16 overflow (%s compute)", tr_dtype_name(dt));
        snprintf(what, sizeof(what), "%s backward weights x 2^%d (overflow)", name, sp.kx + sp.kdy);
        long infs = compare_dtype(what, key, dw_got, dw_ref, w_count, gdt, tol_for(gdt));
        snprintf(what, sizeof(what), "%s backward bias x 2^%d", name, sp.kdy);
        infs += compare_dtype(what, key, db_got, db_ref, d.c_out, gdt, tol_for(gdt));
        CHECK(infs > 0, "%s: no gradient beyond f16's range after scaling by 2^%d", name, sp.kx + sp.kdy);
        free(sp.xs);
        free(sp.dys);
    }

    if (layer == NULL) ops->layer_free(l);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &dx);
    void *arrays[] = {w.data, dy.data, bias.data, y.data, dw.data, db.data, x_host, w_host, dy_host,
                      b_host, y_got,   dx_got,    dw_got, db_got,  y_ref,   dx_ref, dw_ref, db_ref};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) free(arrays[i]);
}

/* ---- tensors ------------------------------------------------------------------------- */

/* Import rounds f32 to the tensor's dtype (nearest even, NaN stays NaN) and
 * puts each element where the layout says; export widens it back exactly;
 * a batch prefix moves only its samples. */
void mixed_tensor_roundtrip(int n, int c, int h, int w, tr_dtype_t dtype)
{
    size_t count = (size_t)n * c * h * w, hw = (size_t)h * w;
    tr_tensor_t t = act_make(n, c, h, w, dtype);
    float *in = rand_array(count, 3.0f), *out = nan_array(count);
    in[0] = NAN;
    in[count - 1] = -0.0f;
    if (count > 2) in[1] = f32_from_bits(0x3F808000u); /* 1 + 2^-8: a bf16 tie, to even (1) */
    if (count > 3) in[2] = -INFINITY;
    tensor_put(&t, in);
    tensor_get(&t, out);
    int block = tensor_layout_block(&t);
    CHECK(t.dtype == dtype && t.bytes == count * tr_dtype_size(dtype) && t.ndim == 4 && t.memory == ops->memory,
          "%s tensor of %zu bytes for %zu elements", tr_dtype_name(t.dtype), t.bytes, count);
    long wrong = 0, misplaced = 0;
    const uint16_t *raw = t.data;
    for (int s = 0; s < n; s++)
        for (int ch = 0; ch < c; ch++)
            for (size_t i = 0; i < hw; i++) {
                size_t k = ((size_t)s * c + ch) * hw + i;
                float want = round_to(in[k], dtype);
                wrong += isnan(want) ? !isnan(out[k]) : f32_bits(out[k]) != f32_bits(want);
                size_t pos = block == 1 ? k : (((size_t)s * (c / block) + ch / block) * hw + i) * block + ch % block;
                misplaced += !isnan(want) && raw[pos] != bits_of(in[k], dtype);
            }
    CHECK(wrong == 0 && misplaced == 0, "tensor %dx%dx%dx%d %s %s: %ld wrong after the round trip, %ld misplaced", n, c,
          h, w, tr_dtype_name(dtype), tr_layout_name(t.layout), wrong, misplaced);
    long prefix_wrong = n > 1 ? tensor_prefix_wrong(&t, in, out) : 0;
    CHECK(prefix_wrong == 0, "tensor %dx%dx%dx%d %s: batch prefix import/export wrong", n, c, h, w,
          tr_dtype_name(dtype));
    printf("%s tensor %dx%dx%dx%d %s %-8s import/export round trip, positions, prefix\n",
           wrong || misplaced || prefix_wrong ? "FAIL" : "ok  ", n, c, h, w, tr_dtype_name(dtype),
           tr_layout_name(t.layout));
    summary_exact("tensor import/export", wrong + misplaced + prefix_wrong, (long)count);
    ops->tensor_free(be, &t);
    free(in);
    free(out);
}
