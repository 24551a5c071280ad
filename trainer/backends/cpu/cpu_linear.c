/*
 * cpu_linear.c - the fully connected layer (nn.Linear) on oneDNN's inner
 * product: y (n, c_out) = x (n, c_in) W^T + bias, W (c_out, c_in).
 *
 * x is the (n, c_in, 1, 1) tensor global average pooling gives. The
 * backend only blocks channels where C fills whole blocks, and with
 * H = W = 1 such a blocked tensor has exactly the bytes of a row-major
 * (n, c_in) matrix, so the primitives see x, dx as plain 2-D "nc" and the
 * weights in PyTorch's (out, in) order: no reorders at all. Primitives are
 * made per batch size (linear_batch_t, cpu_batch_cache_t).
 *
 * dtypes: x, w, dy, dx in the layer's dtype; y and the bias f32 (oneDNN
 * accumulates in f32 and the logits feed the f32 loss); the weight and bias
 * gradients come out of oneDNN in f32 and are rounded once to grad_dtype
 * (through the layer's f32 pair when that is not f32).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct {
    cpu_prim_t fwd, bwd_data, bwd_weights;
    /* f32 on widened copies (linear_make): x, dy, dx at this batch size;
     * NULL where the layer's dtype has fast kernels. */
    float *wide_x, *wide_dy, *wide_dx;
} linear_batch_t;

typedef struct {
    struct tr_layer base;
    tr_linear_desc_t desc;
    cpu_batch_cache_t batches; /* linear_batch_t per batch size */
    float *dw, *dbias;         /* f32 gradients, when grad_dtype is not f32 (owned) */
    float *wide_w;             /* w widened to f32, when the batches run widened (owned) */
} cpu_linear_t;

static void linear_batch_free(void *entry)
{
    linear_batch_t *linear = entry;
    cpu_prim_free(&linear->fwd);
    cpu_prim_free(&linear->bwd_data);
    cpu_prim_free(&linear->bwd_weights);
    free(linear->wide_x);
    free(linear->wide_dy);
    free(linear->wide_dx);
}

static void cpu_linear_free(tr_layer_t *layer)
{
    cpu_linear_t *linear = (cpu_linear_t *)layer;
    cpu_batch_clear(&linear->batches);
    free(linear->dw);
    free(linear->dbias);
    free(linear->wide_w);
    free(linear);
}

/* The memory descriptors linear_make uses (cpu_md_t, released together). */
enum { LIN_X, LIN_W, LIN_DW, LIN_BIAS, LIN_Y, LIN_DY, LIN_MD_COUNT };

static hora_status_t linear_make_in(const cpu_linear_t *layer, linear_batch_t *linear, int n, cpu_md_t *md,
                                    tr_dtype_t dt)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_linear_desc_t *d = &layer->desc;
    CPU_CHECK(cpu_md_plain(&md[LIN_X], 2, (const int[]){n, d->c_in}, dt));
    CPU_CHECK(cpu_md_plain(&md[LIN_W], 2, (const int[]){d->c_out, d->c_in}, dt));
    CPU_CHECK(cpu_md_plain(&md[LIN_DW], 2, (const int[]){d->c_out, d->c_in}, TR_DTYPE_F32));
    CPU_CHECK(cpu_md_plain(&md[LIN_BIAS], 1, (const int[]){d->c_out}, TR_DTYPE_F32));
    CPU_CHECK(cpu_md_plain(&md[LIN_Y], 2, (const int[]){n, d->c_out}, TR_DTYPE_F32));
    CPU_CHECK(cpu_md_plain(&md[LIN_DY], 2, (const int[]){n, d->c_out}, dt));

    CPU_CHECK(
        cpu_prim_made(backend, &linear->fwd, "linear forward",
                      cpu_pd_ip_forward(&linear->fwd.pd, backend, md[LIN_X], md[LIN_W], md[LIN_BIAS], md[LIN_Y])));
    CPU_CHECK(cpu_prim_made(
        backend, &linear->bwd_data, "linear backward data",
        cpu_pd_ip_backward_data(&linear->bwd_data.pd, backend, md[LIN_X], md[LIN_W], md[LIN_DY], linear->fwd.pd)));
    CPU_CHECK(cpu_prim_made(backend, &linear->bwd_weights, "linear backward weights",
                            cpu_pd_ip_backward_weights(&linear->bwd_weights.pd, backend, md[LIN_X], md[LIN_DW],
                                                       md[LIN_BIAS], md[LIN_DY], linear->fwd.pd)));

    return HORA_OK;
}

