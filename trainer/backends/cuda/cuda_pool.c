/*
 * cuda_pool.c - the cuda backend's pooling over NHWC activations, on
 * kernels/cuda's k_cuda_nn.h: max pooling with a one-byte argmax per output
 * element kept for the backward (at the last forward's batch size), and
 * global average pooling.
 *
 * Not yet run on a GPU (issue 15).
 */
#include <stdlib.h>

#include "cuda_internal.h"
#include "k_cuda_nn.h"

typedef struct {
    struct tr_layer base;
    tr_pool_desc_t desc;
    int h_out, w_out;
    uint8_t *argmax; /* max pool: one byte per output element of the last forward */
    size_t argmax_bytes;
    int batch;
} cuda_pool_t;

static void pool_free(tr_layer_t *layer)
{
    cuda_pool_t *l = (cuda_pool_t *)layer;
    if (l->argmax) cudaFree(l->argmax);
    free(l);
}

hora_status_t cuda_pool_create(tr_backend_t *backend_base, const tr_pool_desc_t *desc, tr_layer_t **layer_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || desc == NULL || layer_out == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "pool_create: NULL argument");
    const int max = desc->kind == TR_POOL_MAX;
    if ((desc->kind != TR_POOL_MAX && desc->kind != TR_POOL_GLOBAL_AVERAGE) || desc->c < 1 || desc->h < 1 ||
        desc->w < 1 ||
        (max && (desc->kernel < 1 || desc->stride < 1 || desc->pad < 0 || 2 * desc->pad > desc->kernel ||
                 desc->h + 2 * desc->pad < desc->kernel || desc->w + 2 * desc->pad < desc->kernel ||
                 desc->kernel * desc->kernel > 255)))
        return cuda_fail(HORA_ERR_INVALID_ARG, "pool_create: kind %d, c %d, %dx%d, kernel %d stride %d pad %d",
                         (int)desc->kind, desc->c, desc->h, desc->w, desc->kernel, desc->stride, desc->pad);
    if (desc->c < CUDA_CONV_CHANNEL_ALIGN) /* as bn_create */
        return cuda_fail(HORA_ERR_UNSUPPORTED, "pool_create: %d channels (the cuda backend's pooling takes %d or more)",
                         desc->c, CUDA_CONV_CHANNEL_ALIGN);
    cuda_pool_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return cuda_fail(HORA_ERR_NO_MEMORY, "pool_create: out of memory");
    l->base.backend = b;
    l->base.free = pool_free;
    l->desc = *desc;
    l->h_out = max ? (desc->h + 2 * desc->pad - desc->kernel) / desc->stride + 1 : 1;
    l->w_out = max ? (desc->w + 2 * desc->pad - desc->kernel) / desc->stride + 1 : 1;
    *layer_out = &l->base;
    return HORA_OK;
}

static k_cuda_pool_t pool_geometry(const cuda_pool_t *l, int n)
{
    return (k_cuda_pool_t){n, l->desc.h, l->desc.w, l->desc.c, l->desc.kernel, l->desc.stride, l->desc.pad};
}

hora_status_t cuda_pool_forward(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y)
{
    cuda_pool_t *l = (cuda_pool_t *)layer;
    const tr_pool_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c, d->h, d->w, "pool_forward x"));
    CUDA_CHECK(cuda_check_activation(y, d->dtype, d->c, l->h_out, l->w_out, "pool_forward y"));
    if (y->n != x->n) return cuda_fail(HORA_ERR_INVALID_ARG, "pool_forward: batch of y %d, of x %d", y->n, x->n);
    cudaStream_t stream = l->base.backend->stream;
    if (d->kind == TR_POOL_GLOBAL_AVERAGE)
        return cuda_kernel(
            k_cuda_avgpool_forward(y->data, x->data, tr_dtype_kernel(d->dtype), x->n, d->h * d->w, d->c, stream),
            "pool_forward (global average)");
    const size_t need = (size_t)x->n * (size_t)l->h_out * (size_t)l->w_out * (size_t)d->c;
    if (need > l->argmax_bytes) {
        CUDA_CHECK(cuda_rt(cudaStreamSynchronize(stream), "pool_forward: cudaStreamSynchronize"));
        if (l->argmax) cudaFree(l->argmax);
        l->argmax = NULL;
        l->argmax_bytes = 0;
        CUDA_CHECK(cuda_rt(cudaMalloc((void **)&l->argmax, need), "pool_forward: cudaMalloc (argmax)"));
        l->argmax_bytes = need;
    }
    const k_cuda_pool_t g = pool_geometry(l, x->n);
    CUDA_CHECK(cuda_kernel(k_cuda_maxpool_forward(y->data, l->argmax, x->data, tr_dtype_kernel(d->dtype), &g, stream),
                           "pool_forward (max)"));
    l->batch = x->n;
    return HORA_OK;
}

hora_status_t cuda_pool_backward(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx)
{
    cuda_pool_t *l = (cuda_pool_t *)layer;
    const tr_pool_desc_t *d = &l->desc;
    CUDA_CHECK(cuda_check_activation(dy, d->dtype, d->c, l->h_out, l->w_out, "pool_backward dy"));
    CUDA_CHECK(cuda_check_activation(dx, d->dtype, d->c, d->h, d->w, "pool_backward dx"));
    if (dx->n != dy->n) return cuda_fail(HORA_ERR_INVALID_ARG, "pool_backward: batch of dx %d, of dy %d", dx->n, dy->n);
    cudaStream_t stream = l->base.backend->stream;
    if (d->kind == TR_POOL_GLOBAL_AVERAGE)
        return cuda_kernel(
            k_cuda_avgpool_backward(dx->data, dy->data, tr_dtype_kernel(d->dtype), dy->n, d->h * d->w, d->c, stream),
            "pool_backward (global average)");
    if (l->batch != dy->n)
        return cuda_fail(HORA_ERR_INVALID_ARG, "pool_backward: batch %d but the last forward's was %d", dy->n,
                         l->batch);
    const k_cuda_pool_t g = pool_geometry(l, dy->n);
    return cuda_kernel(k_cuda_maxpool_backward(dx->data, dy->data, l->argmax, tr_dtype_kernel(d->dtype), &g, stream),
                       "pool_backward (max)");
}
