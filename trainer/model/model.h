/*
 * model.h - the ResNet family on a tr_backend: layout of parameters and
 * gradients, forward (train / inference) and backward with a per-parameter
 * "gradient ready" callback, so the trainer can start each all-reduce while
 * the rest of backprop runs.
 *
 * Models (tr_model_spec_from_name):
 *   resnet18/34 (basic blocks), resnet50/101/152 (bottleneck v1.5: the
 *   stride sits on the 3x3 conv) with the ImageNet stem (7x7/2 conv, BN,
 *   ReLU, 3x3/2 max pool); resnet8/20/32/44/56/110: CIFAR-style (3x3 stem, no
 *   pool, 3 stages of n basic blocks, widths 16/32/64). A shortcut is a
 *   projection (1x1 conv with the stride + BN) when the shape changes.
 *
 * Memory: every parameter lives in one arena (`params`, PyTorch's
 * named_parameters order and shapes, e.g. "layer1.0.conv1.weight"); every
 * gradient in one arena (`grads`) laid out in the order backprop produces
 * them (the reverse), each at a multiple of HORA_ALIGN_BYTES, so gradients
 * that become ready together are neighbours and a fused all-reduce can work
 * in place; momentum in a third arena, BN running statistics in a fourth.
 * The arenas are backend memory; every parameter, gradient, momentum and
 * statistic is a tr_tensor_t view into them. Activations, logits, labels
 * and the loss are backend tensors too: logits and loss reach the host only
 * through tr_model_logits / tr_model_topk / the loss download.
 *
 * Batch size: each forward takes a batch of any size n >= 1; activations
 * are made for the batch given at init and grow when a larger one comes.
 * backward works on the last forward's batch.
 */
#ifndef TR_MODEL_H
#define TR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef enum { TR_STEM_CIFAR = 0, TR_STEM_IMAGENET = 1 } tr_stem_t;
typedef enum { TR_BLOCK_BASIC = 0, TR_BLOCK_BOTTLENECK = 1 } tr_block_kind_t;

#define TR_MODEL_MAX_STAGES 4

typedef struct {
    tr_stem_t stem;
    tr_block_kind_t block;
    int stage_count;
    int blocks[TR_MODEL_MAX_STAGES]; /* blocks per stage */
    int base_width;                  /* stem width; stage i: base * 2^i (x4 out for bottleneck) */
    int in_channels, height, width;  /* input image */
    int classes;
    float bn_epsilon;      /* 1e-5 */
    float bn_momentum;     /* 0.1 */
    int zero_init_last_bn; /* gamma = 0 on the last BN of each block */
    /* Mixed precision (zero: f32 throughout). compute_dtype: activations,
     * their gradients and the conv/linear weights the layers read (a
     * low-precision copy of the f32 master weights, the params_lp arena);
     * grad_dtype: the grads arena, what the all-reduce sends. Master
     * weights, momentum, BN statistics, logits and loss stay f32. */
    tr_dtype_t compute_dtype;
    tr_dtype_t grad_dtype;
} tr_model_spec_t;

typedef enum {
    TR_PARAM_CONV_WEIGHT = 0,
    TR_PARAM_BN_GAMMA = 1,
    TR_PARAM_BN_BETA = 2,
    TR_PARAM_LINEAR_WEIGHT = 3,
    TR_PARAM_LINEAR_BIAS = 4,
} tr_param_kind_t;

typedef struct {
    char name[64]; /* torchvision-style name */
    tr_param_kind_t kind;
    int ndim;
    int dims[4]; /* PyTorch shape */
    size_t count;
    size_t offset;      /* in params (and momentum), elements */
    size_t grad_offset; /* in grads, elements of grad_dtype: at a HORA_ALIGN_BYTES multiple */
    tr_tensor_t value;  /* views of the arenas, shape dims: the f32 master */
    tr_tensor_t grad;   /* grad_dtype */
    tr_tensor_t momentum;
    tr_tensor_t compute; /* what the layers read: value (f32), else its params_lp copy */
} tr_param_t;

/* A BN layer's running statistics: mean at stats + offset, var after it. */
typedef struct {
    char name[64]; /* "layer1.0.bn1" */
    int channels;
    size_t offset;
    tr_tensor_t mean, var; /* views of the stats arena, (channels) */
} tr_bn_stats_t;

typedef struct tr_model tr_model_t;

/* Gradients start at multiples of HORA_ALIGN_BYTES in the grads arena:
 * hora's fusion alignment, so the arena's neighbours fuse in place. */
_Static_assert(HORA_ALIGN_BYTES % sizeof(float) == 0, "gradients must start at hora's fusion alignment");

/* Called during backward as soon as parameter index's gradient is final;
 * event is what to wait on before reading it (NULL: ready now; the
 * backend's gradient_ready). */
typedef void (*tr_grad_ready_fn)(void *ctx, int param_index, tr_event_t event);

/* The model's arenas. */
typedef enum {
    TR_ARENA_PARAMS = 0,
    TR_ARENA_GRADS = 1,     /* backprop order, with zero gaps for alignment */
    TR_ARENA_MOMENTUM = 2,  /* the params' layout */
    TR_ARENA_STATS = 3,     /* BN running means and variances */
    TR_ARENA_PARAMS_LP = 4, /* compute_dtype copy of params (empty in f32 runs) */
    TR_ARENA_COUNT = 5,
} tr_arena_t;

/* Fill spec for a model name with defaults for the rest (input 3x224x224 for
 * ImageNet-style, 3x32x32 for CIFAR-style; 1000 / 10 classes).
 * HORA_ERR_INVALID_ARG for an unknown name. */
hora_status_t tr_model_spec_from_name(const char *name, tr_model_spec_t *spec);
/* "resnet18, resnet34, ..." */
const char *tr_model_names(void);

