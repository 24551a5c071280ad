/*
 * bc_layers.c - the layers (convolution, batch norm, pooling, linear) on
 * both sides: one layer per side made once and run at each batch size in
 * turn (layers are not tied to a batch), every output poisoned with NaN
 * first and compared in full (bc.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"

/* The coarser of two dtypes (bf16 > f16 > f32): a result that went through
 * both roundings. */
static tr_dtype_t coarser(tr_dtype_t a, tr_dtype_t b)
{
    if (a == TR_DTYPE_BF16 || b == TR_DTYPE_BF16) return TR_DTYPE_BF16;
    if (a == TR_DTYPE_F16 || b == TR_DTYPE_F16) return TR_DTYPE_F16;
    return TR_DTYPE_F32;
}

/* The reference side's dtypes for a layer the test side runs in (dtype,
 * grad_dtype): the same where the reference computes in dtype, else f32 for
 * both (the more exact result). */
static void ref_dtypes(tr_dtype_t dtype, tr_dtype_t grad_dtype, tr_dtype_t *ref_dtype, tr_dtype_t *ref_grad)
{
    *ref_dtype = bc_ref_dtype(dtype);
    *ref_grad = *ref_dtype == dtype ? grad_dtype : TR_DTYPE_F32;
}

/* The test side has dtype (else a SKIP line names why). */
static int test_has(const char *what, tr_dtype_t dtype)
{
    char why[256];
    if (bc_has_dtype(&bc_test, dtype, why, sizeof(why))) return 1;
    bc_skip(what, why);
    return 0;
}

static const char *grad_suffix(tr_dtype_t dtype, tr_dtype_t grad)
{
    if (grad == dtype) return "";
    return grad == TR_DTYPE_F32 ? " g32" : grad == TR_DTYPE_F16 ? " g16" : " gbf16";
}

/* ---- convolution ---------------------------------------------------------- */

typedef struct {
    float *y, *dx, *dw;
} conv_out_t;

/* One side: forward, backward data (with the forward's w, as the contract
 * asks), backward weights. */
static int conv_side(bc_side_t *s, tr_layer_t *layer, const tr_conv_desc_t *d, int n, const float *x, const float *w,
                     const float *dy, conv_out_t *out)
{
    const int ho = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1;
    const int wo = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    const int wdims[4] = {d->c_out, d->c_in, d->kernel, d->kernel};
    tr_tensor_t tx = {0}, ty = {0}, tdy = {0}, tdx = {0}, tw = {0}, tdw = {0};
    int ok = bc_act_alloc(s, n, d->c_in, d->h_in, d->w_in, d->dtype, &tx) &&
             bc_act_alloc(s, n, d->c_out, ho, wo, d->dtype, &ty) &&
             bc_act_alloc(s, n, d->c_out, ho, wo, d->dtype, &tdy) &&
             bc_act_alloc(s, n, d->c_in, d->h_in, d->w_in, d->dtype, &tdx) &&
             bc_plain_alloc(s, d->dtype, 4, wdims, &tw) && bc_plain_alloc(s, d->grad_dtype, 4, wdims, &tdw);
    ok = ok && bc_act_put(s, &tx, x, 0) && bc_plain_put(s, &tw, w) && bc_act_put(s, &tdy, dy, 0);
    ok = ok && bc_act_poison(s, &ty) && bc_act_poison(s, &tdx) && bc_plain_poison(s, &tdw);
    ok = ok && BC_OK(s->ops->conv_forward(layer, &tx, &tw, &ty)) && bc_act_get(s, &ty, out->y, 0);
    ok = ok && BC_OK(s->ops->conv_backward_data(layer, &tdy, &tw, &tdx)) && bc_act_get(s, &tdx, out->dx, 0);
    ok = ok && BC_OK(s->ops->conv_backward_weights(layer, &tx, &tdy, &tdw)) && bc_plain_get(s, &tdw, out->dw);
    bc_act_free_all(s, (tr_tensor_t *[]){&tx, &ty, &tdy, &tdx}, 4);
    bc_plain_free_all(s, (tr_tensor_t *[]){&tw, &tdw}, 2);
    return ok;
}

