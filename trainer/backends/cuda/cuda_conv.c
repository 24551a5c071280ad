/*
 * cuda_conv.c - the cuda backend's convolution layer: cuDNN plans per batch
 * size (cuda_cudnn.h), made on first use and kept (--cudnn-autotune: the
 * fastest of a few candidates); the weights' channels-last copy and the
 * weight gradient's way back to PyTorch's layout (k_cuda_layout.h).
 *
 * The arena's w is OIHW in the layer's dtype; forward makes its KRSC copy
 * (input channels padded to cuda_stored_channels, zeros), which backward
 * data reuses, as the contract allows. cuDNN writes dw KRSC in the compute
 * dtype (it plans no f32 dw), which goes back to the OIHW dw view in
 * grad_dtype, the padding dropped.
 *
 * Not yet run on a GPU (issue 15).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"
#include "k_cuda_layout.h"

typedef struct {
    int batch; /* 0: free slot */
    cuda_conv_plan_t *plan[CUDA_CONV_OP_COUNT];
} conv_plans_t;

typedef struct {
    struct tr_layer base;
    tr_conv_desc_t desc;   /* as the model gave it */
    tr_conv_desc_t padded; /* c_in as stored, dw in the compute dtype: what cuDNN plans */
    int h_out, w_out;
    conv_plans_t plans[CUDA_LAYER_BATCHES];
    int next_slot;
    void *w_krsc;  /* (c_out, k, k, padded c_in) dtype */
    void *dw_krsc; /* likewise, cuDNN's dw */
    size_t w_bytes;
} cuda_conv_t;

static void conv_free(tr_layer_t *layer)
{
    cuda_conv_t *l = (cuda_conv_t *)layer;
    for (int i = 0; i < CUDA_LAYER_BATCHES; i++)
        for (int op = 0; op < CUDA_CONV_OP_COUNT; op++) cuda_conv_plan_free(l->plans[i].plan[op]);
    if (l->w_krsc) cudaFree(l->w_krsc);
    if (l->dw_krsc) cudaFree(l->dw_krsc);
    free(l);
}

hora_status_t cuda_conv_create(tr_backend_t *backend_base, const tr_conv_desc_t *desc, tr_layer_t **layer_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || desc == NULL || layer_out == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv_create: NULL argument");
    if (desc->c_in < 1 || desc->c_out < 1 || desc->kernel < 1 || desc->stride < 1 || desc->pad < 0 ||
        desc->h_in + 2 * desc->pad < desc->kernel || desc->w_in + 2 * desc->pad < desc->kernel)
        return cuda_fail(HORA_ERR_INVALID_ARG,
                         "conv_create: bad descriptor (c %d -> %d, %dx%d, kernel %d stride %d pad %d)", desc->c_in,
                         desc->c_out, desc->h_in, desc->w_in, desc->kernel, desc->stride, desc->pad);
    cuda_conv_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return cuda_fail(HORA_ERR_NO_MEMORY, "conv_create: out of memory");
    l->base.backend = b;
    l->base.free = conv_free;
    l->desc = *desc;
    l->padded = *desc;
    l->padded.c_in = cuda_stored_channels(desc->c_in);
    l->padded.grad_dtype = desc->dtype;
    l->h_out = (desc->h_in + 2 * desc->pad - desc->kernel) / desc->stride + 1;
    l->w_out = (desc->w_in + 2 * desc->pad - desc->kernel) / desc->stride + 1;
    l->w_bytes = (size_t)desc->c_out * (size_t)desc->kernel * (size_t)desc->kernel * (size_t)l->padded.c_in *
                 tr_dtype_size(desc->dtype);
    hora_status_t status = cuda_rt(cudaMalloc(&l->w_krsc, l->w_bytes), "conv_create: cudaMalloc (KRSC weights)");
    if (status == HORA_OK) status = cuda_rt(cudaMalloc(&l->dw_krsc, l->w_bytes), "conv_create: cudaMalloc (KRSC dw)");
    if (status != HORA_OK) {
        conv_free(&l->base);
        return status;
    }
    *layer_out = &l->base;
    return HORA_OK;
}

/* --cudnn-autotune: how many of cuDNN's ranked engine configs are timed,
 * and how often each runs (one untimed run first). */
#define CONV_TUNE_CANDIDATES 4
#define CONV_TUNE_RUNS 3

/* Each candidate run on the layer's real operands (a, b, out: the op's, as
 * cuda_conv_plan_execute takes them; out is overwritten anyway by the run
 * that follows), timed with events on the compute stream; *best_out the
 * fastest. The stream is synchronized: this happens once per (op, batch). */
