/*
 * backend.h - the compute backend ops table (struct tr_backend_ops), contract v2.
 *
 * A backend computes the layers of a ResNet on one device: "cpu" uses
 * oneDNN (cpu/cpu_backend.c); "cuda" cuDNN + cuBLAS + kernels/
 * (cuda/cuda_backend.c). A build has either or both. Slots a backend lacks
 * point to a function returning HORA_ERR_UNSUPPORTED, never NULL.
 *
 * Layers with state (primitives, saved statistics, workspaces) are
 * tr_layer_t objects made by *_create and released by layer_free; stateless
 * ops (relu, add, loss, sgd) take the backend.
 *
 * The contract, for every op:
 * - Every argument is a tr_tensor_t saying its shape, dtype, layout and
 *   memory kind; the op checks all four and returns HORA_ERR_INVALID_ARG (the
 *   message names the argument and both shapes) when one is not what it
 *   takes. Tensors live in the backend's memory (ops->memory); host arrays
 *   cross over only through upload / download / tensor_import /
 *   tensor_export.
 * - Activations come from tensor_alloc, in the backend's layout. Parameters,
 *   their gradients, momentum and BN statistics are plain views of arenas
 *   from buffer_alloc (tr_tensor_view): conv weight OIHW (n = out, c = in, h,
 *   w), linear weight (n = out, c = in), bias/gamma/beta/mean/var (C).
 *   Logits and their gradient are plain (N, K), labels plain i32 (N), the
 *   loss a plain f32 (1), all in backend memory.
 * - Layers are not tied to a batch size: the n of a call's tensors is its
 *   batch, the layer makes (and caches) what that batch needs on first use,
 *   so a last partial batch and evaluation at any batch size just work.
 *   Descriptors say everything but the batch.
 * - Gradient outputs (dx, dw, dgamma, ...) are overwritten, not accumulated.
 * - dtypes (mixed precision). A layer computes in its descriptor's dtype
 *   (f32, bf16 or f16; compute_dtype says which this backend has): its
 *   activations, their gradients and the weights of conv and linear are
 *   tensors of that dtype, accumulation is f32 inside every op. What stays
 *   f32 whatever the compute dtype: BN gamma/beta and statistics, the linear
 *   bias, the logits and the loss. Parameter gradients (dw, dgamma, dbeta,
 *   dbias) are written in the descriptor's grad_dtype (f32, bf16 or f16:
 *   what the all-reduce sends), converted once from the op's f32
 *   accumulators. A descriptor zeroed in those fields is f32 throughout.
 *   Element-wise ops take the dtype of their tensors. Ops refuse a tensor of
 *   another dtype with HORA_ERR_INVALID_ARG; tensor_alloc refuses a dtype
 *   the backend cannot compute in with HORA_ERR_UNSUPPORTED.
 * - Ops may run asynchronously (cuda: on the backend's stream); results are
 *   ready for the host after download or synchronize, and for the runtime
 *   after the event gradient_ready gives.
 * - Statuses: HORA_OK, HORA_ERR_INVALID_ARG, HORA_ERR_NO_MEMORY,
 *   HORA_ERR_UNSUPPORTED, HORA_ERR_INTERNAL (the library below failed; the
 *   message, logged once where it happened, names the call).
 */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "hora.h"
#include "tensor.h"

typedef struct tr_backend tr_backend_t;
typedef struct tr_layer tr_layer_t;

/* What the runtime waits on before it reads a gradient: NULL when the
 * gradient is complete already (cpu); a cudaEvent_t recorded on the compute
 * stream (cuda). */
typedef void *tr_event_t;

typedef struct {
    int threads; /* compute threads; 0 = tr_threads_default(): this rank's share of its CPU affinity mask */
    int verbose; /* 1: print the implementation each primitive got */
    /* cpu: the activation layout. 0 = the backend's best: f32 blocked
     * by the CPU's vector (nChw16c with AVX-512, nChw8c with AVX2, where
     * C divides), bf16/f16 NHWC on oneDNN 3 (its brgemm kernels' layout);
     * 1, 8 or 16 force plain NCHW or that block, -1 NHWC, for every dtype
     * (tests run every layout). */
    int channel_block;
    /* cuda: time the first few engine configs cuDNN's heuristics rank for
     * each convolution (op, shape, batch) on its first use and keep the
     * fastest, instead of the first (--cudnn-autotune). The choice is then
     * a measurement: it may differ between runs, and so may the last bits
     * of the results. cpu: ignored (oneDNN picks its own). */
    int autotune;
} tr_backend_config_t;

