/*
 * model_types.h - the types the model's files share (not installed, not
 * for callers: they use model.h): the model struct, its conv+BN units and
 * blocks, the per-sample tensor list, the profile. It declares no function:
 * model_arch.c says what the network is (the named specs, every parameter in
 * PyTorch's order, the initial values; model_arch.h), model_bufs.c keeps the
 * per-sample tensors (model_bufs.h), model_build.c makes the model on a backend
 * (arenas, layers) and frees it, model_pass.c runs it (forward, backward,
 * top-k).
 */
#ifndef HORA_TRAINER_MODEL_TYPES_H
#define HORA_TRAINER_MODEL_TYPES_H

#include "model.h"

#define B_OPS(m) ((m)->backend->ops)
#define P(m, i) (&(m)->params[i].value)
#define G(m, i) (&(m)->params[i].grad)
#define PC(m, i) (&(m)->params[i].compute) /* the weights the layers read */

typedef struct {
    tr_layer_t *conv;
    tr_layer_t *bn;
    tr_conv_desc_t desc;
    int h_out, w_out;
    int relu;              /* ReLU fused into the BN */
    int w, gamma, beta;    /* parameter indices */
    int stats;             /* index into model->bns */
    const tr_tensor_t *in; /* input activation (owned elsewhere) */
    tr_tensor_t conv_out;  /* (N, c_out, h, w) before BN */
    tr_tensor_t out;       /* after BN (+ ReLU) */
    tr_tensor_t d_conv;    /* gradient w.r.t. conv_out */
    tr_tensor_t d_out;     /* gradient w.r.t. out (written by the consumer); unallocated in a
                            * block's last conv_bn and projection, which read the block's */
} convbn_t;

/* --profile (tr_model_profile): per conv+BN unit, the seconds its
 * forward and backward took, summed over the steps timed. */
#define MODEL_PROFILE_UNITS 128
typedef struct {
    const void *key; /* the unit's convbn_t */
    char name[64];   /* its convolution's, "layer1.0.conv1" */
    double s[2];     /* forward, backward */
} model_prof_unit_t;

typedef struct {
    int steps; /* training forwards timed */
    int count;
    model_prof_unit_t units[MODEL_PROFILE_UNITS];
} model_profile_t;

typedef struct {
    int conv_count; /* 2 basic, 3 bottleneck */
    convbn_t cb[3];
    int has_proj;
    convbn_t proj;
    const tr_tensor_t *in;
    tr_tensor_t *d_in; /* where the gradient w.r.t. in goes; NULL: not needed */
    tr_tensor_t out;   /* relu(cb[last].out + shortcut) */
    tr_tensor_t d_out;
    tr_tensor_t d_main;  /* scratch: gradient of in through the main path */
    tr_tensor_t d_short; /* scratch: through the projection */
} block_t;

/* A per-sample tensor of the model: an activation (tensor_alloc, the
 * backend's layout) or a plain tensor (buffer_alloc) of (rows) or (rows,
 * cols). */
typedef struct {
    tr_tensor_t *t;
    int plain_ndim; /* 0: an activation; 1 or 2: plain */
    int c, h, w;    /* activation: per-sample shape; plain: cols in c */
    tr_dtype_t dtype;
    size_t sample_bytes; /* bytes per sample, set when allocated */
} model_buf_t;

struct tr_model {
    tr_backend_t *backend;
    tr_model_spec_t spec;
    int capacity;                      /* samples every per-sample tensor holds */
    int batch;                         /* the n of the per-sample tensors now */
    int forward_train;                 /* the last forward was a training one (backward may follow) */
    float input_mean[4], input_std[4]; /* u8 inputs' normalisation (tr_model_set_input_norm) */
    model_profile_t *profile;          /* NULL: not profiling */

    tr_param_t *params;
    int param_count, param_capacity;
    tr_bn_stats_t *bns;
    int bn_count, bn_capacity;
    size_t params_count, stats_count;
    size_t grads_count; /* the grads arena: params_count plus alignment gaps */
    tr_tensor_t arenas[TR_ARENA_COUNT];
    int grads_shared;

    model_buf_t *bufs;
    int buf_count, buf_capacity;

    convbn_t stem;
    tr_layer_t *maxpool;
    tr_tensor_t pool_out, d_pool_out;
    block_t *blocks;
    int block_count;
    tr_layer_t *avgpool;
    tr_tensor_t avg_out, d_avg_out;
    tr_layer_t *fc;
    int fc_w, fc_b;
    tr_tensor_t input;
    tr_tensor_t logits, dlogits, labels, loss;
    float *logits_host; /* capacity x classes: tr_model_topk's download */
};

static inline int conv_out_size(int in, int kernel, int stride, int pad)
{
    return (in + 2 * pad - kernel) / stride + 1;
}

#endif
