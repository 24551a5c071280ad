/*
 * loss_scale.h - loss scaling for mixed precision, backend-independent: the
 * loss's gradient is multiplied by a scale so that small gradients survive
 * a low-precision dtype, and the optimizer step divides it out again.
 *
 * Static: one scale for the whole run (the reference recipe's 1024; a power
 * of two keeps scaling and unscaling exact, 1000 would round).
 * Dynamic: start at `initial` (2^16), and after every step that was
 * checked: an overflow (any inf/NaN in the all-reduced gradients) skips
 * the step and halves the scale; `window` clean steps in a row double it.
 * Either way a step whose gradients overflowed is skipped, never applied.
 *
 * The decision needs no collective of its own: it is taken from the
 * all-reduced gradients, which hora makes bit-identical on every rank (an
 * inf or NaN on one rank reaches every rank through the sum), so every rank
 * skips the same steps and keeps the same scale.
 *
 * The state is the run state's (run.h), so a checkpoint carries it.
 */
#ifndef TR_LOSS_SCALE_H
#define TR_LOSS_SCALE_H

#include <stdint.h>

#include "hora.h"
#include "run.h"

typedef enum {
    TR_LOSS_SCALE_NONE = 0, /* scale 1, gradients not checked (fp32 runs) */
    TR_LOSS_SCALE_STATIC = 1,
    TR_LOSS_SCALE_DYNAMIC = 2,
} tr_loss_scale_mode_t;

typedef struct {
    tr_loss_scale_mode_t mode;
    double initial;  /* static: the scale; dynamic: the first one (65536) */
    uint64_t window; /* dynamic: clean steps before the scale doubles (2000) */
    /* Overflowed steps in a row after which the run stops: the gradients
     * are not finite at any scale, the model has diverged (dynamic: the
     * scale has been halved that many times). 0 (or less): the default,
     * TR_LOSS_SCALE_MAX_SKIPS. */
    int max_consecutive_skips;
} tr_loss_scale_config_t;

#define TR_LOSS_SCALE_DYNAMIC_INITIAL 65536.0
#define TR_LOSS_SCALE_DEFAULT_WINDOW 2000
#define TR_LOSS_SCALE_MAX_SKIPS 40

/* A fresh state for config: scale = initial (1 for NONE). */
void tr_loss_scale_begin(const tr_loss_scale_config_t *config, tr_loss_scale_state_t *state);

/* Whether gradients are checked and scaled at all. */
static inline int tr_loss_scale_active(const tr_loss_scale_config_t *config)
{
    return config->mode != TR_LOSS_SCALE_NONE;
}

/* After a step's gradients were checked: overflow says whether any was
 * inf/NaN. Updates state (scale, good_steps, skipped_steps) and sets *skip
 * (the optimizer step must not run). HORA_ERR_INTERNAL, with a message,
 * after max_consecutive_skips overflows in a row. */
hora_status_t tr_loss_scale_update(const tr_loss_scale_config_t *config, tr_loss_scale_state_t *state, int overflow,
                                   int *skip);

#endif
