/*
 * test_schedule.c - the learning-rate schedule against values worked out by
 * hand, and the CLI-facing parser.
 */
#include <math.h>
#include <stdio.h>

#include "optim.h"

static int failures;

static void expect(const char *what, double got, double want)
{
    int ok = fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want));
    printf("%-44s got %.15g want %.15g %s\n", what, got, want, ok ? "ok" : "FAIL");
    failures += !ok;
}

int main(void)
{
    /* The reference job: 0.1 x 16384/256 = 6.4 peak, 10 warmup epochs from
     * 0.001, poly-2 over the remaining 80 (1 step per "epoch" here x 100). */
    tr_lr_schedule_t s = {.peak_lr = 6.4,
                          .warmup_lr = 0.001,
                          .warmup_steps = 1000,
                          .total_steps = 9000,
                          .decay = TR_LR_DECAY_POLY,
                          .power = 2};
    expect("warmup step 0", tr_lr_at(&s, 0), 0.001 + (6.4 - 0.001) * 1 / 1000.0);
    expect("warmup step 499", tr_lr_at(&s, 499), 0.001 + (6.4 - 0.001) * 0.5);
    expect("warmup last step reaches peak", tr_lr_at(&s, 999), 6.4);
    expect("poly start", tr_lr_at(&s, 1000), 6.4);
    expect("poly half way: peak / 4", tr_lr_at(&s, 5000), 1.6);
    expect("poly 3/4: peak / 16", tr_lr_at(&s, 7000), 0.4);
    expect("poly end", tr_lr_at(&s, 9000), 0.0);
    expect("past the end stays 0", tr_lr_at(&s, 12345), 0.0);

    /* The Fashion-MNIST recipe: warmup from 0 over one epoch of 468 steps. */
    tr_lr_schedule_t f = {
        .peak_lr = 0.1, .warmup_steps = 468, .total_steps = 4680, .decay = TR_LR_DECAY_POLY, .power = 2};
    expect("fmnist step 0", tr_lr_at(&f, 0), 0.1 / 468);
    expect("fmnist after warmup + 1053 steps", tr_lr_at(&f, 468 + 1053), 0.1 * 0.75 * 0.75);

    tr_lr_schedule_t c = {.peak_lr = 2.0, .total_steps = 100, .decay = TR_LR_DECAY_COSINE};
    expect("cosine start", tr_lr_at(&c, 0), 2.0);
    expect("cosine middle", tr_lr_at(&c, 50), 1.0);
    expect("cosine end", tr_lr_at(&c, 100), 0.0);

    tr_lr_schedule_t st = {.peak_lr = 0.4,
                           .total_steps = 90,
                           .decay = TR_LR_DECAY_STEP,
                           .gamma = 0.1,
                           .milestone_count = 3,
                           .milestones = {30, 60, 80}};
    expect("step before 30", tr_lr_at(&st, 29), 0.4);
    expect("step at 30", tr_lr_at(&st, 30), 0.4 * 0.1);
    expect("step at 85", tr_lr_at(&st, 85), 0.4 * 0.1 * 0.1 * 0.1);

    tr_lr_schedule_t none = {
        .peak_lr = 0.3, .warmup_lr = 0.1, .warmup_steps = 2, .total_steps = 10, .decay = TR_LR_DECAY_NONE};
    expect("constant after warmup", tr_lr_at(&none, 7), 0.3);
    expect("warmup midpoint", tr_lr_at(&none, 0), 0.2);

    expect("parse poly", tr_lr_decay_parse("poly"), TR_LR_DECAY_POLY);
    expect("parse step", tr_lr_decay_parse("step"), TR_LR_DECAY_STEP);
    expect("parse junk", tr_lr_decay_parse("linearish"), -1);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
