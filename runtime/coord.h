/* coord.h - the coordinator: one background thread per process that agrees
 * with the other ranks which named requests are ready, fuses them and runs
 * them in the same order everywhere (coord.c), behind the public async API
 * (coord_api.c). */
#ifndef HORA_COORD_H
#define HORA_COORD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hora.h"

enum coord_kind {
    COORD_KIND_ALLREDUCE = 1,
    COORD_KIND_BROADCAST = 2,
    COORD_KIND_ALLGATHER = 3,
    COORD_KIND_JOIN = 4,
    /* responses only */
    COORD_KIND_ERROR = 5,
    COORD_KIND_SHUTDOWN = 6,
};

/* Everything about a request that must agree across ranks. Plain data: it
 * travels between ranks as bytes. */
struct coord_meta {
    uint32_t kind, dtype, op, compression, memory;
    int32_t root, ndim, group_size;
    uint64_t count;
    double prescale, postscale;
    int64_t dims[HORA_MAX_DIMS];
};

struct hora_request {
    char *name;
    char *group; /* grouped allreduce: key shared by the members, else NULL */
    struct coord_meta meta;
    const void *send;
    void *recv;
    int64_t enqueue_us; /* CLOCK_MONOTONIC */
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

hora_status_t coord_start(void);
/* Collective: every rank asks the coordinator to stop; pending requests fail
 * with HORA_ERR_SHUTDOWN. */
void coord_stop(void);

/* Hand a request (or a group of them) to the coordinator. */
hora_status_t coord_submit(struct hora_request **reqs, int n);
/* Mark a request finished and wake waiters (any thread). */
void coord_complete(struct hora_request *req, hora_status_t status, const char *error);
hora_status_t coord_wait(struct hora_request *req);
int coord_is_done(struct hora_request *req, hora_status_t *status);

int64_t coord_now_us(void);
const char *coord_kind_name(uint32_t kind);

#endif
