/*
 * ops_pool_linear.c - max and global average pooling, and the linear layer,
 * against double loops and finite differences.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_test.h"

/* ---- pooling ---------------------------------------------------------------- */

static void pool_ref(const tr_pool_desc_t *d, int batch, int ho, int wo, const float *x, double *y)
{
    for (int n = 0; n < batch; n++)
        for (int c = 0; c < d->c; c++) {
            const float *xc = x + ((size_t)n * d->c + c) * d->h * d->w;
            double *yc = y + ((size_t)n * d->c + c) * ho * wo;
            if (d->kind == TR_POOL_GLOBAL_AVERAGE) {
                double s = 0;
                for (int i = 0; i < d->h * d->w; i++) s += xc[i];
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

static void pool_forward(fd_layer_t *c) { STATUS_OK(ops->pool_forward(c->layer, &c->x, &c->y)); }

/* layer: made for d by the caller (run at several batch sizes), or NULL:
 * made and freed here. */
void test_pool(tr_layer_t *layer, const tr_pool_desc_t *dp, int n)
{
    const tr_pool_desc_t d = *dp;
    char what[128], name[96];
    int is_max = d.kind == TR_POOL_MAX;
    if (is_max)
        snprintf(name, sizeof(name), "max pool %dx%dx%dx%d k%d s%d p%d", n, d.c, d.h, d.w, d.kernel, d.stride, d.pad);
    else
        snprintf(name, sizeof(name), "global avg pool %dx%dx%dx%d", n, d.c, d.h, d.w);
    int ho = is_max ? (d.h + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    int wo = is_max ? (d.w + 2 * d.pad - d.kernel) / d.stride + 1 : 1;
    size_t x_count = (size_t)n * d.c * d.h * d.w, y_count = (size_t)n * d.c * ho * wo;

    fd_layer_t c = {.layer = layer, .forward = pool_forward};
    if (layer == NULL) STATUS_OK(ops->pool_create(be, &d, &c.layer));
    if (c.layer == NULL) return;
    c.x = tensor_make(n, d.c, d.h, d.w);
    c.y = tensor_make(n, d.c, ho, wo);
    tr_tensor_t dy = tensor_make(n, d.c, ho, wo), dx = tensor_make(n, d.c, d.h, d.w);
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
    fd_layer_loss(&c);
    pool_ref(&d, n, ho, wo, c.x_host, y_ref);
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y_host, y_ref, y_count, 1e-6);

    tensor_put(&dy, c.r);
    tensor_poison(&dx);
    STATUS_OK(ops->pool_backward(c.layer, &dy, &dx));
    tensor_get(&dx, dx_host);
    snprintf(what, sizeof(what), "%s backward (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, is_max ? 1e-2 : 0.5, fd_layer_loss, &c, NULL, 1e-4);

    fd_layer_free(&c, layer);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(dx_host);
    free(y_ref);
}

/* ---- linear ----------------------------------------------------------------- */

typedef struct {
    tr_layer_t *layer;
    tr_tensor_t x, w, bias, y, r; /* r: the projection, also dy */
    float *x_host;
} linear_ctx_t;

static double linear_loss(void *p)
{
    linear_ctx_t *c = p;
    tensor_put(&c->x, c->x_host);
    STATUS_OK(ops->linear_forward(c->layer, &c->x, &c->w, &c->bias, &c->y));
    return dot(c->y.data, c->r.data, tr_tensor_count(&c->y));
}

/* layer: made for d by the caller (run at several batch sizes), or NULL:
 * made and freed here. */
void test_linear(tr_layer_t *layer, const tr_linear_desc_t *dp, int n)
{
    const tr_linear_desc_t d = *dp;
    char what[128], name[64];
    snprintf(name, sizeof(name), "linear %dx%d->%d", n, d.c_in, d.c_out);
    size_t x_count = (size_t)n * d.c_in, y_count = (size_t)n * d.c_out;
    const int w_dims[2] = {d.c_out, d.c_in}, y_dims[2] = {n, d.c_out}, b_dims[1] = {d.c_out};

    linear_ctx_t c = {.layer = layer};
    if (layer == NULL) STATUS_OK(ops->linear_create(be, &d, &c.layer));
    if (c.layer == NULL) return;
    c.x = tensor_make(n, d.c_in, 1, 1);
    tr_tensor_t dx = tensor_make(n, d.c_in, 1, 1);
    c.x_host = rand_array(x_count, 1.0f);
    c.w = param_rand(2, w_dims, 0.5f);
    c.bias = param_rand(1, b_dims, 0.5f);
    c.y = param_nan(2, y_dims);
    c.r = param_rand(2, y_dims, 1.0f);
    float *dx_host = malloc(x_count * sizeof(float));
    tr_tensor_t dw = param_nan(2, w_dims), db = param_nan(1, b_dims);
    double *y_ref = malloc(y_count * sizeof(double));
    const float *w = c.w.data, *bias = c.bias.data;

    linear_loss(&c);
    for (int s = 0; s < n; s++)
        for (int o = 0; o < d.c_out; o++) {
            double v = bias[o];
            for (int i = 0; i < d.c_in; i++) v += (double)c.x_host[s * d.c_in + i] * w[o * d.c_in + i];
            y_ref[s * d.c_out + o] = v;
        }
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y.data, y_ref, y_count, 1e-5);

    tensor_poison(&dx);
    STATUS_OK(ops->linear_backward_data(c.layer, &c.r, &c.w, &dx));
    tensor_get(&dx, dx_host);
    STATUS_OK(ops->linear_backward_weights(c.layer, &c.x, &c.r, &dw, &db));
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, 0.5, linear_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward weights (fd)", name);
    fd_check(what, c.w.data, tr_tensor_count(&c.w), dw.data, 0.5, linear_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward bias (fd)", name);
    fd_check(what, c.bias.data, (size_t)d.c_out, db.data, 0.5, linear_loss, &c, NULL, 1e-4);

    /* Rows of the wrong batch are refused (in a buffer of that size, so a
     * backend that wrongly accepts writes nothing out of bounds). */
    tr_tensor_t y_long = param_nan(2, (const int[]){n + 1, d.c_out});
    CHECK(ops->linear_forward(c.layer, &c.x, &c.w, &c.bias, &y_long) == HORA_ERR_INVALID_ARG,
          "%s: y of %d rows accepted", name, n + 1);
    free(y_long.data);

    if (layer == NULL) ops->layer_free(c.layer);
    ops->tensor_free(be, &c.x);
    ops->tensor_free(be, &dx);
    tr_tensor_t *hosts[] = {&c.w, &c.bias, &c.y, &c.r, &dw, &db};
    for (int i = 0; i < 6; i++) free(hosts[i]->data);
    free(c.x_host);
    free(dx_host);
    free(y_ref);
}
