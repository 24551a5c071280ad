/*
 * model.c - ResNet graph on the backend ops: building (parameters, layers,
 * activation tensors), forward, backward. See model.h.
 *
 * The network is a fixed chain: stem (conv-BN-ReLU [+ max pool]), residual
 * blocks, global average pool, linear. Each conv is followed by a BN, so the
 * unit of work is a conv_bn (ReLU fused into the BN where one follows).
 * Every activation has its own tensor and its own gradient tensor: memory is
 * plentiful on the host and it keeps backward free of aliasing rules.
 *
 * Batch size: every per-sample tensor (activations, logits, labels) is
 * registered in model->bufs when it is made, for the model's capacity of
 * samples; a call with batch n sets each one's n (its first n samples: every
 * layout here keeps the batch outermost), and a batch above the capacity
 * first remakes them all bigger.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define B_OPS(m) ((m)->backend->ops)

typedef struct {
    tr_layer_t *conv;
    tr_layer_t *bn;
    tr_conv_desc_t desc;
    int h_out, w_out;
    int relu;               /* ReLU fused into the BN */
    int w, gamma, beta;     /* parameter indices */
    int stats;              /* index into model->bns */
    const tr_tensor_t *in;  /* input activation (owned elsewhere) */
    tr_tensor_t conv_out;   /* (N, c_out, h, w) before BN */
    tr_tensor_t out;        /* after BN (+ ReLU) */
    tr_tensor_t d_conv;     /* gradient w.r.t. conv_out */
    tr_tensor_t d_out;      /* gradient w.r.t. out (written by the consumer); unallocated in a
                             * block's last conv_bn and projection, which read the block's */
} convbn_t;

typedef struct {
    int conv_count;          /* 2 basic, 3 bottleneck */
    convbn_t cb[3];
    int has_proj;
    convbn_t proj;
    const tr_tensor_t *in;
    tr_tensor_t *d_in;       /* where the gradient w.r.t. in goes; NULL: not needed */
    tr_tensor_t out;         /* relu(cb[last].out + shortcut) */
    tr_tensor_t d_out;
    tr_tensor_t d_main;      /* scratch: gradient of in through the main path */
    tr_tensor_t d_short;     /* scratch: through the projection */
} block_t;

/* A per-sample tensor of the model: an activation (tensor_alloc, the
 * backend's layout) or a plain tensor (buffer_alloc) of (rows) or (rows,
 * cols). */
typedef struct {
    tr_tensor_t *t;
    int plain_ndim;         /* 0: an activation; 1 or 2: plain */
    int c, h, w;            /* activation: per-sample shape; plain: cols in c */
    tr_dtype_t dtype;
    size_t sample_bytes;    /* bytes per sample, set when allocated */
} model_buf_t;

struct tr_model {
    tr_backend_t *backend;
    tr_model_spec_t spec;
    int capacity;           /* samples every per-sample tensor holds */
    int batch;              /* the n of the per-sample tensors now */
    int forward_train;      /* the last forward was a training one (backward may follow) */

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
    float *logits_host;     /* capacity x classes: tr_model_topk's download */
};

/* ---- specs ---------------------------------------------------------------- */

static const struct {
    const char *name;
    tr_stem_t stem;
    tr_block_kind_t block;
    int stages;
    int blocks[TR_MODEL_MAX_STAGES];
} model_table[] = {
    {"resnet18", TR_STEM_IMAGENET, TR_BLOCK_BASIC, 4, {2, 2, 2, 2}},
    {"resnet34", TR_STEM_IMAGENET, TR_BLOCK_BASIC, 4, {3, 4, 6, 3}},
    {"resnet50", TR_STEM_IMAGENET, TR_BLOCK_BOTTLENECK, 4, {3, 4, 6, 3}},
    {"resnet101", TR_STEM_IMAGENET, TR_BLOCK_BOTTLENECK, 4, {3, 4, 23, 3}},
    {"resnet152", TR_STEM_IMAGENET, TR_BLOCK_BOTTLENECK, 4, {3, 8, 36, 3}},
    {"resnet8", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {1, 1, 1}},
    {"resnet20", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {3, 3, 3}},
    {"resnet32", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {5, 5, 5}},
    {"resnet44", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {7, 7, 7}},
    {"resnet56", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {9, 9, 9}},
    {"resnet110", TR_STEM_CIFAR, TR_BLOCK_BASIC, 3, {18, 18, 18}},
};

const char *tr_model_names(void)
{
    return "resnet18, resnet34, resnet50, resnet101, resnet152 (ImageNet stem); "
           "resnet8, resnet20, resnet32, resnet44, resnet56, resnet110 (CIFAR-style)";
}

