/*
 * backend.h - the compute backend ops table (struct tr_backend_ops).
 *
 * A backend computes the layers of a ResNet on one device: "cpu" uses
 * oneDNN (cpu/backend_cpu.c); "cuda" (cuDNN + cuBLAS + kernels/) will fill
 * the same table. Slots a backend lacks point to a function returning
 * HORA_ERR_UNSUPPORTED, never NULL.
 *
 * Layers with state (primitives made once per shape, saved statistics,
 * workspaces) are tr_layer_t objects made by *_create and released by
 * layer_free; stateless ops (relu, add, loss, sgd) take the backend.
 *
 * Conventions for every op:
 * - Activation tensors come from tensor_alloc of the same backend, with the
 *   shape the layer was created for; the backend checks shapes and returns
 *   HORA_ERR_INVALID_ARG on a mismatch.
 * - Parameters, their gradients and BN running statistics are plain f32
 *   arrays in backend memory (host memory for cpu): conv weight OIHW, linear
 *   weight (out, in) row-major, bias/gamma/beta/mean/var (C).
 * - Gradient outputs (dx, dw, dgamma, ...) are overwritten, not accumulated.
 * - Logits, their gradient and labels are plain host-visible arrays.
 * - Statuses: HORA_OK, HORA_ERR_INVALID_ARG, HORA_ERR_NO_MEMORY,
 *   HORA_ERR_UNSUPPORTED, HORA_ERR_INTERNAL (the library below failed; the
 *   message, logged once where it happened, names the call).
 */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include <stdint.h>

#include "hora.h"
#include "tensor.h"

typedef struct tr_backend tr_backend_t;
typedef struct tr_layer tr_layer_t;

typedef struct {
    int threads; /* compute threads; 0 = online cores / ranks on this node */
    int verbose; /* 1: print the implementation each primitive got */
    /* cpu: channel block of the activation layout. 0 = the CPU's best
     * (16 with AVX-512, 8 with AVX2, where C divides); 1, 8 or 16 force
     * plain NCHW or that block (tests run every layout). */
    int channel_block;
} tr_backend_config_t;

/* Square kernels; output size (in + 2 pad - kernel) / stride + 1. No bias. */
typedef struct {
    int n, c_in, h_in, w_in;
    int c_out, kernel, stride, pad;
} tr_conv_desc_t;

/* Batch norm over (N, H, W) per channel. fuse_relu: y = relu(bn(x)) and
 * bn_backward takes the gradient with respect to that relu's output. */
typedef struct {
    int n, c, h, w;
    float epsilon;  /* 1e-5 */
    float momentum; /* running = (1 - momentum) running + momentum batch; 0.1 */
    int fuse_relu;
} tr_bn_desc_t;

typedef enum {
    TR_POOL_MAX = 0,            /* kernel, stride, pad as given */
    TR_POOL_GLOBAL_AVERAGE = 1, /* H x W -> 1 x 1; kernel/stride/pad ignored */
} tr_pool_kind_t;

typedef struct {
    tr_pool_kind_t kind;
    int n, c, h, w;
    int kernel, stride, pad;
} tr_pool_desc_t;

/* y (n, c_out) = x (n, c_in [,1,1]) W^T + bias. x is a backend tensor of
 * shape (n, c_in, 1, 1) (what global average pooling gives). */
typedef struct {
    int n, c_in, c_out;
} tr_linear_desc_t;

/* One SGD step on count elements (PyTorch's torch.optim.SGD semantics):
 *   g = grad + weight_decay * param
 *   m = momentum * m + g                  (m starts at 0: first step m = g)
 *   param -= lr * (nesterov ? g + momentum * m : m)                        */
typedef struct {
    float lr;
    float momentum;
    float weight_decay;
    int nesterov;
} tr_sgd_args_t;

struct tr_backend_ops {
    const char *name;

    hora_status_t (*init)(const tr_backend_config_t *config, tr_backend_t **backend_out);
    void (*free)(tr_backend_t *backend);
    /* Wait for queued work (no-op on cpu). */
    hora_status_t (*synchronize)(tr_backend_t *backend);
    /* Bytes of backend memory for count f32 values (params, grads, stats). */
    hora_status_t (*buffer_alloc)(tr_backend_t *backend, size_t bytes, void **ptr_out);
    void (*buffer_free)(tr_backend_t *backend, void *ptr);