static int linear_any_ref(const linear_batch_t *linear)
{
    return strncmp(cpu_prim_impl(&linear->fwd), "ref", 3) == 0 ||
           strncmp(cpu_prim_impl(&linear->bwd_data), "ref", 3) == 0 ||
           strncmp(cpu_prim_impl(&linear->bwd_weights), "ref", 3) == 0;
}

/* The primitives in the layer's dtype; where oneDNN has only reference
 * kernels for it (f16 inner products on oneDNN 3.2 without AMX), in f32 on
 * widened copies of x, w and dy instead, dx rounded once back (the
 * accumulation is f32 either way, and widening is exact). */
static hora_status_t linear_make(cpu_linear_t *layer, linear_batch_t *linear, int n, cpu_md_t *md)
{
    cpu_backend_t *backend = layer->base.backend;
    const tr_linear_desc_t *d = &layer->desc;
    CPU_CHECK(linear_make_in(layer, linear, n, md, d->dtype));
    if (d->dtype != TR_DTYPE_F32 && linear_any_ref(linear)) {
        linear_batch_free(linear);
        memset(linear, 0, sizeof(*linear));
        cpu_md_free_all(md, LIN_MD_COUNT);
        CPU_CHECK(linear_make_in(layer, linear, n, md, TR_DTYPE_F32));
        linear->wide_x = cpu_alloc((size_t)n * d->c_in * sizeof(float), "linear x widened to f32");
        linear->wide_dx = cpu_alloc((size_t)n * d->c_in * sizeof(float), "linear dx in f32");
        linear->wide_dy = cpu_alloc((size_t)n * d->c_out * sizeof(float), "linear dy widened to f32");
        if (layer->wide_w == NULL)
            layer->wide_w = cpu_alloc((size_t)d->c_out * d->c_in * sizeof(float), "linear w widened to f32");
        if (linear->wide_x == NULL || linear->wide_dx == NULL || linear->wide_dy == NULL || layer->wide_w == NULL)
            return HORA_ERR_NO_MEMORY;
    }

    CPU_CHECK(cpu_prim_add_arg(&linear->fwd, backend->engine, DNNL_ARG_SRC));
    CPU_CHECK(cpu_prim_add_arg(&linear->fwd, backend->engine, DNNL_ARG_WEIGHTS));
    CPU_CHECK(cpu_prim_add_arg(&linear->fwd, backend->engine, DNNL_ARG_BIAS));
    CPU_CHECK(cpu_prim_add_arg(&linear->fwd, backend->engine, DNNL_ARG_DST));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_data, backend->engine, DNNL_ARG_DIFF_DST));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_data, backend->engine, DNNL_ARG_WEIGHTS));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_data, backend->engine, DNNL_ARG_DIFF_SRC));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_weights, backend->engine, DNNL_ARG_SRC));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_weights, backend->engine, DNNL_ARG_DIFF_DST));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_weights, backend->engine, DNNL_ARG_DIFF_WEIGHTS));
    CPU_CHECK(cpu_prim_add_arg(&linear->bwd_weights, backend->engine, DNNL_ARG_DIFF_BIAS));

    if (backend->verbose)
        fprintf(stderr, "hora-train: cpu: linear %dx%d -> %d: forward %s, backward data %s, backward weights %s\n", n,
                d->c_in, d->c_out, cpu_prim_impl(&linear->fwd), cpu_prim_impl(&linear->bwd_data),
                cpu_prim_impl(&linear->bwd_weights));
    return HORA_OK;
}

