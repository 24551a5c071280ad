/*
 * cpu_conv.c - convolution (no bias) on oneDNN: forward training, backward
 * data and backward weights, each a primitive made once per layer and
 * batch size.
 *
 * Activations come in the backend's fixed layout (nChw16c / nChw8c, or
 * plain NCHW for a 1- or 3-channel input), but the weights are left to
 * oneDNN (format "any"): its direct kernels want them blocked, e.g.
 * OIhw16i16o for forward and a transposed blocking for backward data. The
 * parameters stay plain OIHW in the trainer's arena, so conv_forward
 * reorders them once per step into w_fwd, backward data reuses that copy
 * when it wants the same format (else reorders into w_bwd), and backward
 * weights writes a blocked gradient that is reordered back to OIHW.
 *
 * Everything that depends on the batch size (the primitives and the formats
 * oneDNN picked for them) is one conv_batch_t per batch size, made on the
 * first call with that size (cpu_batch_cache_t). The weight-sized buffers
 * (the reordered copies, the blocked gradient) are the layer's, one each,
 * grown to the largest format any batch size wants: ResNet-50's weights are
 * 100 MB, and a copy per batch size would be several times that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct {
    cpu_prim_t fwd, bwd_data, bwd_weights;
    /* Weight reorders; pd NULL where the primitive takes plain OIHW. */
    cpu_prim_t w_to_fwd;    /* OIHW -> forward's format, into w_fwd */
    cpu_prim_t w_to_bwd;    /* OIHW -> backward data's format, into w_bwd */
    cpu_prim_t dw_to_plain; /* backward weights' format -> OIHW */
    cpu_prim_t dx_to_plain; /* backward data's own dx format -> the tensor's (see below) */
    /* How backward data gets its weights: */
    enum { CONV_BWD_W_PLAIN, CONV_BWD_W_FWD_COPY, CONV_BWD_W_OWN_COPY } bwd_w_source;
    float *dx_blocked; /* dx before its reorder, when dx_to_plain is used */
    /* Backward weights on f32 copies of x and dy (wide_x, wide_dy), where
     * oneDNN has no fast kernel for the layer's dtype (f16 on oneDNN 3.2). */
    void *wide_x, *wide_dy;
} conv_batch_t;

/* A layer-wide buffer, grown on demand. */
typedef struct {
    float *data;
    size_t bytes;
} conv_buffer_t;

typedef struct {
    struct tr_layer base;
    tr_conv_desc_t desc;
    int h_out, w_out;
    cpu_batch_cache_t batches; /* conv_batch_t per batch size */
    conv_buffer_t w_fwd;       /* the last conv_forward's weights, reordered */
    int w_fwd_n;               /* the batch size whose format w_fwd holds; 0: none */
    conv_buffer_t w_bwd;       /* CONV_BWD_W_OWN_COPY: weights in backward data's format */
    conv_buffer_t dw_blocked;  /* the weight gradient before its reorder to OIHW */
} cpu_conv_t;

static void conv_batch_free(void *entry)
{
    conv_batch_t *conv = entry;
    cpu_prim_free(&conv->fwd);
    cpu_prim_free(&conv->bwd_data);
    cpu_prim_free(&conv->bwd_weights);
    cpu_prim_free(&conv->w_to_fwd);
    cpu_prim_free(&conv->w_to_bwd);
    cpu_prim_free(&conv->dw_to_plain);
    cpu_prim_free(&conv->dx_to_plain);
    free(conv->dx_blocked);
    free(conv->wide_x);
    free(conv->wide_dy);
}

static void cpu_conv_free(tr_layer_t *layer)
{
    cpu_conv_t *conv = (cpu_conv_t *)layer;
    cpu_batch_clear(&conv->batches);
    free(conv->w_fwd.data);
    free(conv->w_bwd.data);
    free(conv->dw_blocked.data);
    free(conv);
}

/* At least bytes in b (the old contents are not kept). */
static hora_status_t conv_buffer_reserve(conv_buffer_t *b, size_t bytes, const char *what)
{
    if (b->bytes >= bytes) return HORA_OK;
    float *bigger = cpu_alloc(bytes, what);
    if (bigger == NULL) return HORA_ERR_NO_MEMORY;
    free(b->data);
    b->data = bigger;
    b->bytes = bytes;
    return HORA_OK;
}

/* A reorder between plain OIHW and the format a primitive chose for its
 * (diff) weights. Leaves it empty when the primitive chose OIHW itself. */
