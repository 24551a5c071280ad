/*
 * model_build.c - the ResNet graph made on the backend: the four arenas and their
 * views, the layers, the per-sample tensors; and freeing it all. See model.h
 * (model_arch.c declares what is made, model_pass.c runs it).
 *
 * The network is a fixed chain: stem (conv-BN-ReLU [+ max pool]), residual
 * blocks, global average pool, linear. Each conv is followed by a BN, so the
 * unit of work is a conv_bn (ReLU fused into the BN where one follows).
 * Every activation has its own tensor and its own gradient tensor: memory is
 * plentiful on the host and it keeps backward free of aliasing rules.
 *
 * Batch size: every per-sample tensor (activations, logits, labels) is
 * registered in model->bufs (model_bufs.c) when it is made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_arch.h"
#include "model_bufs.h"

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
    if (status != HORA_OK) return status;
    tr_bn_desc_t bd = {.c = d->c_out,
                       .h = u->h_out,
                       .w = u->w_out,
                       .epsilon = m->spec.bn_epsilon,
                       .momentum = m->spec.bn_momentum,
                       .fuse_relu = u->relu,
                       .dtype = m->spec.compute_dtype,
                       .grad_dtype = m->spec.grad_dtype};
    status = ops->bn_create(m->backend, &bd, &u->bn);
    if (status != HORA_OK) return status;
    tr_tensor_t *ts[] = {&u->conv_out, &u->out, &u->d_conv, &u->d_out};
    for (int i = 0; i < (need_d_out ? 4 : 3) && status == HORA_OK; i++)
        status = model_act(m, ts[i], d->c_out, u->h_out, u->w_out);
    return status;
}

static void convbn_free(tr_model_t *m, convbn_t *u)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    if (u->conv) ops->layer_free(u->conv);
    if (u->bn) ops->layer_free(u->bn);
}

static hora_status_t model_build_layers(tr_model_t *m)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_model_spec_t *s = &m->spec;
    hora_status_t status;

    status = model_act(m, &m->input, s->in_channels, s->height, s->width);
    if (status == HORA_OK) status = convbn_build(m, &m->stem, &m->input, 1);
    if (status != HORA_OK) return status;
    const tr_tensor_t *cur = &m->stem.out;
    tr_tensor_t *d_cur = &m->stem.d_out;
    int c = m->stem.desc.c_out, h = m->stem.h_out, w = m->stem.w_out;
    if (s->stem == TR_STEM_IMAGENET) {
        tr_pool_desc_t pd = {
            .kind = TR_POOL_MAX, .c = c, .h = h, .w = w, .kernel = 3, .stride = 2, .pad = 1, .dtype = s->compute_dtype};
        status = ops->pool_create(m->backend, &pd, &m->maxpool);
        if (status != HORA_OK) return status;
        h = conv_out_size(h, 3, 2, 1);
        w = conv_out_size(w, 3, 2, 1);
        status = model_act(m, &m->pool_out, c, h, w);
        if (status == HORA_OK) status = model_act(m, &m->d_pool_out, c, h, w);
        if (status != HORA_OK) return status;
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
            if (status != HORA_OK) return status;
            x = &b->cb[j].out;
        }
        if (b->has_proj) {
            status = convbn_build(m, &b->proj, cur, 0);
            if (status != HORA_OK) return status;
        }
        const convbn_t *last = &b->cb[b->conv_count - 1];
        const int oc = last->desc.c_out, oh = last->h_out, ow = last->w_out;
        status = model_act(m, &b->out, oc, oh, ow);
        if (status == HORA_OK) status = model_act(m, &b->d_out, oc, oh, ow);
        if (status == HORA_OK) status = model_act(m, &b->d_main, c, h, w);
        if (status == HORA_OK && b->has_proj) status = model_act(m, &b->d_short, c, h, w);
        if (status != HORA_OK) return status;
        cur = &b->out;
        d_cur = &b->d_out;
        c = oc;
        h = oh;
        w = ow;
    }
    tr_pool_desc_t ad = {.kind = TR_POOL_GLOBAL_AVERAGE, .c = c, .h = h, .w = w, .dtype = s->compute_dtype};
    status = ops->pool_create(m->backend, &ad, &m->avgpool);
    if (status == HORA_OK) status = model_act(m, &m->avg_out, c, 1, 1);
    if (status == HORA_OK) status = model_act(m, &m->d_avg_out, c, 1, 1);
    if (status != HORA_OK) return status;
    tr_linear_desc_t ld = {.c_in = c, .c_out = s->classes, .dtype = s->compute_dtype, .grad_dtype = s->grad_dtype};
    status = ops->linear_create(m->backend, &ld, &m->fc);
    if (status == HORA_OK) status = model_buf_add(m, &m->logits, 2, s->classes, 1, 1, TR_DTYPE_F32); /* (N, K) */
    if (status == HORA_OK) status = model_buf_add(m, &m->dlogits, 2, s->classes, 1, 1, s->compute_dtype);
    if (status == HORA_OK) status = model_buf_add(m, &m->labels, 1, 1, 1, 1, TR_DTYPE_I32); /* (N) */
    return status;
}