static hora_status_t conv_tune(cuda_conv_t *l, cuda_conv_op_t op, int batch, cuda_conv_plan_t **plans, int count,
                               const void *a, const void *b, void *out, int *best_out)
{
    cuda_backend_t *be = l->base.backend;
    cudaEvent_t start = NULL, stop = NULL;
    float best_ms = 0;
    int best = 0;
    hora_status_t status = cuda_rt(cudaEventCreate(&start), "autotune: cudaEventCreate");
    if (status == HORA_OK) status = cuda_rt(cudaEventCreate(&stop), "autotune: cudaEventCreate");
    for (int i = 0; status == HORA_OK && i < count; i++) {
        void *ws = NULL;
        status = cuda_workspace(be, cuda_conv_plan_workspace(plans[i]), &ws);
        if (status == HORA_OK) status = cuda_conv_plan_execute(plans[i], be->cudnn, a, b, out, ws);
        if (status == HORA_OK) status = cuda_rt(cudaEventRecord(start, be->stream), "autotune: cudaEventRecord");
        for (int r = 0; status == HORA_OK && r < CONV_TUNE_RUNS; r++)
            status = cuda_conv_plan_execute(plans[i], be->cudnn, a, b, out, ws);
        if (status == HORA_OK) status = cuda_rt(cudaEventRecord(stop, be->stream), "autotune: cudaEventRecord");
        if (status == HORA_OK) status = cuda_rt(cudaEventSynchronize(stop), "autotune: cudaEventSynchronize");
        float ms = 0;
        if (status == HORA_OK)
            status = cuda_rt(cudaEventElapsedTime(&ms, start, stop), "autotune: cudaEventElapsedTime");
        if (status != HORA_OK) break;
        ms /= CONV_TUNE_RUNS;
        if (be->verbose)
            fprintf(stderr, "hora-train: cuda: autotune conv %s %d->%d %dx%d k%d s%d batch %d: %s %.3f ms\n",
                    cuda_conv_op_name(op), l->desc.c_in, l->desc.c_out, l->desc.h_in, l->desc.w_in, l->desc.kernel,
                    l->desc.stride, batch, cuda_conv_plan_text(plans[i]), (double)ms);
        if (i == 0 || ms < best_ms) {
            best = i;
            best_ms = ms;
        }
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (status == HORA_OK) *best_out = best;
    return status;
}

/* The plan of op at this batch (made and kept on first use; with autotune
 * the fastest of the candidates on the operands a, b, out) and its
 * workspace. */
static hora_status_t conv_plan(cuda_conv_t *l, cuda_conv_op_t op, int batch, const void *a, const void *b, void *out,
                               cuda_conv_plan_t **plan_out, void **workspace_out)
{
    conv_plans_t *slot = NULL;
    for (int i = 0; i < CUDA_LAYER_BATCHES && !slot; i++)
        if (l->plans[i].batch == batch) slot = &l->plans[i];
    if (slot == NULL) {
        slot = &l->plans[l->next_slot];
        l->next_slot = (l->next_slot + 1) % CUDA_LAYER_BATCHES;
        for (int o = 0; o < CUDA_CONV_OP_COUNT; o++) {
            cuda_conv_plan_free(slot->plan[o]);
            slot->plan[o] = NULL;
        }
        slot->batch = batch;
    }
    if (slot->plan[op] == NULL) {
        cuda_conv_plan_t *plans[CONV_TUNE_CANDIDATES] = {NULL};
        int count = 0, best = 0;
        CUDA_CHECK(cuda_conv_plan_candidates(l->base.backend->conv_device, op, &l->padded, batch, CUDA_MAX_WORKSPACE,
                                             l->base.backend->autotune ? CONV_TUNE_CANDIDATES : 1, plans, &count));
        hora_status_t status = count > 1 ? conv_tune(l, op, batch, plans, count, a, b, out, &best) : HORA_OK;
        for (int i = 0; i < count; i++)
            if (status != HORA_OK || i != best) cuda_conv_plan_free(plans[i]);
        CUDA_CHECK(status);
        slot->plan[op] = plans[best];
    }
    *plan_out = slot->plan[op];
    if (l->base.backend->verbose && slot->plan[op] != NULL && op == CUDA_CONV_FORWARD)
        fprintf(stderr, "hora-train: cuda: conv %d->%d %dx%d k%d s%d batch %d: %s\n", l->desc.c_in, l->desc.c_out,
                l->desc.h_in, l->desc.w_in, l->desc.kernel, l->desc.stride, batch, cuda_conv_plan_text(*plan_out));
    return cuda_workspace(l->base.backend, cuda_conv_plan_workspace(*plan_out), workspace_out);
}

static hora_status_t conv_check_weights(const cuda_conv_t *l, const tr_tensor_t *w, tr_dtype_t dtype, const char *what)
{
    const int dims[4] = {l->desc.c_out, l->desc.c_in, l->desc.kernel, l->desc.kernel};
    return cuda_check_plain(w, dtype, 4, dims, what);
}

hora_status_t cuda_conv_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, tr_tensor_t *y)
{
    cuda_conv_t *l = (cuda_conv_t *)layer;
    cuda_conv_plan_t *plan;
    void *ws;
    const tr_conv_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c_in, d->h_in, d->w_in, "conv_forward x"));
    CUDA_CHECK(conv_check_weights(l, w, d->dtype, "conv_forward w"));
    CUDA_CHECK(cuda_check_activation(y, d->dtype, d->c_out, l->h_out, l->w_out, "conv_forward y"));
    if (y->n != x->n) return cuda_fail(HORA_ERR_INVALID_ARG, "conv_forward: batch of y %d, of x %d", y->n, x->n);
    const k_dtype_t kd = tr_dtype_kernel(d->dtype);
    CUDA_CHECK(cuda_kernel(k_cuda_to_channels_last(l->w_krsc, kd, w->data, kd, (size_t)d->c_out, (size_t)d->c_in,
                                                   (size_t)l->padded.c_in, (size_t)d->kernel * (size_t)d->kernel,
                                                   l->base.backend->stream),
                           "conv_forward: the weights to KRSC"));
    CUDA_CHECK(conv_plan(l, CUDA_CONV_FORWARD, x->n, x->data, l->w_krsc, y->data, &plan, &ws));
    return cuda_conv_plan_execute(plan, l->base.backend->cudnn, x->data, l->w_krsc, y->data, ws);
}

