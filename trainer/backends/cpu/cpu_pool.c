/*
 * cpu_pool.c - pooling on oneDNN: max pooling (nn.MaxPool2d: padding never
 * wins the max, output (in + 2 pad - kernel) / stride + 1) with its argmax
 * kept in a workspace for the backward pass, and global average pooling
 * (nn.AdaptiveAvgPool2d(1)) as an average over one H x W window.
 *
 * Primitives and the argmax depend on the batch size: one pool_batch_t per
 * size (cpu_batch_cache_t).
 *
 * bf16: average pooling runs in bf16 (each gradient element gets one
 * window's share: one rounding). oneDNN's bf16 max-pool backward adds the
 * gradients of overlapping windows in bf16, rounding after every add, so a
 * bf16 max pool runs in f32 on widened copies (the forward is exact either
 * way: a max selects) and rounds dx once.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    cpu_prim_t fwd, bwd;
    void *workspace; /* max: the last forward's argmax at this size (owned); NULL for average */
    int have_argmax; /* max: a forward has filled the workspace */
    float *wide_in;  /* bf16 max: x (forward) or dx (backward) in f32 (owned) */
    float *wide_out; /* bf16 max: y (forward) or dy (backward) in f32 (owned) */
} pool_batch_t;

typedef struct {
    struct tr_layer base;
    tr_pool_desc_t desc;
    int h_out, w_out;
    cpu_batch_cache_t batches; /* pool_batch_t per batch size */
} cpu_pool_t;

static void pool_batch_free(void *entry)
{
    pool_batch_t *pool = entry;
    cpu_prim_free(&pool->fwd);
    cpu_prim_free(&pool->bwd);
    free(pool->workspace);
    free(pool->wide_in);
    free(pool->wide_out);
}

static void cpu_pool_free(tr_layer_t *layer)
{
    cpu_pool_t *pool = (cpu_pool_t *)layer;
    cpu_batch_clear(&pool->batches);
    free(pool);
}

static hora_status_t pool_make(const cpu_pool_t *layer, pool_batch_t *pool, int n, cpu_md_t *src_md, cpu_md_t *dst_md)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_pool_desc_t *d = &layer->desc;
    const int widen = d->kind == TR_POOL_MAX && d->dtype != TR_DTYPE_F32;
    const tr_dtype_t dt = widen ? TR_DTYPE_F32 : d->dtype;
    CPU_CHECK(cpu_md_4d(src_md, n, d->c, d->h, d->w, cpu_layout_for(backend, d->c, d->dtype), dt));
    CPU_CHECK(cpu_md_4d(dst_md, n, d->c, layer->h_out, layer->w_out, cpu_layout_for(backend, d->c, d->dtype), dt));
    if (widen) {
        pool->wide_in = cpu_alloc(dnnl_memory_desc_get_size(*src_md), "max pool f32 input");
        pool->wide_out = cpu_alloc(dnnl_memory_desc_get_size(*dst_md), "max pool f32 output");
        if (pool->wide_in == NULL || pool->wide_out == NULL) return HORA_ERR_NO_MEMORY;
    }

    dnnl_alg_kind_t alg;
    dnnl_dims_t kernel, strides, pad;
    if (d->kind == TR_POOL_MAX) {
        alg = dnnl_pooling_max;
        kernel[0] = kernel[1] = d->kernel;
        strides[0] = strides[1] = d->stride;
        pad[0] = pad[1] = d->pad;
    } else {
        /* No padding, so include/exclude padding mean the same. */
        alg = dnnl_pooling_avg_exclude_padding;
        kernel[0] = d->h;
        kernel[1] = d->w;
        strides[0] = strides[1] = 1;
        pad[0] = pad[1] = 0;
    }
    /* The right/bottom padding that makes oneDNN's output size equal
     * PyTorch's floor formula (it may be less than the left padding). */
    dnnl_dims_t pad_r = {(layer->h_out - 1) * strides[0] + kernel[0] - d->h - pad[0],
                         (layer->w_out - 1) * strides[1] + kernel[1] - d->w - pad[1]};

    CPU_CHECK(
        cpu_prim_made(backend, &pool->fwd, "pool forward",
                      cpu_pd_pool_forward(&pool->fwd.pd, backend, alg, *src_md, *dst_md, strides, kernel, pad, pad_r)));
    CPU_CHECK(cpu_prim_made(backend, &pool->bwd, "pool backward",
                            cpu_pd_pool_backward(&pool->bwd.pd, backend, alg, *src_md, *dst_md, strides, kernel, pad,
                                                 pad_r, pool->fwd.pd)));

    CPU_CHECK(cpu_prim_add_arg(&pool->fwd, backend->engine, DNNL_ARG_SRC));
    CPU_CHECK(cpu_prim_add_arg(&pool->fwd, backend->engine, DNNL_ARG_DST));
    CPU_CHECK(cpu_prim_add_arg(&pool->bwd, backend->engine, DNNL_ARG_DIFF_DST));
    CPU_CHECK(cpu_prim_add_arg(&pool->bwd, backend->engine, DNNL_ARG_DIFF_SRC));
    if (d->kind == TR_POOL_MAX) {
        cpu_cmd_t ws_md = cpu_prim_md(&pool->fwd, DNNL_ARG_WORKSPACE);
        pool->workspace = cpu_alloc(dnnl_memory_desc_get_size(ws_md), "max pool workspace");
        if (pool->workspace == NULL) return HORA_ERR_NO_MEMORY;
        CPU_CHECK(cpu_prim_add_arg(&pool->fwd, backend->engine, DNNL_ARG_WORKSPACE));
        CPU_CHECK(cpu_prim_add_arg(&pool->bwd, backend->engine, DNNL_ARG_WORKSPACE));
    }

    if (backend->verbose)
        fprintf(stderr, "hora-train: cpu: %s pool %dx%dx%dx%d -> %dx%d: forward %s, backward %s\n",
                d->kind == TR_POOL_MAX ? "max" : "global average", n, d->c, d->h, d->w, layer->h_out, layer->w_out,
                cpu_prim_impl(&pool->fwd), cpu_prim_impl(&pool->bwd));
    return HORA_OK;
}