/* ---- init / free ---------------------------------------------------------- */

/* The arenas and every parameter's and statistic's views of them. */
static hora_status_t model_alloc_arenas(tr_model_t *m, int grads_shared)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_model_spec_t *s = &m->spec;
    const int low = s->compute_dtype != TR_DTYPE_F32;
    const size_t counts[TR_ARENA_COUNT] = {m->params_count, m->grads_count, m->params_count, m->stats_count,
                                           low ? m->params_count : 0};
    const tr_dtype_t dtypes[TR_ARENA_COUNT] = {TR_DTYPE_F32, s->grad_dtype, TR_DTYPE_F32, TR_DTYPE_F32,
                                               s->compute_dtype};
    for (int a = 0; a < TR_ARENA_COUNT; a++) {
        void *data = NULL;
        size_t bytes = counts[a] * tr_dtype_size(dtypes[a]);
        if (a == TR_ARENA_PARAMS_LP && !low) continue;
        hora_status_t status;
        if (counts[a] > INT32_MAX) {
            return status_set(HORA_ERR_INVALID_ARG, "%zu values in one arena: more than a tensor holds", counts[a]);
        }
        if (a == TR_ARENA_GRADS && grads_shared) {
            /* hora's pool of the backend's memory: fused all-reduces run in
             * place (shm, cudaipc). */
            const int device = ops->memory == TR_MEMORY_DEVICE;
            status = device ? hora_mem_alloc_device(bytes ? bytes : sizeof(float), &data)
                            : hora_mem_alloc(bytes ? bytes : sizeof(float), &data);
            if (status != HORA_OK) /* libhora's failure, into this program's store */
                status_set(status, "%s of the %zu-byte gradient arena: %s",
                           device ? "hora_mem_alloc_device" : "hora_mem_alloc", bytes, hora_last_error());
            else
                m->grads_shared = 1;
        } else {
            status = ops->buffer_alloc(m->backend, bytes ? bytes : sizeof(float), &data);
        }
        if (status != HORA_OK) return status;
        m->arenas[a] = tr_tensor_plain(data, dtypes[a], ops->memory, 1, (const int[]){(int)counts[a]});
        /* Zero: momentum starts at 0, and the grads arena's alignment gaps
         * must stay 0 (all-reducing zeros gives zeros). */
        status = ops->fill_zero(m->backend, &m->arenas[a]);
        if (status != HORA_OK) return status;
    }
    for (int i = 0; i < m->param_count; i++) {
        tr_param_t *p = &m->params[i];
        p->value = tr_tensor_view(&m->arenas[TR_ARENA_PARAMS], p->offset, p->ndim, p->dims);
        p->grad = tr_tensor_view(&m->arenas[TR_ARENA_GRADS], p->grad_offset, p->ndim, p->dims);
        p->momentum = tr_tensor_view(&m->arenas[TR_ARENA_MOMENTUM], p->offset, p->ndim, p->dims);
        p->compute = low ? tr_tensor_view(&m->arenas[TR_ARENA_PARAMS_LP], p->offset, p->ndim, p->dims) : p->value;
    }
    for (int i = 0; i < m->bn_count; i++) {
        tr_bn_stats_t *b = &m->bns[i];
        b->mean = tr_tensor_view(&m->arenas[TR_ARENA_STATS], b->offset, 1, &b->channels);
        b->var = tr_tensor_view(&m->arenas[TR_ARENA_STATS], b->offset + (size_t)b->channels, 1, &b->channels);
    }
    return HORA_OK;
}

