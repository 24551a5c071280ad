/*
 * cpu_bn.c - batch normalisation on oneDNN, optionally fused with the ReLU
 * that follows it (dnnl_fuse_norm_relu: the forward keeps a bit mask of
 * y > 0 in a workspace and the backward applies it to dy first).
 *
 * gamma and beta are separate arrays in the trainer's arena, which is what
 * dnnl_use_scale | dnnl_use_shift (oneDNN >= 2.3) take; no packing into the
 * old 2 x C scaleshift array.
 *
 * Statistics: oneDNN normalises with the batch mean and the biased
 * variance (what PyTorch normalises with) and hands both out; the layer
 * keeps them for the backward pass and folds them into the running
 * statistics itself, because PyTorch's running_var uses the unbiased
 * variance, var * m / (m - 1) with m = N * H * W, which oneDNN does not do.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    struct tr_layer base;
    tr_bn_desc_t desc;
    cpu_prim_t fwd_train, fwd_infer, bwd;
    float *mean, *var; /* (C) batch statistics of the last forward_train (owned) */
    float *no_shift;   /* (C) zeros: backward's SHIFT argument (see bn_make_primitives) */
    void *workspace;   /* fuse_relu: the last forward_train's relu mask (owned) */
    int have_stats;    /* a forward_train has run: bwd may use mean/var/workspace */
} cpu_bn_t;

static void cpu_bn_free(tr_layer_t *layer)
{
    cpu_bn_t *bn = (cpu_bn_t *)layer;
    cpu_prim_free(&bn->fwd_train);
    cpu_prim_free(&bn->fwd_infer);
    cpu_prim_free(&bn->bwd);
    free(bn->mean);
    free(bn->var);
    free(bn->no_shift);
    free(bn->workspace);
    free(bn);
}

static hora_status_t bn_add_args(cpu_backend_t *backend, cpu_prim_t *p, const int *args, int count)
{
    for (int i = 0; i < count; i++)
        CPU_CHECK(cpu_prim_add_arg(p, backend->engine, args[i]));
    return HORA_OK;
}

