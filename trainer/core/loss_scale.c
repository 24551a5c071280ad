/*
 * loss_scale.c - static and dynamic loss scaling (loss_scale.h).
 */
#include "loss_scale.h"

#include <stdio.h>

void tr_loss_scale_begin(const tr_loss_scale_config_t *c, tr_loss_scale_state_t *s)
{
    s->scale = c->mode == TR_LOSS_SCALE_NONE ? 1.0 : c->initial;
    s->good_steps = 0;
    s->skipped_steps = 0;
    s->consecutive_skips = 0;
}

hora_status_t tr_loss_scale_update(const tr_loss_scale_config_t *c, tr_loss_scale_state_t *s, int overflow, int *skip)
{
    *skip = 0;
    if (c->mode == TR_LOSS_SCALE_NONE) return HORA_OK;
    if (!overflow) {
        s->consecutive_skips = 0;
        s->good_steps++;
        /* The dynamic scale stays a power of two (it starts as one and only
         * doubles or halves), so scaling and unscaling by it are exact; no
         * upper bound needed: an overflow brings it back down. */
        if (c->mode == TR_LOSS_SCALE_DYNAMIC && c->window > 0 && s->good_steps >= c->window) {
            s->scale *= 2.0;
            s->good_steps = 0;
        }
        return HORA_OK;
    }
    *skip = 1;
    s->skipped_steps++;
    s->consecutive_skips++;
    s->good_steps = 0;
    if (c->mode == TR_LOSS_SCALE_DYNAMIC) s->scale *= 0.5;
    uint64_t limit = c->max_consecutive_skips > 0 ? (uint64_t)c->max_consecutive_skips : TR_LOSS_SCALE_MAX_SKIPS;
    if (s->consecutive_skips >= limit) {
        fprintf(stderr,
                "hora-train: the gradients overflowed (inf/NaN) on %llu steps in a row, %s loss scale %g "
                "now; the model has diverged: stopping\n",
                (unsigned long long)s->consecutive_skips, c->mode == TR_LOSS_SCALE_DYNAMIC ? "dynamic" : "static",
                s->scale);
        return HORA_ERR_INTERNAL;
    }
    return HORA_OK;
}
