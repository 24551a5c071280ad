/*
 * main_ckpt.h - hora-train's side of checkpoints (main_ckpt.c): resuming
 * and saving, for main.c (setup) and loop.c (the training loop).
 */
#ifndef TR_CLI_MAIN_CKPT_H
#define TR_CLI_MAIN_CKPT_H

#include <stdint.h>

#include "session.h"

/* --resume: rank 0 picks and reads the checkpoint, every rank gets the run
 * state (before the loaders open: they are keyed by it). */
hora_status_t main_resume_read(run_t *r);
/* After the model is built: rank 0 checks the checkpoint against it and
 * loads the tensors; every rank learns whether that worked. A refusal is
 * reported here, naming the field and both values. */
hora_status_t main_resume_apply(run_t *r);
/* A checkpoint of where the run stands now (rank 0, with --checkpoint-dir). */
hora_status_t main_save_checkpoint(run_t *r, uint64_t spe_epoch, uint64_t spe);
/* A resume on another world size or batch: the position converted. */
void main_reshard(run_t *r, uint64_t spe, double peak_lr);

#endif
