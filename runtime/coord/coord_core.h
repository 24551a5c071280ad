/* coord_internal.h - state shared by coord.c (thread, cache, cycle),
 * coord_queue.c (submission, waiting, completion, the nap), coord_negotiate.c
 * (rank 0's table, validation, wire format), coord_exec.c (fusion and
 * execution of responses) and coord_set.c (a process set's data path). */
#ifndef HORA_COORD_INTERNAL_H
#define HORA_COORD_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "coord/autotune.h"
#include "coord/coord.h"
#include "coord/coord_map.h"
#include "coord/timeline.h"

struct coord_buf {
    uint8_t *data;
    size_t len, cap, pos; /* pos: read cursor */
};

struct coord_response {
    uint32_t kind;
    int ntensors;
    char **names;
    struct coord_meta *metas;
    uint64_t *rank_counts; /* ALLGATHER: one per rank */
    char *error;           /* ERROR, SHUTDOWN */
    int32_t last_joined;   /* JOIN; ERROR: >= 0 when the request came while this rank had joined */
    uint32_t cacheable;    /* insert into the response cache after success */
    int32_t cache_id;      /* >= 0: built from the cache (touch it) */
};

struct coord_responses {
    struct coord_response *items;
    int count, cap;
};

struct coord_cache_entry {
    int valid;
    char *name;
    struct coord_meta meta;
    uint64_t last_used;
};

/* rank 0: one entry per name some rank has submitted and not all have. */
struct coord_entry {
    char *name;
    char *group;
    struct coord_meta *metas; /* [size] */
    uint8_t *present;         /* [size] */
    int64_t *ready_us;        /* [size] */
    int64_t first_us;
    int64_t last_warn_us;
    struct coord_entry *next; /* arrival order */
};

/* What the coordinator's nap between cycles waits for (coord_nap). */
enum { COORD_NAP_CYCLE = 0, COORD_NAP_IDLE = 1, COORD_NAP_DEFER = 2 };

struct coord_settings {
    size_t fusion_threshold;
    double cycle_time_ms;
    size_t chunk_bytes;
};

/* HORA_FAULT_STOP's points (coord_fault_stop). */
enum coord_fault_point { COORD_FAULT_NONE = 0, COORD_FAULT_SLOW_LISTS = 1, COORD_FAULT_SLOW_RESPONSES = 2 };

struct coord {
    pthread_t thread;
    pthread_mutex_t lock; /* guards everything down to "coordinator thread only" */
    pthread_cond_t done_cond;
    pthread_cond_t work_cond; /* signalled when the nap's deadline may move: see coord_nap */
    struct hora_request *incoming, *incoming_tail;
    struct coord_map inflight; /* name -> request, until completion */
    int stop_requested;       /* hora_shutdown on this rank */
    int abort_requested;      /* hora_abort on this rank: stop without the peers */
    int stopped;              /* the thread has ended: new requests fail */
    int thread_joined;        /* coord_abort joined the thread */
    int abandoned;            /* coord_abort gave up waiting for it: c is never freed */
    int waiting_threads;      /* application threads inside coord_wait */
    int polled;               /* hora_test found a request not done; cleared once nothing is in flight */
    int saw_device;           /* a device-memory request was submitted: never defer again */
    int nap_kind;             /* what the coordinator's nap waits for (COORD_NAP_*) */
    hora_status_t stop_status;
    char stop_reason[256];
    struct flight *flight;    /* the process's flight recorder (flight.h), NULL: off */

    /* set at start, read-only after */
    const struct config *cfg;
    int64_t defer_us;         /* HORA_DEFER_MS: 0 = start host requests at once */
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
    int flight_dumped;        /* the flight recorder was written for this failure */
    struct straggler *straggler; /* the world's: lateness per rank (straggler.c) */
    struct stack_channel *stacks; /* the world's: stall stacks, asked and answered (stack.h) */
    MPI_Comm comm;
    int rank, size;
    int64_t sync_us; /* when the last cycle's allreduce ended: the same moment on every rank */
    struct coord_map pending;        /* name -> request taken from incoming */
    struct hora_request *uncached;   /* to send to rank 0 at the next slow path, in */
    struct hora_request *uncached_tail; /* submission order (fusion keeps that order) */
    struct hora_request **cached;    /* requests waiting on the cache path */
    int cached_count, cached_cap;
    struct coord_cache_entry *cache;
    int cache_capacity;
    struct coord_map cache_index;    /* name -> id + 1 */
    uint64_t cache_tick;
    uint64_t *vec;                   /* AND bits | requested bits | invalidate bits | flags */
    /* A process set's star (coord_agree.c, coord_slow.c; NULL for the
     * world's coordinator, whose exchanges are collectives on its channel):
     * rank 0's receive buffers (a vector per member) and reply, or another
     * member's reply; a request per member. */
    uint64_t *agree;
    MPI_Request *agree_reqs;
    int *agree_silent;
    int agree_in_flight;             /* an abandoned agreement's requests may still use vec and agree */
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

