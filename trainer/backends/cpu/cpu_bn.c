/*
 * cpu_bn.c - batch normalisation on oneDNN, optionally fused with the ReLU
 * that follows it (dnnl_fuse_norm_relu: the forward keeps a bit mask of
 * y > 0 in a workspace and the backward applies it to dy first).
 *
 * gamma and beta are separate arrays in the trainer's arena, which is what
 * dnnl_use_scale | dnnl_use_shift (oneDNN >= 2.3, and 3) take; no packing into the
 * old 2 x C scaleshift array.
 *
 * Statistics: oneDNN normalises with the batch mean and the biased
 * variance (what PyTorch normalises with) and hands both out; the layer
 * keeps them for the backward pass and folds them into the running
 * statistics itself, because PyTorch's running_var uses the unbiased
 * variance, var * m / (m - 1) with m = N * H * W, which oneDNN does not do.
 *
 * The primitives and the relu mask depend on the batch size: one bn_batch_t
 * per size (cpu_batch_cache_t). The batch statistics are the layer's, with
 * the size of the forward_train that made them; bn_backward must come at
 * that size.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    cpu_prim_t fwd_train, fwd_infer, bwd;
    void *workspace; /* fuse_relu: the last forward_train's relu mask at this size (owned) */
    int mask_valid;  /* a forward_train at this size filled it */
    int bwd_shift;   /* the backward takes SHIFT (oneDNN 2.6 does; 3 does not) */
} bn_batch_t;

typedef struct {
    struct tr_layer base;
    tr_bn_desc_t desc;
    cpu_batch_cache_t batches; /* bn_batch_t per batch size */
    float *mean, *var;         /* (C) batch statistics of the last forward_train (owned) */
    float *no_shift;           /* (C) zeros: backward's SHIFT argument (see bn_make_primitives) */
    float *dgamma, *dbeta;     /* (C) f32 gradients, when grad_dtype is not f32 (owned) */
    int stats_n;               /* batch size of that forward_train; 0: none yet */
} cpu_bn_t;

static void bn_batch_free(void *entry)
{
    bn_batch_t *bn = entry;
    cpu_prim_free(&bn->fwd_train);
    cpu_prim_free(&bn->fwd_infer);
    cpu_prim_free(&bn->bwd);
    free(bn->workspace);
}

static void cpu_bn_free(tr_layer_t *layer)
{
    cpu_bn_t *bn = (cpu_bn_t *)layer;
    cpu_batch_clear(&bn->batches);
    free(bn->mean);
    free(bn->var);
    free(bn->no_shift);
    free(bn->dgamma);
    free(bn->dbeta);
    free(bn);
}

static hora_status_t bn_add_args(cpu_backend_t *backend, cpu_prim_t *p, const int *args, int count)
{
    for (int i = 0; i < count; i++) CPU_CHECK(cpu_prim_add_arg(p, backend->engine, args[i]));
    return HORA_OK;
}

