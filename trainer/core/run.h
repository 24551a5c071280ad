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

#endif