static hora_status_t bn_make_primitives(cpu_backend_t *backend, cpu_bn_t *bn)
{
    const tr_bn_desc_t *d = &bn->desc;
    dnnl_memory_desc_t data_md;
    CPU_CHECK(cpu_md_4d(&data_md, d->n, d->c, d->h, d->w, cpu_layout_for(backend, d->c)));
    unsigned relu = d->fuse_relu ? dnnl_fuse_norm_relu : 0;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | relu;

    dnnl_batch_normalization_desc_t train_desc, infer_desc, bwd_desc;
    CPU_CHECK(cpu_dnnl(dnnl_batch_normalization_forward_desc_init(&train_desc, dnnl_forward_training,
                                                                  &data_md, d->epsilon, flags),
                       "bn forward descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &bn->fwd_train, "bn forward (training)", &train_desc, NULL));
    CPU_CHECK(cpu_dnnl(dnnl_batch_normalization_forward_desc_init(&infer_desc, dnnl_forward_inference,
                                                                  &data_md, d->epsilon,
                                                                  flags | dnnl_use_global_stats),
                       "bn inference descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &bn->fwd_infer, "bn forward (inference)", &infer_desc, NULL));
    CPU_CHECK(cpu_dnnl(dnnl_batch_normalization_backward_desc_init(&bwd_desc, dnnl_backward, &data_md,
                                                                   &data_md, d->epsilon, flags),
                       "bn backward descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &bn->bwd, "bn backward", &bwd_desc, bn->fwd_train.pd));

    static const int train_args[] = {DNNL_ARG_SRC,  DNNL_ARG_DST,  DNNL_ARG_SCALE,
                                     DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    static const int infer_args[] = {DNNL_ARG_SRC,  DNNL_ARG_DST,  DNNL_ARG_SCALE,
                                     DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    /* The shift enters no gradient, but oneDNN 2.6 counts SHIFT among the
     * backward pass's inputs with dnnl_use_shift and refuses to run without
     * it; backend.h's bn_backward has no beta, so it gets zeros. */
    static const int bwd_args[] = {DNNL_ARG_SRC,      DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE,
                                   DNNL_ARG_SHIFT,    DNNL_ARG_MEAN,     DNNL_ARG_VARIANCE,
                                   DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    CPU_CHECK(bn_add_args(backend, &bn->fwd_train, train_args, 6));
    CPU_CHECK(bn_add_args(backend, &bn->fwd_infer, infer_args, 6));
    CPU_CHECK(bn_add_args(backend, &bn->bwd, bwd_args, 9));

    bn->mean = cpu_alloc((size_t)d->c * sizeof(float), "bn batch mean");
    bn->var = cpu_alloc((size_t)d->c * sizeof(float), "bn batch variance");
    bn->no_shift = cpu_alloc((size_t)d->c * sizeof(float), "bn zero shift");
    if (bn->mean == NULL || bn->var == NULL || bn->no_shift == NULL)
        return HORA_ERR_NO_MEMORY;
    if (d->fuse_relu) {
        const dnnl_memory_desc_t *ws_md = cpu_prim_md(&bn->fwd_train, DNNL_ARG_WORKSPACE);
        bn->workspace = cpu_alloc(dnnl_memory_desc_get_size(ws_md), "bn relu workspace");
        if (bn->workspace == NULL)
            return HORA_ERR_NO_MEMORY;
        CPU_CHECK(cpu_prim_add_arg(&bn->fwd_train, backend->engine, DNNL_ARG_WORKSPACE));
        CPU_CHECK(cpu_prim_add_arg(&bn->bwd, backend->engine, DNNL_ARG_WORKSPACE));
    }

    if (backend->verbose)
        fprintf(stderr, "hora-train: cpu: bn %dx%dx%dx%d%s: forward %s, inference %s, backward %s\n", d->n,
                d->c, d->h, d->w, d->fuse_relu ? " +relu" : "", cpu_prim_impl(&bn->fwd_train),
                cpu_prim_impl(&bn->fwd_infer), cpu_prim_impl(&bn->bwd));
    return HORA_OK;
}

hora_status_t cpu_bn_create(tr_backend_t *backend_base, const tr_bn_desc_t *desc, tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL)
        return cpu_invalid("bn_create: NULL argument");
    if (desc->n <= 0 || desc->c <= 0 || desc->h <= 0 || desc->w <= 0 || !(desc->epsilon > 0.0f) ||
        !(desc->momentum >= 0.0f && desc->momentum <= 1.0f))
        return cpu_invalid("bn_create: bad shape %dx%dx%dx%d, epsilon %g or momentum %g", desc->n, desc->c,
                           desc->h, desc->w, (double)desc->epsilon, (double)desc->momentum);

    cpu_bn_t *bn = cpu_alloc(sizeof(*bn), "a bn layer");
    if (bn == NULL)
        return HORA_ERR_NO_MEMORY;
    bn->base.kind = CPU_LAYER_BN;
    bn->base.backend = backend;
    bn->base.free = cpu_bn_free;
    bn->desc = *desc;

    hora_status_t status = bn_make_primitives(backend, bn);
    if (status != HORA_OK)
        goto err_free_bn;
    *layer_out = &bn->base;
    return HORA_OK;

err_free_bn:
    cpu_bn_free(&bn->base);
    return status;
}

static cpu_bn_t *bn_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_BN ? (cpu_bn_t *)layer : NULL;
}

hora_status_t cpu_bn_forward_train(tr_layer_t *layer, const tr_tensor_t *x, const float *gamma,
                                   const float *beta, float *running_mean, float *running_var,
                                   tr_tensor_t *y)
{
    cpu_bn_t *bn = bn_of(layer);
    if (bn == NULL || gamma == NULL || beta == NULL || running_mean == NULL || running_var == NULL)
        return cpu_invalid("bn_forward_train: not a bn layer, or a NULL parameter");
    cpu_backend_t *backend = bn->base.backend;
    const tr_bn_desc_t *d = &bn->desc;
    size_t m = (size_t)d->n * (size_t)d->h * (size_t)d->w; /* values per channel */
    if (m < 2) /* PyTorch refuses too: the unbiased variance needs two values */
        return cpu_invalid("bn_forward_train: one value per channel (%dx%dx%d) cannot be normalised",
                           d->n, d->h, d->w);
    CPU_CHECK(cpu_check_tensor(backend, x, d->n, d->c, d->h, d->w, "bn_forward_train x"));
    CPU_CHECK(cpu_check_tensor(backend, y, d->n, d->c, d->h, d->w, "bn_forward_train y"));

    cpu_prim_t *p = &bn->fwd_train;
    bn->have_stats = 0;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SRC, x->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DST, y->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SCALE, gamma));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SHIFT, beta));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_MEAN, bn->mean));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_VARIANCE, bn->var));
    if (d->fuse_relu)
        CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_WORKSPACE, bn->workspace));
    CPU_CHECK(cpu_prim_exec(backend, p));
    bn->have_stats = 1;

    /* PyTorch updates in its accumulation type (double on CPUs) and stores
     * floats; so do we. */
    double momentum = d->momentum;
    double unbias = (double)m / (double)(m - 1);
    for (int c = 0; c < d->c; c++) {
        running_mean[c] = (float)(momentum * bn->mean[c] + (1.0 - momentum) * running_mean[c]);
        running_var[c] = (float)(momentum * (bn->var[c] * unbias) + (1.0 - momentum) * running_var[c]);
    }
    return HORA_OK;
}

