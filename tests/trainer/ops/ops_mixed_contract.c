/*
 * ops_mixed_contract.c - the dtype side of backend.h's contract: which
 * dtypes the backend computes in (compute_dtype) and that layers and
 * tensor_alloc follow it (f16 refused with HORA_ERR_UNSUPPORTED where
 * compute_dtype says so, made where it says yes); that every op refuses a
 * tensor of the wrong dtype with HORA_ERR_INVALID_ARG, argument by
 * argument, after the same call with the right dtypes succeeded; and that a
 * refused SGD step leaves the parameters alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"

static long refusals; /* checked, for the summary line */

#define EXPECT_INVALID(call, ...)                        \
    do {                                                 \
        hora_status_t st_ = (call);                      \
        refusals++;                                      \
        CHECK(st_ == HORA_ERR_INVALID_ARG, __VA_ARGS__); \
    } while (0)

/* ---- which dtypes, and the layers' creation ----------------------------------------- */

void mixed_contract_create(tr_dtype_t dt)
{
    int before = failures;
    status_clear();
    hora_status_t can = ops->compute_dtype(be, dt);
    char why[256];
    snprintf(why, sizeof(why), "%s", status_message());
    hora_status_t want = can == HORA_OK ? HORA_OK : HORA_ERR_UNSUPPORTED;
    const char *name = tr_dtype_name(dt);
    printf("note compute_dtype %s: %s%s%s\n", name, can == HORA_OK ? "yes" : "no", can == HORA_OK ? "" : ": ", why);
    CHECK(can == HORA_OK || (can == HORA_ERR_UNSUPPORTED && why[0] != '\0'),
          "compute_dtype %s: status %d, reason \"%s\"", name, (int)can, why);
    CHECK(ops->compute_dtype(be, dt) == can, "compute_dtype %s asked again", name);

    tr_layer_t *layer = NULL;
    hora_status_t st;
    const tr_conv_desc_t cd = {8, 5, 5, 8, 3, 1, 1, dt, TR_DTYPE_F32};
    st = ops->conv_create(be, &cd, &layer);
    CHECK(st == want && (st == HORA_OK) == (layer != NULL), "conv_create %s: status %d (want %d), layer %p", name,
          (int)st, (int)want, (void *)layer);
    ops->layer_free(layer);
    layer = NULL;
    const tr_bn_desc_t bd = {8, 5, 5, 1e-5f, 0.1f, 1, dt, TR_DTYPE_F32};
    st = ops->bn_create(be, &bd, &layer);
    CHECK(st == want && (st == HORA_OK) == (layer != NULL), "bn_create %s: status %d (want %d)", name, (int)st,
          (int)want);
    ops->layer_free(layer);
    layer = NULL;
    const tr_pool_desc_t pd = {TR_POOL_MAX, 8, 6, 6, 3, 2, 1, dt};
    st = ops->pool_create(be, &pd, &layer);
    CHECK(st == want && (st == HORA_OK) == (layer != NULL), "pool_create %s: status %d (want %d)", name, (int)st,
          (int)want);
    ops->layer_free(layer);
    layer = NULL;
    const tr_linear_desc_t ld = {16, 10, dt, TR_DTYPE_F32};
    st = ops->linear_create(be, &ld, &layer);
    CHECK(st == want && (st == HORA_OK) == (layer != NULL), "linear_create %s: status %d (want %d)", name, (int)st,
          (int)want);
    ops->layer_free(layer);

    tr_tensor_t t;
    memset(&t, 0, sizeof(t));
    st = ops->tensor_alloc(be, 2, 16, 3, 3, dt, &t);
    CHECK(st == want, "tensor_alloc %s: status %d (want %d)", name, (int)st, (int)want);
    if (st == HORA_OK) {
        CHECK(t.dtype == dt && t.data != NULL && t.bytes == 2 * 16 * 3 * 3 * tr_dtype_size(dt),
              "tensor_alloc %s: a %s tensor of %zu bytes", name, tr_dtype_name(t.dtype), t.bytes);
        ops->tensor_free(be, &t);
    } else {
        CHECK(t.data == NULL && t.bytes == 0, "tensor_alloc %s: refused, but filled the tensor", name);
    }
    printf("%s %s layers and tensors: %s, as compute_dtype says\n", failures > before ? "FAIL" : "ok  ", name,
           want == HORA_OK ? "made" : "refused (unsupported)");
}

