/*
 * train.c - the data-parallel step (train.h).
 *
 * Overlap: tr_model_backward calls grad_ready for each parameter as soon as
 * its gradient is final; the callback enqueues hora_allreduce_async on the
 * gradient in place (AVG). The coordinator thread negotiates and fuses them
 * while backprop continues with earlier layers. Because the grads arena is
 * laid out in backprop order, a fused response covers neighbouring memory.
 *
 * Overlap is not free: each coordinator cycle during backward interrupts
 * compute on cores the framework fills, and hides only the all-reduce time.
 * For a small model on a busy CPU (ResNet-20, 2 ranks x 1 thread on 2 cores)
 * all-reducing after backward is faster; for a large one behind a slow
 * network, overlap wins. TR_OVERLAP_AUTO measures instead of guessing: after
 * TR_OVERLAP_PROBE_WARMUP steps it times TR_OVERLAP_PROBE_STEPS steps,
 * alternately with and without overlap (the gradients are the same either
 * way), takes every rank's times to the slowest with one all-reduce, and
 * keeps the faster mode on every rank.
 *
 * Device gradients: the optimizer waits for the all-reduces on the device
 * (the backend's request_wait: hora_stream_wait on its compute stream), so
 * the host queues the update right behind backprop instead of waiting for
 * the last all-reduce. The requests are collected (their statuses read,
 * then freed) at the next point the host waits anyway: the loss scaler's
 * overflow check, or the next step's first all-reduce, or
 * tr_trainer_settle (checkpoints, evaluation, the end of the run), so a
 * failed all-reduce still stops the run, on every rank, before anything
 * reads what it left behind.
 */
#include "train.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const tr_overlap_names[] = {"off", "on", "auto", NULL};

struct tr_trainer {
    tr_model_t *model;
    tr_step_config_t config;
    int distributed;
    hora_request_t *requests; /* one per parameter */
    char (*names)[96];
    hora_status_t first_error;
    /* The first failure's message, written by whichever thread met it (the
     * backward's gradient callbacks may run on the backend's threads) and
     * set as the caller's status message (base/status.h) by trainer_fail on
     * the thread that returns the failure. */
    char first_error_message[STATUS_MESSAGE_BYTES];
    tr_overlap_state_t *overlap;   /* the run state's */
    tr_loss_scale_state_t *scaler; /* the run state's */
    hora_dtype_t grad_dtype;       /* the grads arena's, as hora names it */
    int pending;                   /* requests[] queued on the device, not yet collected */
};

double tr_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static hora_dtype_t hora_dtype_of(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F16: return HORA_DTYPE_F16;
    case TR_DTYPE_BF16: return HORA_DTYPE_BF16;
    case TR_DTYPE_I32: return HORA_DTYPE_I32;
    case TR_DTYPE_U8: return HORA_DTYPE_U8;
    case TR_DTYPE_F32: break;
    }
    return HORA_DTYPE_F32;
}

hora_status_t tr_trainer_init(tr_model_t *model, const tr_step_config_t *config, tr_run_state_t *state,
                              tr_trainer_t **out)
{
    if (!state || !config) return HORA_ERR_INVALID_ARG;
    tr_overlap_state_t *overlap = &state->overlap;
    if (!(state->loss_scale.scale > 0))
        return status_set(HORA_ERR_INVALID_ARG, "loss scale %g in the run state", state->loss_scale.scale);
    tr_trainer_t *t = calloc(1, sizeof(*t));
    if (!t) return HORA_ERR_NO_MEMORY;
    int n = tr_model_param_count(model);
    t->model = model;
    t->config = *config;
    t->distributed = hora_initialized() && hora_size() > 1;
    t->overlap = overlap;
    t->scaler = &state->loss_scale;
    t->grad_dtype = hora_dtype_of(tr_model_arena(model, TR_ARENA_GRADS)->dtype);
    if (!t->distributed)
        overlap->mode = 0;
    else if (overlap->mode < 0 && config->overlap != TR_OVERLAP_AUTO)
        overlap->mode = config->overlap == TR_OVERLAP_ON;
    t->requests = calloc((size_t)n, sizeof(*t->requests));
    t->names = calloc((size_t)n, sizeof(*t->names));
    if (!t->requests || !t->names) {
        tr_trainer_free(t);
        return HORA_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++)
        snprintf(t->names[i], sizeof(t->names[i]), "%sgrad.%s", config->name_prefix ? config->name_prefix : "",
                 tr_model_param(model, i)->name);
    *out = t;
    return HORA_OK;
}

void tr_trainer_free(tr_trainer_t *t)
{
    if (!t) return;
    if (t->requests) {
        for (int i = 0; i < tr_model_param_count(t->model); i++)
            if (t->requests[i]) hora_request_free(t->requests[i]); /* waits for it first */
        free(t->requests);
    }
    free(t->names);
    free(t);
}

