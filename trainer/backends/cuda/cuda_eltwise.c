/*
 * cuda_eltwise.c - the cuda backend's element-wise ops over NHWC
 * activations, on kernels/cuda's k_cuda_nn.h: ReLU, its backward, and the
 * residual add (optionally followed by a ReLU).
 *
 * Not yet run on a GPU (issue 15).
 */
#include "cuda_internal.h"
#include "k_cuda_nn.h"

/* Elements an activation holds (its stored channels). */
static size_t nn_count(const tr_tensor_t *t)
{
    return (size_t)t->n * (size_t)cuda_stored_channels(t->c) * (size_t)t->h * (size_t)t->w;
}

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