/* Square kernels; output size (in + 2 pad - kernel) / stride + 1. No bias.
 * x, y, dy, dx and w in dtype; dw in grad_dtype. */
typedef struct {
    int c_in, h_in, w_in;
    int c_out, kernel, stride, pad;
    tr_dtype_t dtype, grad_dtype;
} tr_conv_desc_t;

/* Batch norm over (N, H, W) per channel. fuse_relu: y = relu(bn(x)) and
 * bn_backward takes the gradient with respect to that relu's output. */
typedef struct {
    int c, h, w;
    float epsilon;  /* 1e-5 */
    float momentum; /* running = (1 - momentum) running + momentum batch; 0.1 */
    int fuse_relu;
    tr_dtype_t dtype;      /* x, y, dy, dx; gamma, beta, statistics are f32 */
    tr_dtype_t grad_dtype; /* dgamma, dbeta */
} tr_bn_desc_t;

typedef enum {
    TR_POOL_MAX = 0,            /* kernel, stride, pad as given */
    TR_POOL_GLOBAL_AVERAGE = 1, /* H x W -> 1 x 1; kernel/stride/pad ignored */
} tr_pool_kind_t;

typedef struct {
    tr_pool_kind_t kind;
    int c, h, w;
    int kernel, stride, pad;
    tr_dtype_t dtype; /* x, y, dy, dx */
} tr_pool_desc_t;

/* y (N, c_out) = x (N, c_in [,1,1]) W^T + bias. x is a backend activation of
 * shape (N, c_in, 1, 1) (what global average pooling gives). x, dx, w and
 * dy in dtype; y and bias f32 (the logits feed an f32 loss); dw and dbias
 * in grad_dtype. */
typedef struct {
    int c_in, c_out;
    tr_dtype_t dtype, grad_dtype;
} tr_linear_desc_t;

/* One SGD step on count elements (PyTorch's torch.optim.SGD semantics):
 *   g = grad * grad_scale + weight_decay * param
 *   m = momentum * m + g                  (m starts at 0: first step m = g)
 *   param -= lr * (nesterov ? g + momentum * m : m)
 * grad_scale undoes the loss scale (1 / scale); 0 (a zeroed struct) means 1. */
typedef struct {
    float lr;
    float momentum;
    float weight_decay;
    int nesterov;
    float grad_scale;
} tr_sgd_args_t;

struct tr_backend_ops {
    const char *name;
    tr_memory_t memory; /* where this backend's tensors live */

    hora_status_t (*init)(const tr_backend_config_t *config, tr_backend_t **backend_out);
    void (*free)(tr_backend_t *backend);
    /* Wait until every queued op has finished (no-op on cpu). */
    hora_status_t (*synchronize)(tr_backend_t *backend);

    /* Raw backend memory (arenas for parameters, gradients, momentum, BN
     * statistics; logits, labels, loss), zeroed, 64-byte aligned. */
    hora_status_t (*buffer_alloc)(tr_backend_t *backend, size_t bytes, void **ptr_out);
    void (*buffer_free)(tr_backend_t *backend, void *ptr);

    /* Data movement between host arrays and plain backend tensors: upload
     * copies dst->bytes from host, download copies src->bytes to host (both
     * complete when they return); fill_zero zeroes a tensor of any layout.
     * gradient_ready marks the point in the backend's queue after which the
     * gradients written so far are complete, and gives what the runtime must
     * wait on before reading them (cpu: NULL, at once). */
    hora_status_t (*upload)(tr_backend_t *backend, tr_tensor_t *dst, const void *host);
    hora_status_t (*download)(tr_backend_t *backend, const tr_tensor_t *src, void *host);
    hora_status_t (*fill_zero)(tr_backend_t *backend, tr_tensor_t *t);
    hora_status_t (*gradient_ready)(tr_backend_t *backend, tr_event_t *event_out);
    /* dst = src converted (round to nearest even), two plain tensors of
     * one shape (the master weights' low-precision copy, tests). */
    hora_status_t (*cast)(tr_backend_t *backend, const tr_tensor_t *src, tr_tensor_t *dst);
    /* *nonfinite_out = 1 when any element of the plain f32/bf16/f16 tensor t
     * is inf or NaN, else 0 (the loss scaler's overflow check). */
    hora_status_t (*check_finite)(tr_backend_t *backend, const tr_tensor_t *t, int *nonfinite_out);

