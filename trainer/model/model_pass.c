/*
 * model_pass.c - running the model: forward (training or inference, any
 * batch up to what the per-sample tensors hold, which grow on demand),
 * backward with a callback per written gradient, top-k counts. See model.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_bufs.h"

/* ---- --profile ---------------------------------------------------------------- */

static double prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

hora_status_t tr_model_profile(tr_model_t *m, int on)
{
    free(m->profile);
    m->profile = NULL;
    if (!on) return HORA_OK;
    m->profile = calloc(1, sizeof(*m->profile));
    return m->profile ? HORA_OK : HORA_ERR_NO_MEMORY;
}

/* The clock at the start of a unit's op: 0 when not profiling; else after
 * the backend has drained what came before. */
static double prof_start(tr_model_t *m)
{
    if (!m->profile || B_OPS(m)->synchronize(m->backend) != HORA_OK) return 0;
    return prof_now();
}

/* The unit's op is queued: wait for it and book the time. */
static void prof_stop(tr_model_t *m, const convbn_t *u, int backward, double t0)
{
    model_profile_t *p = m->profile;
    if (!p || t0 == 0 || B_OPS(m)->synchronize(m->backend) != HORA_OK) return;
    double s = prof_now() - t0;
    model_prof_unit_t *unit = NULL;
    for (int i = 0; i < p->count && !unit; i++)
        if (p->units[i].key == u) unit = &p->units[i];
    if (!unit && p->count < MODEL_PROFILE_UNITS) {
        unit = &p->units[p->count++];
        unit->key = u;
        snprintf(unit->name, sizeof(unit->name), "%s", m->params[u->w].name);
        char *dot = strrchr(unit->name, '.');
        if (dot && strcmp(dot, ".weight") == 0) *dot = '\0';
    }
    if (unit) unit->s[backward] += s;
}

void tr_model_profile_print(const tr_model_t *m, double step_ms, FILE *out)
{
    const model_profile_t *p = m->profile;
    if (!p || p->steps < 1) return;
    double sum = 0;
    for (int i = 0; i < p->count; i++) sum += 1e3 * (p->units[i].s[0] + p->units[i].s[1]) / p->steps;
    const double whole = step_ms > 0 ? step_ms : sum;
    fprintf(out, "profile: %d steps, ms per step (the backend synchronized around every unit)\n", p->steps);
    fprintf(out, "  %-24s %9s %9s %9s %6s\n", "conv+bn unit", "forward", "backward", "total", "share");
    for (int i = 0; i < p->count; i++) {
        const model_prof_unit_t *u = &p->units[i];
        double f = 1e3 * u->s[0] / p->steps, b = 1e3 * u->s[1] / p->steps;
        fprintf(out, "  %-24s %9.3f %9.3f %9.3f %5.1f%%\n", u->name, f, b, f + b, 100 * (f + b) / whole);
    }
    fprintf(out, "  %-24s %29.3f %5.1f%%\n", "all units", sum, 100 * sum / whole);
    if (step_ms > 0)
        fprintf(out, "  %-24s %29.3f %5.1f%%\n", "rest of the step", step_ms - sum, 100 * (step_ms - sum) / whole);
}

/* ---- forward -------------------------------------------------------------- */

static hora_status_t convbn_forward(tr_model_t *m, convbn_t *u, int train)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    tr_bn_stats_t *st = &m->bns[u->stats];
    double t0 = train ? prof_start(m) : 0;
    hora_status_t status = ops->conv_forward(u->conv, u->in, PC(m, u->w), &u->conv_out);
    if (status != HORA_OK) return status;
    if (train)
        status =
            ops->bn_forward_train(u->bn, &u->conv_out, P(m, u->gamma), P(m, u->beta), &st->mean, &st->var, &u->out);
    else
        status =
            ops->bn_forward_infer(u->bn, &u->conv_out, P(m, u->gamma), P(m, u->beta), &st->mean, &st->var, &u->out);
    if (status == HORA_OK && train) prof_stop(m, u, 0, t0);
    return status;
}

