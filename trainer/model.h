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
 * them (the reverse), so gradients that become ready together are
 * neighbours and a fused all-reduce can work in place. BN running
 * statistics live in a third arena (`stats`).
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
    float bn_epsilon;                /* 1e-5 */
    float bn_momentum;               /* 0.1 */
    int zero_init_last_bn;           /* gamma = 0 on the last BN of each block */
} tr_model_spec_t;

typedef enum {
    TR_PARAM_CONV_WEIGHT = 0,
    TR_PARAM_BN_GAMMA = 1,
    TR_PARAM_BN_BETA = 2,
    TR_PARAM_LINEAR_WEIGHT = 3,
    TR_PARAM_LINEAR_BIAS = 4,
} tr_param_kind_t;

typedef struct {
    char name[64];          /* torchvision-style name */
    tr_param_kind_t kind;
    int ndim;
    int dims[4];            /* PyTorch shape */
    size_t count;
    size_t offset;          /* in params (and momentum), elements */
    size_t grad_offset;     /* in grads, elements: a multiple of TR_GRAD_ALIGN */
} tr_param_t;

/* A BN layer's running statistics: mean at stats + offset, var after it. */
typedef struct {
    char name[64];          /* "layer1.0.bn1" */
    int channels;
    size_t offset;
} tr_bn_stats_t;

typedef struct tr_model tr_model_t;

/* Gradients start at multiples of 16 floats (64 bytes, hora's fusion alignment). */
#define TR_GRAD_ALIGN 16

/* Called during backward as soon as parameter index's gradient is final. */
typedef void (*tr_grad_ready_fn)(void *ctx, int param_index);

/* Fill spec for a model name with defaults for the rest (input 3x224x224 for
 * ImageNet-style, 3x32x32 for CIFAR-style; 1000 / 10 classes).
 * HORA_ERR_INVALID_ARG for an unknown name. */
hora_status_t tr_model_spec_from_name(const char *name, tr_model_spec_t *spec);
/* "resnet18, resnet34, ..." */
const char *tr_model_names(void);

/* Build the model for batch samples per step. grads_shared: put the gradient
 * arena in hora_mem_alloc memory (hora must be initialised). Parameters are
 * initialised from seed (Kaiming normal for convs, PyTorch's default for the
 * linear layer, BN gamma 1 / beta 0, running var 1). */
hora_status_t tr_model_init(tr_backend_t *backend, const tr_model_spec_t *spec, int batch,
                            int grads_shared, uint64_t seed, tr_model_t **model_out);
void tr_model_free(tr_model_t *model);

const tr_model_spec_t *tr_model_spec(const tr_model_t *model);
tr_backend_t *tr_model_backend(const tr_model_t *model);
int tr_model_batch(const tr_model_t *model);
int tr_model_param_count(const tr_model_t *model);
const tr_param_t *tr_model_param(const tr_model_t *model, int index);
int tr_model_bn_count(const tr_model_t *model);
const tr_bn_stats_t *tr_model_bn(const tr_model_t *model, int index);
float *tr_model_params(tr_model_t *model, size_t *count);   /* the arena */
/* The gradient arena, in backprop order, each parameter's gradient at
 * grad_offset (a multiple of TR_GRAD_ALIGN); count includes the zero gaps. */
float *tr_model_grads(tr_model_t *model, size_t *count);
float *tr_model_momentum(tr_model_t *model, size_t *count);
float *tr_model_stats(tr_model_t *model, size_t *count);

/* Forward on x, a plain NCHW f32 host batch of tr_model_batch samples.
 * train: batch statistics (and running-statistic updates), kept for
 * backward; else inference with the running statistics. logits (batch x
 * classes) stay valid until the next forward (tr_model_logits). */
hora_status_t tr_model_forward(tr_model_t *model, const float *x, int train);
const float *tr_model_logits(const tr_model_t *model);

/* Loss of the last forward (mean softmax cross-entropy with label smoothing)
 * and the gradient of every parameter (into the grads arena). grad_ready
 * (may be NULL) is called once per parameter, in the grads arena's order,
 * the moment that gradient is written. */
hora_status_t tr_model_backward(tr_model_t *model, const int32_t *labels, float label_smoothing,
                                tr_grad_ready_fn grad_ready, void *ctx, float *loss);

/* Count correct top-1 and top-5 predictions in the first count rows of the
 * last forward's logits. */
void tr_model_topk(const tr_model_t *model, const int32_t *labels, int count, int64_t *top1,
                   int64_t *top5);

#endif
