/* coord_queue.h - the queue between application threads and the
 * coordinator thread (coord_queue.c): submission, waiting and polling,
 * completion, and the coordinator's nap between cycles. Its state is
 * struct coord_queue, under its own lock, which only coord_queue.c changes
 * (coord.c and coord_cycle.c also set the stop and abort flags under that
 * lock, and take the incoming list). api/ reaches it through coord.h. */
#ifndef HORA_COORD_QUEUE_H
#define HORA_COORD_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coord/coord_map.h"
#include "coord/coord_request.h"
#include "mem/mem_dev.h"

struct flight;

/* What the coordinator's nap between cycles waits for (coord_queue_nap). */
enum { COORD_NAP_CYCLE = 0, COORD_NAP_IDLE = 1, COORD_NAP_DEFER = 2 };

struct coord_queue {
    pthread_mutex_t lock; /* guards everything down to "set at start" */
    pthread_cond_t done_cond;
    pthread_cond_t work_cond; /* signalled when the nap's deadline may move: see coord_queue_nap */
    struct hora_request *incoming, *incoming_tail;
    struct coord_map inflight; /* name -> request, until completion */
    int stop_requested;        /* hora_shutdown on this rank */
    int abort_requested;       /* hora_abort on this rank: stop without the peers */
    int stopped;               /* the thread has ended: new requests fail */
    int thread_joined;         /* coord_abort joined the thread */
    int abandoned;             /* coord_abort gave up waiting for it: the coordinator is never freed */
    int waiting_threads;       /* application threads inside coord_queue_wait */
    int polled;                /* hora_test found a request not done; cleared once nothing is in flight */
    int saw_device;            /* a device-memory request was submitted: never defer again */
    int nap_kind;              /* what the coordinator's nap waits for (COORD_NAP_*) */
    hora_status_t stop_status;
    char stop_reason[256];

    /* set at start, read-only after */
    struct flight *flight; /* the process's flight recorder (flight.h), NULL: off */
    struct coll_ctx *coll; /* tells the transports an application thread waits */
    struct mem_dev *dev;   /* device requests' completion flags */
    int64_t defer_us;      /* HORA_DEFER_MS: 0 = start host requests at once */
    int rank, set_id;
};

/* Hand a request (or a group of them) to the coordinator. */
hora_status_t coord_queue_submit(struct coord_queue *q, struct hora_request **reqs, int n);
/* Mark a request finished and wake waiters (any thread). */
void coord_queue_complete(struct coord_queue *q, struct hora_request *req, hora_status_t status, const char *error);
hora_status_t coord_queue_wait(struct coord_queue *q, struct hora_request *req);
int coord_queue_is_done(struct coord_queue *q, struct hora_request *req, hora_status_t *status);

/* The coordinator's nap after a cycle that started at start_us: idle_us is
 * how long to sleep with nothing in flight (the stall-inspection period),
 * cycle_us the cycle time, busy whether requests are pending on this rank
 * or names wait in rank 0's table, sync_us when the last cycle's agreement
 * ended. */
void coord_queue_nap(struct coord_queue *q, int64_t start_us, int64_t idle_us, int64_t cycle_us, int busy,
                     int64_t sync_us);

#endif
