/*
 * cuda_internal.h - what the cuda backend's files share: the backend handle,
 * the layer header, error reporting, the tensor checks, and the ops each
 * file fills the table (cuda_backend.c) with. Private to
 * trainer/backends/cuda/.
 */
#ifndef TR_CUDA_INTERNAL_H
#define TR_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_cudnn.h"
#include "cuda_cublaslt.h"
#include "cuda_log.h"
#include "k_cpu.h" /* k_dtype_t */

/* gradient_ready's events, reused in turn: libhora waits on an event long
 * before this many more are recorded (a re-recorded event only makes a late
 * waiter wait for a later point, which is still correct). */
#define CUDA_EVENT_RING 1024

/* Largest workspace a plan may ask for. */
#define CUDA_MAX_WORKSPACE ((size_t)512 << 20)

typedef struct {
    tr_backend_t base;
    int device;
    int verbose;
    int autotune;        /* tr_backend_config_t's */
    cudaStream_t stream; /* every op runs on it */
    cudnnHandle_t cudnn; /* on stream */
    cublasLtHandle_t lt;
    cuda_conv_device_t *conv_device;
    void *workspace; /* one for every plan: ops run one at a time on stream */
    size_t workspace_bytes;
    cudaEvent_t events[CUDA_EVENT_RING];
    int next_event;
    int32_t *dev_flag;  /* a device int32 the finite check and the loss's label check write */
    int32_t *host_flag; /* pinned: where it is read back */
    /* The input step (input_import): u8 batches are copied on copy_stream
     * into one of two device staging buffers, the compute stream waits for
     * the copy (input_copied) and normalises; the next copy into that
     * buffer waits until the normalisation read it (input_read). Two, so
     * the copy of a batch overlaps the previous step's work queued ahead. */
    cudaStream_t copy_stream;
    uint8_t *input_stage[2];
    size_t input_stage_bytes[2];
    cudaEvent_t input_copied[2], input_read[2];
    int input_next;
} cuda_backend_t;

/* Every layer starts with this (trainer/backends/backend.h's tr_layer_t). */
struct tr_layer {
    cuda_backend_t *backend;
    void (*free)(tr_layer_t *layer);
};

/* Batch sizes a conv or FC layer keeps plans for (training, the last
 * partial batch, evaluation, one spare); the oldest goes first. */
#define CUDA_LAYER_BATCHES 4

/* HORA_OK for cudaSuccess, else the message naming what set (cuda_fail;
 * HORA_ERR_NO_MEMORY for cudaErrorMemoryAllocation, HORA_ERR_INTERNAL
 * otherwise). */
hora_status_t cuda_rt(cudaError_t err, const char *what);
/* HORA_OK for 0, else the kernels' int code translated at this boundary:
 * HORA_ERR_INVALID_ARG for K_CUDA_ERR_INVALID_VALUE, HORA_ERR_INTERNAL
 * otherwise, the message k_cuda_error_string's (cuda_fail). */
hora_status_t cuda_kernel(int err, const char *what);

#define CUDA_CHECK(call)                                              \
    do {                                                              \
        hora_status_t cuda_check_status_ = (call);                    \
        if (cuda_check_status_ != HORA_OK) return cuda_check_status_; \
    } while (0)

/* The workspace holds at least bytes (grown after the stream drains). */
hora_status_t cuda_workspace(cuda_backend_t *backend, size_t bytes, void **ptr_out);

/* Physical channels of an activation with c channels: c below
 * CUDA_CONV_CHANNEL_ALIGN is stored padded (zeros) to it, so the stem's
 * convolution gets tensor cores; every other ResNet channel count is a
 * multiple of it already. */
int cuda_stored_channels(int c);

/* t is an allocated NHWC activation of this backend of dtype (any batch up
 * to its own) with the given (c, h, w) when c > 0. */
hora_status_t cuda_check_activation(const tr_tensor_t *t, tr_dtype_t dtype, int c, int h, int w, const char *what);
/* t is an allocated plain device tensor of dtype and shape dims[0..ndim). */
hora_status_t cuda_check_plain(const tr_tensor_t *t, tr_dtype_t dtype, int ndim, const int *dims, const char *what);
/* f32, f16 or bf16 (kernels/'s name for a dtype: tr_dtype_kernel, tensor.h). */
int cuda_float_dtype(tr_dtype_t dtype);

/* ---- cuda_conv.c: the convolution layer ---- */
hora_status_t cuda_conv_create(tr_backend_t *backend, const tr_conv_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cuda_conv_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, tr_tensor_t *y);
hora_status_t cuda_conv_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx);
hora_status_t cuda_conv_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                         tr_tensor_t *dw);

/* ---- cuda_linear.c: the fully connected layer ---- */
hora_status_t cuda_linear_create(tr_backend_t *backend, const tr_linear_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cuda_linear_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w,
                                  const tr_tensor_t *bias, tr_tensor_t *y);
hora_status_t cuda_linear_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w,
                                        tr_tensor_t *dx);
hora_status_t cuda_linear_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                           tr_tensor_t *dw, tr_tensor_t *dbias);

/* ---- cuda_bn.c: batch norm ---- */
hora_status_t cuda_bn_create(tr_backend_t *backend, const tr_bn_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cuda_bn_forward_train(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                    const tr_tensor_t *beta, tr_tensor_t *running_mean, tr_tensor_t *running_var,
                                    tr_tensor_t *y);
hora_status_t cuda_bn_forward_infer(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                    const tr_tensor_t *beta, const tr_tensor_t *running_mean,
                                    const tr_tensor_t *running_var, tr_tensor_t *y);
hora_status_t cuda_bn_backward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy, const tr_tensor_t *gamma,
                               tr_tensor_t *dx, tr_tensor_t *dgamma, tr_tensor_t *dbeta);

/* ---- cuda_pool.c: pooling ---- */
hora_status_t cuda_pool_create(tr_backend_t *backend, const tr_pool_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cuda_pool_forward(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y);
hora_status_t cuda_pool_backward(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx);

/* ---- cuda_eltwise.c: ReLU, its backward, the residual add ---- */
hora_status_t cuda_relu_forward(tr_backend_t *backend, const tr_tensor_t *x, tr_tensor_t *y);
hora_status_t cuda_relu_backward(tr_backend_t *backend, const tr_tensor_t *y, const tr_tensor_t *dy, tr_tensor_t *dx);
hora_status_t cuda_add_forward(tr_backend_t *backend, const tr_tensor_t *a, const tr_tensor_t *b, int relu,
                               tr_tensor_t *y);

/* ---- cuda_step.c: the loss, the finite check and the optimizer step ---- */
hora_status_t cuda_softmax_xent(tr_backend_t *backend, const tr_tensor_t *logits, const tr_tensor_t *labels,
                                float label_smoothing, float grad_scale, tr_tensor_t *loss, tr_tensor_t *dlogits);
hora_status_t cuda_check_finite(tr_backend_t *backend, const tr_tensor_t *t, int *nonfinite_out);
hora_status_t cuda_sgd_step(tr_backend_t *backend, tr_tensor_t *param, tr_tensor_t *param_lp, const tr_tensor_t *grad,
                            tr_tensor_t *momentum, const tr_sgd_args_t *args);

#endif