static hora_status_t conv_weights_reorder(cpu_backend_t *backend, cpu_prim_t *reorder, cpu_cmd_t plain_md,
                                          cpu_cmd_t chosen_md, int to_plain, const char *what)
{
    if (dnnl_memory_desc_equal(plain_md, chosen_md)) return HORA_OK;
    if (to_plain) return cpu_prim_init_reorder(backend, reorder, what, chosen_md, plain_md);
    return cpu_prim_init_reorder(backend, reorder, what, plain_md, chosen_md);
}

/* A plain-layout input (the 1- or 3-channel image) with a blocked output
 * is a mix only oneDNN's reference kernel takes for backward data, over a
 * hundred times slower than the rest (220 ms for ResNet-20's stem). If
 * that is what we got, let oneDNN pick dx's layout (src_any_md), and
 * reorder dx into the tensor's layout after each call. (The trainer rarely
 * wants the image's gradient, but the op must not be a trap.) */
static hora_status_t conv_fix_plain_backward_data(cpu_backend_t *backend, conv_batch_t *conv, cpu_cmd_t src_md,
                                                  cpu_cmd_t src_any_md, cpu_cmd_t w_any_md, cpu_cmd_t dst_md,
                                                  const dnnl_dims_t strides, const dnnl_dims_t pad)
{
    if (strncmp(cpu_prim_impl(&conv->bwd_data), "ref", 3) != 0) return HORA_OK;
    cpu_prim_t retry = {0};
    hora_status_t status = cpu_prim_made(
        backend, &retry, "conv backward data",
        cpu_pd_conv_backward_data(&retry.pd, backend, src_any_md, w_any_md, dst_md, strides, pad, conv->fwd.pd));
    if (status != HORA_OK || strncmp(cpu_prim_impl(&retry), "ref", 3) == 0) {
        cpu_prim_free(&retry); /* keep the first one: slow, but it works */
        return status == HORA_ERR_UNSUPPORTED ? HORA_OK : status;
    }
    cpu_prim_free(&conv->bwd_data);
    conv->bwd_data = retry;
    cpu_cmd_t chosen = cpu_prim_md(&conv->bwd_data, DNNL_ARG_DIFF_SRC);
    if (dnnl_memory_desc_equal(chosen, src_md)) return HORA_OK;
    return cpu_prim_init_reorder(backend, &conv->dx_to_plain, "conv dx reorder", chosen, src_md);
}

/* The memory descriptors conv_make uses (cpu_md_t, released together). */
enum {
    CONV_SRC,
    CONV_SRC_ANY,
    CONV_DST,
    CONV_W_ANY,
    CONV_W_PLAIN,
    CONV_DW_ANY,
    CONV_DW_PLAIN,
    CONV_SRC_F32,
    CONV_DST_F32, /* the widened copies' (conv_widen_backward_weights) */
    CONV_MD_COUNT
};

/* Where oneDNN's backward weights in the layer's low-precision dtype is
 * only its reference kernel (f16 on oneDNN 3.2 without AMX: brgconv has f16
 * forward and backward data there, not backward weights), run it in f32 on
 * widened copies of x and dy instead: exact inputs (widening is), f32
 * accumulation as always, the same f32 weight gradient, and a fast kernel;
 * the copies cost two casts of the activations per call. */
static hora_status_t conv_widen_backward_weights(const cpu_conv_t *layer, conv_batch_t *conv, int n, cpu_md_t *md,
                                                 const dnnl_dims_t strides, const dnnl_dims_t pad)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_conv_desc_t *d = &layer->desc;
    if (d->dtype == TR_DTYPE_F32 || strncmp(cpu_prim_impl(&conv->bwd_weights), "ref", 3) != 0) return HORA_OK;
    /* The activations' own layout, in f32: the casts are flat. */
    CPU_CHECK(cpu_md_4d(&md[CONV_SRC_F32], n, d->c_in, d->h_in, d->w_in, cpu_layout_for(backend, d->c_in, d->dtype),
                        TR_DTYPE_F32));
    CPU_CHECK(cpu_md_4d(&md[CONV_DST_F32], n, d->c_out, layer->h_out, layer->w_out,
                        cpu_layout_for(backend, d->c_out, d->dtype), TR_DTYPE_F32));
    cpu_prim_t wide = {0};
    hora_status_t status =
        cpu_prim_made(backend, &wide, "conv backward weights (f32 on widened copies)",
                      cpu_pd_conv_backward_weights(&wide.pd, backend, md[CONV_SRC_F32], md[CONV_DW_ANY],
                                                   md[CONV_DST_F32], strides, pad, NULL));
    if (status != HORA_OK || strncmp(cpu_prim_impl(&wide), "ref", 3) == 0) {
        cpu_prim_free(&wide); /* keep the native one: slow, but it works */
        return status == HORA_ERR_UNSUPPORTED ? HORA_OK : status;
    }
    cpu_prim_free(&conv->bwd_weights);
    conv->bwd_weights = wide;
    conv->wide_x = cpu_alloc(dnnl_memory_desc_get_size(md[CONV_SRC_F32]), "conv x widened to f32");
    conv->wide_dy = cpu_alloc(dnnl_memory_desc_get_size(md[CONV_DST_F32]), "conv dy widened to f32");
    return conv->wide_x != NULL && conv->wide_dy != NULL ? HORA_OK : HORA_ERR_NO_MEMORY;
}