void bc_conv(const tr_conv_desc_t *d, const int *batches, int batch_count)
{
    char what[128];
    snprintf(what, sizeof(what), "conv %d->%d k%d s%d p%d %dx%d %s%s", d->c_in, d->c_out, d->kernel, d->stride, d->pad,
             d->h_in, d->w_in, tr_dtype_name(d->dtype), grad_suffix(d->dtype, d->grad_dtype));
    if (!test_has(what, d->dtype)) return;
    tr_conv_desc_t dr = *d;
    ref_dtypes(d->dtype, d->grad_dtype, &dr.dtype, &dr.grad_dtype);
    tr_layer_t *lr = NULL, *lt = NULL;
    if (!BC_OK(bc_ref.ops->conv_create(bc_ref.be, &dr, &lr)) || !BC_OK(bc_test.ops->conv_create(bc_test.be, d, &lt)))
        goto out;
    const int ho = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1;
    const int wo = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    const size_t w_count = (size_t)d->c_out * d->c_in * d->kernel * d->kernel;
    for (int b = 0; b < batch_count; b++) {
        const int n = batches[b];
        const size_t x_count = (size_t)n * d->c_in * d->h_in * d->w_in, y_count = (size_t)n * d->c_out * ho * wo;
        float *x = bc_rand(x_count, 1.0f, d->dtype);
        float *w = bc_rand(w_count, 1.0f / sqrtf((float)(d->c_in * d->kernel * d->kernel)), d->dtype);
        float *dy = bc_rand(y_count, 1.0f, d->dtype);
        conv_out_t o[2];
        for (int i = 0; i < 2; i++) o[i] = (conv_out_t){bc_nan(y_count), bc_nan(x_count), bc_nan(w_count)};
        const int ok =
            conv_side(&bc_ref, lr, &dr, n, x, w, dy, &o[0]) && conv_side(&bc_test, lt, d, n, x, w, dy, &o[1]);
        if (ok) {
            char line[192];
            snprintf(line, sizeof(line), "%s n%d forward y", what, n);
            bc_compare(line, o[1].y, o[0].y, y_count, bc_tol(BC_TOL_CONV, d->dtype));
            snprintf(line, sizeof(line), "%s n%d backward data dx", what, n);
            bc_compare(line, o[1].dx, o[0].dx, x_count, bc_tol(BC_TOL_CONV, d->dtype));
            /* dw: cuDNN plans no f32 dw from f16/bf16 inputs, so the cuda
             * backend rounds dw to the compute dtype before grad_dtype
             * (trainer/backends/cuda/README.md): the coarser of the two. */
            snprintf(line, sizeof(line), "%s n%d backward weights dw", what, n);
            bc_compare(line, o[1].dw, o[0].dw, w_count, bc_tol(BC_TOL_CONV, coarser(d->dtype, d->grad_dtype)));
        }
        for (int i = 0; i < 2; i++) {
            free(o[i].y);
            free(o[i].dx);
            free(o[i].dw);
        }
        free(x);
        free(w);
        free(dy);
    }
out:
    bc_layer_free(&bc_ref, &lr);
    bc_layer_free(&bc_test, &lt);
}

/* ---- batch norm ----------------------------------------------------------- */

typedef struct {
    const float *x, *dy, *gamma, *beta, *mean, *var; /* inputs; mean/var the running statistics before */
} bn_in_t;

typedef struct {
    float *y, *mean, *var, *dx, *dgamma, *dbeta, *y_infer;
} bn_out_t;

/* One side: forward_train (y, running statistics updated), backward (dx,
 * dgamma, dbeta, the relu mask of the fused forward), forward_infer with
 * the updated running statistics. */