void tr_model_set_input_norm(tr_model_t *m, const float *mean, const float *std)
{
    for (int c = 0; c < m->spec.in_channels && c < 4; c++) {
        m->input_mean[c] = mean[c];
        m->input_std[c] = std[c];
    }
}

hora_status_t tr_model_forward(tr_model_t *m, const tr_tensor_t *x, int train)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    const tr_model_spec_t *s = &m->spec;
    if (!x || x->n < 1 || x->c != s->in_channels || x->h != s->height || x->w != s->width) {
        return status_set(HORA_ERR_INVALID_ARG,
                          "model forward: input (%d, %d, %d, %d), the model takes (N, %d, %d, %d)", x ? x->n : 0,
                          x ? x->c : 0, x ? x->h : 0, x ? x->w : 0, s->in_channels, s->height, s->width);
    }
    hora_status_t status = HORA_OK;
    if (x->n > m->capacity) status = model_bufs_alloc(m, x->n);
    if (status != HORA_OK) return status;
    model_set_batch(m, x->n);
    m->forward_train = 0;
    if (x->dtype == TR_DTYPE_U8 && x->c > 4) {
        return status_set(HORA_ERR_INVALID_ARG, "model forward: u8 input of %d channels (images have at most 4)", x->c);
    }
    if (x->dtype == TR_DTYPE_U8)
        status = ops->input_import(m->backend, x, m->input_mean, m->input_std, &m->input);
    else
        status = ops->tensor_import(m->backend, x, &m->input);
    if (status != HORA_OK) return status;
    status = convbn_forward(m, &m->stem, train);
    if (status == HORA_OK && m->maxpool) status = ops->pool_forward(m->maxpool, &m->stem.out, &m->pool_out);
    for (int i = 0; status == HORA_OK && i < m->block_count; i++) {
        block_t *b = &m->blocks[i];
        for (int j = 0; status == HORA_OK && j < b->conv_count; j++) status = convbn_forward(m, &b->cb[j], train);
        if (status == HORA_OK && b->has_proj) status = convbn_forward(m, &b->proj, train);
        if (status == HORA_OK)
            status = ops->add_forward(m->backend, &b->cb[b->conv_count - 1].out, b->has_proj ? &b->proj.out : b->in, 1,
                                      &b->out);
    }
    const tr_tensor_t *last = m->block_count ? &m->blocks[m->block_count - 1].out : &m->stem.out;
    if (status == HORA_OK) status = ops->pool_forward(m->avgpool, last, &m->avg_out);
    if (status == HORA_OK) status = ops->linear_forward(m->fc, &m->avg_out, PC(m, m->fc_w), P(m, m->fc_b), &m->logits);
    m->forward_train = status == HORA_OK && train;
    if (m->forward_train && m->profile) m->profile->steps++;
    return status;
}

hora_status_t tr_model_logits(tr_model_t *m, float *host)
{
    if (!host) return HORA_ERR_INVALID_ARG;
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
    if (!r->fn) return HORA_OK;
    tr_event_t event = NULL;
    hora_status_t status = B_OPS(r->model)->gradient_ready(r->model->backend, &event);
    if (status == HORA_OK) r->fn(r->ctx, param, event);
    return status;
}

/* dy holds d loss / d out (u->d_out, or the block's gradient for the last
 * conv_bn and the projection). Writes BN and conv gradients and, when dx is
 * not NULL, d loss / d input into dx. */
static hora_status_t convbn_backward(tr_model_t *m, convbn_t *u, const tr_tensor_t *dy, tr_tensor_t *dx,
                                     const ready_t *r)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    double t0 = prof_start(m);
    hora_status_t status =
        ops->bn_backward(u->bn, &u->conv_out, dy, P(m, u->gamma), &u->d_conv, G(m, u->gamma), G(m, u->beta));
    if (status == HORA_OK) status = ready(r, u->beta);
    if (status == HORA_OK) status = ready(r, u->gamma);
    if (status == HORA_OK) status = ops->conv_backward_weights(u->conv, u->in, &u->d_conv, G(m, u->w));
    if (status == HORA_OK) status = ready(r, u->w);
    if (status == HORA_OK && dx) status = ops->conv_backward_data(u->conv, &u->d_conv, PC(m, u->w), dx);
    if (status == HORA_OK) prof_stop(m, u, 1, t0);
    return status;
}