/* Gradient dtypes: f32, bf16 and f16 with any compute dtype; nothing else. */
static void contract_grad_dtypes(void)
{
    static const tr_dtype_t grads[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};
    for (int i = 0; i < 3; i++) {
        tr_layer_t *conv = NULL, *bn = NULL, *linear = NULL;
        const tr_conv_desc_t cd = {8, 5, 5, 8, 3, 1, 1, TR_DTYPE_F32, grads[i]};
        const tr_bn_desc_t bd = {8, 5, 5, 1e-5f, 0.1f, 0, TR_DTYPE_F32, grads[i]};
        const tr_linear_desc_t ld = {16, 10, TR_DTYPE_F32, grads[i]};
        STATUS_OK(ops->conv_create(be, &cd, &conv));
        STATUS_OK(ops->bn_create(be, &bd, &bn));
        STATUS_OK(ops->linear_create(be, &ld, &linear));
        ops->layer_free(conv);
        ops->layer_free(bn);
        ops->layer_free(linear);
    }
    tr_layer_t *layer = NULL;
    const tr_conv_desc_t cd = {8, 5, 5, 8, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_I32};
    EXPECT_INVALID(ops->conv_create(be, &cd, &layer), "conv_create with i32 gradients accepted");
    const tr_bn_desc_t bd = {8, 5, 5, 1e-5f, 0.1f, 0, TR_DTYPE_F32, TR_DTYPE_I32};
    EXPECT_INVALID(ops->bn_create(be, &bd, &layer), "bn_create with i32 gradients accepted");
    const tr_linear_desc_t ld = {16, 10, TR_DTYPE_F32, TR_DTYPE_I32};
    EXPECT_INVALID(ops->linear_create(be, &ld, &layer), "linear_create with i32 gradients accepted");
    CHECK(layer == NULL, "a refused create set its layer");
}

/* ---- each op, each argument in the wrong dtype ------------------------------------------ */

/* The dtype a tensor of a layer computing in dt must not have. */
static tr_dtype_t other(tr_dtype_t dt) { return dt == TR_DTYPE_F32 ? TR_DTYPE_BF16 : TR_DTYPE_F32; }