static hora_status_t bn_make(const cpu_bn_t *layer, bn_batch_t *bn, int n, cpu_md_t *data_md)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_bn_desc_t *d = &layer->desc;
    CPU_CHECK(cpu_md_4d(data_md, n, d->c, d->h, d->w, cpu_layout_for(backend, d->c, d->dtype), d->dtype));
    unsigned relu = d->fuse_relu ? dnnl_fuse_norm_relu : 0;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | relu;

    CPU_CHECK(cpu_prim_made(
        backend, &bn->fwd_train, "bn forward (training)",
        cpu_pd_bn_forward(&bn->fwd_train.pd, backend, dnnl_forward_training, *data_md, d->epsilon, flags)));
    CPU_CHECK(cpu_prim_made(backend, &bn->fwd_infer, "bn forward (inference)",
                            cpu_pd_bn_forward(&bn->fwd_infer.pd, backend, dnnl_forward_inference, *data_md, d->epsilon,
                                              flags | dnnl_use_global_stats)));
    CPU_CHECK(cpu_prim_made(backend, &bn->bwd, "bn backward",
                            cpu_pd_bn_backward(&bn->bwd.pd, backend, *data_md, d->epsilon, flags, bn->fwd_train.pd)));

    static const int train_args[] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                                     DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    static const int infer_args[] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                                     DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    static const int bwd_args[] = {DNNL_ARG_SRC,      DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE,      DNNL_ARG_MEAN,
                                   DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    CPU_CHECK(bn_add_args(backend, &bn->fwd_train, train_args, 6));
    CPU_CHECK(bn_add_args(backend, &bn->fwd_infer, infer_args, 6));
    CPU_CHECK(bn_add_args(backend, &bn->bwd, bwd_args, 8));
    /* The shift enters no gradient, but oneDNN 2.6 counts SHIFT among the
     * backward pass's inputs with dnnl_use_shift and refuses to run without
     * it (oneDNN 3 does not take it); backend.h's bn_backward has no beta,
     * so it gets zeros. */
    bn->bwd_shift = !CPU_DNNL3;
    if (bn->bwd_shift) CPU_CHECK(cpu_prim_add_arg(&bn->bwd, backend->engine, DNNL_ARG_SHIFT));

    if (d->fuse_relu) {
        cpu_cmd_t ws_md = cpu_prim_md(&bn->fwd_train, DNNL_ARG_WORKSPACE);
        bn->workspace = cpu_alloc(dnnl_memory_desc_get_size(ws_md), "bn relu workspace");
        if (bn->workspace == NULL) return HORA_ERR_NO_MEMORY;
        CPU_CHECK(cpu_prim_add_arg(&bn->fwd_train, backend->engine, DNNL_ARG_WORKSPACE));
        CPU_CHECK(cpu_prim_add_arg(&bn->bwd, backend->engine, DNNL_ARG_WORKSPACE));
    }

    if (backend->verbose)
        fprintf(stderr, "hora-train: cpu: bn %dx%dx%dx%d%s: forward %s, inference %s, backward %s\n", n, d->c, d->h,
                d->w, d->fuse_relu ? " +relu" : "", cpu_prim_impl(&bn->fwd_train), cpu_prim_impl(&bn->fwd_infer),
                cpu_prim_impl(&bn->bwd));
    return HORA_OK;
}

/* The batch cache's fill: the primitives (and buffers) of one batch size. */
static hora_status_t bn_make_primitives(tr_layer_t *layer_base, void *entry, int n)
{
    cpu_md_t data_md = NULL;
    hora_status_t status = bn_make((const cpu_bn_t *)layer_base, entry, n, &data_md);
    cpu_md_free(data_md);
    return status;
}

hora_status_t cpu_bn_create(tr_backend_t *backend_base, const tr_bn_desc_t *desc, tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL) return cpu_invalid("bn_create: NULL argument");
    if (desc->c <= 0 || desc->h <= 0 || desc->w <= 0 || !(desc->epsilon > 0.0f) ||
        !(desc->momentum >= 0.0f && desc->momentum <= 1.0f))
        return cpu_invalid("bn_create: bad shape %dx%dx%d, epsilon %g or momentum %g", desc->c, desc->h, desc->w,
                           (double)desc->epsilon, (double)desc->momentum);
    CPU_CHECK(cpu_check_layer_dtypes(desc->dtype, desc->grad_dtype, "bn_create"));

    cpu_bn_t *bn = cpu_alloc(sizeof(*bn), "a bn layer");
    if (bn == NULL) return HORA_ERR_NO_MEMORY;
    bn->base.kind = CPU_LAYER_BN;
    bn->base.backend = backend;
    bn->base.free = cpu_bn_free;
    bn->desc = *desc;
    bn->batches.entry_bytes = sizeof(bn_batch_t);
    bn->batches.fill = bn_make_primitives;
    bn->batches.drop = bn_batch_free;
    bn->mean = cpu_alloc((size_t)desc->c * sizeof(float), "bn batch mean");
    bn->var = cpu_alloc((size_t)desc->c * sizeof(float), "bn batch variance");
    bn->no_shift = cpu_alloc((size_t)desc->c * sizeof(float), "bn zero shift");
    if (desc->grad_dtype != TR_DTYPE_F32) {
        bn->dgamma = cpu_alloc((size_t)desc->c * sizeof(float), "bn f32 dgamma");
        bn->dbeta = cpu_alloc((size_t)desc->c * sizeof(float), "bn f32 dbeta");
    }
    if (bn->mean == NULL || bn->var == NULL || bn->no_shift == NULL ||
        (desc->grad_dtype != TR_DTYPE_F32 && (bn->dgamma == NULL || bn->dbeta == NULL))) {
        cpu_bn_free(&bn->base);
        return HORA_ERR_NO_MEMORY;
    }
    *layer_out = &bn->base;
    return HORA_OK;
}

