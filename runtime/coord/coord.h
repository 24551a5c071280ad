/* coord.h - the coordinator: one background thread per process that agrees
 * with the other ranks which named requests are ready, fuses them and runs
 * them in the same order everywhere (coord_cycle.c), behind the public async
 * API (api/api_async.c). Its state is one struct coord (coord_core.h), made
 * by coord_start (coord.c) and passed to every call; it runs its data path
 * through the coll_ctx it is given. api/ includes this header only.
 *
 * May include: base/, mem/, coll/ (and what they include). Nothing of api/. */
#ifndef HORA_COORD_H
#define HORA_COORD_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "coll/coll.h"
#include "coord/coord_request.h" /* struct hora_request, the kinds, coord_free_result */
#include "hora.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"

struct coord;
struct timeline;

/* What a coordinator runs on; everything outlives it. */
struct coord_env {
    MPI_Comm world;           /* duplicated for the coordinator's own traffic; MPI_COMM_NULL under the store
                               * bootstrap (no MPI: no process sets, no alltoall, no stall stacks) */
    int rank, size;           /* the world's, where world is MPI_COMM_NULL */
    const struct config *cfg; /* HORA_CYCLE_TIME_MS, fusion, cache, stall, timeline, autotune */
    struct coll_ctx *coll;    /* the data path (its COLL_PURPOSE_COORD channels) */
    struct mem_pool *pool;    /* fusion buffer and zeros live here */
    struct mem_dev *dev;      /* and those of device requests here */
    /* A process set's coordinator: world is the set's communicator, members
     * its world ranks (messages and a broadcast's root name world ranks),
     * and the data moves over MPI on that communicator instead of coll's
     * channels (which connect the world's rings); coll still brings the
     * abort notices. NULL / 0 for the world's. */
    const int *members;
    int set_id;
    /* The timeline rank 0 writes from the start (HORA_TIMELINE, or the one
     * hora_timeline_start set before a process set was created): a process
     * set's coordinator appends ".set<id>". NULL or "": none. */
    const char *timeline;
    int timeline_mark_cycles; /* coord_timeline_mark_cycles from the start */
};

/* Collective over env->world: starts the thread. */
hora_status_t coord_start(const struct coord_env *env, struct coord **out);
/* Stop: the first rank that asks stops every coordinator in the same cycle
 * (its stop flag is OR'ed), and pending requests fail with
 * HORA_ERR_SHUTDOWN on every rank. Returns at once when the coordinator has
 * already stopped (an error, an abort). Frees c (unless coord_abort had to
 * abandon it). */
void coord_stop(struct coord *c);
/* This rank aborts (the notice is out already, so the thread's waits fail
 * within milliseconds): stop the thread without the peers; every pending
 * request fails with the abort's status and message. Waits at most wait_s
 * for the thread; c stays valid until coord_stop. */
void coord_abort(struct coord *c, double wait_s);

/* The dynamic timeline (hora_timeline_start/stop), any thread.
 * coord_timeline_open: on rank 0 of c's ranks, open path (".set<id>"
 * appended for a process set's coordinator) as a new timeline, not yet in
 * use; elsewhere *tl = NULL. HORA_OK, HORA_ERR_SYSTEM (the message names
 * the file and the OS error), HORA_ERR_NO_MEMORY.
 * coord_timeline_swap: c writes tl (NULL: nothing) from its next cycle on;
 * the timeline it replaces is closed, a complete file that is no longer
 * written once this returns. It waits for the cycle in progress to end (a
 * nap is not waited for); a coordinator that has stopped takes tl as it
 * is, to close it at coord_stop. coord_timeline_discard closes a timeline
 * never swapped in. coord_timeline_mark_cycles: from the next cycle on,
 * each cycle starts with a CYCLE_START instant in the timeline (on), or
 * not. The callers serialise these calls on one coordinator. */
hora_status_t coord_timeline_open(const struct coord *c, const char *path, struct timeline **tl);
void coord_timeline_swap(struct coord *c, struct timeline *tl);
void coord_timeline_discard(struct timeline *tl);
void coord_timeline_mark_cycles(struct coord *c, int on);

/* Hand a request (or a group of them) to the coordinator (coord_queue.c). */
hora_status_t coord_submit(struct coord *c, struct hora_request **reqs, int n);
/* Wait for a request to complete; whether it has (hora_test). Any thread. */
hora_status_t coord_wait(struct coord *c, struct hora_request *req);
int coord_is_done(struct coord *c, struct hora_request *req, hora_status_t *status);

/* Rank 0's last straggler report (straggler.h): rank -1 when none, on
 * other ranks, or HORA_STRAGGLER_S=0. Any thread. */
void coord_straggler(struct coord *c, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles);

#endif