hora_status_t tr_model_spec_from_name(const char *name, tr_model_spec_t *spec)
{
    for (size_t i = 0; i < sizeof(model_table) / sizeof(model_table[0]); i++) {
        if (strcmp(name, model_table[i].name) != 0)
            continue;
        tr_model_spec_t s = {0};
        s.stem = model_table[i].stem;
        s.block = model_table[i].block;
        s.stage_count = model_table[i].stages;
        memcpy(s.blocks, model_table[i].blocks, sizeof(s.blocks));
        int imagenet = s.stem == TR_STEM_IMAGENET;
        s.base_width = imagenet ? 64 : 16;
        s.in_channels = 3;
        s.height = s.width = imagenet ? 224 : 32;
        s.classes = imagenet ? 1000 : 10;
        s.bn_epsilon = 1e-5f;
        s.bn_momentum = 0.1f;
        s.zero_init_last_bn = 1;
        *spec = s;
        return HORA_OK;
    }
    fprintf(stderr, "hora-train: unknown model '%s' (known: %s)\n", name, tr_model_names());
    return HORA_ERR_INVALID_ARG;
}

/* ---- declaring ------------------------------------------------------------ */

static int add_param(tr_model_t *m, const char *prefix, const char *suffix, tr_param_kind_t kind,
                     int ndim, int d0, int d1, int d2, int d3)
{
    if (m->param_count == m->param_capacity) {
        int cap = m->param_capacity ? 2 * m->param_capacity : 64;
        tr_param_t *p = realloc(m->params, (size_t)cap * sizeof(*p));
        if (!p)
            return -1;
        m->params = p;
        m->param_capacity = cap;
    }
    tr_param_t *p = &m->params[m->param_count];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s%s", prefix, suffix);
    p->kind = kind;
    p->ndim = ndim;
    int dims[4] = {d0, d1, d2, d3};
    p->count = 1;
    for (int i = 0; i < ndim; i++) {
        p->dims[i] = dims[i];
        p->count *= (size_t)dims[i];
    }
    p->offset = m->params_count;
    m->params_count += p->count;
    return m->param_count++;
}

static int add_bn_stats(tr_model_t *m, const char *name, int channels)
{
    if (m->bn_count == m->bn_capacity) {
        int cap = m->bn_capacity ? 2 * m->bn_capacity : 64;
        tr_bn_stats_t *b = realloc(m->bns, (size_t)cap * sizeof(*b));
        if (!b)
            return -1;
        m->bns = b;
        m->bn_capacity = cap;
    }
    tr_bn_stats_t *b = &m->bns[m->bn_count];
    memset(b, 0, sizeof(*b));
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->channels = channels;
    b->offset = m->stats_count;
    m->stats_count += 2 * (size_t)channels;
    return m->bn_count++;
}

static int conv_out_size(int in, int kernel, int stride, int pad)
{
    return (in + 2 * pad - kernel) / stride + 1;
}

/* Declare a conv_bn's parameters (first pass: shapes only). */
static hora_status_t convbn_declare(tr_model_t *m, convbn_t *u, const char *conv_name,
                                    const char *bn_name, int c_in, int h, int w, int c_out,
                                    int kernel, int stride, int relu)
{
    u->desc = (tr_conv_desc_t){.c_in = c_in, .h_in = h, .w_in = w, .c_out = c_out,
                               .kernel = kernel, .stride = stride, .pad = kernel / 2};
    u->h_out = conv_out_size(h, kernel, stride, kernel / 2);
    u->w_out = conv_out_size(w, kernel, stride, kernel / 2);
    u->relu = relu;
    u->w = add_param(m, conv_name, ".weight", TR_PARAM_CONV_WEIGHT, 4, c_out, c_in, kernel, kernel);
    u->gamma = add_param(m, bn_name, ".weight", TR_PARAM_BN_GAMMA, 1, c_out, 0, 0, 0);
    u->beta = add_param(m, bn_name, ".bias", TR_PARAM_BN_BETA, 1, c_out, 0, 0, 0);
    u->stats = add_bn_stats(m, bn_name, c_out);
    if (u->w < 0 || u->gamma < 0 || u->beta < 0 || u->stats < 0)
        return HORA_ERR_NO_MEMORY;
    return HORA_OK;
}

