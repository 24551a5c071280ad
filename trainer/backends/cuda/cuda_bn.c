/*
 * cuda_bn.c - the cuda backend's batch norm (with the fused ReLU) over NHWC
 * activations, on kernels/cuda's k_cuda_nn.h.
 *
 * Batch norm keeps, per layer, the forward's batch mean and invstd (for the
 * backward at the same batch size) and, with the fused ReLU, a pointer to
 * the forward's output y: the mask the backward applies is y > 0, so y must
 * still hold the forward's values then (the model keeps every activation of
 * the step). The reductions' workspace comes from the backend's.
 *
 * Not yet run on a GPU (issue 15).
 */
#include <stdlib.h>

#include "cuda_internal.h"
#include "k_cuda_nn.h"

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
