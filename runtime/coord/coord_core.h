/* coord_core.h - the coordinator's state (struct coord: made by coord.c,
 * turned by coord_cycle.c, read by every piece above this one) and the
 * low-level helpers every piece may call (coord_core.c): the polling of its
 * waits, MPI waits, the inspection period, buffers kept for MPI to the end
 * of the process. The pieces whose state it holds - the queue
 * (coord_queue.h), the response cache (coord_cache.h) and rank 0's
 * negotiation table (coord_table.h) - sit below it and know nothing of it.
 *
 *   coord.c          start, stop, abort
 *   coord_cycle.c    the cycle
 *   coord_slow.c     the slow path's exchange
 *   coord_exec.c     execution
 *   coord_flight.c   the hooks into the flight recorder
 *   coord_agree.c    the agreement         coord_set.c    a set's MPI path
 *   coord_core.c     this state, polling, waits, coord_finish_pending
 *   coord_queue.c    submission, completion, the nap (struct coord_queue)
 *   flight.c         the flight recorder
 *   coord_table.c    rank 0's table        coord_cache.c  the response cache
 *   coord_fuse.c     fusion planning
 *   coord_wire.c     the lists as bytes
 *   coord_request.c  requests, the clock
 * (each calls only what stands below it). */
#ifndef HORA_COORD_CORE_H
#define HORA_COORD_CORE_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "coll/coll.h"
#include "coord/coord_cache.h"
#include "coord/coord_map.h"
#include "coord/coord_queue.h"
#include "coord/coord_request.h"
#include "coord/coord_table.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"

struct autotune;
struct stack_channel;
struct straggler;
struct timeline;

struct coord_settings {
    size_t fusion_threshold;
    double cycle_time_ms;
    size_t chunk_bytes;
};

/* HORA_FAULT_STOP's points (coord_fault_stop). */
enum coord_fault_point { COORD_FAULT_NONE = 0, COORD_FAULT_SLOW_LISTS = 1, COORD_FAULT_SLOW_RESPONSES = 2 };

struct coord {
    pthread_t thread;
    struct coord_queue queue; /* between application threads and this coordinator, under its lock */

    /* set at start, read-only after */
    const struct config *cfg;
    struct coll_ctx *coll;
    struct mem_pool *pool;
    struct mem_dev *dev;

    /* A process set's (NULL / 0 for the world's): members' world ranks,
     * the set's id. Its data moves over MPI on comm (coord_set.c). */
    int *members;
    int set_id;
    /* HORA_FAULT_STOP: where, on which rank, at which occurrence (1-based). */
    int fault_point; /* enum coord_fault_point */
    int fault_rank, fault_nth, fault_seen;

    /* coordinator thread only */
    int flight_dumped;            /* the flight recorder was written for this failure */
    struct straggler *straggler;  /* the world's: lateness per rank (straggler.c) */
    struct stack_channel *stacks; /* the world's: stall stacks, asked and answered (stack.h) */
    MPI_Comm comm;
    int rank, size;
    int64_t sync_us;            /* when the last cycle's allreduce ended: the same moment on every rank */
    struct coord_map pending;   /* name -> request taken from incoming */
    struct coord_fifo uncached; /* to send to rank 0 at the next slow path, in submission order */
    struct coord_cache cache;   /* the response cache and the requests waiting on it */
    uint64_t *vec;              /* AND bits | requested bits | invalidate bits | flags */
    /* A process set's star (coord_agree.c, coord_slow.c; NULL for the
     * world's coordinator, whose exchanges are collectives on its channel):
     * rank 0's receive buffers (a vector per member) and reply, or another
     * member's reply; a request per member. */
    uint64_t *agree;
    MPI_Request *agree_reqs;
    int *agree_silent;
    int agree_in_flight; /* an abandoned agreement's requests may still use vec and agree */
    int words;
    int joined;
    struct hora_request *join_req;
    struct coord_settings settings;
    int64_t demote_us;
    /* Per memory kind (host pool, device pool). */
    void *fusion_buf[HORA_MEMORY_COUNT];
    size_t fusion_bytes[HORA_MEMORY_COUNT];
    void *zeros[HORA_MEMORY_COUNT]; /* a joined rank's broadcast buffer */
    size_t zeros_bytes[HORA_MEMORY_COUNT];
    void *gap_zeros[HORA_MEMORY_COUNT]; /* HORA_ALIGN_BYTES of zeros: the fusion buffer's gaps */
    size_t gap_zeros_bytes[HORA_MEMORY_COUNT];
    uint64_t cycle_bytes; /* allreduced this cycle (autotune) */

    /* rank 0 only (the table is allocated on every rank) */
    struct coord_table table; /* the negotiation and its stall inspector */
    /* The timeline (HORA_TIMELINE, hora_timeline_start) and whether each
     * cycle leaves a CYCLE_START instant in it: under cycle_lock, which the
     * coordinator thread holds through every cycle and lets go for its nap,
     * so coord_timeline_swap (any thread) replaces them between two cycles. */
    pthread_mutex_t cycle_lock;
    pthread_cond_t cycle_cond; /* a swap is done: the next cycle may start */
    atomic_int swaps_waiting;  /* swaps that want cycle_lock: the next cycle lets one go first */
    uint64_t swaps_done;       /* under cycle_lock */
    struct timeline *tl;
    int mark_cycles;
    struct autotune *at;
    int settings_changed;
    struct coord_settings next_settings;
};

/* The world rank of place q (a process set's member q, else q). */
static inline int coord_world_rank(const struct coord *c, int q) { return c->members ? c->members[q] : q; }

/* Poll a nonblocking MPI operation on c->comm to its end: HORA_OK, or an
 * MPI error, the status of a rank that aborted, or HORA_ERR_TIMEOUT after
 * timeout_s (0: none). A failed wait leaves the operation in flight (MPI
 * cannot cancel a collective): its buffers must never be freed. */
hora_status_t coord_mpi_wait(struct coord *c, MPI_Request *req, double timeout_s, const char *what);
/* The coordinator's polling (naps, or yields while an application thread
 * waits; a rank's abort ends it with that rank's status): init before a
 * wait, pause after each poll that found nothing. */
struct coord_poll {
    long nap_ns, max_nap_ns;
    int polls;
};
void coord_poll_init(const struct coord *c, struct coord_poll *p);
hora_status_t coord_poll_pause(struct coord *c, struct coord_poll *p);
/* How often rank 0's stall inspector looks and an idle rank cycles. */
int64_t coord_inspect_period_us(const struct coord *c);
/* Keep buf (may be NULL) and the communicator to the end of the process: an
 * abandoned MPI request may still use them. */
void coord_keep_in_flight(struct coord *c, void *buf);
/* Keep buf (may be NULL) to the end of the process, reachable. */
void coord_abandon(void *buf);
/* The coordinator thread: a request leaves its tables (pending, the cache
 * path, the uncached list, the join) and completes. */
void coord_finish_pending(struct coord *c, struct hora_request *req, hora_status_t status, const char *error);

#endif
