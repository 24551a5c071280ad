/*
 * model_arch.c - what the network is: the named ResNets, every parameter and
 * BN statistic in PyTorch's order (the order the golden files and
 * checkpoints use), and their initial values. See model.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_arch.h"
#include "rng.h"

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
        if (strcmp(name, model_table[i].name) != 0) continue;
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
    return status_set(HORA_ERR_INVALID_ARG, "unknown model '%s' (known: %s)", name, tr_model_names());
}

/* ---- declaring ------------------------------------------------------------ */

static int add_param(tr_model_t *m, const char *prefix, const char *suffix, tr_param_kind_t kind, int ndim, int d0,
                     int d1, int d2, int d3)
{
    if (m->param_count == m->param_capacity) {
        int cap = m->param_capacity ? 2 * m->param_capacity : 64;
        tr_param_t *p = realloc(m->params, (size_t)cap * sizeof(*p));
        if (!p) return -1;
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
        if (!b) return -1;
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

/* Declare a conv_bn's parameters (first pass: shapes only). */
static hora_status_t convbn_declare(tr_model_t *m, convbn_t *u, const char *conv_name, const char *bn_name, int c_in,
                                    int h, int w, int c_out, int kernel, int stride, int relu)
{
    u->desc = (tr_conv_desc_t){.c_in = c_in,
                               .h_in = h,
                               .w_in = w,
                               .c_out = c_out,
                               .kernel = kernel,
                               .stride = stride,
                               .pad = kernel / 2,
                               .dtype = m->spec.compute_dtype,
                               .grad_dtype = m->spec.grad_dtype};
    u->h_out = conv_out_size(h, kernel, stride, kernel / 2);
    u->w_out = conv_out_size(w, kernel, stride, kernel / 2);
    u->relu = relu;
    u->w = add_param(m, conv_name, ".weight", TR_PARAM_CONV_WEIGHT, 4, c_out, c_in, kernel, kernel);
    u->gamma = add_param(m, bn_name, ".weight", TR_PARAM_BN_GAMMA, 1, c_out, 0, 0, 0);
    u->beta = add_param(m, bn_name, ".bias", TR_PARAM_BN_BETA, 1, c_out, 0, 0, 0);
    u->stats = add_bn_stats(m, bn_name, c_out);
    if (u->w < 0 || u->gamma < 0 || u->beta < 0 || u->stats < 0) return HORA_ERR_NO_MEMORY;
    return HORA_OK;
}

/* Declare every parameter in PyTorch's order; records block shapes. */
hora_status_t model_declare(tr_model_t *m)
{
    const tr_model_spec_t *s = &m->spec;
    int imagenet = s->stem == TR_STEM_IMAGENET;
    int h = s->height, w = s->width, c = s->base_width;
    hora_status_t status;

    status =
        convbn_declare(m, &m->stem, "conv1", "bn1", s->in_channels, h, w, c, imagenet ? 7 : 3, imagenet ? 2 : 1, 1);
    if (status != HORA_OK) return status;
    h = m->stem.h_out;
    w = m->stem.w_out;
    if (imagenet) {
        h = conv_out_size(h, 3, 2, 1);
        w = conv_out_size(w, 3, 2, 1);
    }

    m->block_count = 0;
    for (int i = 0; i < s->stage_count; i++) m->block_count += s->blocks[i];
    m->blocks = calloc((size_t)m->block_count, sizeof(*m->blocks));
    if (!m->blocks) return HORA_ERR_NO_MEMORY;

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
                    status = convbn_declare(m, &b->cb[j], cn, bn, cin[j], hs[j], ws[j], cout[j], ks[j], ss[j], j < 2);
                    if (status != HORA_OK) return status;
                }
            } else {
                int cin[2] = {c, width}, hs[2] = {h, ho}, ws[2] = {w, wo}, ss[2] = {stride, 1};
                for (int j = 0; j < 2; j++) {
                    snprintf(cn, sizeof(cn), "%sconv%d", pre, j + 1);
                    snprintf(bn, sizeof(bn), "%sbn%d", pre, j + 1);
                    status = convbn_declare(m, &b->cb[j], cn, bn, cin[j], hs[j], ws[j], width, 3, ss[j], j < 1);
                    if (status != HORA_OK) return status;
                }
            }
            b->has_proj = stride != 1 || c != c_out;
            if (b->has_proj) {
                snprintf(cn, sizeof(cn), "%sdownsample.0", pre);
                snprintf(bn, sizeof(bn), "%sdownsample.1", pre);
                status = convbn_declare(m, &b->proj, cn, bn, c, h, w, c_out, 1, stride, 0);
                if (status != HORA_OK) return status;
            }
            h = ho;
            w = wo;
            c = c_out;
        }
    }
    m->fc_w = add_param(m, "fc", ".weight", TR_PARAM_LINEAR_WEIGHT, 2, s->classes, c, 0, 0);
    m->fc_b = add_param(m, "fc", ".bias", TR_PARAM_LINEAR_BIAS, 1, s->classes, 0, 0, 0);
    if (m->fc_w < 0 || m->fc_b < 0) return HORA_ERR_NO_MEMORY;
    return HORA_OK;
}

/* The convolutions of spec in the order forward runs them, from the same
 * declaration tr_model_init uses (a model without a backend: shapes only). */
hora_status_t tr_model_conv_descs(const tr_model_spec_t *spec, tr_conv_desc_t *descs, int capacity, int *count_out)
{
    tr_model_t m = {.spec = *spec};
    hora_status_t status = model_declare(&m);
    int count = 0;
    if (status == HORA_OK) {
        const convbn_t *stem = &m.stem;
        if (count < capacity) descs[count] = stem->desc;
        count++;
        for (int i = 0; i < m.block_count; i++) {
            const block_t *b = &m.blocks[i];
            for (int j = 0; j < b->conv_count + b->has_proj; j++) {
                if (count < capacity) descs[count] = j < b->conv_count ? b->cb[j].desc : b->proj.desc;
                count++;
            }
        }
        *count_out = count;
    }
    free(m.blocks);
    free(m.params);
    free(m.bns);
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
hora_status_t model_init_values(tr_model_t *m, uint64_t seed)
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
            for (size_t k = 0; k < p->count; k++) v[k] = (float)(std * rng_normal(&rng));
            break;
        }
        case TR_PARAM_BN_GAMMA:
            for (size_t k = 0; k < p->count; k++) v[k] = 1.0f;
            break;
        case TR_PARAM_BN_BETA: break; /* zeros */
        case TR_PARAM_LINEAR_WEIGHT:
        case TR_PARAM_LINEAR_BIAS: {
            /* nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)). */
            double bound = 1.0 / sqrt((double)fc_in);
            for (size_t k = 0; k < p->count; k++) v[k] = (float)(bound * (2.0 * rng_uniform(&rng) - 1.0));
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
    if (status == HORA_OK) status = ops->upload(m->backend, &m->arenas[TR_ARENA_STATS], stats);
    free(params);
    free(stats);
    return status;
}