static hora_status_t conv_make(const cpu_conv_t *layer, conv_batch_t *conv, int n, cpu_md_t *md)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_conv_desc_t *d = &layer->desc;
    CPU_CHECK(
        cpu_md_4d(&md[CONV_SRC], n, d->c_in, d->h_in, d->w_in, cpu_layout_for(backend, d->c_in, d->dtype), d->dtype));
    CPU_CHECK(cpu_md_4d(&md[CONV_DST], n, d->c_out, layer->h_out, layer->w_out,
                        cpu_layout_for(backend, d->c_out, d->dtype), d->dtype));
    dnnl_dims_t src_dims = {n, d->c_in, d->h_in, d->w_in};
    dnnl_dims_t w_dims = {d->c_out, d->c_in, d->kernel, d->kernel};
    const dnnl_data_type_t dt = cpu_dnnl_dtype(d->dtype);
    CPU_CHECK(cpu_md_tag(&md[CONV_SRC_ANY], 4, src_dims, dt, dnnl_format_tag_any));
    CPU_CHECK(cpu_md_tag(&md[CONV_W_ANY], 4, w_dims, dt, dnnl_format_tag_any));
    CPU_CHECK(cpu_md_tag(&md[CONV_W_PLAIN], 4, w_dims, dt, dnnl_oihw));
    /* The weight gradient accumulates in f32 whatever the compute dtype;
     * the reorder to plain OIHW rounds it to the gradient dtype. */
    CPU_CHECK(cpu_md_tag(&md[CONV_DW_ANY], 4, w_dims, dnnl_f32, dnnl_format_tag_any));
    CPU_CHECK(cpu_md_tag(&md[CONV_DW_PLAIN], 4, w_dims, cpu_dnnl_dtype(d->grad_dtype), dnnl_oihw));
    dnnl_dims_t strides = {d->stride, d->stride};
    dnnl_dims_t pad = {d->pad, d->pad}; /* symmetric, as in PyTorch; output sizes agree */

    /* Direct convolution, not "auto": auto may pick Winograd, whose
     * rounding differs from PyTorch's direct/GEMM results by more than
     * float noise. */
    CPU_CHECK(cpu_prim_made(
        backend, &conv->fwd, "conv forward",
        cpu_pd_conv_forward(&conv->fwd.pd, backend, md[CONV_SRC], md[CONV_W_ANY], md[CONV_DST], strides, pad)));
    CPU_CHECK(cpu_prim_made(backend, &conv->bwd_data, "conv backward data",
                            cpu_pd_conv_backward_data(&conv->bwd_data.pd, backend, md[CONV_SRC], md[CONV_W_ANY],
                                                      md[CONV_DST], strides, pad, conv->fwd.pd)));
    CPU_CHECK(conv_fix_plain_backward_data(backend, conv, md[CONV_SRC], md[CONV_SRC_ANY], md[CONV_W_ANY], md[CONV_DST],
                                           strides, pad));
    CPU_CHECK(cpu_prim_made(backend, &conv->bwd_weights, "conv backward weights",
                            cpu_pd_conv_backward_weights(&conv->bwd_weights.pd, backend, md[CONV_SRC], md[CONV_DW_ANY],
                                                         md[CONV_DST], strides, pad, conv->fwd.pd)));
    CPU_CHECK(conv_widen_backward_weights(layer, conv, n, md, strides, pad));

    CPU_CHECK(cpu_prim_add_arg(&conv->fwd, backend->engine, DNNL_ARG_SRC));
    CPU_CHECK(cpu_prim_add_arg(&conv->fwd, backend->engine, DNNL_ARG_WEIGHTS));
    CPU_CHECK(cpu_prim_add_arg(&conv->fwd, backend->engine, DNNL_ARG_DST));
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_data, backend->engine, DNNL_ARG_DIFF_DST));
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_data, backend->engine, DNNL_ARG_WEIGHTS));
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_data, backend->engine, DNNL_ARG_DIFF_SRC));
    if (conv->dx_to_plain.pd != NULL) {
        conv->dx_blocked = cpu_alloc(dnnl_memory_desc_get_size(cpu_prim_md(&conv->bwd_data, DNNL_ARG_DIFF_SRC)),
                                     "conv dx before its reorder");
        if (conv->dx_blocked == NULL) return HORA_ERR_NO_MEMORY;
    }
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_weights, backend->engine, DNNL_ARG_SRC));
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_weights, backend->engine, DNNL_ARG_DIFF_DST));
    CPU_CHECK(cpu_prim_add_arg(&conv->bwd_weights, backend->engine, DNNL_ARG_DIFF_WEIGHTS));

    cpu_cmd_t fwd_w_md = cpu_prim_md(&conv->fwd, DNNL_ARG_WEIGHTS);
    cpu_cmd_t bwd_w_md = cpu_prim_md(&conv->bwd_data, DNNL_ARG_WEIGHTS);
    cpu_cmd_t dw_md = cpu_prim_md(&conv->bwd_weights, DNNL_ARG_DIFF_WEIGHTS);
    CPU_CHECK(conv_weights_reorder(backend, &conv->w_to_fwd, md[CONV_W_PLAIN], fwd_w_md, 0,
                                   "conv weights reorder (forward)"));
    if (dnnl_memory_desc_equal(bwd_w_md, md[CONV_W_PLAIN])) {
        conv->bwd_w_source = CONV_BWD_W_PLAIN;
    } else if (dnnl_memory_desc_equal(bwd_w_md, fwd_w_md)) {
        conv->bwd_w_source = CONV_BWD_W_FWD_COPY;
    } else {
        conv->bwd_w_source = CONV_BWD_W_OWN_COPY;
        CPU_CHECK(conv_weights_reorder(backend, &conv->w_to_bwd, md[CONV_W_PLAIN], bwd_w_md, 0,
                                       "conv weights reorder (backward data)"));
    }
    CPU_CHECK(
        conv_weights_reorder(backend, &conv->dw_to_plain, md[CONV_DW_PLAIN], dw_md, 1, "conv weight gradient reorder"));

    /* The reference kernels are orders of magnitude slower (~1 GFLOP/s):
     * say so even when not verbose where that costs more than a few ms per
     * pass. It is usually a channel count that is not a multiple of the
     * block, mixing layouts the fast kernels do not take; the tiny test
     * networks do that on purpose, hence the threshold. */
    double flops = 2.0 * n * d->c_out * layer->h_out * layer->w_out * (double)d->c_in * d->kernel * d->kernel;
    int slow = flops > 5e6 && (strncmp(cpu_prim_impl(&conv->fwd), "ref", 3) == 0 ||
                               strncmp(cpu_prim_impl(&conv->bwd_data), "ref", 3) == 0 ||
                               strncmp(cpu_prim_impl(&conv->bwd_weights), "ref", 3) == 0);
    if (backend->verbose || slow)
        fprintf(stderr,
                "hora-train: cpu: %sconv %dx%dx%dx%d -> %dx%dx%d k%d s%d p%d: forward %s, "
                "backward data %s, backward weights %s%s\n",
                slow ? "warning: oneDNN reference kernel (slow) in " : "", n, d->c_in, d->h_in, d->w_in, d->c_out,
                layer->h_out, layer->w_out, d->kernel, d->stride, d->pad, cpu_prim_impl(&conv->fwd),
                cpu_prim_impl(&conv->bwd_data), cpu_prim_impl(&conv->bwd_weights),
                conv->bwd_w_source == CONV_BWD_W_OWN_COPY ? " (own backward weight copy)" : "");
    return HORA_OK;
}