/* Declare every parameter in PyTorch's order; records block shapes. */
static hora_status_t model_declare(tr_model_t *m)
{
    const tr_model_spec_t *s = &m->spec;
    int imagenet = s->stem == TR_STEM_IMAGENET;
    int h = s->height, w = s->width, c = s->base_width;
    hora_status_t status;

    status = convbn_declare(m, &m->stem, "conv1", "bn1", s->in_channels, h, w, c, imagenet ? 7 : 3,
                            imagenet ? 2 : 1, 1);
    if (status != HORA_OK)
        return status;
    h = m->stem.h_out;
    w = m->stem.w_out;
    if (imagenet) {
        h = conv_out_size(h, 3, 2, 1);
        w = conv_out_size(w, 3, 2, 1);
    }

    m->block_count = 0;
    for (int i = 0; i < s->stage_count; i++)
        m->block_count += s->blocks[i];
    m->blocks = calloc((size_t)m->block_count, sizeof(*m->blocks));
    if (!m->blocks)
        return HORA_ERR_NO_MEMORY;

    int bottleneck = s->block == TR_BLOCK_BOTTLENECK;
    int bi = 0;
    for (int st = 0; st < s->stage_count; st++) {
        int width = s->base_width << st;
        int c_out = bottleneck ? 4 * width : width;
        for (int k = 0; k < s->blocks[st]; k++, bi++) {
            block_t *b = &m->blocks[bi];
            int stride = (k == 0 && st > 0) ? 2 : 1;
            char pre[48], cn[64], bn[64];
            snprintf(pre, sizeof(pre), "layer%d.%d.", st + 1, k);
            b->conv_count = bottleneck ? 3 : 2;
            int ho = conv_out_size(h, 3, stride, 1), wo = conv_out_size(w, 3, stride, 1);
            if (bottleneck) {
                /* v1.5: 1x1 reduce, 3x3 with the stride, 1x1 expand. */
                int ks[3] = {1, 3, 1}, cin[3] = {c, width, width}, cout[3] = {width, width, c_out};
                int hs[3] = {h, h, ho}, ws[3] = {w, w, wo}, ss[3] = {1, stride, 1};
                for (int j = 0; j < 3; j++) {
                    snprintf(cn, sizeof(cn), "%sconv%d", pre, j + 1);
                    snprintf(bn, sizeof(bn), "%sbn%d", pre, j + 1);
                    status = convbn_declare(m, &b->cb[j], cn, bn, cin[j], hs[j], ws[j], cout[j], ks[j],
                                            ss[j], j < 2);
                    if (status != HORA_OK)
                        return status;
                }
            } else {
                int cin[2] = {c, width}, hs[2] = {h, ho}, ws[2] = {w, wo}, ss[2] = {stride, 1};
                for (int j = 0; j < 2; j++) {
                    snprintf(cn, sizeof(cn), "%sconv%d", pre, j + 1);
                    snprintf(bn, sizeof(bn), "%sbn%d", pre, j + 1);
                    status = convbn_declare(m, &b->cb[j], cn, bn, cin[j], hs[j], ws[j], width, 3, ss[j],
                                            j < 1);
                    if (status != HORA_OK)
                        return status;
                }
            }
            b->has_proj = stride != 1 || c != c_out;
            if (b->has_proj) {
                snprintf(cn, sizeof(cn), "%sdownsample.0", pre);
                snprintf(bn, sizeof(bn), "%sdownsample.1", pre);
                status = convbn_declare(m, &b->proj, cn, bn, c, h, w, c_out, 1, stride, 0);
                if (status != HORA_OK)
                    return status;
            }
            h = ho;
            w = wo;
            c = c_out;
        }
    }
    m->fc_w = add_param(m, "fc", ".weight", TR_PARAM_LINEAR_WEIGHT, 2, s->classes, c, 0, 0);
    m->fc_b = add_param(m, "fc", ".bias", TR_PARAM_LINEAR_BIAS, 1, s->classes, 0, 0, 0);
    if (m->fc_w < 0 || m->fc_b < 0)
        return HORA_ERR_NO_MEMORY;
    return HORA_OK;
}

/* ---- per-sample tensors --------------------------------------------------- */

static hora_status_t model_buf_add(tr_model_t *m, tr_tensor_t *t, int plain_ndim, int c, int h, int w,
                                   tr_dtype_t dtype)
{
    if (m->buf_count == m->buf_capacity) {
        int cap = m->buf_capacity ? 2 * m->buf_capacity : 128;
        model_buf_t *b = realloc(m->bufs, (size_t)cap * sizeof(*b));
        if (!b)
            return HORA_ERR_NO_MEMORY;
        m->bufs = b;
        m->buf_capacity = cap;
    }
    m->bufs[m->buf_count++] =
        (model_buf_t){.t = t, .plain_ndim = plain_ndim, .c = c, .h = h, .w = w, .dtype = dtype};
    return HORA_OK;
}

static hora_status_t model_act(tr_model_t *m, tr_tensor_t *t, int c, int h, int w)
{
    return model_buf_add(m, t, 0, c, h, w, TR_DTYPE_F32);
}

static void model_buf_release(tr_model_t *m, model_buf_t *b)
{
    if (!b->t->data)
        return;
    if (b->plain_ndim)
        B_OPS(m)->buffer_free(m->backend, b->t->data);
    else
        B_OPS(m)->tensor_free(m->backend, b->t);
    b->t->data = NULL;
}

/* (Re)make every per-sample tensor for capacity samples. */
static hora_status_t model_bufs_alloc(tr_model_t *m, int capacity)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    for (int i = 0; i < m->buf_count; i++) {
        model_buf_t *b = &m->bufs[i];
        model_buf_release(m, b);
        hora_status_t status;
        if (b->plain_ndim) {
            void *data = NULL;
            size_t bytes = (size_t)capacity * (size_t)b->c * tr_dtype_size(b->dtype);
            status = ops->buffer_alloc(m->backend, bytes, &data);
            if (status == HORA_OK)
                *b->t = tr_tensor_plain(data, b->dtype, ops->memory, b->plain_ndim, (const int[]){capacity, b->c});
        } else {
            status = ops->tensor_alloc(m->backend, capacity, b->c, b->h, b->w, b->dtype, b->t);
        }
        if (status != HORA_OK)
            return status;
        b->sample_bytes = b->t->bytes / (size_t)capacity;
    }
    float *host = realloc(m->logits_host, (size_t)capacity * (size_t)m->spec.classes * sizeof(float));
    if (!host)
        return HORA_ERR_NO_MEMORY;
    m->logits_host = host;
    m->capacity = m->batch = capacity;
    m->forward_train = 0;
    return HORA_OK;
}

