/*
 * run.h - the run state: where a training run stands, everything about it
 * that is not a tensor. It is one struct, owned by the training loop
 * (cli/loop.c) and updated by it and by the trainer (train.c: the overlap
 * decision; the loss scaler: its state), so that a checkpoint can store
 * exactly this struct and a resumed run continue at the exact next step:
 * same batches (the loader is keyed by data_seed, epoch and step_in_epoch),
 * same learning rate (step), same overlap mode, same loss scale, same
 * precision (cli/main.c: --precision auto's choice).
 */
#ifndef TR_RUN_H
#define TR_RUN_H

#include <stdint.h>

/* --overlap auto's probe and its decision. */
typedef struct {
    int mode;          /* in use: 1 overlap, 0 not, -1 auto is still timing both */
    int probe_step;    /* auto: gradient steps taken while probing */
    double probe_s[2]; /* auto: seconds summed without [0] and with [1] overlap */
} tr_overlap_state_t;

/* The precision the run computes in, and what --precision auto measured
 * to choose it (a resumed run keeps it instead of measuring again). */
typedef struct {
    int choice;         /* tr_precision_t (precision.h): 0 fp32, 1 bf16, 2 fp16; -1 not chosen yet */
    int measured;       /* 1: --precision auto timed the candidates; 0: given, or the only candidate */
    double probe_ms[3]; /* auto: median ms per step of fp32, bf16, fp16 (0: not a candidate) */
} tr_precision_state_t;

/* Loss scaling for mixed precision (fp32 runs keep scale 1). */
typedef struct {
    double scale;               /* the scale in use */
    uint64_t good_steps;        /* steps since the last overflow (dynamic scaling) */
    uint64_t skipped_steps;     /* steps skipped because a gradient overflowed */
    uint64_t consecutive_skips; /* overflowed steps in a row, up to the last one */
} tr_loss_scale_state_t;

typedef struct {
    uint64_t seed;                /* parameter initialisation and synthetic data */
    uint64_t data_seed;           /* the loader's shuffle and augmentation key */
    uint64_t epoch;               /* the epoch in progress, from 0 */
    uint64_t step_in_epoch;       /* the next batch of that epoch: the data-order position */
    uint64_t epoch_sample_offset; /* samples of this epoch's order trained on before step_in_epoch 0
                                   * counts from: nonzero only in an epoch resumed at another world
                                   * size or batch (the loader's tr_loader_start_epoch_at) */
    uint64_t step;                /* training steps taken, skipped ones (loss-scale overflows) included:
                                   * the learning-rate schedule's position */
    uint64_t images;              /* samples trained on, all ranks together */
    tr_overlap_state_t overlap;
    tr_loss_scale_state_t loss_scale;
    tr_precision_state_t precision;
} tr_run_state_t;

/* A fresh run from seed (data_seed = seed, as before there were two). */
static inline tr_run_state_t tr_run_state_begin(uint64_t seed)
{
    tr_run_state_t s = {0};
    s.seed = s.data_seed = seed;
    s.overlap.mode = -1;
    s.precision.choice = -1;
    s.loss_scale.scale = 1.0;
    return s;
}

/* A change of world (a resume on another number of ranks or batch, an
 * elastic re-form; run.c). The per-rank batch on w1 ranks after a world of
 * w0 ranks x batch b0: with keep_global the global batch w0 x b0 divided by
 * w1 (0 when w1 does not divide it: the caller refuses, or keeps batch1),
 * else batch1 (--batch). The learning rate follows from the global batch
 * (optim.h: lr x global batch / 256), so keep_global keeps it too. */
int tr_run_world_batch(int w0, int b0, int w1, int batch1, int keep_global);

/* The position of st converted from global batch g0 to g1 (samples per
 * step, all ranks): the epoch in progress continues after the samples
 * already trained on. ordered (a loader's data, samples in the split): the
 * samples trained on become epoch_sample_offset (at most samples) and
 * step_in_epoch 0; synthetic data (ordered 0) keeps the position as a step
 * count within the epoch (at most spe). step: the epoch's start in steps of
 * the new size (spe per epoch) plus the samples trained on, rounded to the
 * nearest step, so the schedule keeps its place in epochs. Returns the
 * samples of the epoch trained on. */
uint64_t tr_run_reshard(tr_run_state_t *st, uint64_t g0, uint64_t g1, int ordered, uint64_t samples, uint64_t spe);

#endif