static cpu_bn_t *bn_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_BN ? (cpu_bn_t *)layer : NULL;
}

/* gamma, beta, running statistics (f32) and their gradients (grad_dtype):
 * plain (C). */
static hora_status_t bn_check_channels(const cpu_bn_t *bn, const tr_tensor_t *t, tr_dtype_t dtype, const char *what)
{
    return cpu_check_plain(t, dtype, 1, (const int[]){bn->desc.c}, what);
}

/* x and y (or dy, dx) of one call; *n its batch. */
static hora_status_t bn_check_data(const cpu_bn_t *bn, const tr_tensor_t *x, const tr_tensor_t *y, const char *what_x,
                                   const char *what_y, int *n)
{
    const tr_bn_desc_t *d = &bn->desc;
    CPU_CHECK(cpu_check_input(bn->base.backend, x, d->c, d->h, d->w, d->dtype, what_x, n));
    return cpu_check_tensor(bn->base.backend, y, *n, d->c, d->h, d->w, d->dtype, what_y);
}

/* The arguments of a forward (training or inference): x and y of one batch
 * n, and the four (C) vectors. */
static hora_status_t bn_check_forward(const cpu_bn_t *bn, int train, const tr_tensor_t *x,
                                      const tr_tensor_t *const vectors[4], const tr_tensor_t *y, int *n)
{
    static const char *const names[2][6] = {
        {"bn_forward_infer x", "bn_forward_infer y", "bn_forward_infer gamma", "bn_forward_infer beta",
         "bn_forward_infer running_mean", "bn_forward_infer running_var"},
        {"bn_forward_train x", "bn_forward_train y", "bn_forward_train gamma", "bn_forward_train beta",
         "bn_forward_train running_mean", "bn_forward_train running_var"},
    };
    const char *const *what = names[train != 0];
    CPU_CHECK(bn_check_data(bn, x, y, what[0], what[1], n));
    for (int i = 0; i < 4; i++) CPU_CHECK(bn_check_channels(bn, vectors[i], TR_DTYPE_F32, what[2 + i]));
    return HORA_OK;
}

hora_status_t cpu_bn_forward_train(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                   const tr_tensor_t *beta, tr_tensor_t *running_mean, tr_tensor_t *running_var,
                                   tr_tensor_t *y)
{
    cpu_bn_t *layer_bn = bn_of(layer);
    int n;
    if (layer_bn == NULL) return cpu_invalid("bn_forward_train: not a bn layer");
    cpu_backend_t *backend = layer_bn->base.backend;
    const tr_bn_desc_t *d = &layer_bn->desc;
    CPU_CHECK(
        bn_check_forward(layer_bn, 1, x, (const tr_tensor_t *const[4]){gamma, beta, running_mean, running_var}, y, &n));
    size_t m = (size_t)n * (size_t)d->h * (size_t)d->w; /* values per channel */
    if (m < 2) /* PyTorch refuses too: the unbiased variance needs two values */
        return cpu_invalid("bn_forward_train: one value per channel (%dx%dx%d) cannot be normalised", n, d->h, d->w);
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_bn->batches, n, &entry));
    bn_batch_t *bn = entry;

    layer_bn->stats_n = 0;
    static const int args[7] = {DNNL_ARG_SRC,  DNNL_ARG_DST,      DNNL_ARG_SCALE,    DNNL_ARG_SHIFT,
                                DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE};
    const void *const ptrs[7] = {x->data,        y->data,       gamma->data,  beta->data,
                                 layer_bn->mean, layer_bn->var, bn->workspace};
    CPU_CHECK(cpu_prim_run(backend, &bn->fwd_train, d->fuse_relu ? 7 : 6, args, ptrs));
    layer_bn->stats_n = n;
    bn->mask_valid = 1;

    /* PyTorch updates in its accumulation type (double on CPUs) and stores
     * floats; so do we (k_train_numeric.h, which the cuda kernels use too). */
    float *rm = running_mean->data, *rv = running_var->data;
    double momentum = d->momentum;
    double unbias = (double)m / (double)(m - 1);
    for (int c = 0; c < d->c; c++) {
        rm[c] = k_train_bn_running(rm[c], layer_bn->mean[c], momentum);
        rv[c] = k_train_bn_running(rv[c], layer_bn->var[c] * unbias, momentum);
    }
    return HORA_OK;
}

