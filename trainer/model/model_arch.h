/*
 * model_arch.h - what the network is (model_arch.c), for model_build.c.
 */
#ifndef HORA_TRAINER_MODEL_ARCH_H
#define HORA_TRAINER_MODEL_ARCH_H

#include "model_types.h"

/* Declares every parameter and BN statistic of m->spec in PyTorch's order
 * (shapes, arena offsets) and the blocks' shapes. */
hora_status_t model_declare(tr_model_t *m);
/* The initial parameters and statistics from seed, made on the host and
 * uploaded into the arenas (the compute-dtype copy is the caller's:
 * tr_model_sync_compute). */
hora_status_t model_init_values(tr_model_t *m, uint64_t seed);

#endif
