/* coord_request.h - what a request is (the bottom of the coordinator: every
 * piece may include it, it includes none of them): its kinds, the metadata
 * that must agree across ranks, struct hora_request, the FIFO the cycle
 * keeps them in, and the coordinator's clock. */
#ifndef HORA_COORD_REQUEST_H
#define HORA_COORD_REQUEST_H

#include <stddef.h>
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
    uint64_t *splits;    /* alltoall: rows to each rank (size entries, owned) */
    int64_t enqueue_us;  /* CLOCK_MONOTONIC */
    uint64_t flight_seq; /* its flight recorder entry (flight.h), 0: none */
    /* Device requests: the data is ready once ready_event has happened
     * (the caller's, or one recorded on its stream at submission: owned);
     * flag_slot >= 0: the completion flag hora_stream_wait waits on. */
    void *ready_event;
    int owns_event;
    int flag_slot;
    uint32_t flag_value;
    /* coordinator thread only */
    int cache_id; /* waiting on the cache path under this id, or -1 */
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

/* Requests in the order they were submitted, linked through next. FIFO:
 * the order requests were submitted becomes the order rank 0 sees them,
 * the response order, the cache-id order and the layout of a fused buffer
 * - which then matches a gradient arena filled in the same order, so fusion
 * runs without copies. */
struct coord_fifo {
    struct hora_request *head, *tail;
};

static inline void coord_fifo_push(struct coord_fifo *f, struct hora_request *req)
{
    req->next = NULL;
    if (f->tail)
        f->tail->next = req;
    else
        f->head = req;
    f->tail = req;
}

/* Take req out of f, if it is there. */
void coord_fifo_remove(struct coord_fifo *f, struct hora_request *req);

/* Free an allgather's result (host: malloc, device: mem_dev_malloc). */
void coord_free_result(hora_memory_t memory, void *result);

/* CLOCK_MONOTONIC in microseconds. */
int64_t coord_now_us(void);
const char *coord_kind_name(uint32_t kind);
/* Requests of this kind may take the response cache's fast path. */
int coord_kind_cacheable(uint32_t kind);

#endif
