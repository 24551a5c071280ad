/*
 * ops_conv.c - convolution against direct double loops (forward) and
 * central finite differences (backward data and weights; linear in both, so
 * a large step is exact up to float noise).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_test.h"

static void conv_forward(fd_layer_t *c) { STATUS_OK(ops->conv_forward(c->layer, &c->x, &c->w, &c->y)); }

/* layer: made for d by the caller (run at several batch sizes), or NULL:
 * made and freed here. */
void test_conv(tr_layer_t *layer, const tr_conv_desc_t *d, int n)
{
    char what[128], name[96];
    snprintf(name, sizeof(name), "conv %dx%dx%dx%d->%d k%d s%d p%d", n, d->c_in, d->h_in, d->w_in, d->c_out, d->kernel,
             d->stride, d->pad);
    int ho = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1,
        wo = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    size_t x_count = (size_t)n * d->c_in * d->h_in * d->w_in, y_count = (size_t)n * d->c_out * ho * wo;
    const int w_dims[4] = {d->c_out, d->c_in, d->kernel, d->kernel};

    fd_layer_t c = {.layer = layer, .forward = conv_forward};
    if (layer == NULL) STATUS_OK(ops->conv_create(be, d, &c.layer));
    if (c.layer == NULL) return;
    c.x = tensor_make(n, d->c_in, d->h_in, d->w_in);
    c.y = tensor_make(n, d->c_out, ho, wo);
    tr_tensor_t dy = tensor_make(n, d->c_out, ho, wo), dx = tensor_make(n, d->c_in, d->h_in, d->w_in);
    c.x_host = rand_array(x_count, 1.0f);
    c.w = param_rand(4, w_dims, 0.5f);
    c.r = rand_array(y_count, 1.0f);
    c.y_host = malloc(y_count * sizeof(float));
    c.y_count = y_count;
    float *dx_host = malloc(x_count * sizeof(float));
    tr_tensor_t dw = param_nan(4, w_dims);
    double *y_ref = malloc(y_count * sizeof(double));

    /* forward against the direct loops */
    tensor_poison(&c.y);
    fd_layer_loss(&c);
    conv_ref(d, n, ho, wo, c.x_host, c.w.data, NULL, y_ref, NULL, NULL);
    snprintf(what, sizeof(what), "%s forward", name);
    compare(what, c.y_host, y_ref, y_count, 1e-5);

    /* gradients of sum(y * r): dy = r */
    tensor_put(&dy, c.r);
    tensor_poison(&dx);
    STATUS_OK(ops->conv_backward_data(c.layer, &dy, &c.w, &dx));
    tensor_get(&dx, dx_host);
    STATUS_OK(ops->conv_backward_weights(c.layer, &c.x, &dy, &dw));

    /* Linear in x and in w: a step of 0.5 is exact up to float noise. */
    snprintf(what, sizeof(what), "%s backward data (fd)", name);
    fd_check(what, c.x_host, x_count, dx_host, 0.5, fd_layer_loss, &c, NULL, 1e-4);
    snprintf(what, sizeof(what), "%s backward weights (fd)", name);
    fd_check(what, c.w.data, tr_tensor_count(&c.w), dw.data, 0.5, fd_layer_loss, &c, NULL, 1e-4);

    /* Shape checks: a y of the wrong size, or weights of the wrong shape, are refused. */
    tr_tensor_t wrong = tensor_make(n, d->c_out, ho + 1, wo);
    CHECK(ops->conv_forward(c.layer, &c.x, &c.w, &wrong) == HORA_ERR_INVALID_ARG, "%s: wrong y accepted", name);
    ops->tensor_free(be, &wrong);
    tr_tensor_t w_wrong =
        host_tensor(c.w.data, TR_DTYPE_F32, 4, (const int[]){d->c_in, d->c_out, d->kernel, d->kernel});
    if (d->c_in != d->c_out) /* else the transposed shape is the same shape */
        CHECK(ops->conv_forward(c.layer, &c.x, &w_wrong, &c.y) == HORA_ERR_INVALID_ARG,
              "%s: transposed weights accepted", name);

    fd_layer_free(&c, layer);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(dx_host);
    free(dw.data);
    free(y_ref);
}