static int bn_side(bc_side_t *s, tr_layer_t *layer, const tr_bn_desc_t *d, int n, const bn_in_t *in, bn_out_t *out)
{
    const int c = d->c;
    tr_tensor_t tx = {0}, ty = {0}, tdy = {0}, tdx = {0}, tyi = {0};
    tr_tensor_t tg = {0}, tb = {0}, tm = {0}, tv = {0}, tdg = {0}, tdb = {0};
    int ok = bc_act_alloc(s, n, c, d->h, d->w, d->dtype, &tx) && bc_act_alloc(s, n, c, d->h, d->w, d->dtype, &ty) &&
             bc_act_alloc(s, n, c, d->h, d->w, d->dtype, &tdy) && bc_act_alloc(s, n, c, d->h, d->w, d->dtype, &tdx) &&
             bc_act_alloc(s, n, c, d->h, d->w, d->dtype, &tyi);
    ok = ok && bc_plain_alloc(s, TR_DTYPE_F32, 1, &c, &tg) && bc_plain_alloc(s, TR_DTYPE_F32, 1, &c, &tb) &&
         bc_plain_alloc(s, TR_DTYPE_F32, 1, &c, &tm) && bc_plain_alloc(s, TR_DTYPE_F32, 1, &c, &tv) &&
         bc_plain_alloc(s, d->grad_dtype, 1, &c, &tdg) && bc_plain_alloc(s, d->grad_dtype, 1, &c, &tdb);
    ok = ok && bc_act_put(s, &tx, in->x, 0) && bc_act_put(s, &tdy, in->dy, 0) && bc_plain_put(s, &tg, in->gamma) &&
         bc_plain_put(s, &tb, in->beta) && bc_plain_put(s, &tm, in->mean) && bc_plain_put(s, &tv, in->var);
    ok = ok && bc_act_poison(s, &ty) && bc_act_poison(s, &tdx) && bc_act_poison(s, &tyi) && bc_plain_poison(s, &tdg) &&
         bc_plain_poison(s, &tdb);
    ok = ok && BC_OK(s->ops->bn_forward_train(layer, &tx, &tg, &tb, &tm, &tv, &ty)) && bc_act_get(s, &ty, out->y, 0) &&
         bc_plain_get(s, &tm, out->mean) && bc_plain_get(s, &tv, out->var);
    /* y stays as the forward wrote it: the fused relu's mask may be y. */
    ok = ok && BC_OK(s->ops->bn_backward(layer, &tx, &tdy, &tg, &tdx, &tdg, &tdb)) && bc_act_get(s, &tdx, out->dx, 0) &&
         bc_plain_get(s, &tdg, out->dgamma) && bc_plain_get(s, &tdb, out->dbeta);
    ok = ok && BC_OK(s->ops->bn_forward_infer(layer, &tx, &tg, &tb, &tm, &tv, &tyi)) &&
         bc_act_get(s, &tyi, out->y_infer, 0);
    tr_tensor_t *acts[] = {&tx, &ty, &tdy, &tdx, &tyi};
    tr_tensor_t *plains[] = {&tg, &tb, &tm, &tv, &tdg, &tdb};
    for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) bc_act_free(s, acts[i]);
    for (size_t i = 0; i < sizeof(plains) / sizeof(plains[0]); i++) bc_plain_free(s, plains[i]);
    return ok;
}

/* The cuda backend refuses batch norm, pooling and linear layers of fewer
 * than 8 channels (their activations are stored padded; trainer/backends/cuda's
 * README): for those the check is that refusal, HORA_ERR_UNSUPPORTED. */
#define BC_CUDA_MIN_CHANNELS 8
static int bc_small(int c) { return strcmp(bc_test.ops->name, "cuda") == 0 && c < BC_CUDA_MIN_CHANNELS; }