static void contract_conv(tr_dtype_t dt, tr_dtype_t gdt)
{
    const tr_dtype_t odt = other(dt), ogdt = other(gdt);
    const tr_conv_desc_t d = {16, 6, 6, 16, 3, 1, 1, dt, gdt};
    const int w_dims[4] = {16, 16, 3, 3};
    const char *dn = tr_dtype_name(dt), *gn = tr_dtype_name(gdt);
    tr_layer_t *l = NULL;
    STATUS_OK(ops->conv_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(2, 16, 6, 6, dt), y = act_make(2, 16, 6, 6, dt);
    tr_tensor_t xo = act_make(2, 16, 6, 6, odt), yo = act_make(2, 16, 6, 6, odt);
    tr_tensor_t w = plain_make(dt, 4, w_dims), wo = plain_make(odt, 4, w_dims);
    tr_tensor_t dw = plain_make(gdt, 4, w_dims), dwo = plain_make(ogdt, 4, w_dims);
    float *wv = rand_array(16 * 16 * 9, 0.5f);
    plain_put(&w, wv);
    plain_put(&wo, wv);
    /* x, y double as dy, dx: same shapes. */
    STATUS_OK(ops->conv_forward(l, &x, &w, &y));
    EXPECT_INVALID(ops->conv_forward(l, &xo, &w, &y), "conv %s: forward took a %s x", dn, tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_forward(l, &x, &wo, &y), "conv %s: forward took %s weights", dn, tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_forward(l, &x, &w, &yo), "conv %s: forward took a %s y", dn, tr_dtype_name(odt));
    STATUS_OK(ops->conv_backward_data(l, &y, &w, &x));
    EXPECT_INVALID(ops->conv_backward_data(l, &yo, &w, &x), "conv %s: backward data took a %s dy", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_backward_data(l, &y, &wo, &x), "conv %s: backward data took %s weights", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_backward_data(l, &y, &w, &xo), "conv %s: backward data took a %s dx", dn,
                   tr_dtype_name(odt));
    STATUS_OK(ops->conv_backward_weights(l, &x, &y, &dw));
    EXPECT_INVALID(ops->conv_backward_weights(l, &xo, &y, &dw), "conv %s: backward weights took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_backward_weights(l, &x, &yo, &dw), "conv %s: backward weights took a %s dy", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->conv_backward_weights(l, &x, &y, &dwo), "conv %s/%s: backward weights took a %s dw", dn, gn,
                   tr_dtype_name(ogdt));
    ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &y, &xo, &yo};
    for (int i = 0; i < 4; i++) ops->tensor_free(be, acts[i]);
    free(w.data);
    free(wo.data);
    free(dw.data);
    free(dwo.data);
    free(wv);
}

