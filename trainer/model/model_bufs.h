/*
 * model_bufs.h - the model's per-sample tensors (model_bufs.c), for model_build.c
 * (which makes them) and model_pass.c (which sets the batch).
 */
#ifndef HORA_TRAINER_MODEL_BUFS_H
#define HORA_TRAINER_MODEL_BUFS_H

#include "model_types.h"

/* Registers t, a per-sample tensor of (rows, c) (plain_ndim 2), (rows)
 * (plain_ndim 1) or an activation of c x h x w per sample (plain_ndim 0),
 * in dtype; model_bufs_alloc makes it. */
hora_status_t model_buf_add(tr_model_t *m, tr_tensor_t *t, int plain_ndim, int c, int h, int w, tr_dtype_t dtype);
/* An activation (or its gradient) in the compute dtype. */
hora_status_t model_act(tr_model_t *m, tr_tensor_t *t, int c, int h, int w);
/* (Re)makes every per-sample tensor for capacity samples. */
hora_status_t model_bufs_alloc(tr_model_t *m, int capacity);
/* Points every per-sample tensor at its first n samples (n <= capacity). */
void model_set_batch(tr_model_t *m, int n);
/* Frees every per-sample tensor and the list. */
void model_bufs_free(tr_model_t *m);

#endif