hora_status_t tr_model_init(tr_backend_t *backend, const tr_model_spec_t *spec, int batch, int grads_shared,
                            uint64_t seed, tr_model_t **model_out)
{
    if (backend && spec) {
        /* The layers refuse a dtype the backend lacks too; saying so here,
         * once, with the backend's reason, is clearer. */
        if (spec->compute_dtype != TR_DTYPE_F32 && backend->ops->compute_dtype(backend, spec->compute_dtype) != HORA_OK)
            return status_set(HORA_ERR_UNSUPPORTED, "the %s backend cannot compute in %s: %s", backend->ops->name,
                              tr_dtype_name(spec->compute_dtype), status_message());
        if (spec->grad_dtype != TR_DTYPE_F32 && spec->grad_dtype != TR_DTYPE_BF16 && spec->grad_dtype != TR_DTYPE_F16)
            return status_set(HORA_ERR_INVALID_ARG, "gradient dtype %s (f32, bf16 or f16)",
                              tr_dtype_name(spec->grad_dtype));
    }
    if (!backend || !spec || !model_out || batch <= 0 || spec->stage_count < 1 ||
        spec->stage_count > TR_MODEL_MAX_STAGES || spec->base_width <= 0 || spec->classes <= 0 ||
        spec->in_channels <= 0 || spec->height <= 0 || spec->width <= 0)
        return status_set(HORA_ERR_INVALID_ARG, "invalid model spec or batch %d", batch);
    tr_model_t *m = calloc(1, sizeof(*m));
    if (!m) return HORA_ERR_NO_MEMORY;
    m->backend = backend;
    m->spec = *spec;
    hora_status_t status = model_declare(m);
    if (status != HORA_OK) goto err_free;

    /* Gradients in the order backprop writes them: the reverse of the
     * parameter order (backward walks the network from the head, and each
     * conv_bn's BN gradients come before its conv's, as declared reversed),
     * each at a multiple of HORA_ALIGN_BYTES. hora packs a fused response
     * at HORA_ALIGN_BYTES offsets, so neighbours laid out like this are
     * all-reduced in place, with no copy into a fusion buffer. */
    const size_t align = HORA_ALIGN_BYTES / tr_dtype_size(spec->grad_dtype);
    size_t off = 0;
    for (int i = m->param_count - 1; i >= 0; i--) {
        m->params[i].grad_offset = off;
        off += (m->params[i].count + align - 1) / align * align;
    }
    m->grads_count = off;
    status = model_alloc_arenas(m, grads_shared);
    if (status == HORA_OK) status = model_build_layers(m);
    if (status == HORA_OK) status = model_bufs_alloc(m, batch);
    if (status == HORA_OK) {
        void *loss = NULL;
        status = backend->ops->buffer_alloc(backend, sizeof(float), &loss);
        if (status == HORA_OK) m->loss = tr_tensor_plain(loss, TR_DTYPE_F32, backend->ops->memory, 1, (const int[]){1});
    }
    if (status == HORA_OK) status = model_init_values(m, seed);
    if (status == HORA_OK) status = tr_model_sync_compute(m); /* the compute-dtype copy of the initial weights */
    if (status != HORA_OK) goto err_free;
    *model_out = m;
    return HORA_OK;

err_free:
    tr_model_free(m);
    return status;
}