static void contract_bn(tr_dtype_t dt, tr_dtype_t gdt)
{
    const tr_dtype_t odt = other(dt), ogdt = other(gdt);
    const tr_bn_desc_t d = {16, 5, 5, 1e-5f, 0.1f, 1, dt, gdt};
    const int cdim[1] = {16};
    const char *dn = tr_dtype_name(dt), *gn = tr_dtype_name(gdt);
    tr_layer_t *l = NULL;
    STATUS_OK(ops->bn_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(2, 16, 5, 5, dt), y = act_make(2, 16, 5, 5, dt);
    tr_tensor_t dy = act_make(2, 16, 5, 5, dt), dx = act_make(2, 16, 5, 5, dt);
    tr_tensor_t xo = act_make(2, 16, 5, 5, odt), yo = act_make(2, 16, 5, 5, odt);
    float *xv = rand_array(2 * 16 * 25, 1.0f);
    tensor_put(&x, xv);
    tensor_put(&dy, xv);
    tr_tensor_t v[4], v16 = plain_make(TR_DTYPE_BF16, 1, cdim); /* gamma, beta, mean, var; a bf16 vector */
    float ones[16];
    for (int i = 0; i < 16; i++) ones[i] = 1.0f;
    for (int i = 0; i < 4; i++) {
        v[i] = plain_make(TR_DTYPE_F32, 1, cdim);
        plain_put(&v[i], ones);
    }
    plain_put(&v16, ones);
    tr_tensor_t dg = plain_make(gdt, 1, cdim), db = plain_make(gdt, 1, cdim), dgo = plain_make(ogdt, 1, cdim);
    STATUS_OK(ops->bn_forward_train(l, &x, &v[0], &v[1], &v[2], &v[3], &y));
    EXPECT_INVALID(ops->bn_forward_train(l, &xo, &v[0], &v[1], &v[2], &v[3], &y), "bn %s: forward took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->bn_forward_train(l, &x, &v[0], &v[1], &v[2], &v[3], &yo), "bn %s: forward took a %s y", dn,
                   tr_dtype_name(odt));
    for (int i = 0; i < 4; i++) {
        tr_tensor_t w[4] = {v[0], v[1], v[2], v[3]};
        w[i] = v16;
        EXPECT_INVALID(ops->bn_forward_train(l, &x, &w[0], &w[1], &w[2], &w[3], &y),
                       "bn %s: forward took a bf16 %s (it stays f32)", dn,
                       (const char *[]){"gamma", "beta", "running mean", "running var"}[i]);
        EXPECT_INVALID(ops->bn_forward_infer(l, &x, &w[0], &w[1], &w[2], &w[3], &y),
                       "bn %s: inference took a bf16 %s (it stays f32)", dn,
                       (const char *[]){"gamma", "beta", "running mean", "running var"}[i]);
    }
    STATUS_OK(ops->bn_forward_infer(l, &x, &v[0], &v[1], &v[2], &v[3], &y));
    EXPECT_INVALID(ops->bn_forward_infer(l, &xo, &v[0], &v[1], &v[2], &v[3], &y), "bn %s: inference took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->bn_forward_infer(l, &x, &v[0], &v[1], &v[2], &v[3], &yo), "bn %s: inference took a %s y", dn,
                   tr_dtype_name(odt));
    STATUS_OK(ops->bn_forward_train(l, &x, &v[0], &v[1], &v[2], &v[3], &y));
    STATUS_OK(ops->bn_backward(l, &x, &dy, &v[0], &dx, &dg, &db));
    EXPECT_INVALID(ops->bn_backward(l, &xo, &dy, &v[0], &dx, &dg, &db), "bn %s: backward took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->bn_backward(l, &x, &yo, &v[0], &dx, &dg, &db), "bn %s: backward took a %s dy", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->bn_backward(l, &x, &dy, &v[0], &yo, &dg, &db), "bn %s: backward took a %s dx", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->bn_backward(l, &x, &dy, &v16, &dx, &dg, &db), "bn %s: backward took a bf16 gamma", dn);
    EXPECT_INVALID(ops->bn_backward(l, &x, &dy, &v[0], &dx, &dgo, &db), "bn %s/%s: backward took a %s dgamma", dn, gn,
                   tr_dtype_name(ogdt));
    EXPECT_INVALID(ops->bn_backward(l, &x, &dy, &v[0], &dx, &dg, &dgo), "bn %s/%s: backward took a %s dbeta", dn, gn,
                   tr_dtype_name(ogdt));
    ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &y, &dy, &dx, &xo, &yo};
    for (int i = 0; i < 6; i++) ops->tensor_free(be, acts[i]);
    for (int i = 0; i < 4; i++) free(v[i].data);
    free(v16.data);
    free(dg.data);
    free(db.data);
    free(dgo.data);
    free(xv);
}

static void contract_pool(tr_dtype_t dt)
{
    const tr_dtype_t odt = other(dt);
    const char *dn = tr_dtype_name(dt);
    const tr_pool_desc_t d = {TR_POOL_MAX, 16, 7, 7, 3, 2, 1, dt};
    tr_layer_t *l = NULL;
    STATUS_OK(ops->pool_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(2, 16, 7, 7, dt), y = act_make(2, 16, 4, 4, dt);
    tr_tensor_t xo = act_make(2, 16, 7, 7, odt), yo = act_make(2, 16, 4, 4, odt);
    STATUS_OK(ops->pool_forward(l, &x, &y));
    EXPECT_INVALID(ops->pool_forward(l, &xo, &y), "max pool %s: forward took a %s x", dn, tr_dtype_name(odt));
    EXPECT_INVALID(ops->pool_forward(l, &x, &yo), "max pool %s: forward took a %s y", dn, tr_dtype_name(odt));
    STATUS_OK(ops->pool_forward(l, &x, &y));
    STATUS_OK(ops->pool_backward(l, &y, &x));
    EXPECT_INVALID(ops->pool_backward(l, &yo, &x), "max pool %s: backward took a %s dy", dn, tr_dtype_name(odt));
    EXPECT_INVALID(ops->pool_backward(l, &y, &xo), "max pool %s: backward took a %s dx", dn, tr_dtype_name(odt));
    ops->layer_free(l);
    tr_tensor_t *acts[] = {&x, &y, &xo, &yo};
    for (int i = 0; i < 4; i++) ops->tensor_free(be, acts[i]);
}

static void contract_linear(tr_dtype_t dt, tr_dtype_t gdt)
{
    const tr_dtype_t odt = other(dt), ogdt = other(gdt);
    const char *dn = tr_dtype_name(dt), *gn = tr_dtype_name(gdt);
    const tr_linear_desc_t d = {16, 10, dt, gdt};
    const int w_dims[2] = {10, 16}, y_dims[2] = {2, 10}, b_dims[1] = {10};
    tr_layer_t *l = NULL;
    STATUS_OK(ops->linear_create(be, &d, &l));
    if (l == NULL) return;
    tr_tensor_t x = act_make(2, 16, 1, 1, dt), xo = act_make(2, 16, 1, 1, odt);
    tr_tensor_t w = plain_make(dt, 2, w_dims), wo = plain_make(odt, 2, w_dims);
    tr_tensor_t bias = plain_make(TR_DTYPE_F32, 1, b_dims), bias16 = plain_make(TR_DTYPE_BF16, 1, b_dims);
    tr_tensor_t y = plain_make(TR_DTYPE_F32, 2, y_dims), y16 = plain_make(TR_DTYPE_BF16, 2, y_dims);
    tr_tensor_t dy = plain_make(dt, 2, y_dims), dyo = plain_make(odt, 2, y_dims);
    tr_tensor_t dw = plain_make(gdt, 2, w_dims), dwo = plain_make(ogdt, 2, w_dims);
    tr_tensor_t db = plain_make(gdt, 1, b_dims), dbo = plain_make(ogdt, 1, b_dims);
    float *vals = rand_array(160, 0.5f);
    tr_tensor_t *fill[] = {&w, &wo, &bias, &bias16, &dy, &dyo};
    for (int i = 0; i < 6; i++) plain_put(fill[i], vals);
    STATUS_OK(ops->linear_forward(l, &x, &w, &bias, &y));
    EXPECT_INVALID(ops->linear_forward(l, &xo, &w, &bias, &y), "linear %s: forward took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_forward(l, &x, &wo, &bias, &y), "linear %s: forward took %s weights", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_forward(l, &x, &w, &bias16, &y), "linear %s: forward took a bf16 bias (it stays f32)",
                   dn);
    EXPECT_INVALID(ops->linear_forward(l, &x, &w, &bias, &y16), "linear %s: forward wrote bf16 logits (they stay f32)",
                   dn);
    STATUS_OK(ops->linear_backward_data(l, &dy, &w, &x));
    EXPECT_INVALID(ops->linear_backward_data(l, &dyo, &w, &x), "linear %s: backward data took a %s dy", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_backward_data(l, &dy, &wo, &x), "linear %s: backward data took %s weights", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_backward_data(l, &dy, &w, &xo), "linear %s: backward data took a %s dx", dn,
                   tr_dtype_name(odt));
    STATUS_OK(ops->linear_backward_weights(l, &x, &dy, &dw, &db));
    EXPECT_INVALID(ops->linear_backward_weights(l, &xo, &dy, &dw, &db), "linear %s: backward weights took a %s x", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_backward_weights(l, &x, &dyo, &dw, &db), "linear %s: backward weights took a %s dy", dn,
                   tr_dtype_name(odt));
    EXPECT_INVALID(ops->linear_backward_weights(l, &x, &dy, &dwo, &db), "linear %s/%s: backward weights took a %s dw",
                   dn, gn, tr_dtype_name(ogdt));
    EXPECT_INVALID(ops->linear_backward_weights(l, &x, &dy, &dw, &dbo),
                   "linear %s/%s: backward weights took a %s dbias", dn, gn, tr_dtype_name(ogdt));
    ops->layer_free(l);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &xo);
    void *arrays[] = {w.data,   wo.data, bias.data, bias16.data, y.data,   y16.data, dy.data,
                      dyo.data, dw.data, dwo.data,  db.data,     dbo.data, vals};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) free(arrays[i]);
}