hora_status_t cpu_bn_forward_infer(tr_layer_t *layer, const tr_tensor_t *x, const float *gamma,
                                   const float *beta, const float *running_mean,
                                   const float *running_var, tr_tensor_t *y)
{
    cpu_bn_t *bn = bn_of(layer);
    if (bn == NULL || gamma == NULL || beta == NULL || running_mean == NULL || running_var == NULL)
        return cpu_invalid("bn_forward_infer: not a bn layer, or a NULL parameter");
    cpu_backend_t *backend = bn->base.backend;
    const tr_bn_desc_t *d = &bn->desc;
    CPU_CHECK(cpu_check_tensor(backend, x, d->n, d->c, d->h, d->w, "bn_forward_infer x"));
    CPU_CHECK(cpu_check_tensor(backend, y, d->n, d->c, d->h, d->w, "bn_forward_infer y"));

    cpu_prim_t *p = &bn->fwd_infer;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SRC, x->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DST, y->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SCALE, gamma));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SHIFT, beta));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_MEAN, running_mean));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_VARIANCE, running_var));
    return cpu_prim_exec(backend, p);
}

hora_status_t cpu_bn_backward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                              const float *gamma, tr_tensor_t *dx, float *dgamma, float *dbeta)
{
    cpu_bn_t *bn = bn_of(layer);
    if (bn == NULL || gamma == NULL || dgamma == NULL || dbeta == NULL)
        return cpu_invalid("bn_backward: not a bn layer, or a NULL parameter");
    if (!bn->have_stats)
        return cpu_invalid("bn_backward: no bn_forward_train ran before it");
    cpu_backend_t *backend = bn->base.backend;
    const tr_bn_desc_t *d = &bn->desc;
    CPU_CHECK(cpu_check_tensor(backend, x, d->n, d->c, d->h, d->w, "bn_backward x"));
    CPU_CHECK(cpu_check_tensor(backend, dy, d->n, d->c, d->h, d->w, "bn_backward dy"));
    CPU_CHECK(cpu_check_tensor(backend, dx, d->n, d->c, d->h, d->w, "bn_backward dx"));

    cpu_prim_t *p = &bn->bwd;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SRC, x->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_DST, dy->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SCALE, gamma));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SHIFT, bn->no_shift));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_MEAN, bn->mean));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_VARIANCE, bn->var));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_SRC, dx->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_SCALE, dgamma));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_SHIFT, dbeta));
    if (d->fuse_relu)
        CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_WORKSPACE, bn->workspace));
    return cpu_prim_exec(backend, p);
}