void bc_bn(const tr_bn_desc_t *d, const int *batches, int batch_count)
{
    char what[128];
    snprintf(what, sizeof(what), "bn c%d %dx%d%s %s%s", d->c, d->h, d->w, d->fuse_relu ? " +relu" : "",
             tr_dtype_name(d->dtype), grad_suffix(d->dtype, d->grad_dtype));
    if (!test_has(what, d->dtype)) return;
    tr_bn_desc_t dr = *d;
    ref_dtypes(d->dtype, d->grad_dtype, &dr.dtype, &dr.grad_dtype);
    tr_layer_t *lr = NULL, *lt = NULL;
    if (bc_small(d->c)) {
        bc_expect(what, bc_test.ops->bn_create(bc_test.be, d, &lt), HORA_ERR_UNSUPPORTED);
        goto out;
    }
    if (!BC_OK(bc_ref.ops->bn_create(bc_ref.be, &dr, &lr)) || !BC_OK(bc_test.ops->bn_create(bc_test.be, d, &lt)))
        goto out;
    const size_t c = (size_t)d->c, hw = (size_t)d->h * d->w;
    for (int b = 0; b < batch_count; b++) {
        const int n = batches[b];
        const size_t count = (size_t)n * c * hw;
        /* Channels with their own offset and spread (a mean to subtract, a
         * variance well away from 0), gamma around 1. */
        float *x = bc_rand(count, 1.0f, TR_DTYPE_F32), *dy = bc_rand(count, 1.0f, d->dtype);
        float *gamma = bc_rand(c, 0.5f, TR_DTYPE_F32), *beta = bc_rand(c, 0.5f, TR_DTYPE_F32);
        float *mean = bc_rand(c, 0.5f, TR_DTYPE_F32), *var = bc_rand(c, 0.5f, TR_DTYPE_F32);
        for (size_t k = 0; k < c; k++) {
            const float offset = bc_sym(1.0f), spread = 1.25f + bc_sym(0.75f);
            for (int s = 0; s < n; s++)
                for (size_t i = 0; i < hw; i++) {
                    float *v = &x[((size_t)s * c + k) * hw + i];
                    *v = offset + spread * *v;
                }
            gamma[k] += 1.0f;
            var[k] += 1.0f;
        }
        bc_round(x, count, d->dtype);
        const bn_in_t in = {x, dy, gamma, beta, mean, var};
        bn_out_t o[2];
        for (int i = 0; i < 2; i++)
            o[i] = (bn_out_t){bc_nan(count), bc_nan(c), bc_nan(c), bc_nan(count), bc_nan(c), bc_nan(c), bc_nan(count)};
        const int ok = bn_side(&bc_ref, lr, &dr, n, &in, &o[0]) && bn_side(&bc_test, lt, d, n, &in, &o[1]);
        if (ok) {
            char line[192];
            snprintf(line, sizeof(line), "%s n%d forward train y", what, n);
            bc_compare(line, o[1].y, o[0].y, count, bc_tol(BC_TOL_BN, d->dtype));
            snprintf(line, sizeof(line), "%s n%d running mean", what, n);
            bc_compare(line, o[1].mean, o[0].mean, c, bc_tol(BC_TOL_BN_STATS, TR_DTYPE_F32));
            snprintf(line, sizeof(line), "%s n%d running var", what, n);
            bc_compare(line, o[1].var, o[0].var, c, bc_tol(BC_TOL_BN_STATS, TR_DTYPE_F32));
            snprintf(line, sizeof(line), "%s n%d backward dx", what, n);
            bc_compare(line, o[1].dx, o[0].dx, count, bc_tol(BC_TOL_BN_DX, d->dtype));
            snprintf(line, sizeof(line), "%s n%d backward dgamma", what, n);
            bc_compare(line, o[1].dgamma, o[0].dgamma, c, bc_tol(BC_TOL_BN, coarser(d->dtype, d->grad_dtype)));
            snprintf(line, sizeof(line), "%s n%d backward dbeta", what, n);
            bc_compare(line, o[1].dbeta, o[0].dbeta, c, bc_tol(BC_TOL_BN, coarser(d->dtype, d->grad_dtype)));
            snprintf(line, sizeof(line), "%s n%d forward infer y", what, n);
            bc_compare(line, o[1].y_infer, o[0].y_infer, count, bc_tol(BC_TOL_BN, d->dtype));
        }
        for (int i = 0; i < 2; i++) {
            float *arrays[] = {o[i].y, o[i].mean, o[i].var, o[i].dx, o[i].dgamma, o[i].dbeta, o[i].y_infer};
            for (size_t a = 0; a < sizeof(arrays) / sizeof(arrays[0]); a++) free(arrays[a]);
        }
        free(x);
        free(dy);
        free(gamma);
        free(beta);
        free(mean);
        free(var);
    }
out:
    bc_layer_free(&bc_ref, &lr);
    bc_layer_free(&bc_test, &lt);
}