static void contract_eltwise(int f16_ok)
{
    tr_tensor_t a = act_make(2, 16, 5, 5, TR_DTYPE_BF16), b = act_make(2, 16, 5, 5, TR_DTYPE_BF16);
    tr_tensor_t a32 = act_make(2, 16, 5, 5, TR_DTYPE_F32), b32 = act_make(2, 16, 5, 5, TR_DTYPE_F32);
    STATUS_OK(ops->relu_forward(be, &a, &b));
    STATUS_OK(ops->add_forward(be, &a, &b, 1, &a));
    STATUS_OK(ops->relu_backward(be, &a, &b, &b));
    EXPECT_INVALID(ops->relu_forward(be, &a, &a32), "relu: bf16 x into an f32 y");
    EXPECT_INVALID(ops->relu_forward(be, &a32, &a), "relu: f32 x into a bf16 y");
    EXPECT_INVALID(ops->add_forward(be, &a, &b32, 0, &b), "add: bf16 a + f32 b");
    EXPECT_INVALID(ops->add_forward(be, &a32, &b, 0, &a32), "add: f32 a + bf16 b");
    EXPECT_INVALID(ops->add_forward(be, &a, &b, 1, &a32), "add: bf16 a + bf16 b into an f32 y");
    EXPECT_INVALID(ops->relu_backward(be, &a, &b32, &b), "relu backward: bf16 y, f32 dy");
    EXPECT_INVALID(ops->relu_backward(be, &a, &b, &b32), "relu backward: bf16 y and dy, f32 dx");
    EXPECT_INVALID(ops->relu_backward(be, &a32, &b, &b), "relu backward: f32 y, bf16 dy");
    if (!f16_ok) {
        /* A tensor claiming f16 (this backend cannot make one). */
        tr_tensor_t fake = a;
        fake.dtype = TR_DTYPE_F16;
        EXPECT_INVALID(ops->relu_forward(be, &fake, &fake), "relu on an f16 tensor this backend cannot compute in");
    }
    ops->tensor_free(be, &a);
    ops->tensor_free(be, &b);
    ops->tensor_free(be, &a32);
    ops->tensor_free(be, &b32);
}