static hora_status_t block_backward(tr_model_t *m, block_t *b, const ready_t *r)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    /* d_out is the gradient w.r.t. relu(sum): mask it in place. */
    hora_status_t status = ops->relu_backward(m->backend, &b->out, &b->d_out, &b->d_out);
    if (status != HORA_OK) return status;
    /* The projection's parameters come last in PyTorch's order, so their
     * gradients come first here (the grads arena is the reverse order). */
    if (b->has_proj) {
        status = convbn_backward(m, &b->proj, &b->d_out, b->d_in ? &b->d_short : NULL, r);
        if (status != HORA_OK) return status;
    }
    for (int j = b->conv_count - 1; j >= 0; j--) {
        const tr_tensor_t *dy = j == b->conv_count - 1 ? &b->d_out : &b->cb[j].d_out;
        tr_tensor_t *dx = j > 0 ? &b->cb[j - 1].d_out : (b->d_in ? &b->d_main : NULL);
        status = convbn_backward(m, &b->cb[j], dy, dx, r);
        if (status != HORA_OK) return status;
    }
    if (!b->d_in) return HORA_OK;
    return ops->add_forward(m->backend, &b->d_main, b->has_proj ? &b->d_short : &b->d_out, 0, b->d_in);
}

hora_status_t tr_model_backward(tr_model_t *m, const int32_t *labels, float label_smoothing, float loss_scale,
                                tr_grad_ready_fn grad_ready, void *ctx, float *loss)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    ready_t r = {m, grad_ready, ctx};
    if (!m->forward_train || !labels) {
        return status_set(HORA_ERR_INVALID_ARG, "model backward needs labels and a training forward before it");
    }
    hora_status_t status = ops->upload(m->backend, &m->labels, labels);
    if (status == HORA_OK)
        status =
            ops->softmax_xent(m->backend, &m->logits, &m->labels, label_smoothing, loss_scale, &m->loss, &m->dlogits);
    if (status == HORA_OK)
        status = ops->linear_backward_weights(m->fc, &m->avg_out, &m->dlogits, G(m, m->fc_w), G(m, m->fc_b));
    if (status == HORA_OK) status = ready(&r, m->fc_b);
    if (status == HORA_OK) status = ready(&r, m->fc_w);
    if (status == HORA_OK) status = ops->linear_backward_data(m->fc, &m->dlogits, PC(m, m->fc_w), &m->d_avg_out);
    tr_tensor_t *d_last = m->block_count ? &m->blocks[m->block_count - 1].d_out : &m->stem.d_out;
    if (status == HORA_OK) status = ops->pool_backward(m->avgpool, &m->d_avg_out, d_last);
    for (int i = m->block_count - 1; status == HORA_OK && i >= 0; i--) status = block_backward(m, &m->blocks[i], &r);
    if (status == HORA_OK && m->maxpool) status = ops->pool_backward(m->maxpool, &m->d_pool_out, &m->stem.d_out);
    if (status == HORA_OK) status = convbn_backward(m, &m->stem, &m->stem.d_out, NULL, &r);
    if (status == HORA_OK && loss) status = ops->download(m->backend, &m->loss, loss);
    return status;
}

hora_status_t tr_model_topk(tr_model_t *m, const int32_t *labels, int64_t *top1, int64_t *top5)
{
    const int k = m->spec.classes;
    int64_t c1 = 0, c5 = 0;
    hora_status_t status = tr_model_logits(m, m->logits_host);
    if (status != HORA_OK) return status;
    for (int i = 0; i < m->batch; i++) {
        const float *row = m->logits_host + (size_t)i * (size_t)k;
        int y = labels[i];
        if (y < 0 || y >= k) continue;
        /* Rank of the true class: how many logits beat it (ties count
         * against it, so a constant output scores nothing). */
        int better = 0;
        for (int j = 0; j < k; j++)
            if (j != y && row[j] >= row[y]) better++;
        c1 += better < 1;
        c5 += better < 5;
    }
    *top1 = c1;
    *top5 = c5;
    return HORA_OK;
}
