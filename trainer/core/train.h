/*
 * train.h - one data-parallel training step: forward, backward with each
 * gradient's all-reduce (average over ranks) started the moment backprop
 * writes it, wait, optimizer step.
 */
#ifndef TR_TRAIN_H
#define TR_TRAIN_H

#include "loss_scale.h"
#include "model.h"
#include "optim.h"
#include "run.h"

/* When the gradients' all-reduces run. */
typedef enum {
    TR_OVERLAP_OFF = 0,  /* all after backward */
    TR_OVERLAP_ON = 1,   /* each the moment backprop writes it */
    TR_OVERLAP_AUTO = 2, /* measure both on the first steps, keep the faster */
} tr_overlap_t;

/* The names of tr_overlap_t, indexed by it, NULL-terminated. */
extern const char *const tr_overlap_names[];

/* TR_OVERLAP_AUTO: warm-up steps (first-use costs, not timed), then steps timed,
 * alternately with and without overlap. */
#define TR_OVERLAP_PROBE_WARMUP 2
#define TR_OVERLAP_PROBE_STEPS 16

/* Called with parameter index's gradient (a view of the grads arena, in
 * backend memory, in the gradient dtype, times the loss scale) the moment
 * backprop has written it, before its all-reduce starts, on the thread
 * running the step; it may change the gradient in place (per-tensor
 * clipping, fault injection in tests). On a device backend the gradient is
 * complete only after the backend's synchronize. */
typedef void (*tr_grad_hook_fn)(void *ctx, int param_index, const tr_tensor_t *grad);

typedef struct {
    tr_overlap_t overlap;
    float label_smoothing;
    tr_optim_config_t optim;
    tr_loss_scale_config_t loss_scale; /* mode NONE: fp32 without scaling */
    tr_grad_hook_fn grad_hook;         /* NULL: none */
    void *grad_hook_ctx;
    /* Put before each all-reduce's name ("grad.<param>"); NULL: none.
     * Two trainers alive at once (--precision auto's probe) keep their
     * requests, and hora's response-cache entries, apart with it. */
    const char *name_prefix;
    /* The gradient all-reduce's hora_opts_t.reproducible (--reproducible):
     * 0 what HORA_REPRODUCIBLE says, 1 rank order (bit-identical for a
     * world size whatever the algorithm or transport), 2 exact. */
    int reproducible;
} tr_step_config_t;

typedef struct tr_trainer tr_trainer_t;

/* hora must be initialised (it is used when hora_size() > 1). state is the
 * run state (run.h): the trainer keeps its overlap probe and decision and
 * the loss scale there. An overlap mode of -1 starts according to
 * config->overlap; 0 or 1 (a resumed run) is kept. The loss-scale state is
 * used as it is (tr_loss_scale_begin makes a fresh one). */
hora_status_t tr_trainer_init(tr_model_t *model, const tr_step_config_t *config, tr_run_state_t *state,
                              tr_trainer_t **out);
void tr_trainer_free(tr_trainer_t *trainer);

/* Rank root's parameters and BN statistics to every rank (and the
 * low-precision copy remade from them); with momentum set, its optimizer
 * momentum too (a resumed run: a fresh one starts at zero everywhere).
 * root: 0 at start and on resume; an elastic re-form's the lowest rank
 * holding the newest commit. */
hora_status_t tr_trainer_broadcast_state(tr_trainer_t *trainer, int momentum, int root);

/* Forward + backward on x (a host batch of any size, as tr_model_forward
 * takes it; every rank passes the same size) and its labels (host), the averaged gradients
 * in the model's grads arena (times the loss scale), then, with loss
 * scaling, the overflow check and the scaler's update, and the optimizer
 * step with lr unless the gradients overflowed (a skipped step has still
 * updated the BN running statistics in its forward, as in PyTorch's
 * mixed-precision training). *loss: this rank's loss;
 * *skipped (may be NULL): 1 when the step was skipped (the same on every
 * rank). */
hora_status_t tr_trainer_step(tr_trainer_t *trainer, const tr_tensor_t *x, const int32_t *labels, double lr,
                              float *loss, int *skipped);

/* Forward + backward + all-reduce without the check or the optimizer step
 * (tests): the grads arena holds the averaged gradients times the loss
 * scale in use (settled: see tr_trainer_settle). */
hora_status_t tr_trainer_gradients(tr_trainer_t *trainer, const tr_tensor_t *x, const int32_t *labels, float *loss);

/* A device backend's step returns with its all-reduces queued: the
 * optimizer waits for them on the device, and their statuses are read at
 * the next step. This collects them now (blocking until they are done) and
 * returns the first failure; call it before reading the step's results
 * from elsewhere (a checkpoint, evaluation, the end of the run). HORA_OK
 * at once when nothing is pending (the cpu backend never leaves any). */
hora_status_t tr_trainer_settle(tr_trainer_t *trainer);

/* Whether the next step overlaps: 1 or 0, or -1 while TR_OVERLAP_AUTO is
 * still timing both (always 0 on one rank: there is nothing to all-reduce).
 * Once auto has decided (the same way on every rank, from the slowest
 * rank's times), *ms_on and *ms_off are its mean step times, else 0. */
int tr_trainer_overlap(const tr_trainer_t *trainer, double *ms_on, double *ms_off);

/* CLOCK_MONOTONIC in seconds (step timing here and in hora-train). */
double tr_now_s(void);

#endif