hora_status_t tr_trainer_broadcast_state(tr_trainer_t *t, int momentum, int root)
{
    if (!t->distributed) return HORA_OK;
    const tr_tensor_t *p = tr_model_arena(t->model, TR_ARENA_PARAMS), *s = tr_model_arena(t->model, TR_ARENA_STATS);
    const tr_tensor_t *m = tr_model_arena(t->model, TR_ARENA_MOMENTUM);
    /* Device arenas too: hora's direct collectives take device pointers.
     * The backend's queued writes come first. */
    tr_backend_t *backend = tr_model_backend(t->model);
    hora_status_t status = backend->ops->synchronize(backend);
    if (status == HORA_OK) status = hora_broadcast(p->data, tr_tensor_count(p), HORA_DTYPE_F32, root);
    if (status == HORA_OK) status = hora_broadcast(s->data, tr_tensor_count(s), HORA_DTYPE_F32, root);
    if (status == HORA_OK && momentum) status = hora_broadcast(m->data, tr_tensor_count(m), HORA_DTYPE_F32, root);
    if (status == HORA_OK) status = tr_model_sync_compute(t->model);
    return status;
}

__attribute__((format(printf, 2, 3))) static void trainer_note(tr_trainer_t *t, const char *fmt, ...)
{
    if (t->first_error_message[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->first_error_message, sizeof(t->first_error_message), fmt, ap);
    va_end(ap);
}

/* status, with the noted message as the calling thread's (and the note
 * cleared): what the trainer's entry points return. */
static hora_status_t trainer_fail(tr_trainer_t *t, hora_status_t status)
{
    if (status != HORA_OK && t->first_error_message[0]) status_set(status, "%s", t->first_error_message);
    t->first_error_message[0] = '\0';
    return status;
}

/* Wait for every request, note the first failure, free them all. */
static hora_status_t collect(tr_trainer_t *t)
{
    hora_status_t result = HORA_OK;
    for (int i = 0; i < tr_model_param_count(t->model); i++) {
        if (!t->requests[i]) continue;
        hora_status_t status = hora_wait(t->requests[i]);
        if (status != HORA_OK && result == HORA_OK) {
            trainer_note(t, "allreduce of %s failed: %s", tr_model_param(t->model, i)->name,
                         hora_request_error(t->requests[i]));
            result = status;
        }
        hora_request_free(t->requests[i]);
        t->requests[i] = NULL;
    }
    t->pending = 0;
    return result;
}

hora_status_t tr_trainer_settle(tr_trainer_t *t) { return t->pending ? trainer_fail(t, collect(t)) : HORA_OK; }

/* The all-reduce of parameter i's gradient, in place. event: the backend's
 * gradient_ready (NULL: ready now; a device event is for the GPU runtime,
 * which takes it with the request). */
static void enqueue(tr_trainer_t *t, int i, tr_event_t event)
{
    if (t->pending && t->first_error == HORA_OK)
        t->first_error = collect(t); /* the last step's, before the names are reused */
    if (t->first_error != HORA_OK) return;
    const tr_param_t *p = tr_model_param(t->model, i);
    if (t->config.grad_hook) t->config.grad_hook(t->config.grad_hook_ctx, i, &p->grad);
    if (!t->distributed) return; /* one rank: the gradient is the average already */
    /* Device gradients: ready when the backend's event is (its compute
     * stream got past the op that wrote them). */
    hora_opts_t opts = HORA_OPTS_INIT;
    opts.reproducible = t->config.reproducible;
    if (p->grad.memory == TR_MEMORY_DEVICE) {
        opts.memory = HORA_MEMORY_CUDA;
        opts.ready_event = event;
    }
    hora_status_t status = hora_allreduce_async(t->names[i], p->grad.data, p->grad.data, p->count, t->grad_dtype,
                                                HORA_OP_AVG, &opts, &t->requests[i]);
    if (status != HORA_OK) {
        trainer_note(t, "allreduce of %s: %s (%s)", p->name, hora_status_string(status), hora_last_error());
        t->first_error = status;
    }
}

static void on_grad_ready(void *ctx, int i, tr_event_t event) { enqueue(ctx, i, event); }

/* The step's all-reduces done before the optimizer runs: device
 * gradients on the device (collected later, see the top), host ones on
 * the host. */
static hora_status_t wait_all(tr_trainer_t *t)
{
    hora_status_t result = t->first_error;
    tr_backend_t *backend = tr_model_backend(t->model);
    int device = backend->ops->memory == TR_MEMORY_DEVICE;
    for (int i = 0; device && result == HORA_OK && i < tr_model_param_count(t->model); i++)
        if (t->requests[i]) {
            hora_status_t status = backend->ops->request_wait(backend, t->requests[i]);
            if (status != HORA_OK) {
                trainer_note(t, "allreduce of %s: request_wait: %s", tr_model_param(t->model, i)->name,
                             status_message()[0] ? status_message() : hora_status_string(status));
                result = status;
            }
            t->pending = 1;
        }
    if (!device || result != HORA_OK) {
        hora_status_t status = collect(t);
        if (result == HORA_OK) result = status;
    }
    t->first_error = HORA_OK;
    return trainer_fail(t, result);
}

static hora_status_t gradients(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *labels, int overlap, float *loss)
{
    hora_status_t status = tr_model_forward(t->model, x, 1);
    if (status != HORA_OK) return status;
    status = tr_model_backward(t->model, labels, t->config.label_smoothing, (float)t->scaler->scale,
                               overlap ? on_grad_ready : NULL, t, loss);
    if (status != HORA_OK) {
        wait_all(t);
        return status;
    }
    if (!overlap) {
        /* Same order as backprop would have used, all at once. */
        for (int i = tr_model_param_count(t->model) - 1; i >= 0; i--) enqueue(t, i, NULL);
    }
    return wait_all(t);
}

/* One probing step of TR_OVERLAP_AUTO; the last one decides. */
static hora_status_t probe(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *labels, float *loss)
{
    tr_overlap_state_t *o = t->overlap;
    int k = o->probe_step - TR_OVERLAP_PROBE_WARMUP, with = k < 0 || k % 2 == 0;
    double start = tr_now_s();
    hora_status_t status = gradients(t, x, labels, with, loss);
    if (status == HORA_OK) status = tr_trainer_settle(t); /* timed to the end of the all-reduces */
    if (status != HORA_OK) return status;
    if (k >= 0) o->probe_s[with] += tr_now_s() - start;
    if (++o->probe_step < TR_OVERLAP_PROBE_WARMUP + TR_OVERLAP_PROBE_STEPS) return HORA_OK;
    /* Every rank takes the slowest rank's times, so all keep the same mode. */
    status = hora_allreduce(o->probe_s, o->probe_s, 2, HORA_DTYPE_F64, HORA_OP_MAX);
    if (status != HORA_OK) return status;
    o->mode = o->probe_s[1] <= o->probe_s[0];
    return HORA_OK;
}

static hora_status_t step_gradients(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *labels, float *loss)
{
    if (t->overlap->mode < 0) return probe(t, x, labels, loss);
    return gradients(t, x, labels, t->overlap->mode, loss);
}

hora_status_t tr_trainer_gradients(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *labels, float *loss)
{
    hora_status_t status = step_gradients(t, x, labels, loss);
    hora_status_t settled = tr_trainer_settle(t);
    return status != HORA_OK ? status : settled;
}

int tr_trainer_overlap(const tr_trainer_t *t, double *ms_on, double *ms_off)
{
    const tr_overlap_state_t *o = t->overlap;
    int decided = t->config.overlap == TR_OVERLAP_AUTO && o->mode >= 0 && o->probe_step > 0;
    const double per_mode = TR_OVERLAP_PROBE_STEPS / 2;
    if (ms_on) *ms_on = decided ? 1e3 * o->probe_s[1] / per_mode : 0;
    if (ms_off) *ms_off = decided ? 1e3 * o->probe_s[0] / per_mode : 0;
    return o->mode;
}

hora_status_t tr_trainer_step(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *labels, double lr, float *loss,
                              int *skipped)
{
    const double scale = t->scaler->scale; /* this step's: the update below may change it */
    int skip = 0;
    hora_status_t status = step_gradients(t, x, labels, loss);
    if (status == HORA_OK && tr_loss_scale_active(&t->config.loss_scale)) {
        /* The all-reduced gradients are the same bits on every rank, so
         * every rank finds the same overflow and takes the same decision.
         * The check reads them back, so the host waits here anyway: the
         * all-reduces are collected first, a failed one ends the step. */
        tr_backend_t *backend = tr_model_backend(t->model);
        int overflow = 0;
        status = backend->ops->check_finite(backend, tr_model_arena(t->model, TR_ARENA_GRADS), &overflow);
        hora_status_t settled = tr_trainer_settle(t);
        if (status == HORA_OK) status = settled;
        if (status == HORA_OK) status = tr_loss_scale_update(&t->config.loss_scale, t->scaler, overflow, &skip);
    }
    if (skipped) *skipped = skip;
    if (status != HORA_OK || skip) return status;
    return tr_optim_step(t->model, &t->config.optim, lr, 1.0 / scale);
}