/* sgd_step, cast and check_finite: what they take, and a refused step
 * writes nothing. */
static void contract_plain_ops(void)
{
    const int d8[1] = {8}, d9[1] = {9};
    tr_tensor_t p = plain_make(TR_DTYPE_F32, 1, d8), m = plain_make(TR_DTYPE_F32, 1, d8);
    tr_tensor_t g = plain_make(TR_DTYPE_BF16, 1, d8), lp = plain_make(TR_DTYPE_BF16, 1, d8);
    tr_tensor_t p16 = plain_make(TR_DTYPE_BF16, 1, d8), m16 = plain_make(TR_DTYPE_BF16, 1, d8);
    tr_tensor_t gi = plain_make(TR_DTYPE_I32, 1, d8), lpi = plain_make(TR_DTYPE_I32, 1, d8);
    tr_tensor_t lp9 = plain_make(TR_DTYPE_BF16, 1, d9), g9 = plain_make(TR_DTYPE_BF16, 1, d9);
    float v[9] = {1, -2, 3, -4, 5, -6, 7, -8, 9}, before[8];
    plain_put(&p, v);
    plain_put(&g, v);
    plain_put(&p16, v);
    memset(m.data, 0, 8 * sizeof(float));
    memset(gi.data, 0, 8 * sizeof(int32_t));
    const tr_sgd_args_t a = {0.1f, 0.9f, 1e-4f, 0, 1.0f / 1024.0f};
    STATUS_OK(ops->sgd_step(be, &p, &lp, &g, &m, &a));
    memcpy(before, p.data, sizeof(before));
    EXPECT_INVALID(ops->sgd_step(be, &p16, &lp, &g, &m, &a), "sgd_step: a bf16 master param");
    EXPECT_INVALID(ops->sgd_step(be, &p, &lp, &g, &m16, &a), "sgd_step: a bf16 momentum");
    EXPECT_INVALID(ops->sgd_step(be, &p, &lp, &gi, &m, &a), "sgd_step: i32 gradients");
    EXPECT_INVALID(ops->sgd_step(be, &p, &lpi, &g, &m, &a), "sgd_step: an i32 param_lp");
    EXPECT_INVALID(ops->sgd_step(be, &p, &lp9, &g, &m, &a), "sgd_step: a param_lp of another shape");
    EXPECT_INVALID(ops->sgd_step(be, &p, &lp, &g9, &m, &a), "sgd_step: gradients of another shape");
    CHECK(memcmp(before, p.data, sizeof(before)) == 0, "sgd_step: a refused step changed the parameters");

    EXPECT_INVALID(ops->cast(be, &p, &lp9), "cast: 8 values into 9");
    int nonfinite = -7;
    EXPECT_INVALID(ops->check_finite(be, &gi, &nonfinite), "check_finite: an i32 tensor");
    CHECK(nonfinite == -7, "check_finite: refused, but wrote its answer (%d)", nonfinite);
    /* Both take plain tensors: a blocked activation is refused. */
    tr_tensor_t act = act_make(2, 16, 3, 3, TR_DTYPE_BF16);
    if (act.layout != TR_LAYOUT_NCHW) {
        tr_tensor_t dst = plain_make(TR_DTYPE_F32, 4, (const int[]){2, 16, 3, 3});
        EXPECT_INVALID(ops->cast(be, &act, &dst), "cast: a %s activation", tr_layout_name(act.layout));
        EXPECT_INVALID(ops->check_finite(be, &act, &nonfinite), "check_finite: a %s activation",
                       tr_layout_name(act.layout));
        free(dst.data);
    }
    ops->tensor_free(be, &act);
    tr_tensor_t *all[] = {&p, &m, &g, &lp, &p16, &m16, &gi, &lpi, &lp9, &g9};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) free(all[i]->data);
}