/* The batch cache's fill: the primitives (and buffers) of one batch size. */
static hora_status_t pool_make_primitives(tr_layer_t *layer_base, void *entry, int n)
{
    cpu_md_t src_md = NULL, dst_md = NULL;
    hora_status_t status = pool_make((const cpu_pool_t *)layer_base, entry, n, &src_md, &dst_md);
    cpu_md_free(src_md);
    cpu_md_free(dst_md);
    return status;
}

hora_status_t cpu_pool_create(tr_backend_t *backend_base, const tr_pool_desc_t *desc, tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL) return cpu_invalid("pool_create: NULL argument");
    const tr_pool_desc_t *d = desc;
    if (d->c <= 0 || d->h <= 0 || d->w <= 0 || (d->kind != TR_POOL_MAX && d->kind != TR_POOL_GLOBAL_AVERAGE))
        return cpu_invalid("pool_create: bad kind %d or shape %dx%dx%d", (int)d->kind, d->c, d->h, d->w);
    /* PyTorch's own limits: padding at most half the kernel (so no window
     * lies wholly in the padding), and the input at least one window. */
    if (d->kind == TR_POOL_MAX && (d->kernel <= 0 || d->stride <= 0 || d->pad < 0 || 2 * d->pad > d->kernel ||
                                   d->h + 2 * d->pad < d->kernel || d->w + 2 * d->pad < d->kernel))
        return cpu_invalid("pool_create: bad max pool kernel %d stride %d pad %d for %dx%d", d->kernel, d->stride,
                           d->pad, d->h, d->w);
    CPU_CHECK(cpu_check_layer_dtypes(d->dtype, TR_DTYPE_F32, "pool_create"));

    cpu_pool_t *pool = cpu_alloc(sizeof(*pool), "a pool layer");
    if (pool == NULL) return HORA_ERR_NO_MEMORY;
    pool->base.kind = CPU_LAYER_POOL;
    pool->base.backend = backend;
    pool->base.free = cpu_pool_free;
    pool->desc = *desc;
    pool->batches.entry_bytes = sizeof(pool_batch_t);
    pool->batches.fill = pool_make_primitives;
    pool->batches.drop = pool_batch_free;
    if (d->kind == TR_POOL_MAX) {
        pool->h_out = (d->h + 2 * d->pad - d->kernel) / d->stride + 1;
        pool->w_out = (d->w + 2 * d->pad - d->kernel) / d->stride + 1;
    } else {
        pool->h_out = pool->w_out = 1;
    }
    *layer_out = &pool->base;
    return HORA_OK;
}