    /* HORA_OK when layers can compute in dtype here; else
     * HORA_ERR_UNSUPPORTED with the reason in status_message()
     * (base/status.h: "oneDNN 2.6.3 has no f16 convolution on
     * avx512_core_bf16"). Logs nothing. */
    hora_status_t (*compute_dtype)(tr_backend_t *backend, tr_dtype_t dtype);

    /* Activations. tensor_alloc fills t with a zeroed (n, c, h, w) tensor of
     * dtype in the backend's layout. tensor_import converts a plain host
     * tensor of the same shape (NCHW) into t, tensor_export t into one;
     * src/dst->n may be smaller than t's (a batch prefix: the first n
     * samples), never larger. */
    hora_status_t (*tensor_alloc)(tr_backend_t *backend, int n, int c, int h, int w, tr_dtype_t dtype, tr_tensor_t *t);
    void (*tensor_free)(tr_backend_t *backend, tr_tensor_t *t);
    hora_status_t (*tensor_import)(tr_backend_t *backend, const tr_tensor_t *host_nchw, tr_tensor_t *t);
    hora_status_t (*tensor_export)(tr_backend_t *backend, const tr_tensor_t *t, tr_tensor_t *host_nchw);

    /* The input step: t (an activation of tensor_alloc, f32/bf16/f16) =
     * the normalised pixels, (p / 255 - mean[c]) / std[c] in fp32 (p / 255
     * where std[c] is not > 0), rounded once to t's dtype: tr_aug_store's
     * arithmetic. pixels is a host u8 tensor (n, c, h, w) in TR_LAYOUT_NHWC
     * (interleaved, as decoded), n <= t->n; mean and std host arrays of c
     * floats. May be queued (cuda: an asynchronous copy on its own stream,
     * the normalisation on the compute stream after it): pixels must stay
     * unchanged until the backend next synchronizes (synchronize, or a
     * download); from host_alloc memory the copy runs without staging. */
    hora_status_t (*input_import)(tr_backend_t *backend, const tr_tensor_t *pixels, const float *mean, const float *std,
                                  tr_tensor_t *t);
    /* Host memory the backend copies from and to fastest (cuda: pinned;
     * cpu: 64-byte aligned malloc), for input batches; zeroed. */
    hora_status_t (*host_alloc)(tr_backend_t *backend, size_t bytes, void **ptr_out);
    void (*host_free)(tr_backend_t *backend, void *ptr);