void mixed_contract(void)
{
    int before = failures;
    refusals = 0;
    mixed_contract_create(TR_DTYPE_F32);
    mixed_contract_create(TR_DTYPE_BF16);
    mixed_contract_create(TR_DTYPE_F16);
    mixed_contract_create(TR_DTYPE_I32);
    CHECK(ops->compute_dtype(be, TR_DTYPE_F32) == HORA_OK, "compute_dtype f32 is not OK");
    CHECK(ops->compute_dtype(be, TR_DTYPE_I32) == HORA_ERR_UNSUPPORTED, "layers compute in i32?");
    CHECK(ops->compute_dtype(be, (tr_dtype_t)9) == HORA_ERR_UNSUPPORTED, "compute_dtype of dtype 9");
    contract_grad_dtypes();
    int f16_ok = ops->compute_dtype(be, TR_DTYPE_F16) == HORA_OK;
    if (ops->compute_dtype(be, TR_DTYPE_BF16) == HORA_OK) {
        static const tr_dtype_t pairs[][2] = {{TR_DTYPE_F32, TR_DTYPE_F32},
                                              {TR_DTYPE_BF16, TR_DTYPE_F32},
                                              {TR_DTYPE_BF16, TR_DTYPE_BF16},
                                              {TR_DTYPE_F32, TR_DTYPE_F16}};
        for (int i = 0; i < 4; i++) {
            contract_conv(pairs[i][0], pairs[i][1]);
            contract_bn(pairs[i][0], pairs[i][1]);
            contract_linear(pairs[i][0], pairs[i][1]);
        }
        contract_pool(TR_DTYPE_F32);
        contract_pool(TR_DTYPE_BF16);
        contract_eltwise(f16_ok);
        contract_plain_ops();
    }
    int failed = failures - before;
    printf("%s dtype contract: %ld refusals checked, %d checks failed\n", failed ? "FAIL" : "ok  ", refusals, failed);
    summary_exact("dtype contract (refusals)", failed, refusals);
}
