/*
 * optim.h - learning-rate schedule and the optimizer step over a model.
 *
 * The schedule is a pure function of the iteration, so every rank (and a
 * resumed run) computes the same rate without state:
 *   peak = base_lr x global_batch / 256
 *   warmup (step < warmup_steps): warmup_lr + (peak - warmup_lr) (step + 1) / warmup_steps
 *   then, with t = (step - warmup_steps) / (total_steps - warmup_steps):
 *     poly:   peak (1 - t)^power
 *     cosine: peak (1 + cos(pi t)) / 2
 *     step:   peak x gamma^(number of milestones <= step)
 *     none:   peak
 */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include <stdint.h>

#include "model.h"

typedef enum {
    TR_LR_DECAY_POLY = 0,
    TR_LR_DECAY_COSINE = 1,
    TR_LR_DECAY_STEP = 2,
    TR_LR_DECAY_NONE = 3,
} tr_lr_decay_t;

#define TR_LR_MAX_MILESTONES 8

typedef struct {
    double peak_lr;
    double warmup_lr;
    uint64_t warmup_steps;
    uint64_t total_steps;
    tr_lr_decay_t decay;
    double power; /* poly */
    double gamma; /* step: factor per milestone */
    int milestone_count;
    uint64_t milestones[TR_LR_MAX_MILESTONES]; /* step: iterations */
} tr_lr_schedule_t;

double tr_lr_at(const tr_lr_schedule_t *schedule, uint64_t step);
/* The names of tr_lr_decay_t, indexed by it, NULL-terminated. */
extern const char *const tr_lr_decay_names[];
/* "poly" | "cosine" | "step" | "none"; -1 if unknown. */
int tr_lr_decay_parse(const char *name);

typedef struct {
    double momentum;     /* 0.9 */
    double weight_decay; /* 1e-4 */
    int nesterov;
    int decay_bn_bias; /* 0: no weight decay on BN gamma/beta and biases */
    int lars;          /* layer-wise trust ratio (You et al.) */
    double lars_eta;   /* 0.001 */
} tr_optim_config_t;

/* One step of every parameter with learning rate lr, from the grads arena
 * (already averaged over ranks) times grad_scale (1 / the loss scale; 1
 * without one), writing the f32 master weights and, in mixed precision,
 * their low-precision copy in the same pass. */
hora_status_t tr_optim_step(tr_model_t *model, const tr_optim_config_t *config, double lr, double grad_scale);

#endif