/* The convolution descriptors of spec's network, in forward order (stem,
 * then each block's convs and its projection; repeats included), as
 * tr_model_init makes them: the first min(capacity, count) into descs,
 * *count_out = how many there are (call with capacity 0 to size descs).
 * Lets a backend plan its convolutions ahead (cuda/cuda_cudnn.h).
 * HORA_ERR_NO_MEMORY. */
hora_status_t tr_model_conv_descs(const tr_model_spec_t *spec, tr_conv_desc_t *descs, int capacity, int *count_out);

/* One parameter tensor of a spec's network, as a model without a backend
 * describes it (tr_model_describe). */
typedef struct {
    char name[64]; /* torchvision-style name, as in tr_param_t */
    tr_param_kind_t kind;
    size_t count;         /* elements */
    double forward_flops; /* per sample, on a conv or linear weight: its layer's forward FLOPs
                           * (2 x multiply-adds); 0 on BN parameters and the bias */
} tr_param_desc_t;

/* Every parameter of spec's network in the order backprop makes their
 * gradients ready (the grads arena's order, the reverse of PyTorch's), from
 * the declaration tr_model_init uses: no backend, no hora_init. *descs_out
 * (free() it) gets *count_out entries; set only on success.
 * HORA_ERR_INVALID_ARG for a NULL argument, HORA_ERR_NO_MEMORY. */
hora_status_t tr_model_describe(const tr_model_spec_t *spec, tr_param_desc_t **descs_out, int *count_out);

/* Build the model, with activations for batch samples (more grow them).
 * grads_shared: put the gradient arena in hora's pool of the backend's
 * memory, hora_mem_alloc or (device backends) hora_mem_alloc_device (hora
 * must be initialised, with device support for the latter). Parameters are initialised from seed
 * (Kaiming normal for convs, PyTorch's default for the linear layer, BN
 * gamma 1 / beta 0, running var 1). */
hora_status_t tr_model_init(tr_backend_t *backend, const tr_model_spec_t *spec, int batch, int grads_shared,
                            uint64_t seed, tr_model_t **model_out);
void tr_model_free(tr_model_t *model);

const tr_model_spec_t *tr_model_spec(const tr_model_t *model);
tr_backend_t *tr_model_backend(const tr_model_t *model);
/* Samples the activations hold now (the largest batch so far). */
int tr_model_capacity(const tr_model_t *model);
int tr_model_param_count(const tr_model_t *model);
const tr_param_t *tr_model_param(const tr_model_t *model, int index);
int tr_model_bn_count(const tr_model_t *model);
const tr_bn_stats_t *tr_model_bn(const tr_model_t *model, int index);
/* An arena as a 1-D plain tensor of backend memory (f32; grads in
 * grad_dtype, params_lp in compute_dtype, with no data in f32 runs); the
 * grads arena's count includes the zero gaps. */
const tr_tensor_t *tr_model_arena(const tr_model_t *model, tr_arena_t arena);

/* Forward on x, a host tensor (n, C, H, W) of any batch n >= 1: a plain
 * NCHW f32 batch (normalised already), or u8 pixels in TR_LAYOUT_NHWC,
 * normalised by the backend's input step with tr_model_set_input_norm's
 * statistics (a device backend copies the bytes, not floats, and
 * normalises on the device). train: batch statistics (and running-statistic
 * updates), kept for backward; else inference with the running statistics. */
hora_status_t tr_model_forward(tr_model_t *model, const tr_tensor_t *x, int train);
/* --profile. on: time every conv+BN unit's forward and backward from now
 * (starting afresh), the backend synchronized before and after each, so the
 * steps run slower than unprofiled ones and nothing overlaps: a table of
 * where the time goes, not a benchmark; off: stop. HORA_ERR_NO_MEMORY. */
hora_status_t tr_model_profile(tr_model_t *model, int on);
/* The table on out: per unit (model order) forward, backward and total ms
 * per training step (the mean over the steps timed) and its share of
 * step_ms (the caller's profiled step time; 0: of the units' sum), then
 * the units' sum and the rest of the step (input, pooling, the residual
 * adds, the loss, the all-reduces' waits and the optimizer). Nothing when
 * no step was timed. */
void tr_model_profile_print(const tr_model_t *model, double step_ms, FILE *out);

/* The per-channel mean and std (C floats) u8 inputs are normalised with,
 * (p / 255 - mean) / std; until set, p / 255. */
void tr_model_set_input_norm(tr_model_t *model, const float *mean, const float *std);

/* After a training forward: the loss (mean softmax cross-entropy with label
 * smoothing) against labels (host, one per sample of that batch), and the
 * gradient of every parameter, times loss_scale (> 0; 1 without loss
 * scaling), into the grads arena. grad_ready (may be NULL) is called once
 * per parameter, in the grads arena's order, the moment that gradient is
 * written. loss (may be NULL) gets the (unscaled) loss, downloaded from the
 * backend. */
hora_status_t tr_model_backward(tr_model_t *model, const int32_t *labels, float label_smoothing, float loss_scale,
                                tr_grad_ready_fn grad_ready, void *ctx, float *loss);

/* Remake the low-precision copy of every parameter from the f32 master
 * (after the master was written other than by the optimizer step: init,
 * broadcast, a checkpoint load). No-op in f32. */
hora_status_t tr_model_sync_compute(tr_model_t *model);

/* The last forward's logits, downloaded: n x classes floats into host. */
hora_status_t tr_model_logits(tr_model_t *model, float *host);

/* Count correct top-1 and top-5 predictions of the last forward against
 * labels (host, one per sample; negative labels are not counted). */
hora_status_t tr_model_topk(tr_model_t *model, const int32_t *labels, int64_t *top1, int64_t *top5);

#endif