/* ---- pooling -------------------------------------------------------------- */

static int pool_side(bc_side_t *s, tr_layer_t *layer, const tr_pool_desc_t *d, int n, int ho, int wo, const float *x,
                     const float *dy, float *y, float *dx)
{
    tr_tensor_t tx = {0}, ty = {0}, tdy = {0}, tdx = {0};
    int ok = bc_act_alloc(s, n, d->c, d->h, d->w, d->dtype, &tx) && bc_act_alloc(s, n, d->c, ho, wo, d->dtype, &ty) &&
             bc_act_alloc(s, n, d->c, ho, wo, d->dtype, &tdy) && bc_act_alloc(s, n, d->c, d->h, d->w, d->dtype, &tdx);
    ok =
        ok && bc_act_put(s, &tx, x, 0) && bc_act_put(s, &tdy, dy, 0) && bc_act_poison(s, &ty) && bc_act_poison(s, &tdx);
    ok = ok && BC_OK(s->ops->pool_forward(layer, &tx, &ty)) && bc_act_get(s, &ty, y, 0);
    ok = ok && BC_OK(s->ops->pool_backward(layer, &tdy, &tdx)) && bc_act_get(s, &tdx, dx, 0);
    bc_act_free_all(s, (tr_tensor_t *[]){&tx, &ty, &tdy, &tdx}, 4);
    return ok;
}