/* Point every per-sample tensor at its first n samples (n <= capacity). */
static void model_set_batch(tr_model_t *m, int n)
{
    for (int i = 0; i < m->buf_count; i++) {
        model_buf_t *b = &m->bufs[i];
        b->t->n = n;
        b->t->bytes = b->sample_bytes * (size_t)n;
    }
    m->batch = n;
}

/* ---- building ------------------------------------------------------------- */

/* Layers and tensors of a conv_bn. need_d_out: the conv_bn's own gradient
 * tensor; a block's last conv_bn and its projection read the block's
 * gradient instead (block_backward), so they have none. */
static hora_status_t convbn_build(tr_model_t *m, convbn_t *u, const tr_tensor_t *in, int need_d_out)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_conv_desc_t *d = &u->desc;
    hora_status_t status;
    u->in = in;
    status = ops->conv_create(m->backend, d, &u->conv);
    if (status != HORA_OK)
        return status;
    tr_bn_desc_t bd = {.c = d->c_out, .h = u->h_out, .w = u->w_out, .epsilon = m->spec.bn_epsilon,
                       .momentum = m->spec.bn_momentum, .fuse_relu = u->relu};
    status = ops->bn_create(m->backend, &bd, &u->bn);
    if (status != HORA_OK)
        return status;
    tr_tensor_t *ts[] = {&u->conv_out, &u->out, &u->d_conv, &u->d_out};
    for (int i = 0; i < (need_d_out ? 4 : 3) && status == HORA_OK; i++)
        status = model_act(m, ts[i], d->c_out, u->h_out, u->w_out);
    return status;
}

static void convbn_free(tr_model_t *m, convbn_t *u)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    if (u->conv)
        ops->layer_free(u->conv);
    if (u->bn)
        ops->layer_free(u->bn);
}

static hora_status_t model_build_layers(tr_model_t *m)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_model_spec_t *s = &m->spec;
    hora_status_t status;

    status = model_act(m, &m->input, s->in_channels, s->height, s->width);
    if (status == HORA_OK)
        status = convbn_build(m, &m->stem, &m->input, 1);
    if (status != HORA_OK)
        return status;
    const tr_tensor_t *cur = &m->stem.out;
    tr_tensor_t *d_cur = &m->stem.d_out;
    int c = m->stem.desc.c_out, h = m->stem.h_out, w = m->stem.w_out;
    if (s->stem == TR_STEM_IMAGENET) {
        tr_pool_desc_t pd = {.kind = TR_POOL_MAX, .c = c, .h = h, .w = w, .kernel = 3, .stride = 2, .pad = 1};
        status = ops->pool_create(m->backend, &pd, &m->maxpool);
        if (status != HORA_OK)
            return status;
        h = conv_out_size(h, 3, 2, 1);
        w = conv_out_size(w, 3, 2, 1);
        status = model_act(m, &m->pool_out, c, h, w);
        if (status == HORA_OK)
            status = model_act(m, &m->d_pool_out, c, h, w);
        if (status != HORA_OK)
            return status;
        cur = &m->pool_out;
        d_cur = &m->d_pool_out;
    }
    for (int i = 0; i < m->block_count; i++) {
        block_t *b = &m->blocks[i];
        b->in = cur;
        b->d_in = d_cur;
        const tr_tensor_t *x = cur;
        for (int j = 0; j < b->conv_count; j++) {
            status = convbn_build(m, &b->cb[j], x, j < b->conv_count - 1);
            if (status != HORA_OK)
                return status;
            x = &b->cb[j].out;
        }
        if (b->has_proj) {
            status = convbn_build(m, &b->proj, cur, 0);
            if (status != HORA_OK)
                return status;
        }
        const convbn_t *last = &b->cb[b->conv_count - 1];
        const int oc = last->desc.c_out, oh = last->h_out, ow = last->w_out;
        status = model_act(m, &b->out, oc, oh, ow);
        if (status == HORA_OK)
            status = model_act(m, &b->d_out, oc, oh, ow);
        if (status == HORA_OK)
            status = model_act(m, &b->d_main, c, h, w);
        if (status == HORA_OK && b->has_proj)
            status = model_act(m, &b->d_short, c, h, w);
        if (status != HORA_OK)
            return status;
        cur = &b->out;
        d_cur = &b->d_out;
        c = oc;
        h = oh;
        w = ow;
    }
    tr_pool_desc_t ad = {.kind = TR_POOL_GLOBAL_AVERAGE, .c = c, .h = h, .w = w};
    status = ops->pool_create(m->backend, &ad, &m->avgpool);
    if (status == HORA_OK)
        status = model_act(m, &m->avg_out, c, 1, 1);
    if (status == HORA_OK)
        status = model_act(m, &m->d_avg_out, c, 1, 1);
    if (status != HORA_OK)
        return status;
    tr_linear_desc_t ld = {.c_in = c, .c_out = s->classes};
    status = ops->linear_create(m->backend, &ld, &m->fc);
    if (status == HORA_OK)
        status = model_buf_add(m, &m->logits, 2, s->classes, 1, 1, TR_DTYPE_F32); /* (N, K) */
    if (status == HORA_OK)
        status = model_buf_add(m, &m->dlogits, 2, s->classes, 1, 1, TR_DTYPE_F32);
    if (status == HORA_OK)
        status = model_buf_add(m, &m->labels, 1, 1, 1, 1, TR_DTYPE_I32); /* (N) */
    return status;
}