hora_status_t cpu_bn_forward_infer(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                   const tr_tensor_t *beta, const tr_tensor_t *running_mean,
                                   const tr_tensor_t *running_var, tr_tensor_t *y)
{
    cpu_bn_t *layer_bn = bn_of(layer);
    int n;
    if (layer_bn == NULL) return cpu_invalid("bn_forward_infer: not a bn layer");
    CPU_CHECK(
        bn_check_forward(layer_bn, 0, x, (const tr_tensor_t *const[4]){gamma, beta, running_mean, running_var}, y, &n));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_bn->batches, n, &entry));
    bn_batch_t *bn = entry;
    static const int args[6] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                                DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    const void *const ptrs[6] = {x->data, y->data, gamma->data, beta->data, running_mean->data, running_var->data};
    return cpu_prim_run(layer_bn->base.backend, &bn->fwd_infer, 6, args, ptrs);
}

hora_status_t cpu_bn_backward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy, const tr_tensor_t *gamma,
                              tr_tensor_t *dx, tr_tensor_t *dgamma, tr_tensor_t *dbeta)
{
    cpu_bn_t *layer_bn = bn_of(layer);
    int n;
    if (layer_bn == NULL) return cpu_invalid("bn_backward: not a bn layer");
    cpu_backend_t *backend = layer_bn->base.backend;
    const tr_bn_desc_t *d = &layer_bn->desc;
    CPU_CHECK(bn_check_data(layer_bn, x, dy, "bn_backward x", "bn_backward dy", &n));
    CPU_CHECK(cpu_check_tensor(backend, dx, n, d->c, d->h, d->w, d->dtype, "bn_backward dx"));
    CPU_CHECK(bn_check_channels(layer_bn, gamma, TR_DTYPE_F32, "bn_backward gamma"));
    CPU_CHECK(bn_check_channels(layer_bn, dgamma, d->grad_dtype, "bn_backward dgamma"));
    CPU_CHECK(bn_check_channels(layer_bn, dbeta, d->grad_dtype, "bn_backward dbeta"));
    if (layer_bn->stats_n != n)
        return layer_bn->stats_n
                   ? cpu_invalid("bn_backward: batch %d, but the last bn_forward_train had %d", n, layer_bn->stats_n)
                   : cpu_invalid("bn_backward: no bn_forward_train ran before it");
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_bn->batches, n, &entry));
    bn_batch_t *bn = entry;
    if (d->fuse_relu && !bn->mask_valid) /* evicted since its forward: more batch sizes than slots in between */
        return cpu_invalid("bn_backward: the relu mask of the forward at batch %d is gone", n);

    /* oneDNN's scale and shift gradients are f32: into the gradients when
     * those are f32, else into the layer's f32 pair and converted. The
     * optional arguments (the relu mask, the zero shift) come last. */
    int convert = d->grad_dtype != TR_DTYPE_F32;
    int args[10] = {DNNL_ARG_SRC,      DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE,      DNNL_ARG_MEAN,
                    DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    const void *ptrs[10] = {x->data,
                            dy->data,
                            gamma->data,
                            layer_bn->mean,
                            layer_bn->var,
                            dx->data,
                            convert ? layer_bn->dgamma : dgamma->data,
                            convert ? layer_bn->dbeta : dbeta->data};
    int count = 8;
    if (d->fuse_relu) {
        args[count] = DNNL_ARG_WORKSPACE;
        ptrs[count++] = bn->workspace;
    }
    if (bn->bwd_shift) {
        args[count] = DNNL_ARG_SHIFT;
        ptrs[count++] = layer_bn->no_shift;
    }
    CPU_CHECK(cpu_prim_run(backend, &bn->bwd, count, args, ptrs));
    if (convert) {
        cpu_grad_store(dgamma, layer_bn->dgamma, (size_t)d->c);
        cpu_grad_store(dbeta, layer_bn->dbeta, (size_t)d->c);
    }
    return HORA_OK;
}