void bc_pool(const tr_pool_desc_t *d, const int *batches, int batch_count)
{
    const int max = d->kind == TR_POOL_MAX;
    char what[128];
    if (max)
        snprintf(what, sizeof(what), "max pool c%d %dx%d k%d s%d p%d %s", d->c, d->h, d->w, d->kernel, d->stride,
                 d->pad, tr_dtype_name(d->dtype));
    else
        snprintf(what, sizeof(what), "global avg pool c%d %dx%d %s", d->c, d->h, d->w, tr_dtype_name(d->dtype));
    if (!test_has(what, d->dtype)) return;
    tr_pool_desc_t dr = *d;
    dr.dtype = bc_ref_dtype(d->dtype);
    tr_layer_t *lr = NULL, *lt = NULL;
    if (bc_small(d->c)) {
        bc_expect(what, bc_test.ops->pool_create(bc_test.be, d, &lt), HORA_ERR_UNSUPPORTED);
        goto out;
    }
    if (!BC_OK(bc_ref.ops->pool_create(bc_ref.be, &dr, &lr)) || !BC_OK(bc_test.ops->pool_create(bc_test.be, d, &lt)))
        goto out;
    const int ho = max ? (d->h + 2 * d->pad - d->kernel) / d->stride + 1 : 1;
    const int wo = max ? (d->w + 2 * d->pad - d->kernel) / d->stride + 1 : 1;
    for (int b = 0; b < batch_count; b++) {
        const int n = batches[b];
        const size_t x_count = (size_t)n * d->c * d->h * d->w, y_count = (size_t)n * d->c * ho * wo;
        float *x = bc_rand(x_count, 1.0f, d->dtype), *dy = bc_rand(y_count, 1.0f, d->dtype);
        if (max) {
            /* No ties inside a window (which maximum the backward picks is
             * the backends' own choice): (7 h + 13 w + an offset per plane)
             * mod 61 differs for any two positions less than 3 apart, and
             * k / 8 with |k| <= 30 is exact in every dtype. */
            for (size_t p = 0; p < (size_t)n * d->c; p++) {
                const int offset = (int)(bc_unit() * 61.0);
                for (int h = 0; h < d->h; h++)
                    for (int w = 0; w < d->w; w++)
                        x[(p * d->h + h) * d->w + w] = (float)((7 * h + 13 * w + offset) % 61 - 30) / 8.0f;
            }
        }
        float *y[2] = {bc_nan(y_count), bc_nan(y_count)}, *dx[2] = {bc_nan(x_count), bc_nan(x_count)};
        const int ok = pool_side(&bc_ref, lr, &dr, n, ho, wo, x, dy, y[0], dx[0]) &&
                       pool_side(&bc_test, lt, d, n, ho, wo, x, dy, y[1], dx[1]);
        if (ok) {
            char line[192];
            snprintf(line, sizeof(line), "%s n%d forward y", what, n);
            bc_compare(line, y[1], y[0], y_count, bc_tol(max ? BC_TOL_EXACT : BC_TOL_SUM, d->dtype));
            snprintf(line, sizeof(line), "%s n%d backward dx", what, n);
            bc_compare(line, dx[1], dx[0], x_count, bc_tol(BC_TOL_SUM, d->dtype));
        }
        for (int i = 0; i < 2; i++) {
            free(y[i]);
            free(dx[i]);
        }
        free(x);
        free(dy);
    }
out:
    bc_layer_free(&bc_ref, &lr);
    bc_layer_free(&bc_test, &lt);
}

/* ---- linear --------------------------------------------------------------- */

typedef struct {
    float *y, *dx, *dw, *dbias;
} linear_out_t;

static int linear_side(bc_side_t *s, tr_layer_t *layer, const tr_linear_desc_t *d, int n, const float *x,
                       const float *w, const float *bias, const float *dy, linear_out_t *out)
{
    const int wdims[2] = {d->c_out, d->c_in}, ydims[2] = {n, d->c_out};
    tr_tensor_t tx = {0}, tdx = {0}, tw = {0}, tb = {0}, ty = {0}, tdy = {0}, tdw = {0}, tdb = {0};
    int ok = bc_act_alloc(s, n, d->c_in, 1, 1, d->dtype, &tx) && bc_act_alloc(s, n, d->c_in, 1, 1, d->dtype, &tdx) &&
             bc_plain_alloc(s, d->dtype, 2, wdims, &tw) && bc_plain_alloc(s, TR_DTYPE_F32, 1, &d->c_out, &tb) &&
             bc_plain_alloc(s, TR_DTYPE_F32, 2, ydims, &ty) && bc_plain_alloc(s, d->dtype, 2, ydims, &tdy) &&
             bc_plain_alloc(s, d->grad_dtype, 2, wdims, &tdw) && bc_plain_alloc(s, d->grad_dtype, 1, &d->c_out, &tdb);
    ok = ok && bc_act_put(s, &tx, x, 0) && bc_plain_put(s, &tw, w) && bc_plain_put(s, &tb, bias) &&
         bc_plain_put(s, &tdy, dy);
    ok =
        ok && bc_plain_poison(s, &ty) && bc_act_poison(s, &tdx) && bc_plain_poison(s, &tdw) && bc_plain_poison(s, &tdb);
    ok = ok && BC_OK(s->ops->linear_forward(layer, &tx, &tw, &tb, &ty)) && bc_plain_get(s, &ty, out->y);
    ok = ok && BC_OK(s->ops->linear_backward_data(layer, &tdy, &tw, &tdx)) && bc_act_get(s, &tdx, out->dx, 0);
    ok = ok && BC_OK(s->ops->linear_backward_weights(layer, &tx, &tdy, &tdw, &tdb)) && bc_plain_get(s, &tdw, out->dw) &&
         bc_plain_get(s, &tdb, out->dbias);
    bc_act_free_all(s, (tr_tensor_t *[]){&tx, &tdx}, 2);
    tr_tensor_t *plains[] = {&tw, &tb, &ty, &tdy, &tdw, &tdb};
    for (size_t i = 0; i < sizeof(plains) / sizeof(plains[0]); i++) bc_plain_free(s, plains[i]);
    return ok;
}