/* The batch cache's fill: the primitives (and buffers) of one batch size. */
static hora_status_t conv_make_primitives(tr_layer_t *layer_base, void *entry, int n)
{
    cpu_md_t md[CONV_MD_COUNT] = {0};
    hora_status_t status = conv_make((const cpu_conv_t *)layer_base, entry, n, md);
    cpu_md_free_all(md, CONV_MD_COUNT);
    return status;
}

hora_status_t cpu_conv_create(tr_backend_t *backend_base, const tr_conv_desc_t *desc, tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL) return cpu_invalid("conv_create: NULL argument");
    const tr_conv_desc_t *d = desc;
    if (d->c_in <= 0 || d->h_in <= 0 || d->w_in <= 0 || d->c_out <= 0 || d->kernel <= 0 || d->stride <= 0 ||
        d->pad < 0 || d->h_in + 2 * d->pad < d->kernel || d->w_in + 2 * d->pad < d->kernel)
        return cpu_invalid("conv_create: bad shape c_in %d %dx%d c_out %d kernel %d stride %d pad %d", d->c_in, d->h_in,
                           d->w_in, d->c_out, d->kernel, d->stride, d->pad);
    CPU_CHECK(cpu_check_layer_dtypes(d->dtype, d->grad_dtype, "conv_create"));

    cpu_conv_t *conv = cpu_alloc(sizeof(*conv), "a conv layer");
    if (conv == NULL) return HORA_ERR_NO_MEMORY;
    conv->base.kind = CPU_LAYER_CONV;
    conv->base.backend = backend;
    conv->base.free = cpu_conv_free;
    conv->desc = *desc;
    conv->h_out = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1;
    conv->w_out = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    conv->batches.entry_bytes = sizeof(conv_batch_t);
    conv->batches.fill = conv_make_primitives;
    conv->batches.drop = conv_batch_free;
    *layer_out = &conv->base;
    return HORA_OK;
}