hora_status_t cuda_conv_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx)
{
    cuda_conv_t *l = (cuda_conv_t *)layer;
    cuda_conv_plan_t *plan;
    void *ws;
    const tr_conv_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(dy, d->dtype, d->c_out, l->h_out, l->w_out, "conv_backward_data dy"));
    CUDA_CHECK(conv_check_weights(l, w, d->dtype, "conv_backward_data w"));
    CUDA_CHECK(cuda_check_activation(dx, d->dtype, d->c_in, d->h_in, d->w_in, "conv_backward_data dx"));
    if (dx->n != dy->n)
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv_backward_data: batch of dx %d, of dy %d", dx->n, dy->n);
    /* w_krsc holds the last forward's w (the contract's promise). */
    CUDA_CHECK(conv_plan(l, CUDA_CONV_BACKWARD_DATA, dy->n, dy->data, l->w_krsc, dx->data, &plan, &ws));
    return cuda_conv_plan_execute(plan, l->base.backend->cudnn, dy->data, l->w_krsc, dx->data, ws);
}

hora_status_t cuda_conv_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                         tr_tensor_t *dw)
{
    cuda_conv_t *l = (cuda_conv_t *)layer;
    cuda_conv_plan_t *plan;
    void *ws;
    const tr_conv_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c_in, d->h_in, d->w_in, "conv_backward_weights x"));
    CUDA_CHECK(cuda_check_activation(dy, d->dtype, d->c_out, l->h_out, l->w_out, "conv_backward_weights dy"));
    CUDA_CHECK(conv_check_weights(l, dw, d->grad_dtype, "conv_backward_weights dw"));
    if (x->n != dy->n)
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv_backward_weights: batch of x %d, of dy %d", x->n, dy->n);
    CUDA_CHECK(conv_plan(l, CUDA_CONV_BACKWARD_FILTER, x->n, x->data, dy->data, l->dw_krsc, &plan, &ws));
    CUDA_CHECK(cuda_conv_plan_execute(plan, l->base.backend->cudnn, x->data, dy->data, l->dw_krsc, ws));
    return cuda_kernel(k_cuda_from_channels_last(dw->data, tr_dtype_kernel(d->grad_dtype), l->dw_krsc,
                                                 tr_dtype_kernel(d->dtype), (size_t)d->c_out, (size_t)d->c_in,
                                                 (size_t)l->padded.c_in, (size_t)d->kernel * (size_t)d->kernel,
                                                 l->base.backend->stream),
                       "conv_backward_weights: dw from KRSC");
}
