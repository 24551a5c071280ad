/*
 * optim.c - learning-rate schedule and SGD / LARS over a model's arenas.
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double tr_lr_at(const tr_lr_schedule_t *s, uint64_t step)
{
    if (step < s->warmup_steps)
        return s->warmup_lr + (s->peak_lr - s->warmup_lr) * (double)(step + 1) / (double)s->warmup_steps;
    double span = s->total_steps > s->warmup_steps ? (double)(s->total_steps - s->warmup_steps) : 1.0;
    double t = (double)(step - s->warmup_steps) / span;
    if (t > 1.0) t = 1.0;
    switch (s->decay) {
    case TR_LR_DECAY_POLY: return s->peak_lr * pow(1.0 - t, s->power);
    case TR_LR_DECAY_COSINE: return s->peak_lr * 0.5 * (1.0 + cos(M_PI * t));
    case TR_LR_DECAY_STEP: {
        double lr = s->peak_lr;
        for (int i = 0; i < s->milestone_count; i++)
            if (step >= s->milestones[i]) lr *= s->gamma;
        return lr;
    }
    case TR_LR_DECAY_NONE: break;
    }
    return s->peak_lr;
}

const char *const tr_lr_decay_names[] = {"poly", "cosine", "step", "none", NULL};

int tr_lr_decay_parse(const char *name)
{
    for (int i = 0; tr_lr_decay_names[i]; i++)
        if (strcmp(name, tr_lr_decay_names[i]) == 0) return i;
    return -1;
}

/* ||t||_2 of a plain f32, bf16 or f16 tensor, in double; device memory is
 * downloaded, low-precision values widened (exactly) first. */
static hora_status_t norm2(tr_backend_t *backend, const tr_tensor_t *t, double *out)
{
    const size_t n = tr_tensor_count(t);
    const float *v = t->data;
    float *copy = NULL;
    if (t->memory != TR_MEMORY_HOST || t->dtype != TR_DTYPE_F32) {
        copy = malloc(n * sizeof(float) + 1);
        if (!copy) return HORA_ERR_NO_MEMORY;
        hora_status_t status = HORA_OK;
        if (t->dtype == TR_DTYPE_F32) {
            status = backend->ops->download(backend, t, copy);
        } else {
            /* Cast on the backend into an f32 buffer of its own, then download. */
            void *wide = NULL;
            status = backend->ops->buffer_alloc(backend, n * sizeof(float) + 1, &wide);
            if (status == HORA_OK) {
                tr_tensor_t w =
                    tr_tensor_plain(wide, TR_DTYPE_F32, t->memory, t->ndim, (const int[]){t->n, t->c, t->h, t->w});
                status = backend->ops->cast(backend, t, &w);
                if (status == HORA_OK) status = backend->ops->download(backend, &w, copy);
                backend->ops->buffer_free(backend, wide);
            }
        }
        if (status != HORA_OK) {
            free(copy);
            return status;
        }
        v = copy;
    }
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    free(copy);
    *out = sqrt(s);
    return HORA_OK;
}

hora_status_t tr_optim_step(tr_model_t *model, const tr_optim_config_t *c, double lr, double grad_scale)
{
    tr_backend_t *backend = tr_model_backend(model);
    for (int i = 0; i < tr_model_param_count(model); i++) {
        /* The views are the model's; the op may write the value and momentum. */
        tr_param_t p = *tr_model_param(model, i);
        int exempt = p.kind == TR_PARAM_BN_GAMMA || p.kind == TR_PARAM_BN_BETA || p.kind == TR_PARAM_LINEAR_BIAS;
        double wd = (exempt && !c->decay_bn_bias) ? 0.0 : c->weight_decay;
        double layer_lr = lr;
        if (c->lars && !exempt) {
            /* Trust ratio eta ||w|| / (||g|| + wd ||w||); 1 where either is 0. */
            double wn, gn;
            hora_status_t status = norm2(backend, &p.value, &wn);
            if (status == HORA_OK) status = norm2(backend, &p.grad, &gn);
            if (status != HORA_OK) return status;
            gn *= grad_scale;
            if (wn > 0 && gn > 0) layer_lr *= c->lars_eta * wn / (gn + wd * wn);
        }
        tr_sgd_args_t args = {.lr = (float)layer_lr,
                              .momentum = (float)c->momentum,
                              .weight_decay = (float)wd,
                              .nesterov = c->nesterov,
                              .grad_scale = (float)grad_scale};
        /* The layers' copy is rewritten in the same pass, where there is one. */
        tr_tensor_t *lp = p.compute.data != p.value.data ? &p.compute : NULL;
        hora_status_t status =
            backend->ops->sgd_step(backend, &p.value, lp, &p.grad, c->momentum != 0.0 ? &p.momentum : NULL, &args);
        if (status != HORA_OK) return status;
    }
    return HORA_OK;
}