/* ---- initial values ------------------------------------------------------- */

/* The initialisation stream: splitmix64 (data/rng.h) from one seed, the same
 * on every rank. */
static double rng_uniform(tr_rng_t *rng) /* (0, 1) */
{
    return ((double)(tr_rng_next(rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rng_normal(tr_rng_t *rng)
{
    double u1 = rng_uniform(rng), u2 = rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Initial parameters and statistics, made on the host and uploaded. */
static hora_status_t model_init_values(tr_model_t *m, uint64_t seed)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    tr_rng_t rng = {.state = seed ^ 0x686f72612d696e69ULL};
    float *params = calloc(m->params_count ? m->params_count : 1, sizeof(float));
    float *stats = calloc(m->stats_count ? m->stats_count : 1, sizeof(float));
    if (!params || !stats) {
        free(params);
        free(stats);
        return HORA_ERR_NO_MEMORY;
    }
    int fc_in = m->params[m->fc_w].dims[1];
    for (int i = 0; i < m->param_count; i++) {
        tr_param_t *p = &m->params[i];
        float *v = params + p->offset;
        switch (p->kind) {
        case TR_PARAM_CONV_WEIGHT: {
            /* Kaiming normal, fan_out mode, gain sqrt(2) (torchvision's ResNet). */
            double std = sqrt(2.0 / ((double)p->dims[0] * p->dims[2] * p->dims[3]));
            for (size_t k = 0; k < p->count; k++)
                v[k] = (float)(std * rng_normal(&rng));
            break;
        }
        case TR_PARAM_BN_GAMMA:
            for (size_t k = 0; k < p->count; k++)
                v[k] = 1.0f;
            break;
        case TR_PARAM_BN_BETA:
            break; /* zeros */
        case TR_PARAM_LINEAR_WEIGHT:
        case TR_PARAM_LINEAR_BIAS: {
            /* nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)). */
            double bound = 1.0 / sqrt((double)fc_in);
            for (size_t k = 0; k < p->count; k++)
                v[k] = (float)(bound * (2.0 * rng_uniform(&rng) - 1.0));
            break;
        }
        }
    }
    if (m->spec.zero_init_last_bn) {
        for (int i = 0; i < m->block_count; i++) {
            block_t *b = &m->blocks[i];
            tr_param_t *g = &m->params[b->cb[b->conv_count - 1].gamma];
            memset(params + g->offset, 0, g->count * sizeof(float));
        }
    }
    for (int i = 0; i < m->bn_count; i++) /* running mean 0, running var 1 */
        for (int k = 0; k < m->bns[i].channels; k++)
            stats[m->bns[i].offset + (size_t)m->bns[i].channels + (size_t)k] = 1.0f;
    hora_status_t status = ops->upload(m->backend, &m->arenas[TR_ARENA_PARAMS], params);
    if (status == HORA_OK)
        status = ops->upload(m->backend, &m->arenas[TR_ARENA_STATS], stats);
    free(params);
    free(stats);
    return status;
}

/* ---- init / free ---------------------------------------------------------- */

/* The four arenas and every parameter's and statistic's views of them. */
static hora_status_t model_alloc_arenas(tr_model_t *m, int grads_shared)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const size_t counts[TR_ARENA_COUNT] = {m->params_count, m->grads_count, m->params_count, m->stats_count};
    if (grads_shared && ops->memory != TR_MEMORY_HOST) {
        fprintf(stderr, "hora-train: the %s backend's gradients cannot live in hora_mem_alloc memory yet\n",
                ops->name);
        return HORA_ERR_UNSUPPORTED;
    }
    for (int a = 0; a < TR_ARENA_COUNT; a++) {
        void *data = NULL;
        size_t bytes = counts[a] * sizeof(float);
        hora_status_t status;
        if (counts[a] > INT32_MAX) {
            fprintf(stderr, "hora-train: %zu values in one arena: more than a tensor holds\n", counts[a]);
            return HORA_ERR_INVALID_ARG;
        }
        if (a == TR_ARENA_GRADS && grads_shared) {
            status = hora_mem_alloc(bytes ? bytes : sizeof(float), &data);
            if (status != HORA_OK)
                fprintf(stderr, "hora-train: hora_mem_alloc of the %zu-byte gradient arena: %s\n", bytes,
                        hora_last_error());
            else
                m->grads_shared = 1;
        } else {
            status = ops->buffer_alloc(m->backend, bytes ? bytes : sizeof(float), &data);
        }
        if (status != HORA_OK)
            return status;
        m->arenas[a] = tr_tensor_plain(data, TR_DTYPE_F32, ops->memory, 1, (const int[]){(int)counts[a]});
        /* Zero: momentum starts at 0, and the grads arena's alignment gaps
         * must stay 0 (all-reducing zeros gives zeros). */
        status = ops->fill_zero(m->backend, &m->arenas[a]);
        if (status != HORA_OK)
            return status;
    }
    for (int i = 0; i < m->param_count; i++) {
        tr_param_t *p = &m->params[i];
        p->value = tr_tensor_view(&m->arenas[TR_ARENA_PARAMS], p->offset, p->ndim, p->dims);
        p->grad = tr_tensor_view(&m->arenas[TR_ARENA_GRADS], p->grad_offset, p->ndim, p->dims);
        p->momentum = tr_tensor_view(&m->arenas[TR_ARENA_MOMENTUM], p->offset, p->ndim, p->dims);
    }
    for (int i = 0; i < m->bn_count; i++) {
        tr_bn_stats_t *b = &m->bns[i];
        b->mean = tr_tensor_view(&m->arenas[TR_ARENA_STATS], b->offset, 1, &b->channels);
        b->var = tr_tensor_view(&m->arenas[TR_ARENA_STATS], b->offset + (size_t)b->channels, 1, &b->channels);
    }
    return HORA_OK;
}

hora_status_t tr_model_init(tr_backend_t *backend, const tr_model_spec_t *spec, int batch,
                            int grads_shared, uint64_t seed, tr_model_t **model_out)
{
    if (!backend || !spec || !model_out || batch <= 0 || spec->stage_count < 1 ||
        spec->stage_count > TR_MODEL_MAX_STAGES || spec->base_width <= 0 || spec->classes <= 0 ||
        spec->in_channels <= 0 || spec->height <= 0 || spec->width <= 0) {
        fprintf(stderr, "hora-train: invalid model spec or batch %d\n", batch);
        return HORA_ERR_INVALID_ARG;
    }
    tr_model_t *m = calloc(1, sizeof(*m));
    if (!m)
        return HORA_ERR_NO_MEMORY;
    m->backend = backend;
    m->spec = *spec;
    hora_status_t status = model_declare(m);
    if (status != HORA_OK)
        goto err_free;

    /* Gradients in the order backprop writes them: the reverse of the
     * parameter order (backward walks the network from the head, and each
     * conv_bn's BN gradients come before its conv's, as declared reversed),
     * each at a multiple of TR_GRAD_ALIGN elements. hora packs a fused
     * response at HORA_ALIGN_BYTES offsets, so neighbours laid out like this
     * are all-reduced in place, with no copy into a fusion buffer. */
    size_t off = 0;
    for (int i = m->param_count - 1; i >= 0; i--) {
        m->params[i].grad_offset = off;
        off += (m->params[i].count + TR_GRAD_ALIGN - 1) / TR_GRAD_ALIGN * TR_GRAD_ALIGN;
    }
    m->grads_count = off;
    status = model_alloc_arenas(m, grads_shared);
    if (status == HORA_OK)
        status = model_build_layers(m);
    if (status == HORA_OK)
        status = model_bufs_alloc(m, batch);
    if (status == HORA_OK) {
        void *loss = NULL;
        status = backend->ops->buffer_alloc(backend, sizeof(float), &loss);
        if (status == HORA_OK)
            m->loss = tr_tensor_plain(loss, TR_DTYPE_F32, backend->ops->memory, 1, (const int[]){1});
    }
    if (status == HORA_OK)
        status = model_init_values(m, seed);
    if (status != HORA_OK)
        goto err_free;
    *model_out = m;
    return HORA_OK;

err_free:
    tr_model_free(m);
    return status;
}

void tr_model_free(tr_model_t *m)
{
    if (!m)
        return;
    const struct tr_backend_ops *ops = B_OPS(m);
    for (int i = 0; i < m->buf_count; i++)
        model_buf_release(m, &m->bufs[i]);
    free(m->bufs);
    convbn_free(m, &m->stem);
    if (m->maxpool)
        ops->layer_free(m->maxpool);
    if (m->blocks) {
        for (int i = 0; i < m->block_count; i++) {
            block_t *b = &m->blocks[i];
            for (int j = 0; j < b->conv_count; j++)
                convbn_free(m, &b->cb[j]);
            if (b->has_proj)
                convbn_free(m, &b->proj);
        }
        free(m->blocks);
    }
    if (m->avgpool)
        ops->layer_free(m->avgpool);
    if (m->fc)
        ops->layer_free(m->fc);
    for (int a = 0; a < TR_ARENA_COUNT; a++) {
        if (!m->arenas[a].data)
            continue;
        if (a == TR_ARENA_GRADS && m->grads_shared)
            hora_mem_free(m->arenas[a].data);
        else
            ops->buffer_free(m->backend, m->arenas[a].data);
    }
    if (m->loss.data)
        ops->buffer_free(m->backend, m->loss.data);
    free(m->logits_host);
    free(m->params);
    free(m->bns);
    free(m);
}

/* ---- accessors ------------------------------------------------------------ */

const tr_model_spec_t *tr_model_spec(const tr_model_t *m) { return &m->spec; }
tr_backend_t *tr_model_backend(const tr_model_t *m) { return m->backend; }
int tr_model_capacity(const tr_model_t *m) { return m->capacity; }
int tr_model_param_count(const tr_model_t *m) { return m->param_count; }
const tr_param_t *tr_model_param(const tr_model_t *m, int i) { return &m->params[i]; }
int tr_model_bn_count(const tr_model_t *m) { return m->bn_count; }
const tr_bn_stats_t *tr_model_bn(const tr_model_t *m, int i) { return &m->bns[i]; }
const tr_tensor_t *tr_model_arena(const tr_model_t *m, tr_arena_t arena) { return &m->arenas[arena]; }

/* ---- forward -------------------------------------------------------------- */

#define P(m, i) (&(m)->params[i].value)
#define G(m, i) (&(m)->params[i].grad)

static hora_status_t convbn_forward(tr_model_t *m, convbn_t *u, int train)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    tr_bn_stats_t *st = &m->bns[u->stats];
    hora_status_t status = ops->conv_forward(u->conv, u->in, P(m, u->w), &u->conv_out);
    if (status != HORA_OK)
        return status;
    if (train)
        return ops->bn_forward_train(u->bn, &u->conv_out, P(m, u->gamma), P(m, u->beta), &st->mean, &st->var,
                                     &u->out);
    return ops->bn_forward_infer(u->bn, &u->conv_out, P(m, u->gamma), P(m, u->beta), &st->mean, &st->var,
                                 &u->out);
}

hora_status_t tr_model_forward(tr_model_t *m, const tr_tensor_t *x, int train)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_model_spec_t *s = &m->spec;
    if (!x || x->n < 1 || x->c != s->in_channels || x->h != s->height || x->w != s->width) {
        fprintf(stderr, "hora-train: model forward: input (%d, %d, %d, %d), the model takes (N, %d, %d, %d)\n",
                x ? x->n : 0, x ? x->c : 0, x ? x->h : 0, x ? x->w : 0, s->in_channels, s->height, s->width);
        return HORA_ERR_INVALID_ARG;
    }
    hora_status_t status = HORA_OK;
    if (x->n > m->capacity)
        status = model_bufs_alloc(m, x->n);
    if (status != HORA_OK)
        return status;
    model_set_batch(m, x->n);
    m->forward_train = 0;
    status = ops->tensor_import(m->backend, x, &m->input);
    if (status != HORA_OK)
        return status;
    status = convbn_forward(m, &m->stem, train);
    if (status == HORA_OK && m->maxpool)
        status = ops->pool_forward(m->maxpool, &m->stem.out, &m->pool_out);
    for (int i = 0; status == HORA_OK && i < m->block_count; i++) {
        block_t *b = &m->blocks[i];
        for (int j = 0; status == HORA_OK && j < b->conv_count; j++)
            status = convbn_forward(m, &b->cb[j], train);
        if (status == HORA_OK && b->has_proj)
            status = convbn_forward(m, &b->proj, train);
        if (status == HORA_OK)
            status = ops->add_forward(m->backend, &b->cb[b->conv_count - 1].out,
                                      b->has_proj ? &b->proj.out : b->in, 1, &b->out);
    }
    const tr_tensor_t *last = m->block_count ? &m->blocks[m->block_count - 1].out : &m->stem.out;
    if (status == HORA_OK)
        status = ops->pool_forward(m->avgpool, last, &m->avg_out);
    if (status == HORA_OK)
        status = ops->linear_forward(m->fc, &m->avg_out, P(m, m->fc_w), P(m, m->fc_b), &m->logits);
    m->forward_train = status == HORA_OK && train;
    return status;
}

hora_status_t tr_model_logits(tr_model_t *m, float *host)
{
    if (!host)
        return HORA_ERR_INVALID_ARG;
    return B_OPS(m)->download(m->backend, &m->logits, host);
}

/* ---- backward ------------------------------------------------------------- */

typedef struct {
    tr_model_t *model;
    tr_grad_ready_fn fn;
    void *ctx;
} ready_t;

/* Parameter param's gradient is written: tell the callback, with what to
 * wait on. */
static hora_status_t ready(const ready_t *r, int param)
{
    if (!r->fn)
        return HORA_OK;
    tr_event_t event = NULL;
    hora_status_t status = B_OPS(r->model)->gradient_ready(r->model->backend, &event);
    if (status == HORA_OK)
        r->fn(r->ctx, param, event);
    return status;
}

/* dy holds d loss / d out (u->d_out, or the block's gradient for the last
 * conv_bn and the projection). Writes BN and conv gradients and, when dx is
 * not NULL, d loss / d input into dx. */
static hora_status_t convbn_backward(tr_model_t *m, convbn_t *u, const tr_tensor_t *dy, tr_tensor_t *dx,
                                     const ready_t *r)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    hora_status_t status = ops->bn_backward(u->bn, &u->conv_out, dy, P(m, u->gamma), &u->d_conv,
                                            G(m, u->gamma), G(m, u->beta));
    if (status == HORA_OK)
        status = ready(r, u->beta);
    if (status == HORA_OK)
        status = ready(r, u->gamma);
    if (status == HORA_OK)
        status = ops->conv_backward_weights(u->conv, u->in, &u->d_conv, G(m, u->w));
    if (status == HORA_OK)
        status = ready(r, u->w);
    if (status == HORA_OK && dx)
        status = ops->conv_backward_data(u->conv, &u->d_conv, P(m, u->w), dx);
    return status;
}