static cpu_conv_t *conv_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_CONV ? (cpu_conv_t *)layer : NULL;
}

/* Run a reorder from `from` into `to` (weights, weight gradients, dx). */
static hora_status_t conv_reorder(cpu_backend_t *backend, cpu_prim_t *reorder, const void *from, void *to)
{
    return cpu_prim_run(backend, reorder, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                        (const void *const[]){from, to});
}

/* Reorder the plain weights w into buffer, grown to what reorder writes. */
static hora_status_t conv_weights_to(cpu_conv_t *layer, cpu_prim_t *reorder, conv_buffer_t *buffer,
                                     const tr_tensor_t *w)
{
    CPU_CHECK(conv_buffer_reserve(buffer, dnnl_memory_desc_get_size(cpu_prim_md(reorder, DNNL_ARG_TO)),
                                  "reordered conv weights"));
    return conv_reorder(layer->base.backend, reorder, w->data, buffer->data);
}

/* The forward's copy of w at batch n, in layer->w_fwd; backward data at n
 * reuses it while w_fwd_n says so. */
static hora_status_t conv_forward_weights(cpu_conv_t *layer, conv_batch_t *conv, const tr_tensor_t *w, int n)
{
    layer->w_fwd_n = 0; /* overwritten: valid again once the reorder ran */
    CPU_CHECK(conv_weights_to(layer, &conv->w_to_fwd, &layer->w_fwd, w));
    layer->w_fwd_n = n;
    return HORA_OK;
}

/* OIHW weights (dtype: the layer's) or their gradient (its grad_dtype). */
static hora_status_t conv_check_weights(const cpu_conv_t *conv, const tr_tensor_t *w, tr_dtype_t dtype,
                                        const char *what)
{
    const tr_conv_desc_t *d = &conv->desc;
    return cpu_check_plain(w, dtype, 4, (const int[]){d->c_out, d->c_in, d->kernel, d->kernel}, what);
}

