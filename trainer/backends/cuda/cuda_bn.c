/*
 * cuda_nn.c - the cuda backend's batch norm, pooling and element-wise ops
 * over NHWC activations, on kernels/cuda's k_cuda_nn.h.
 *
 * Batch norm keeps, per layer, the forward's batch mean and invstd (for the
 * backward at the same batch size) and, with the fused ReLU, a pointer to
 * the forward's output y: the mask the backward applies is y > 0, so y must
 * still hold the forward's values then (the model keeps every activation of
 * the step). The reductions' workspace comes from the backend's.

 * Not yet run on a GPU (issue 15).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "k_cuda_nn.h"

/* Elements an activation holds (its stored channels). */
static size_t nn_count(const tr_tensor_t *t)
{
    return (size_t)t->n * (size_t)cuda_stored_channels(t->c) * (size_t)t->h * (size_t)t->w;
}

/* ---- batch norm ----------------------------------------------------------- */

typedef struct {
    struct tr_layer base;
    tr_bn_desc_t desc;
    float *save_mean, *save_invstd; /* c each */
    const void *y;                  /* the last training forward's output (fused ReLU's mask) */
    int batch;                      /* of the last training forward; 0 before one */
} cuda_bn_t;

static void bn_free(tr_layer_t *layer)
{
    cuda_bn_t *l = (cuda_bn_t *)layer;
    if (l->save_mean) cudaFree(l->save_mean);
    free(l);
}

hora_status_t cuda_bn_create(tr_backend_t *backend_base, const tr_bn_desc_t *desc, tr_layer_t **layer_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || desc == NULL || layer_out == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "bn_create: NULL argument");
    if (desc->c < 1 || desc->h < 1 || desc->w < 1 || !(desc->epsilon > 0.0f) || desc->momentum < 0.0f ||
        desc->momentum > 1.0f)
        return cuda_fail(HORA_ERR_INVALID_ARG, "bn_create: c %d, %dx%d, epsilon %g, momentum %g", desc->c, desc->h,
                         desc->w, (double)desc->epsilon, (double)desc->momentum);
    /* Activations of fewer channels are stored padded, which these kernels
     * do not stride over; in a ResNet only the input is, and a convolution
     * reads it. */
    if (desc->c < CUDA_CONV_CHANNEL_ALIGN)
        return cuda_fail(HORA_ERR_UNSUPPORTED,
                         "bn_create: %d channels (the cuda backend's batch norm takes %d or more)", desc->c,
                         CUDA_CONV_CHANNEL_ALIGN);
    cuda_bn_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return cuda_fail(HORA_ERR_NO_MEMORY, "bn_create: out of memory");
    l->base.backend = b;
    l->base.free = bn_free;
    l->desc = *desc;
    hora_status_t status =
        cuda_rt(cudaMalloc((void **)&l->save_mean, 2 * (size_t)desc->c * sizeof(float)), "bn_create: cudaMalloc");
    if (status != HORA_OK) {
        free(l);
        return status;
    }
    l->save_invstd = l->save_mean + desc->c;
    *layer_out = &l->base;
    return HORA_OK;
}

static hora_status_t bn_check_params(const cuda_bn_t *l, const tr_tensor_t *const *p, const char *const *names)
{
    for (int i = 0; p[i]; i++) CUDA_CHECK(cuda_check_plain(p[i], TR_DTYPE_F32, 1, (const int[]){l->desc.c}, names[i]));
    return HORA_OK;
}

static hora_status_t bn_workspace(cuda_bn_t *l, size_t rows, void **ws)
{
    return cuda_workspace(l->base.backend, K_CUDA_BN_WORKSPACE_BYTES(rows, l->desc.c), ws);
}

hora_status_t cuda_bn_forward_train(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                    const tr_tensor_t *beta, tr_tensor_t *running_mean, tr_tensor_t *running_var,
                                    tr_tensor_t *y)
{
    cuda_bn_t *l = (cuda_bn_t *)layer;
    const tr_bn_desc_t *d = &l->desc;
    void *ws;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c, d->h, d->w, "bn_forward_train x"));
    CUDA_CHECK(cuda_check_activation(y, d->dtype, d->c, d->h, d->w, "bn_forward_train y"));
    CUDA_CHECK(bn_check_params(l, (const tr_tensor_t *[]){gamma, beta, running_mean, running_var, NULL},
                               (const char *[]){"bn gamma", "bn beta", "bn running_mean", "bn running_var"}));
    if (y->n != x->n) return cuda_fail(HORA_ERR_INVALID_ARG, "bn_forward_train: batch of y %d, of x %d", y->n, x->n);
    const size_t rows = (size_t)x->n * (size_t)d->h * (size_t)d->w;
    if (rows < 2)
        return cuda_fail(HORA_ERR_INVALID_ARG, "bn_forward_train: %zu value(s) per channel (training needs 2)", rows);
    CUDA_CHECK(bn_workspace(l, rows, &ws));
    CUDA_CHECK(
        cuda_kernel(k_cuda_bn_forward_train(y->data, x->data, NULL, tr_dtype_kernel(d->dtype), rows, d->c, gamma->data,
                                            beta->data, running_mean->data, running_var->data, d->momentum, d->epsilon,
                                            d->fuse_relu, l->save_mean, l->save_invstd, ws, l->base.backend->stream),
                    "bn_forward_train"));
    l->y = y->data;
    l->batch = x->n;
    return HORA_OK;
}