static hora_status_t block_backward(tr_model_t *m, block_t *b, const ready_t *r)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    /* d_out is the gradient w.r.t. relu(sum): mask it in place. */
    hora_status_t status = ops->relu_backward(m->backend, &b->out, &b->d_out, &b->d_out);
    if (status != HORA_OK)
        return status;
    /* The projection's parameters come last in PyTorch's order, so their
     * gradients come first here (the grads arena is the reverse order). */
    if (b->has_proj) {
        status = convbn_backward(m, &b->proj, &b->d_out, b->d_in ? &b->d_short : NULL, r);
        if (status != HORA_OK)
            return status;
    }
    for (int j = b->conv_count - 1; j >= 0; j--) {
        const tr_tensor_t *dy = j == b->conv_count - 1 ? &b->d_out : &b->cb[j].d_out;
        tr_tensor_t *dx = j > 0 ? &b->cb[j - 1].d_out : (b->d_in ? &b->d_main : NULL);
        status = convbn_backward(m, &b->cb[j], dy, dx, r);
        if (status != HORA_OK)
            return status;
    }
    if (!b->d_in)
        return HORA_OK;
    return ops->add_forward(m->backend, &b->d_main, b->has_proj ? &b->d_short : &b->d_out, 0, b->d_in);
}

hora_status_t tr_model_backward(tr_model_t *m, const int32_t *labels, float label_smoothing,
                                tr_grad_ready_fn grad_ready, void *ctx, float *loss)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    ready_t r = {m, grad_ready, ctx};
    if (!m->forward_train || !labels) {
        fprintf(stderr, "hora-train: model backward needs labels and a training forward before it\n");
        return HORA_ERR_INVALID_ARG;
    }
    hora_status_t status = ops->upload(m->backend, &m->labels, labels);
    if (status == HORA_OK)
        status = ops->softmax_xent(m->backend, &m->logits, &m->labels, label_smoothing, &m->loss, &m->dlogits);
    if (status == HORA_OK)
        status = ops->linear_backward_weights(m->fc, &m->avg_out, &m->dlogits, G(m, m->fc_w), G(m, m->fc_b));
    if (status == HORA_OK)
        status = ready(&r, m->fc_b);
    if (status == HORA_OK)
        status = ready(&r, m->fc_w);
    if (status == HORA_OK)
        status = ops->linear_backward_data(m->fc, &m->dlogits, P(m, m->fc_w), &m->d_avg_out);
    tr_tensor_t *d_last = m->block_count ? &m->blocks[m->block_count - 1].d_out : &m->stem.d_out;
    if (status == HORA_OK)
        status = ops->pool_backward(m->avgpool, &m->d_avg_out, d_last);
    for (int i = m->block_count - 1; status == HORA_OK && i >= 0; i--)
        status = block_backward(m, &m->blocks[i], &r);
    if (status == HORA_OK && m->maxpool)
        status = ops->pool_backward(m->maxpool, &m->d_pool_out, &m->stem.d_out);
    if (status == HORA_OK)
        status = convbn_backward(m, &m->stem, &m->stem.d_out, NULL, &r);
    if (status == HORA_OK && loss)
        status = ops->download(m->backend, &m->loss, loss);
    return status;
}

hora_status_t tr_model_topk(tr_model_t *m, const int32_t *labels, int64_t *top1, int64_t *top5)
{
    const int k = m->spec.classes;
    int64_t c1 = 0, c5 = 0;
    hora_status_t status = tr_model_logits(m, m->logits_host);
    if (status != HORA_OK)
        return status;
    for (int i = 0; i < m->batch; i++) {
        const float *row = m->logits_host + (size_t)i * (size_t)k;
        int y = labels[i];
        if (y < 0 || y >= k)
            continue;
        /* Rank of the true class: how many logits beat it (ties count
         * against it, so a constant output scores nothing). */
        int better = 0;
        for (int j = 0; j < k; j++)
            if (j != y && row[j] >= row[y])
                better++;
        c1 += better < 1;
        c5 += better < 5;
    }
    *top1 = c1;
    *top5 = c5;
    return HORA_OK;
}
