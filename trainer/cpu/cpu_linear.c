/*
 * cpu_linear.c - the fully connected layer (nn.Linear) on oneDNN's inner
 * product: y (n, c_out) = x (n, c_in) W^T + bias, W (c_out, c_in).
 *
 * x is the (n, c_in, 1, 1) tensor global average pooling gives. The
 * backend only blocks channels where C fills whole blocks, and with
 * H = W = 1 such a blocked tensor has exactly the bytes of a row-major
 * (n, c_in) matrix, so the primitives see x, dx as plain 2-D "nc" and the
 * weights in PyTorch's (out, in) order: no reorders at all.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    struct tr_layer base;
    tr_linear_desc_t desc;
    cpu_prim_t fwd, bwd_data, bwd_weights;
} cpu_linear_t;

static void cpu_linear_free(tr_layer_t *layer)
{
    cpu_linear_t *linear = (cpu_linear_t *)layer;
    cpu_prim_free(&linear->fwd);
    cpu_prim_free(&linear->bwd_data);
    cpu_prim_free(&linear->bwd_weights);
    free(linear);
}

static hora_status_t linear_make_primitives(cpu_backend_t *backend, cpu_linear_t *linear)
{
    const tr_linear_desc_t *d = &linear->desc;
    dnnl_memory_desc_t x_md, w_md, bias_md, y_md;
    CPU_CHECK(cpu_md_plain(&x_md, 2, (const int[]){d->n, d->c_in}));
    CPU_CHECK(cpu_md_plain(&w_md, 2, (const int[]){d->c_out, d->c_in}));
    CPU_CHECK(cpu_md_plain(&bias_md, 1, (const int[]){d->c_out}));
    CPU_CHECK(cpu_md_plain(&y_md, 2, (const int[]){d->n, d->c_out}));

    dnnl_inner_product_desc_t fwd_desc, bwd_data_desc, bwd_weights_desc;
    CPU_CHECK(cpu_dnnl(dnnl_inner_product_forward_desc_init(&fwd_desc, dnnl_forward_training, &x_md, &w_md,
                                                            &bias_md, &y_md),
                       "linear forward descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &linear->fwd, "linear forward", &fwd_desc, NULL));
    CPU_CHECK(cpu_dnnl(dnnl_inner_product_backward_data_desc_init(&bwd_data_desc, &x_md, &w_md, &y_md),
                       "linear backward data descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &linear->bwd_data, "linear backward data", &bwd_data_desc,
                            linear->fwd.pd));
    CPU_CHECK(cpu_dnnl(dnnl_inner_product_backward_weights_desc_init(&bwd_weights_desc, &x_md, &w_md,
                                                                     &bias_md, &y_md),
                       "linear backward weights descriptor"));
    CPU_CHECK(cpu_prim_init(backend, &linear->bwd_weights, "linear backward weights", &bwd_weights_desc,
                            linear->fwd.pd));

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
        fprintf(stderr, "hora-train: cpu: linear %dx%d -> %d: forward %s, backward data %s, backward weights %s\n",
                d->n, d->c_in, d->c_out, cpu_prim_impl(&linear->fwd), cpu_prim_impl(&linear->bwd_data),
                cpu_prim_impl(&linear->bwd_weights));
    return HORA_OK;
}

hora_status_t cpu_linear_create(tr_backend_t *backend_base, const tr_linear_desc_t *desc,
                                tr_layer_t **layer_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || desc == NULL || layer_out == NULL)
        return cpu_invalid("linear_create: NULL argument");
    if (desc->n <= 0 || desc->c_in <= 0 || desc->c_out <= 0)
        return cpu_invalid("linear_create: bad shape n %d c_in %d c_out %d", desc->n, desc->c_in, desc->c_out);

    cpu_linear_t *linear = cpu_alloc(sizeof(*linear), "a linear layer");
    if (linear == NULL)
        return HORA_ERR_NO_MEMORY;
    linear->base.kind = CPU_LAYER_LINEAR;
    linear->base.backend = backend;
    linear->base.free = cpu_linear_free;
    linear->desc = *desc;

    hora_status_t status = linear_make_primitives(backend, linear);
    if (status != HORA_OK)
        goto err_free_linear;
    *layer_out = &linear->base;
    return HORA_OK;

err_free_linear:
    cpu_linear_free(&linear->base);
    return status;
}

static cpu_linear_t *linear_of(tr_layer_t *layer)
{
    return layer != NULL && layer->kind == CPU_LAYER_LINEAR ? (cpu_linear_t *)layer : NULL;
}

hora_status_t cpu_linear_forward(tr_layer_t *layer, const tr_tensor_t *x, const float *w,
                                 const float *bias, float *y)
{
    cpu_linear_t *linear = linear_of(layer);
    if (linear == NULL || w == NULL || bias == NULL || y == NULL)
        return cpu_invalid("linear_forward: not a linear layer, or a NULL array");
    cpu_backend_t *backend = linear->base.backend;
    const tr_linear_desc_t *d = &linear->desc;
    CPU_CHECK(cpu_check_tensor(backend, x, d->n, d->c_in, 1, 1, "linear_forward x"));

    cpu_prim_t *p = &linear->fwd;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SRC, x->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_WEIGHTS, w));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_BIAS, bias));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DST, y));
    return cpu_prim_exec(backend, p);
}

hora_status_t cpu_linear_backward_data(tr_layer_t *layer, const float *dy, const float *w,
                                       tr_tensor_t *dx)
{
    cpu_linear_t *linear = linear_of(layer);
    if (linear == NULL || dy == NULL || w == NULL)
        return cpu_invalid("linear_backward_data: not a linear layer, or a NULL array");
    cpu_backend_t *backend = linear->base.backend;
    const tr_linear_desc_t *d = &linear->desc;
    CPU_CHECK(cpu_check_tensor(backend, dx, d->n, d->c_in, 1, 1, "linear_backward_data dx"));

    cpu_prim_t *p = &linear->bwd_data;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_DST, dy));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_WEIGHTS, w));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_SRC, dx->data));
    return cpu_prim_exec(backend, p);
}

hora_status_t cpu_linear_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const float *dy,
                                          float *dw, float *dbias)
{
    cpu_linear_t *linear = linear_of(layer);
    if (linear == NULL || dy == NULL || dw == NULL || dbias == NULL)
        return cpu_invalid("linear_backward_weights: not a linear layer, or a NULL array");
    cpu_backend_t *backend = linear->base.backend;
    const tr_linear_desc_t *d = &linear->desc;
    CPU_CHECK(cpu_check_tensor(backend, x, d->n, d->c_in, 1, 1, "linear_backward_weights x"));

    cpu_prim_t *p = &linear->bwd_weights;
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_SRC, x->data));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_DST, dy));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_WEIGHTS, dw));
    CPU_CHECK(cpu_prim_set(backend, p, DNNL_ARG_DIFF_BIAS, dbias));
    return cpu_prim_exec(backend, p);
}