/* The batch cache's fill: the primitives (and buffers) of one batch size. */
static hora_status_t linear_make_primitives(tr_layer_t *layer_base, void *entry, int n)
{
    cpu_md_t md[LIN_MD_COUNT] = {0};
    hora_status_t status = linear_make((cpu_linear_t *)layer_base, entry, n, md);
    cpu_md_free_all(md, LIN_MD_COUNT);
    return status;
}

hora_status_t cpu_linear_create(tr_backend_t *backend_base, const tr_linear_desc_t *desc, tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL) return cpu_invalid("linear_create: NULL argument");
    if (desc->c_in <= 0 || desc->c_out <= 0)
        return cpu_invalid("linear_create: bad shape c_in %d c_out %d", desc->c_in, desc->c_out);
    CPU_CHECK(cpu_check_layer_dtypes(desc->dtype, desc->grad_dtype, "linear_create"));

    cpu_linear_t *linear = cpu_alloc(sizeof(*linear), "a linear layer");
    if (linear == NULL) return HORA_ERR_NO_MEMORY;
    linear->base.kind = CPU_LAYER_LINEAR;
    linear->base.backend = backend;
    linear->base.free = cpu_linear_free;
    linear->desc = *desc;
    linear->batches.entry_bytes = sizeof(linear_batch_t);
    linear->batches.fill = linear_make_primitives;
    linear->batches.drop = linear_batch_free;
    if (desc->grad_dtype != TR_DTYPE_F32) {
        linear->dw = cpu_alloc((size_t)desc->c_out * (size_t)desc->c_in * sizeof(float), "linear f32 dw");
        linear->dbias = cpu_alloc((size_t)desc->c_out * sizeof(float), "linear f32 dbias");
        if (linear->dw == NULL || linear->dbias == NULL) {
            cpu_linear_free(&linear->base);
            return HORA_ERR_NO_MEMORY;
        }
    }
    *layer_out = &linear->base;
    return HORA_OK;
}

static cpu_linear_t *linear_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_LINEAR ? (cpu_linear_t *)layer : NULL;
}

/* The weight (c_out, c_in) of this layer (its dtype), or its gradient
 * (grad_dtype). */
static hora_status_t linear_check_weight(const cpu_linear_t *l, const tr_tensor_t *w, tr_dtype_t dtype,
                                         const char *what)
{
    return cpu_check_plain(w, dtype, 2, (const int[]){l->desc.c_out, l->desc.c_in}, what);
}

/* The (n, c_out) output rows (f32), or their gradient (the layer's dtype). */
static hora_status_t linear_check_rows(const cpu_linear_t *l, const tr_tensor_t *y, int n, tr_dtype_t dtype,
                                       const char *what)
{
    return cpu_check_plain(y, dtype, 2, (const int[]){n, l->desc.c_out}, what);
}

hora_status_t cpu_linear_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, const tr_tensor_t *bias,
                                 tr_tensor_t *y)
{
    cpu_linear_t *layer_linear = linear_of(layer);
    int n;
    if (layer_linear == NULL) return cpu_invalid("linear_forward: not a linear layer");
    cpu_backend_t *backend = layer_linear->base.backend;
    const tr_linear_desc_t *d = &layer_linear->desc;
    CPU_CHECK(cpu_check_input(backend, x, d->c_in, 1, 1, d->dtype, "linear_forward x", &n));
    CPU_CHECK(linear_check_weight(layer_linear, w, d->dtype, "linear_forward w"));
    CPU_CHECK(cpu_check_plain(bias, TR_DTYPE_F32, 1, (const int[]){d->c_out}, "linear_forward bias"));
    CPU_CHECK(linear_check_rows(layer_linear, y, n, TR_DTYPE_F32, "linear_forward y"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_linear->batches, n, &entry));
    linear_batch_t *linear = entry;

    const void *src = x->data, *weights = w->data;
    if (linear->wide_x != NULL) {
        src = cpu_widen(backend, linear->wide_x, x);
        weights = cpu_widen(backend, layer_linear->wide_w, w);
    }
    return cpu_prim_run(backend, &linear->fwd, 4,
                        (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST},
                        (const void *const[]){src, weights, bias->data, y->data});
}