void tr_model_free(tr_model_t *m)
{
    if (!m) return;
    const struct tr_backend_ops *ops = B_OPS(m);
    model_bufs_free(m);
    convbn_free(m, &m->stem);
    if (m->maxpool) ops->layer_free(m->maxpool);
    if (m->blocks) {
        for (int i = 0; i < m->block_count; i++) {
            block_t *b = &m->blocks[i];
            for (int j = 0; j < b->conv_count; j++) convbn_free(m, &b->cb[j]);
            if (b->has_proj) convbn_free(m, &b->proj);
        }
        free(m->blocks);
    }
    if (m->avgpool) ops->layer_free(m->avgpool);
    if (m->fc) ops->layer_free(m->fc);
    free(m->profile);
    for (int a = 0; a < TR_ARENA_COUNT; a++) {
        if (!m->arenas[a].data) continue;
        if (a == TR_ARENA_GRADS && m->grads_shared)
            hora_mem_free(m->arenas[a].data);
        else
            ops->buffer_free(m->backend, m->arenas[a].data);
    }
    if (m->loss.data) ops->buffer_free(m->backend, m->loss.data);
    free(m->logits_host);
    free(m->params);
    free(m->bns);
    free(m);
}

/* ---- description without a backend ---------------------------------------- */

static double convbn_flops(const convbn_t *u)
{
    const tr_conv_desc_t *d = &u->desc;
    return 2.0 * d->c_out * d->c_in * d->kernel * d->kernel * u->h_out * u->w_out;
}

hora_status_t tr_model_describe(const tr_model_spec_t *spec, tr_param_desc_t **descs_out, int *count_out)
{
    if (!spec || !descs_out || !count_out) return HORA_ERR_INVALID_ARG;
    tr_model_t m = {.spec = *spec};
    tr_param_desc_t *descs = NULL;
    hora_status_t status = model_declare(&m);
    if (status == HORA_OK && !(descs = calloc((size_t)m.param_count, sizeof(*descs)))) status = HORA_ERR_NO_MEMORY;
    if (status == HORA_OK) {
        /* descs[last - i] describes parameter i (PyTorch's order reversed). */
        const int last = m.param_count - 1;
        for (int i = 0; i <= last; i++) {
            const tr_param_t *p = &m.params[i];
            tr_param_desc_t *d = &descs[last - i];
            snprintf(d->name, sizeof(d->name), "%s", p->name);
            d->kind = p->kind;
            d->count = p->count;
        }
        descs[last - m.stem.w].forward_flops = convbn_flops(&m.stem);
        for (int i = 0; i < m.block_count; i++) {
            const block_t *b = &m.blocks[i];
            for (int j = 0; j < b->conv_count; j++) descs[last - b->cb[j].w].forward_flops = convbn_flops(&b->cb[j]);
            if (b->has_proj) descs[last - b->proj.w].forward_flops = convbn_flops(&b->proj);
        }
        const tr_param_t *fc = &m.params[m.fc_w];
        descs[last - m.fc_w].forward_flops = 2.0 * fc->dims[0] * fc->dims[1];
        *descs_out = descs;
        *count_out = m.param_count;
    }
    free(m.blocks);
    free(m.params);
    free(m.bns);
    return status;
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

hora_status_t tr_model_sync_compute(tr_model_t *m)
{
    if (m->spec.compute_dtype == TR_DTYPE_F32) return HORA_OK;
    return B_OPS(m)->cast(m->backend, &m->arenas[TR_ARENA_PARAMS], &m->arenas[TR_ARENA_PARAMS_LP]);
}