void bc_linear(const tr_linear_desc_t *d, const int *batches, int batch_count)
{
    char what[128];
    snprintf(what, sizeof(what), "linear %d->%d %s%s", d->c_in, d->c_out, tr_dtype_name(d->dtype),
             grad_suffix(d->dtype, d->grad_dtype));
    if (!test_has(what, d->dtype)) return;
    tr_linear_desc_t dr = *d;
    ref_dtypes(d->dtype, d->grad_dtype, &dr.dtype, &dr.grad_dtype);
    tr_layer_t *lr = NULL, *lt = NULL;
    if (bc_small(d->c_in)) {
        bc_expect(what, bc_test.ops->linear_create(bc_test.be, d, &lt), HORA_ERR_UNSUPPORTED);
        goto out;
    }
    if (!BC_OK(bc_ref.ops->linear_create(bc_ref.be, &dr, &lr)) ||
        !BC_OK(bc_test.ops->linear_create(bc_test.be, d, &lt)))
        goto out;
    const size_t w_count = (size_t)d->c_out * d->c_in;
    for (int b = 0; b < batch_count; b++) {
        const int n = batches[b];
        const size_t x_count = (size_t)n * d->c_in, y_count = (size_t)n * d->c_out;
        float *x = bc_rand(x_count, 1.0f, d->dtype), *dy = bc_rand(y_count, 1.0f, d->dtype);
        float *w = bc_rand(w_count, 1.0f / sqrtf((float)d->c_in), d->dtype);
        float *bias = bc_rand((size_t)d->c_out, 0.5f, TR_DTYPE_F32);
        linear_out_t o[2];
        for (int i = 0; i < 2; i++)
            o[i] = (linear_out_t){bc_nan(y_count), bc_nan(x_count), bc_nan(w_count), bc_nan((size_t)d->c_out)};
        const int ok = linear_side(&bc_ref, lr, &dr, n, x, w, bias, dy, &o[0]) &&
                       linear_side(&bc_test, lt, d, n, x, w, bias, dy, &o[1]);
        if (ok) {
            char line[192];
            snprintf(line, sizeof(line), "%s n%d forward y (+bias)", what, n);
            bc_compare(line, o[1].y, o[0].y, y_count, bc_tol(BC_TOL_SUM, TR_DTYPE_F32));
            snprintf(line, sizeof(line), "%s n%d backward data dx", what, n);
            bc_compare(line, o[1].dx, o[0].dx, x_count, bc_tol(BC_TOL_SUM, d->dtype));
            snprintf(line, sizeof(line), "%s n%d backward weights dw", what, n);
            bc_compare(line, o[1].dw, o[0].dw, w_count, bc_tol(BC_TOL_SUM, d->grad_dtype));
            snprintf(line, sizeof(line), "%s n%d backward weights dbias", what, n);
            bc_compare(line, o[1].dbias, o[0].dbias, (size_t)d->c_out, bc_tol(BC_TOL_SUM, d->grad_dtype));
        }
        for (int i = 0; i < 2; i++) {
            free(o[i].y);
            free(o[i].dx);
            free(o[i].dw);
            free(o[i].dbias);
        }
        free(x);
        free(dy);
        free(w);
        free(bias);
    }
out:
    bc_layer_free(&bc_ref, &lr);
    bc_layer_free(&bc_test, &lt);
}
