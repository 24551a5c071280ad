/*
 * elastic.h - hora-train --elastic (elastic.c): the training state
 * committed in memory, and the world re-formed after a lost member or when
 * hosts arrive, training going on from the last commit.
 */
#ifndef TR_CLI_ELASTIC_H
#define TR_CLI_ELASTIC_H

#include <stdint.h>

#include "session.h"

/* After hora_init, with --elastic: refused (on every rank, with the
 * message) unless this world can re-form (hora-run --elastic); a newcomer
 * (its first hora_init joined a later generation) learns the run state from
 * the rank with the newest commit here, and its tensors in elastic_sync. */
hora_status_t elastic_start(run_t *r);

/* Steps between commits: --commit-every-steps, or auto (1 for models under
 * 5 M parameters, else 10). */
int elastic_commit_interval(const run_t *r);

/* Commit the training state in memory (r->commit): the model's arenas
 * and the run state, in the world of spe steps per epoch. Then, with check,
 * ask whether hosts wait to be taken in (collective: r->hosts_waiting, the
 * same on every rank). */
hora_status_t elastic_commit(run_t *r, uint64_t spe, int check);

/* The world ends its generation (why HORA_ERR_PEER_LOST: a member was
 * lost; HORA_OK: hosts wait, hora_elastic_reform) and this process joins
 * the next (hora_init); every rank learns the run state of the rank with
 * the newest commit. Rank 0 says what changed: `world 4 -> 3 at step K
 * (rank 2 lost: <reason>)`. The model, trainer and loaders must be freed
 * before (they hold the ended world's memory); setup builds them again for
 * the new world, then elastic_sync. */
hora_status_t elastic_reform(run_t *r, hora_status_t why);

/* After setup in a re-formed world (or a newcomer's): the committed
 * tensors (params, momentum, BN statistics) from the commit's rank to every
 * rank, the run state rolled back to that commit. */
hora_status_t elastic_sync(run_t *r);

#endif