static cpu_pool_t *pool_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_POOL ? (cpu_pool_t *)layer : NULL;
}

/* What both passes start with: the layer; the incoming tensor (x, or dy
 * at the output's size) and the outgoing one (y, or dx at the input's
 * size), checked against it; the primitives of their batch size n. */
static hora_status_t pool_begin(tr_layer_t *layer, int backward, const tr_tensor_t *in, const tr_tensor_t *out,
                                pool_batch_t **pool_out, int *n_out)
{
    const char *pass = backward ? "pool_backward" : "pool_forward";
    cpu_pool_t *layer_pool = pool_of(layer);
    if (layer_pool == NULL) return cpu_invalid("%s: not a pool layer", pass);
    cpu_backend_t *backend = layer_pool->base.backend;
    const tr_pool_desc_t *d = &layer_pool->desc;
    const int h[2] = {d->h, layer_pool->h_out}, w[2] = {d->w, layer_pool->w_out};
    char what[32];
    snprintf(what, sizeof(what), "%s %s", pass, backward ? "dy" : "x");
    CPU_CHECK(cpu_check_input(backend, in, d->c, h[backward], w[backward], d->dtype, what, n_out));
    snprintf(what, sizeof(what), "%s %s", pass, backward ? "dx" : "y");
    CPU_CHECK(cpu_check_tensor(backend, out, *n_out, d->c, h[!backward], w[!backward], d->dtype, what));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_pool->batches, *n_out, &entry));
    *pool_out = entry;
    return HORA_OK;
}

hora_status_t cpu_pool_forward(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y)
{
    pool_batch_t *pool = NULL;
    int n;
    CPU_CHECK(pool_begin(layer, 0, x, y, &pool, &n));
    cpu_backend_t *backend = pool_of(layer)->base.backend;

    /* The workspace (max pooling's argmax) is the last argument, where there is one. */
    static const int args[3] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};
    pool->have_argmax = 0;
    if (pool->wide_in != NULL) cpu_widen(backend, pool->wide_in, x);
    CPU_CHECK(cpu_prim_run(backend, &pool->fwd, pool->workspace ? 3 : 2, args,
                           (const void *const[]){pool->wide_in != NULL ? pool->wide_in : x->data,
                                                 pool->wide_out != NULL ? pool->wide_out : y->data, pool->workspace}));
    if (pool->wide_out != NULL) /* exact: every output is one of the inputs */
        cpu_cast_n(backend, y->data, y->dtype, pool->wide_out, TR_DTYPE_F32, tr_tensor_count(y));
    pool->have_argmax = 1;
    return HORA_OK;
}

hora_status_t cpu_pool_backward(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx)
{
    pool_batch_t *pool = NULL;
    int n;
    CPU_CHECK(pool_begin(layer, 1, dy, dx, &pool, &n));
    cpu_backend_t *backend = pool_of(layer)->base.backend;
    if (pool->workspace != NULL && !pool->have_argmax)
        return cpu_invalid("pool_backward: no pool_forward at batch %d ran before it", n);

    static const int args[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_WORKSPACE};
    if (pool->wide_out != NULL) cpu_widen(backend, pool->wide_out, dy);
    CPU_CHECK(cpu_prim_run(backend, &pool->bwd, pool->workspace ? 3 : 2, args,
                           (const void *const[]){pool->wide_out != NULL ? pool->wide_out : dy->data,
                                                 pool->wide_in != NULL ? pool->wide_in : dx->data, pool->workspace}));
    if (pool->wide_in != NULL) /* the one rounding of dx */
        cpu_cast_n(backend, dx->data, dx->dtype, pool->wide_in, TR_DTYPE_F32, tr_tensor_count(dx));
    return HORA_OK;
}