hora_status_t cpu_conv_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, tr_tensor_t *y)
{
    cpu_conv_t *layer_conv = conv_of(layer);
    int n;
    if (layer_conv == NULL) return cpu_invalid("conv_forward: not a conv layer");
    cpu_backend_t *backend = layer_conv->base.backend;
    const tr_conv_desc_t *d = &layer_conv->desc;
    CPU_CHECK(cpu_check_input(backend, x, d->c_in, d->h_in, d->w_in, d->dtype, "conv_forward x", &n));
    CPU_CHECK(conv_check_weights(layer_conv, w, d->dtype, "conv_forward w"));
    CPU_CHECK(
        cpu_check_tensor(backend, y, n, d->c_out, layer_conv->h_out, layer_conv->w_out, d->dtype, "conv_forward y"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_conv->batches, n, &entry));
    conv_batch_t *conv = entry;

    const float *weights = w->data;
    if (conv->w_to_fwd.pd != NULL) {
        CPU_CHECK(conv_forward_weights(layer_conv, conv, w, n));
        weights = layer_conv->w_fwd.data;
    }
    return cpu_prim_run(backend, &conv->fwd, 3, (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                        (const void *const[]){x->data, weights, y->data});
}

hora_status_t cpu_conv_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx)
{
    cpu_conv_t *layer_conv = conv_of(layer);
    int n;
    if (layer_conv == NULL) return cpu_invalid("conv_backward_data: not a conv layer");
    cpu_backend_t *backend = layer_conv->base.backend;
    const tr_conv_desc_t *d = &layer_conv->desc;
    CPU_CHECK(cpu_check_input(backend, dy, d->c_out, layer_conv->h_out, layer_conv->w_out, d->dtype,
                              "conv_backward_data dy", &n));
    CPU_CHECK(conv_check_weights(layer_conv, w, d->dtype, "conv_backward_data w"));
    CPU_CHECK(cpu_check_tensor(backend, dx, n, d->c_in, d->h_in, d->w_in, d->dtype, "conv_backward_data dx"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_conv->batches, n, &entry));
    conv_batch_t *conv = entry;

    const float *weights = w->data;
    switch (conv->bwd_w_source) {
    case CONV_BWD_W_PLAIN: break;
    case CONV_BWD_W_FWD_COPY:
        /* backend.h promises w equals the last forward's weights at this
         * batch size, so the forward's reordered copy is reused; without
         * that forward (or after one at another size, another format), make it. */
        if (layer_conv->w_fwd_n != n) CPU_CHECK(conv_forward_weights(layer_conv, conv, w, n));
        weights = layer_conv->w_fwd.data;
        break;
    case CONV_BWD_W_OWN_COPY:
        CPU_CHECK(conv_weights_to(layer_conv, &conv->w_to_bwd, &layer_conv->w_bwd, w));
        weights = layer_conv->w_bwd.data;
        break;
    }
    float *out = conv->dx_to_plain.pd != NULL ? conv->dx_blocked : dx->data;
    CPU_CHECK(cpu_prim_run(backend, &conv->bwd_data, 3,
                           (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                           (const void *const[]){dy->data, weights, out}));
    if (conv->dx_to_plain.pd == NULL) return HORA_OK;
    return conv_reorder(backend, &conv->dx_to_plain, conv->dx_blocked, dx->data);
}

hora_status_t cpu_conv_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy, tr_tensor_t *dw)
{
    cpu_conv_t *layer_conv = conv_of(layer);
    int n;
    if (layer_conv == NULL) return cpu_invalid("conv_backward_weights: not a conv layer");
    cpu_backend_t *backend = layer_conv->base.backend;
    const tr_conv_desc_t *d = &layer_conv->desc;
    CPU_CHECK(cpu_check_input(backend, x, d->c_in, d->h_in, d->w_in, d->dtype, "conv_backward_weights x", &n));
    CPU_CHECK(cpu_check_tensor(backend, dy, n, d->c_out, layer_conv->h_out, layer_conv->w_out, d->dtype,
                               "conv_backward_weights dy"));
    CPU_CHECK(conv_check_weights(layer_conv, dw, d->grad_dtype, "conv_backward_weights dw"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_conv->batches, n, &entry));
    conv_batch_t *conv = entry;

    float *out = dw->data;
    if (conv->dw_to_plain.pd != NULL) {
        CPU_CHECK(conv_buffer_reserve(&layer_conv->dw_blocked,
                                      dnnl_memory_desc_get_size(cpu_prim_md(&conv->dw_to_plain, DNNL_ARG_FROM)),
                                      "conv weight gradient before its reorder"));
        out = layer_conv->dw_blocked.data;
    }
    const void *src = x->data, *diff_dst = dy->data;
    if (conv->wide_x != NULL) {
        src = cpu_widen(backend, conv->wide_x, x);
        diff_dst = cpu_widen(backend, conv->wide_dy, dy);
    }
    CPU_CHECK(cpu_prim_run(backend, &conv->bwd_weights, 3,
                           (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
                           (const void *const[]){src, diff_dst, out}));
    if (conv->dw_to_plain.pd == NULL) return HORA_OK;
    return conv_reorder(backend, &conv->dw_to_plain, layer_conv->dw_blocked.data, dw->data);
}