    /* Activations. tensor_alloc fills t (layout of the backend's choosing,
     * zeroed memory). import/export convert from/to plain NCHW f32 host
     * arrays of tr_tensor_count(t) values. */
    hora_status_t (*tensor_alloc)(tr_backend_t *backend, int n, int c, int h, int w, tr_tensor_t *t);
    void (*tensor_free)(tr_backend_t *backend, tr_tensor_t *t);
    hora_status_t (*tensor_import)(tr_backend_t *backend, const float *nchw, tr_tensor_t *t);
    hora_status_t (*tensor_export)(tr_backend_t *backend, const tr_tensor_t *t, float *nchw);

    /* Convolution. conv_backward_data's w must hold the values of the last
     * conv_forward's w (the backend may reuse its reordered copy). */
    hora_status_t (*conv_create)(tr_backend_t *backend, const tr_conv_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*conv_forward)(tr_layer_t *layer, const tr_tensor_t *x, const float *w, tr_tensor_t *y);
    hora_status_t (*conv_backward_data)(tr_layer_t *layer, const tr_tensor_t *dy, const float *w,
                                        tr_tensor_t *dx);
    hora_status_t (*conv_backward_weights)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                           float *dw);

    /* Batch norm. forward_train normalises with the batch's statistics,
     * keeps them (and the relu mask) for bn_backward, and updates the
     * running statistics (variance unbiased, n/(n-1), as PyTorch does).
     * forward_infer uses the running statistics. */
    hora_status_t (*bn_create)(tr_backend_t *backend, const tr_bn_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*bn_forward_train)(tr_layer_t *layer, const tr_tensor_t *x, const float *gamma,
                                      const float *beta, float *running_mean, float *running_var,
                                      tr_tensor_t *y);
    hora_status_t (*bn_forward_infer)(tr_layer_t *layer, const tr_tensor_t *x, const float *gamma,
                                      const float *beta, const float *running_mean,
                                      const float *running_var, tr_tensor_t *y);
    hora_status_t (*bn_backward)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                 const float *gamma, tr_tensor_t *dx, float *dgamma, float *dbeta);

    /* Pooling (max with its argmax kept for backward; global average). */
    hora_status_t (*pool_create)(tr_backend_t *backend, const tr_pool_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*pool_forward)(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y);
    hora_status_t (*pool_backward)(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx);

    /* Fully connected layer; y, dy are (n, c_out) row-major. */
    hora_status_t (*linear_create)(tr_backend_t *backend, const tr_linear_desc_t *desc,
                                   tr_layer_t **layer_out);
    hora_status_t (*linear_forward)(tr_layer_t *layer, const tr_tensor_t *x, const float *w,
                                    const float *bias, float *y);
    hora_status_t (*linear_backward_data)(tr_layer_t *layer, const float *dy, const float *w,
                                          tr_tensor_t *dx);
    hora_status_t (*linear_backward_weights)(tr_layer_t *layer, const tr_tensor_t *x, const float *dy,
                                             float *dw, float *dbias);

    void (*layer_free)(tr_layer_t *layer);

    /* Elementwise, on tensors of one shape. y may alias x (or a). */
    hora_status_t (*relu_forward)(tr_backend_t *backend, const tr_tensor_t *x, tr_tensor_t *y);
    /* dx = dy where y > 0, else 0 (y is relu's output). dx may alias dy. */
    hora_status_t (*relu_backward)(tr_backend_t *backend, const tr_tensor_t *y, const tr_tensor_t *dy,
                                   tr_tensor_t *dx);
    /* y = a + b, then relu when relu != 0 (residual join). */
    hora_status_t (*add_forward)(tr_backend_t *backend, const tr_tensor_t *a, const tr_tensor_t *b,
                                 int relu, tr_tensor_t *y);

    /* Mean softmax cross-entropy over n rows of k logits, with label
     * smoothing s (target = (1 - s) onehot + s / k). Writes *loss and
     * dlogits = d loss / d logits (already divided by n). labels in [0, k). */
    hora_status_t (*softmax_xent)(tr_backend_t *backend, const float *logits, const int32_t *labels,
                                  int n, int k, float label_smoothing, float *loss, float *dlogits);

    /* The optimizer step on one parameter tensor (see tr_sgd_args_t). */
    hora_status_t (*sgd_step)(tr_backend_t *backend, float *param, const float *grad, float *momentum_buf,
                              size_t count, const tr_sgd_args_t *args);
};

/* The backends built in; NULL for an unknown or unavailable name. */
const struct tr_backend_ops *tr_backend_find(const char *name);

/* A backend handle starts with its ops, so generic code can reach them. */
struct tr_backend {
    const struct tr_backend_ops *ops;
};

#endif
