/*
 * ops_bn.c - batch norm (training with its running statistics, inference,
 * backward; with and without the fused relu) against double loops and
 * finite differences, and the fused relu against an unfused layer fed the
 * masked gradient.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

/* y = gamma (x - mean) / sqrt(var + eps) + beta per channel, relu if asked;
 * mean, var: the batch's (biased) when stats_in is NULL, else stats_in. */
static void bn_ref(const tr_bn_desc_t *d, int batch, const float *x, const float *gamma, const float *beta,
                   const float *mean_in, const float *var_in, double *mean_out, double *var_out, double *y, int relu)
{
    size_t hw = (size_t)d->h * d->w;
    for (int c = 0; c < d->c; c++) {
        double mean = 0, var = 0;
        if (mean_in == NULL) {
            bn_stats_ref(x, batch, d->c, hw, c, &mean, &var);
        } else {
            mean = mean_in[c];
            var = var_in[c];
        }
        if (mean_out) {
            mean_out[c] = mean;
            var_out[c] = var;
        }
        double inv = 1.0 / sqrt(var + d->epsilon);
        for (int n = 0; n < batch; n++)
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
    tr_tensor_t gamma_t, beta_t, rm_t, rv_t; /* host tensors over the arrays below */
    float *x_host, *gamma, *beta, *rm, *rv, *y_host, *r;
    size_t count;
} bn_ctx_t;

static double bn_loss(void *p)
{
    bn_ctx_t *b = p;
    tensor_put(&b->x, b->x_host);
    STATUS_OK(ops->bn_forward_train(b->layer, &b->x, &b->gamma_t, &b->beta_t, &b->rm_t, &b->rv_t, &b->y));
    tensor_get(&b->y, b->y_host);
    return dot(b->y_host, b->r, b->count);
}

/* layer: made for d by the caller (run at several batch sizes), or NULL:
 * made and freed here. */
void test_bn(tr_layer_t *layer, const tr_bn_desc_t *dp, int n)
{
    const tr_bn_desc_t d = *dp;
    char what[128], name[96];
    snprintf(name, sizeof(name), "bn %dx%dx%dx%d%s", n, d.c, d.h, d.w, d.fuse_relu ? " +relu" : "");
    size_t count = (size_t)n * d.c * d.h * d.w, m = (size_t)n * d.h * d.w;
    const int cdim[1] = {d.c};

    bn_ctx_t b = {.layer = layer};
    if (layer == NULL) STATUS_OK(ops->bn_create(be, &d, &b.layer));
    if (b.layer == NULL) return;
    b.x = tensor_make(n, d.c, d.h, d.w);
    b.y = tensor_make(n, d.c, d.h, d.w);
    tr_tensor_t dy = tensor_make(n, d.c, d.h, d.w), dx = tensor_make(n, d.c, d.h, d.w);
    b.count = count;
    b.x_host = malloc(count * sizeof(float));
    b.gamma = malloc(d.c * sizeof(float));
    b.beta = malloc(d.c * sizeof(float));
    b.rm = rand_array(d.c, 1.0f);
    b.rv = malloc(d.c * sizeof(float));
    b.gamma_t = host_tensor(b.gamma, TR_DTYPE_F32, 1, cdim);
    b.beta_t = host_tensor(b.beta, TR_DTYPE_F32, 1, cdim);
    b.rm_t = host_tensor(b.rm, TR_DTYPE_F32, 1, cdim);
    b.rv_t = host_tensor(b.rv, TR_DTYPE_F32, 1, cdim);
    b.y_host = malloc(count * sizeof(float));
    b.r = rand_array(count, 1.0f);
    double *y_ref = malloc(count * sizeof(double)), *mean = malloc(d.c * sizeof(double));
    double *var = malloc(d.c * sizeof(double));
    float *dx_host = malloc(count * sizeof(float));
    tr_tensor_t dgamma = param_nan(1, cdim), dbeta = param_nan(1, cdim);
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
            for (int s = 0; s < n; s++)
                for (int i = 0; i < d.h * d.w; i++)
                    b.x_host[((size_t)s * d.c + c) * d.h * d.w + i] = offset + scale * rng_sym(1.0f);
        }
        bn_ref(&d, n, b.x_host, b.gamma, b.beta, NULL, NULL, mean, var, y_ref, 0);
        double closest = INFINITY;
        for (size_t i = 0; i < count; i++) closest = fmin(closest, fabs(y_ref[i]));
        drawn = !d.fuse_relu || closest > 6e-3;
    }
    CHECK(drawn, "%s: no input found that keeps away from the relu's kink", name);
    /* The perturbed element itself moves by about eps * gamma / sigma. */
    for (size_t i = 0; i < count; i++) skip[i] = d.fuse_relu && fabs(y_ref[i]) < 0.02;

    /* forward (training) and the running statistics */
    float *rm0 = malloc(d.c * sizeof(float)), *rv0 = malloc(d.c * sizeof(float));
    memcpy(rm0, b.rm, d.c * sizeof(float));
    memcpy(rv0, b.rv, d.c * sizeof(float));
    tensor_poison(&b.y);
    bn_loss(&b);
    bn_ref(&d, n, b.x_host, b.gamma, b.beta, NULL, NULL, mean, var, y_ref, d.fuse_relu);
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
    STATUS_OK(ops->bn_forward_infer(b.layer, &b.x, &b.gamma_t, &b.beta_t, &b.rm_t, &b.rv_t, &b.y));
    tensor_get(&b.y, b.y_host);
    bn_ref(&d, n, b.x_host, b.gamma, b.beta, b.rm, b.rv, NULL, NULL, y_ref, d.fuse_relu);
    snprintf(what, sizeof(what), "%s forward inference", name);
    compare(what, b.y_host, y_ref, count, 1e-5);

    /* backward after a training forward on the same x */
    bn_loss(&b);
    tensor_put(&dy, b.r);
    tensor_poison(&dx);
    STATUS_OK(ops->bn_backward(b.layer, &b.x, &dy, &b.gamma_t, &dx, &dgamma, &dbeta));
    tensor_get(&dx, dx_host);

    /* The fused relu's backward is the plain one's on dy masked by y > 0;
     * checked through the layer's own output, it needs no step at all. */
    double eps = d.fuse_relu ? 1e-3 : 1e-2;
    double tol = d.fuse_relu ? 3e-3 : 5e-4;
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, b.x_host, count, dx_host, eps, bn_loss, &b, skip, tol);
    snprintf(what, sizeof(what), "%s backward gamma (fd)", name);
    fd_check(what, b.gamma, d.c, dgamma.data, eps, bn_loss, &b, NULL, tol);
    snprintf(what, sizeof(what), "%s backward beta (fd)", name);
    fd_check(what, b.beta, d.c, dbeta.data, eps, bn_loss, &b, NULL, tol);

    if (d.fuse_relu) {
        /* Against an unfused layer fed dy * (y > 0). */
        tr_bn_desc_t plain_d = d;
        plain_d.fuse_relu = 0;
        tr_layer_t *plain = NULL;
        STATUS_OK(ops->bn_create(be, &plain_d, &plain));
        float *masked = malloc(count * sizeof(float)), *dx2 = malloc(count * sizeof(float));
        tr_tensor_t dg2_t = param_nan(1, cdim), db2_t = param_nan(1, cdim);
        const float *dg2 = dg2_t.data, *db2 = db2_t.data;
        bn_loss(&b); /* y_host = relu(bn(x)) */
        for (size_t i = 0; i < count; i++) masked[i] = b.y_host[i] > 0 ? b.r[i] : 0.0f;
        STATUS_OK(ops->bn_forward_train(plain, &b.x, &b.gamma_t, &b.beta_t, &b.rm_t, &b.rv_t, &b.y));
        tensor_put(&dy, masked);
        STATUS_OK(ops->bn_backward(plain, &b.x, &dy, &b.gamma_t, &dx, &dg2_t, &db2_t));
        tensor_get(&dx, dx2);
        double *want = malloc((count + 2 * d.c) * sizeof(double));
        for (size_t i = 0; i < count; i++) want[i] = dx2[i];
        snprintf(what, sizeof(what), "%s backward = unfused on masked dy", name);
        compare(what, dx_host, want, count, 1e-5);
        for (int c = 0; c < d.c; c++) {
            want[c] = dg2[c];
            want[d.c + c] = db2[c];
        }
        snprintf(what, sizeof(what), "%s dgamma = unfused on masked dy", name);
        compare(what, dgamma.data, want, d.c, 1e-5);
        snprintf(what, sizeof(what), "%s dbeta = unfused on masked dy", name);
        compare(what, dbeta.data, want + d.c, d.c, 1e-5);
        ops->layer_free(plain);
        free(masked);
        free(dx2);
        free(dg2_t.data);
        free(db2_t.data);
        free(want);
    }

    /* Backward at another batch size than the last training forward's is refused. */
    tr_tensor_t x_other = tensor_make(n + 1, d.c, d.h, d.w);
    CHECK(ops->bn_backward(b.layer, &x_other, &x_other, &b.gamma_t, &x_other, &dgamma, &dbeta) == HORA_ERR_INVALID_ARG,
          "%s: backward at batch %d after a forward at %d accepted", name, n + 1, n);
    ops->tensor_free(be, &x_other);

    if (layer == NULL) ops->layer_free(b.layer);
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
    free(dgamma.data);
    free(dbeta.data);
    free(skip);
}
