/* coord.h - the coordinator: one background thread per process that agrees
 * with the other ranks which named requests are ready, fuses them and runs
 * them in the same order everywhere (coord.c), behind the public async API
 * (api/api_async.c). Its state is one struct coord, made by coord_start and
 * passed to every call; it runs its data path through the coll_ctx it is
 * given.
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
#include "hora.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"

enum coord_kind {
    COORD_KIND_ALLREDUCE = 1,
    COORD_KIND_BROADCAST = 2,
    COORD_KIND_ALLGATHER = 3,
    COORD_KIND_JOIN = 4,
    /* responses only */
    COORD_KIND_ERROR = 5,
    COORD_KIND_SHUTDOWN = 6,
    /* requests again */
    COORD_KIND_BARRIER = 7,
    COORD_KIND_ALLTOALL = 8,
    COORD_KIND_REDUCESCATTER = 9,
};

/* Everything about a request that must agree across ranks. Plain data: it
 * travels between ranks as bytes. */
struct coord_meta {
    uint32_t kind, dtype, op, compression, memory;
    uint32_t reproducible; /* allreduce: 0 off, 1 rank order, 2 exact (hora_reproducible_t, resolved) */
    int32_t root, ndim, group_size;
    uint64_t count;
    double prescale, postscale;
    int64_t dims[HORA_MAX_DIMS];
};

struct hora_request {
    char *name;
    char *group; /* grouped allreduce or reducescatter: key shared by the members, else NULL */
    int set;     /* the process set it was submitted to (0: the world) */
    struct coord_meta meta;
    const void *send;
    void *recv;
    uint64_t *splits; /* alltoall: rows to each rank (size entries, owned) */
    int64_t enqueue_us; /* CLOCK_MONOTONIC */
    uint64_t flight_seq; /* its flight recorder entry (flight.h), 0: none */
    /* Device requests: the data is ready once ready_event has happened
     * (the caller's, or one recorded on its stream at submission: owned);
     * flag_slot >= 0: the completion flag hora_stream_wait waits on. */
    void *ready_event;
    int owns_event;
    int flag_slot;
    uint32_t flag_value;
    /* coordinator thread only */
    int cache_id;        /* waiting on the cache path under this id, or -1 */
    int64_t cached_since_us;
    struct hora_request *next; /* incoming queue / uncached list */
    /* completion, under coord.lock */
    int done;
    hora_status_t status;
    char *error;
    void *result;
    size_t result_total;
    size_t *rank_counts;
    int join_last;
};

struct coord;

/* Free an allgather's result (host: malloc, device: mem_dev_malloc). */
void coord_free_result(hora_memory_t memory, void *result);

/* What a coordinator runs on; everything outlives it. */
struct coord_env {
    MPI_Comm world;            /* duplicated for the coordinator's own traffic */
    const struct config *cfg;  /* HORA_CYCLE_TIME_MS, fusion, cache, stall, timeline, autotune */
    struct coll_ctx *coll;     /* the data path (its COLL_PURPOSE_COORD channels) */
    struct mem_pool *pool;     /* fusion buffer and zeros live here */
    struct mem_dev *dev;       /* and those of device requests here */
    /* A process set's coordinator: world is the set's communicator, members
     * its world ranks (messages and a broadcast's root name world ranks),
     * and the data moves over MPI on that communicator instead of coll's
     * channels (which connect the world's rings); coll still brings the
     * abort notices. NULL / 0 for the world's. */
    const int *members;
    int set_id;
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

/* Hand a request (or a group of them) to the coordinator. */
hora_status_t coord_submit(struct coord *c, struct hora_request **reqs, int n);
/* Mark a request finished and wake waiters (any thread). */
void coord_complete(struct coord *c, struct hora_request *req, hora_status_t status, const char *error);
hora_status_t coord_wait(struct coord *c, struct hora_request *req);
int coord_is_done(struct coord *c, struct hora_request *req, hora_status_t *status);

/* Rank 0's last straggler report (straggler.h): rank -1 when none, on
 * other ranks, or HORA_STRAGGLER_S=0. Any thread. */
void coord_straggler(struct coord *c, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles);

int64_t coord_now_us(void);
const char *coord_kind_name(uint32_t kind);
/* Requests of this kind may take the response cache's fast path. */
int coord_kind_cacheable(uint32_t kind);

#endif