    /* rank 0 only */
    struct coord_map table;
    struct coord_entry *order_head, *order_tail;
    int64_t last_inspect_us; /* stall inspector: last forced slow path */
    uint8_t *joined_ranks;
    int joined_count;
    int last_joined;
    struct timeline *tl;
    struct autotune *at;
    int settings_changed;
    struct coord_settings next_settings;
};

/* coord_negotiate.c */
void coord_buf_free(struct coord_buf *b);
int coord_buf_put(struct coord_buf *b, const void *data, size_t len);
int coord_buf_get(struct coord_buf *b, void *data, size_t len);
hora_status_t coord_encode_requests(struct hora_request *list, struct coord_buf *out);
hora_status_t coord_encode_responses(const struct coord *c, const struct coord_responses *list,
                                     struct coord_buf *out);
hora_status_t coord_decode_responses(const struct coord *c, struct coord_buf *in, struct coord_responses *list);
/* rank 0: merge every rank's submissions (bufs[r]) and emit ready responses. */
hora_status_t coord_negotiate(struct coord *c, struct coord_buf *bufs, struct coord_responses *out);
void coord_negotiate_free(struct coord *c);

struct coord_response *coord_responses_add(struct coord_responses *list);
void coord_responses_clear(struct coord_responses *list);
void coord_meta_describe_shape(const struct coord_meta *m, char *buf, size_t len);

/* coord_slow.c: the slow path (request lists to rank 0, responses back) and
 * autotune's settings from rank 0, under HORA_TIMEOUT_S: a rank that does
 * not come makes every rank fail with HORA_ERR_TIMEOUT naming it. The
 * world's run as collectives on its channel, a process set's as
 * point-to-point MPI messages. */
hora_status_t coord_slow_path(struct coord *c, struct coord_responses *out);
hora_status_t coord_slow_settings(struct coord *c, struct coord_settings *s);

/* coord_exec.c */
/* Fuse list in place (threshold 0: no fusion): a pure function of the
 * threshold and the list, so tools/sim's hora-sim runs this very code on the
 * responses it builds. Merged responses take over their tensors' names and
 * metas; a failed allocation leaves that response unfused. */
void coord_fuse_list(size_t threshold, struct coord_responses *list);
/* coord_fuse_list with this coordinator's HORA_FUSION_THRESHOLD. */
void coord_fuse(struct coord *c, struct coord_responses *list);
/* Run one response; HORA_OK, or a fatal transport error that stops the coordinator. */
hora_status_t coord_execute(struct coord *c, struct coord_response *resp);

/* The world rank of place q (a process set's member q, else q). */
static inline int coord_world_rank(const struct coord *c, int q) { return c->members ? c->members[q] : q; }

/* coord_set.c: a process set's data path, MPI on c->comm, the same
 * contracts as coll's (host memory). root: a place in the set. */
hora_status_t coord_set_allreduce(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, hora_op_t op);
hora_status_t coord_set_broadcast(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, int root);
hora_status_t coord_set_allgatherv(struct coord *c, const void *send, void *recv, const size_t *counts,
                                   hora_dtype_t dtype);

/* coord.c */
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
/* HORA_ERR_TIMEOUT naming silent[0] (places of c) and how many more did not
 * come; decided_here: this rank saw it, else rank 0 told it. */
hora_status_t coord_agree_silent(struct coord *c, const int *silent, int count, int decided_here);
/* A failure of the world's negotiation over its channel (the agreement, the
 * slow path): a timeout the transports put down to a rank (status_culprit)
 * becomes "rank R did not join the negotiation" with the transport's words
 * after it; any other status stays as it is. */
hora_status_t coord_negotiation_failed(struct coord *c, hora_status_t status);
/* HORA_FAULT_STOP: this process stops itself (SIGSTOP) when this rank
 * reaches point the configured time (coord_start parses the setting). The
 * world's slow path counts only the slow paths in which this rank hands in
 * requests of its own: the N-th is the one of its N-th new tensor name when
 * it submits one at a time. */
void coord_fault_stop(struct coord *c, enum coord_fault_point point);
hora_status_t coord_fault_parse(struct coord *c, const char *spec);
/* The cycle's agreement (coord_agree.c): every rank's c->vec merged into
 * every rank's, or HORA_ERR_TIMEOUT naming a rank that did not come within
 * HORA_TIMEOUT_S (c->agree_in_flight then says buffers are still in MPI). */
hora_status_t coord_allreduce_bits(struct coord *c);
/* Keep buf (may be NULL) and the communicator to the end of the process: an
 * abandoned MPI request may still use them. */
void coord_keep_in_flight(struct coord *c, void *buf);
void coord_cache_store(struct coord *c, const char *name, const struct coord_meta *meta);
void coord_finish_pending(struct coord *c, struct hora_request *req, hora_status_t status, const char *error);
/* coord_queue.c: the nap after a cycle that started at start_us; idle_us is
 * how long to sleep with nothing in flight (the stall-inspection period). */
void coord_nap(struct coord *c, int64_t start_us, int64_t idle_us);

#endif