hora_status_t cpu_linear_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx)
{
    cpu_linear_t *layer_linear = linear_of(layer);
    int n;
    if (layer_linear == NULL) return cpu_invalid("linear_backward_data: not a linear layer");
    cpu_backend_t *backend = layer_linear->base.backend;
    const tr_linear_desc_t *d = &layer_linear->desc;
    CPU_CHECK(cpu_check_batch(dy, "linear_backward_data dy", &n));
    CPU_CHECK(linear_check_rows(layer_linear, dy, n, d->dtype, "linear_backward_data dy"));
    CPU_CHECK(linear_check_weight(layer_linear, w, d->dtype, "linear_backward_data w"));
    CPU_CHECK(cpu_check_tensor(backend, dx, n, d->c_in, 1, 1, d->dtype, "linear_backward_data dx"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_linear->batches, n, &entry));
    linear_batch_t *linear = entry;

    if (linear->wide_x == NULL)
        return cpu_prim_run(backend, &linear->bwd_data, 3,
                            (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                            (const void *const[]){dy->data, w->data, dx->data});
    CPU_CHECK(cpu_prim_run(backend, &linear->bwd_data, 3,
                           (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                           (const void *const[]){cpu_widen(backend, linear->wide_dy, dy),
                                                 cpu_widen(backend, layer_linear->wide_w, w), linear->wide_dx}));
    cpu_cast_n(backend, dx->data, dx->dtype, linear->wide_dx, TR_DTYPE_F32, tr_tensor_count(dx));
    return HORA_OK;
}

hora_status_t cpu_linear_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                          tr_tensor_t *dw, tr_tensor_t *dbias)
{
    cpu_linear_t *layer_linear = linear_of(layer);
    int n;
    if (layer_linear == NULL) return cpu_invalid("linear_backward_weights: not a linear layer");
    cpu_backend_t *backend = layer_linear->base.backend;
    const tr_linear_desc_t *d = &layer_linear->desc;
    CPU_CHECK(cpu_check_input(backend, x, d->c_in, 1, 1, d->dtype, "linear_backward_weights x", &n));
    CPU_CHECK(linear_check_rows(layer_linear, dy, n, d->dtype, "linear_backward_weights dy"));
    CPU_CHECK(linear_check_weight(layer_linear, dw, d->grad_dtype, "linear_backward_weights dw"));
    CPU_CHECK(cpu_check_plain(dbias, d->grad_dtype, 1, (const int[]){d->c_out}, "linear_backward_weights dbias"));
    void *entry;
    CPU_CHECK(cpu_batch_get(layer, &layer_linear->batches, n, &entry));
    linear_batch_t *linear = entry;

    int convert = d->grad_dtype != TR_DTYPE_F32;
    const void *src = x->data, *diff_dst = dy->data;
    if (linear->wide_x != NULL) {
        src = cpu_widen(backend, linear->wide_x, x);
        diff_dst = cpu_widen(backend, linear->wide_dy, dy);
    }
    CPU_CHECK(cpu_prim_run(backend, &linear->bwd_weights, 4,
                           (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS},
                           (const void *const[]){src, diff_dst, convert ? layer_linear->dw : dw->data,
                                                 convert ? layer_linear->dbias : dbias->data}));
    if (convert) {
        cpu_grad_store(dw, layer_linear->dw, (size_t)d->c_out * (size_t)d->c_in);
        cpu_grad_store(dbias, layer_linear->dbias, (size_t)d->c_out);
    }
    return HORA_OK;
}