    /* Convolution. conv_backward_data's w must hold the values of the last
     * conv_forward's w at the same batch size (the backend may reuse its
     * reordered copy). */
    hora_status_t (*conv_create)(tr_backend_t *backend, const tr_conv_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*conv_forward)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, tr_tensor_t *y);
    hora_status_t (*conv_backward_data)(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w,
                                        tr_tensor_t *dx);
    hora_status_t (*conv_backward_weights)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                           tr_tensor_t *dw);

    /* Batch norm. forward_train normalises with the batch's statistics,
     * keeps them (and the relu mask) for bn_backward at the same batch size,
     * and updates the running statistics (variance unbiased, m/(m-1), as
     * PyTorch does). forward_infer uses the running statistics. */
    hora_status_t (*bn_create)(tr_backend_t *backend, const tr_bn_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*bn_forward_train)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                      const tr_tensor_t *beta, tr_tensor_t *running_mean, tr_tensor_t *running_var,
                                      tr_tensor_t *y);
    hora_status_t (*bn_forward_infer)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                      const tr_tensor_t *beta, const tr_tensor_t *running_mean,
                                      const tr_tensor_t *running_var, tr_tensor_t *y);
    hora_status_t (*bn_backward)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                 const tr_tensor_t *gamma, tr_tensor_t *dx, tr_tensor_t *dgamma, tr_tensor_t *dbeta);

    /* Pooling (max with its argmax kept for backward at the same batch
     * size; global average). */
    hora_status_t (*pool_create)(tr_backend_t *backend, const tr_pool_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*pool_forward)(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y);
    hora_status_t (*pool_backward)(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx);

    /* Fully connected layer; y, dy are plain (N, c_out). */
    hora_status_t (*linear_create)(tr_backend_t *backend, const tr_linear_desc_t *desc, tr_layer_t **layer_out);
    hora_status_t (*linear_forward)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w,
                                    const tr_tensor_t *bias, tr_tensor_t *y);
    hora_status_t (*linear_backward_data)(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w,
                                          tr_tensor_t *dx);
    hora_status_t (*linear_backward_weights)(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                             tr_tensor_t *dw, tr_tensor_t *dbias);

    void (*layer_free)(tr_layer_t *layer);

    /* Elementwise, on activations of one shape. y may alias x (or a). */
    hora_status_t (*relu_forward)(tr_backend_t *backend, const tr_tensor_t *x, tr_tensor_t *y);
    /* dx = dy where y > 0, else 0 (y is relu's output). dx may alias dy. */
    hora_status_t (*relu_backward)(tr_backend_t *backend, const tr_tensor_t *y, const tr_tensor_t *dy, tr_tensor_t *dx);
    /* y = a + b, then relu when relu != 0 (residual join). */
    hora_status_t (*add_forward)(tr_backend_t *backend, const tr_tensor_t *a, const tr_tensor_t *b, int relu,
                                 tr_tensor_t *y);

    /* Mean softmax cross-entropy over the N rows of K f32 logits, with label
     * smoothing s (target = (1 - s) onehot + s / K). Writes loss (1, f32,
     * unscaled) and dlogits = grad_scale x d loss / d logits (already
     * divided by N; f32, bf16 or f16: the loss scale enters here, computed
     * in double and rounded once). labels in [0, K). */
    hora_status_t (*softmax_xent)(tr_backend_t *backend, const tr_tensor_t *logits, const tr_tensor_t *labels,
                                  float label_smoothing, float grad_scale, tr_tensor_t *loss, tr_tensor_t *dlogits);

    /* The optimizer step on one parameter tensor (see tr_sgd_args_t): param
     * and momentum f32, grad f32/bf16/f16, all of one shape. momentum may be
     * NULL when args->momentum is 0. param_lp (may be NULL): a bf16/f16 (or
     * f32) tensor of the same shape that gets the new param rounded to its
     * dtype, in the same pass (the low-precision copy layers compute with). */
    hora_status_t (*sgd_step)(tr_backend_t *backend, tr_tensor_t *param, tr_tensor_t *param_lp, const tr_tensor_t *grad,
                              tr_tensor_t *momentum, const tr_sgd_args_t *args);

    /* Order this backend's next ops after the libhora request req (an
     * all-reduce of gradients in this backend's memory) without blocking the
     * host where the device can (cuda: hora_stream_wait on the compute
     * stream); else wait for it (cpu: hora_wait). HORA_OK means queued (or
     * done); the request's own status still comes from hora_wait / hora_test,
     * which the caller must call before it frees req or trusts the result. */
    hora_status_t (*request_wait)(tr_backend_t *backend, hora_request_t req);
};

/* The backends built into this binary (cpu, cuda, or both: meson's
 * -Dtrainer_cpu and -Dcuda); NULL for an unknown or unavailable name. */
const struct tr_backend_ops *tr_backend_find(const char *name);
/* --cpu-layout's names and the tr_backend_config_t.channel_block each
 * gives: auto 0, nchw 1, nchw8c 8, nchw16c 16, nhwc -1 (NULL-terminated,
 * index i gives tr_cpu_layout_blocks[i]). */
extern const char *const tr_cpu_layout_names[];
extern const int tr_cpu_layout_blocks[];
/* "cpu", "cuda" or "cpu, cuda": the names tr_backend_find knows. */
const char *tr_backend_names(void);
/* 1 when name is a backend hora has, built into this binary or not (so a
 * caller can tell "left out of this build" from "no such backend"). */
int tr_backend_known(const char *name);

/* A backend handle starts with its ops, so generic code can reach them. */
struct tr_backend {
    const struct tr_backend_ops *ops;
};

#endif