hora_status_t cuda_bn_forward_infer(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                    const tr_tensor_t *beta, const tr_tensor_t *running_mean,
                                    const tr_tensor_t *running_var, tr_tensor_t *y)
{
    cuda_bn_t *l = (cuda_bn_t *)layer;
    const tr_bn_desc_t *d = &l->desc;
    void *ws;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c, d->h, d->w, "bn_forward_infer x"));
    CUDA_CHECK(cuda_check_activation(y, d->dtype, d->c, d->h, d->w, "bn_forward_infer y"));
    CUDA_CHECK(bn_check_params(l, (const tr_tensor_t *[]){gamma, beta, running_mean, running_var, NULL},
                               (const char *[]){"bn gamma", "bn beta", "bn running_mean", "bn running_var"}));
    if (y->n != x->n) return cuda_fail(HORA_ERR_INVALID_ARG, "bn_forward_infer: batch of y %d, of x %d", y->n, x->n);
    const size_t rows = (size_t)x->n * (size_t)d->h * (size_t)d->w;
    CUDA_CHECK(bn_workspace(l, rows, &ws));
    return cuda_kernel(k_cuda_bn_forward_infer(y->data, x->data, NULL, tr_dtype_kernel(d->dtype), rows, d->c,
                                               gamma->data, beta->data, running_mean->data, running_var->data,
                                               d->epsilon, d->fuse_relu, ws, l->base.backend->stream),
                       "bn_forward_infer");
}

hora_status_t cuda_bn_backward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy, const tr_tensor_t *gamma,
                               tr_tensor_t *dx, tr_tensor_t *dgamma, tr_tensor_t *dbeta)
{
    cuda_bn_t *l = (cuda_bn_t *)layer;
    const tr_bn_desc_t *d = &l->desc;
    void *ws;
    CUDA_CHECK(cuda_check_activation(x, d->dtype, d->c, d->h, d->w, "bn_backward x"));
    CUDA_CHECK(cuda_check_activation(dy, d->dtype, d->c, d->h, d->w, "bn_backward dy"));
    CUDA_CHECK(cuda_check_activation(dx, d->dtype, d->c, d->h, d->w, "bn_backward dx"));
    CUDA_CHECK(cuda_check_plain(gamma, TR_DTYPE_F32, 1, (const int[]){d->c}, "bn_backward gamma"));
    CUDA_CHECK(cuda_check_plain(dgamma, d->grad_dtype, 1, (const int[]){d->c}, "bn_backward dgamma"));
    CUDA_CHECK(cuda_check_plain(dbeta, d->grad_dtype, 1, (const int[]){d->c}, "bn_backward dbeta"));
    if (l->batch != x->n || dy->n != x->n || dx->n != x->n)
        return cuda_fail(HORA_ERR_INVALID_ARG,
                         "bn_backward: batch %d (dy %d, dx %d) but the last training forward's was %d", x->n, dy->n,
                         dx->n, l->batch);
    const size_t rows = (size_t)x->n * (size_t)d->h * (size_t)d->w;
    CUDA_CHECK(bn_workspace(l, rows, &ws));
    return cuda_kernel(k_cuda_bn_backward(dx->data, NULL, x->data, dy->data, d->fuse_relu ? l->y : NULL,
                                          tr_dtype_kernel(d->dtype), rows, d->c, gamma->data, l->save_mean,
                                          l->save_invstd, dgamma->data, dbeta->data, tr_dtype_kernel(d->grad_dtype), ws,
                                          l->base.backend->stream),
                       "bn_backward");
}

/* ---- pooling -------------------------------------------------------------- */

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

/* ---- element-wise --------------------------------------------------------- */

/* b has a's shape, dtype and layout. */
static hora_status_t nn_same(const tr_tensor_t *a, const tr_tensor_t *b, const char *what)
{
    CUDA_CHECK(cuda_check_activation(a, a ? a->dtype : TR_DTYPE_F32, -1, 0, 0, what));
    CUDA_CHECK(cuda_check_activation(b, a->dtype, a->c, a->h, a->w, what));
    if (a->n != b->n) return cuda_fail(HORA_ERR_INVALID_ARG, "%s: batches %d and %d", what, a->n, b->n);
    return HORA_OK;
}

hora_status_t cuda_relu_forward(tr_backend_t *backend_base, const tr_tensor_t *x, tr_tensor_t *y)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    CUDA_CHECK(nn_same(x, y, "relu_forward"));
    return cuda_kernel(k_cuda_relu_forward(y->data, x->data, tr_dtype_kernel(x->dtype), nn_count(x), b->stream),
                       "relu_forward");
}

hora_status_t cuda_relu_backward(tr_backend_t *backend_base, const tr_tensor_t *y, const tr_tensor_t *dy,
                                 tr_tensor_t *dx)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    CUDA_CHECK(nn_same(y, dy, "relu_backward"));
    CUDA_CHECK(nn_same(y, dx, "relu_backward"));
    return cuda_kernel(
        k_cuda_relu_backward(dx->data, y->data, dy->data, tr_dtype_kernel(y->dtype), nn_count(y), b->stream),
        "relu_backward");
}

hora_status_t cuda_add_forward(tr_backend_t *backend_base, const tr_tensor_t *a, const tr_tensor_t *bt, int relu,
                               tr_tensor_t *y)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    CUDA_CHECK(nn_same(a, bt, "add_forward"));
    CUDA_CHECK(nn_same(a, y, "add_forward"));
    return cuda_kernel(
        k_cuda_add_forward(y->data, a->data, bt->data, tr_dtype_kernel(a->dtype), nn_count(a), relu, b->stream),
        "add_forward");
}
