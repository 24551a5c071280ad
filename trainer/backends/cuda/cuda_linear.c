/*
 * cuda_linear.c - the cuda backend's fully connected layer: cuBLASLt matmul
 * plans per batch size (cuda_cublaslt.h says which matrices are which),
 * made on first use and kept; the bias added and dbias reduced by the
 * matmuls' epilogues.
 *
 * Not yet run on a GPU (issue 15).
 */
#include <stdlib.h>

#include "cuda_internal.h"

typedef struct {
    int batch;
    cuda_linear_plan_t *plan[3];
} linear_plans_t;

typedef struct {
    struct tr_layer base;
    tr_linear_desc_t desc;
    linear_plans_t plans[CUDA_LAYER_BATCHES];
    int next_slot;
} cuda_linear_t;

static void linear_free(tr_layer_t *layer)
{
    cuda_linear_t *l = (cuda_linear_t *)layer;
    for (int i = 0; i < CUDA_LAYER_BATCHES; i++)
        for (int op = 0; op < 3; op++) cuda_linear_plan_free(l->plans[i].plan[op]);
    free(l);
}

hora_status_t cuda_linear_create(tr_backend_t *backend_base, const tr_linear_desc_t *desc, tr_layer_t **layer_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || desc == NULL || layer_out == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "linear_create: NULL argument");
    if (desc->c_in < 1 || desc->c_out < 1)
        return cuda_fail(HORA_ERR_INVALID_ARG, "linear_create: c_in %d, c_out %d", desc->c_in, desc->c_out);
    if (desc->c_in < CUDA_CONV_CHANNEL_ALIGN) /* x would be stored padded: see bn_create */
        return cuda_fail(HORA_ERR_UNSUPPORTED, "linear_create: c_in %d (the cuda backend's takes %d or more)",
                         desc->c_in, CUDA_CONV_CHANNEL_ALIGN);
    cuda_linear_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return cuda_fail(HORA_ERR_NO_MEMORY, "linear_create: out of memory");
    l->base.backend = b;
    l->base.free = linear_free;
    l->desc = *desc;
    *layer_out = &l->base;
    return HORA_OK;
}

static hora_status_t linear_plan(cuda_linear_t *l, cuda_linear_op_t op, int batch, cuda_linear_plan_t **plan_out,
                                 void **workspace_out)
{
    linear_plans_t *slot = NULL;
    for (int i = 0; i < CUDA_LAYER_BATCHES && !slot; i++)
        if (l->plans[i].batch == batch) slot = &l->plans[i];
    if (slot == NULL) {
        slot = &l->plans[l->next_slot];
        l->next_slot = (l->next_slot + 1) % CUDA_LAYER_BATCHES;
        for (int o = 0; o < 3; o++) {
            cuda_linear_plan_free(slot->plan[o]);
            slot->plan[o] = NULL;
        }
        slot->batch = batch;
    }
    if (slot->plan[op] == NULL)
        CUDA_CHECK(
            cuda_linear_plan_create(l->base.backend->lt, op, &l->desc, batch, CUDA_MAX_WORKSPACE, &slot->plan[op]));
    *plan_out = slot->plan[op];
    return cuda_workspace(l->base.backend, cuda_linear_plan_workspace(*plan_out), workspace_out);
}

hora_status_t cuda_linear_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w,
                                  const tr_tensor_t *bias, tr_tensor_t *y)
{
    cuda_linear_t *l = (cuda_linear_t *)layer;
    cuda_linear_plan_t *plan;
    void *ws;
    const tr_linear_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c_in, 1, 1, "linear_forward x"));
    CUDA_CHECK(cuda_check_plain(w, d->dtype, 2, (const int[]){d->c_out, d->c_in}, "linear_forward w"));
    CUDA_CHECK(cuda_check_plain(bias, TR_DTYPE_F32, 1, (const int[]){d->c_out}, "linear_forward bias"));
    CUDA_CHECK(cuda_check_plain(y, TR_DTYPE_F32, 2, (const int[]){x->n, d->c_out}, "linear_forward y"));
    CUDA_CHECK(linear_plan(l, CUDA_LINEAR_FORWARD, x->n, &plan, &ws));
    return cuda_linear_plan_run(l->base.backend->lt, plan, x->data, w->data, y->data, bias->data, ws,
                                l->base.backend->stream);
}

hora_status_t cuda_linear_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx)
{
    cuda_linear_t *l = (cuda_linear_t *)layer;
    cuda_linear_plan_t *plan;
    void *ws;
    const tr_linear_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(dx, d->dtype, d->c_in, 1, 1, "linear_backward_data dx"));
    CUDA_CHECK(cuda_check_plain(dy, d->dtype, 2, (const int[]){dx->n, d->c_out}, "linear_backward_data dy"));
    CUDA_CHECK(cuda_check_plain(w, d->dtype, 2, (const int[]){d->c_out, d->c_in}, "linear_backward_data w"));
    CUDA_CHECK(linear_plan(l, CUDA_LINEAR_BACKWARD_DATA, dx->n, &plan, &ws));
    return cuda_linear_plan_run(l->base.backend->lt, plan, dy->data, w->data, dx->data, NULL, ws,
                                l->base.backend->stream);
}

hora_status_t cuda_linear_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                           tr_tensor_t *dw, tr_tensor_t *dbias)
{
    cuda_linear_t *l = (cuda_linear_t *)layer;
    cuda_linear_plan_t *plan;
    void *ws;
    const tr_linear_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c_in, 1, 1, "linear_backward_weights x"));
    CUDA_CHECK(cuda_check_plain(dy, d->dtype, 2, (const int[]){x->n, d->c_out}, "linear_backward_weights dy"));
    CUDA_CHECK(cuda_check_plain(dw, d->grad_dtype, 2, (const int[]){d->c_out, d->c_in}, "linear_backward_weights dw"));
    CUDA_CHECK(cuda_check_plain(dbias, d->grad_dtype, 1, (const int[]){d->c_out}, "linear_backward_weights dbias"));
    CUDA_CHECK(linear_plan(l, CUDA_LINEAR_BACKWARD_WEIGHTS, x->n, &plan, &ws));
    return cuda_linear_plan_run(l->base.backend->lt, plan, x->data, dy->data, dw->data, dbias->data, ws,
                                l->base.backend->stream);
}
