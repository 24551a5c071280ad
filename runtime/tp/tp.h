/* tp.h - the transport layer: the ops table every transport fills, and the
 * environment a transport is connected in (struct tp_env, owned by the
 * layer above, coll/).
 *
 * Transports come in two flavours and say which through caps:
 *  - message transports (ucx, mpi) move bytes: isend / irecv / wait;
 *  - peer-memory transports (shm, cudaipc) map the peers' buffers, so a
 *    rank reduces straight from a neighbour's memory; ranks agree on progress
 *    through monotonically increasing positions (mem_post / mem_wait) and
 *    describe their buffers for the current operation (mem_publish / mem_desc).
 *    They also agree on each operation's outcome: mem_op_begin / mem_op_end
 *    bracket it, and every member that returns from mem_op_end returns the
 *    same status (tp_shm.c explains the protocol).
 * A transport also says which memory kinds it moves (memory_kinds: host for
 * shm, ucx and mpi; device memory for cudaipc) and whether it reaches only the ranks of
 * its own host (TP_CAP_HOST_LOCAL: never chosen for the cross-node rings,
 * whose traffic is what they exist for, even between virtual nodes of one
 * host).
 * Slots a transport does not provide point to tp_unsupported_* (returning
 * HORA_ERR_UNSUPPORTED), never NULL. They are tried in the order of
 * tp_registry; HORA_DISABLE_<NAME>=1 removes one. Peers are world ranks.
 *
 * May include: base/, mem/, MPI, UCX. Nothing above (coll/, coord/, api/). */
#ifndef HORA_TP_H
#define HORA_TP_H

#include <mpi.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"
#include "mem/topo.h"

struct tp;

enum tp_kind { TP_KIND_SHM = 0, TP_KIND_CUDAIPC = 1, TP_KIND_UCX = 2, TP_KIND_MPI = 3, TP_KIND_COUNT = 4 };

enum tp_caps {
    TP_CAP_MESSAGE = 1u << 0,
    TP_CAP_PEER_MEMORY = 1u << 1,
    TP_CAP_HOST_LOCAL = 1u << 2, /* reaches only ranks on its own host */
};

/* Connected instances per rank and transport kind: the layer above numbers
 * its channels below this (each has its own control block, communicator and
 * operation counter). */
#define TP_MAX_CHANNELS 8

/* A request in flight: opaque bytes each message transport lays out as it
 * needs (an MPI_Request, a UCP request pointer), so nothing above depends
 * on MPI's or UCX's types. */
#define TP_REQ_BYTES 32
struct tp_req {
    alignas(16) unsigned char opaque[TP_REQ_BYTES];
};

/* What a rank publishes about the operation it is running (peer-memory
 * transports). Neighbours check it against their own call: a mismatch means
 * the ranks did not call the same collective. */
struct tp_mem_desc {
    uint64_t op_seq;
    uint32_t kind; /* the collective (enum group_kind, coll/algo.h) */
    uint32_t dtype, op;
    int32_t root;
    uint64_t count;
    uint64_t chunk_elems;
    uint64_t send_offset; /* in the publishing rank's pool */
    uint64_t work_offset;
};

/* One operation over peer memory, as the outcome agreement sees it. */
struct tp_mem_op {
    uint64_t op_seq;    /* the channel's operation number, identical on every member */
    const char *what;   /* "allreduce", ...: for messages */
    const int *members; /* world rank of each place; NULL: place i is rank i */
    int n;              /* members */
    bool direct;        /* a direct collective of the application: a member's shutdown notice fails it */
};

/* Notices (tp_notice.c): what this process knows of a rank that gave up.
 * hora_abort on any rank reaches its host peers through a record in its
 * shared-memory control area and every rank through one MPI message; a rank
 * that learns of it keeps the first one here, and from then on every wait of
 * every transport fails with its status and message. */
#define TP_NOTICE_REASON_BYTES 384
struct tp_notice {
    _Atomic int known;    /* 1 once rank/status/reason below are set (release) */
    int rank;             /* who aborted; -1: the launcher said the world lost a member (tp_notice_lost) */
    hora_status_t status; /* what it passed to hora_abort */
    char reason[TP_NOTICE_REASON_BYTES];
    pthread_mutex_t lock; /* setting the fields above; the MPI receive */
    MPI_Comm comm;        /* private: notices only (MPI_COMM_NULL before init) */
    MPI_Request recv;     /* posted for any source while healthy */
    int recv_posted;
    _Atomic int64_t last_poll_us; /* rate limit of tp_notice_check's slow part */
    int *host_peers;              /* world ranks of the other ranks of this host whose pools are mapped */
    int host_peer_count;
    unsigned char msg[16 + TP_NOTICE_REASON_BYTES];  /* receive buffer */
    unsigned char sent[16 + TP_NOTICE_REASON_BYTES]; /* hora_abort's message: outlives its sends */
    MPI_Request *sends; /* hora_abort's sends still in flight when it returned (kept: MPI may use them) */
};

/* Everything a transport may read about the job, filled by the layer above
 * before the first connect and alive until the last close. */
struct tp_env {
    MPI_Comm world;    /* world ranks are peers; MPI_COMM_NULL under the store bootstrap (no MPI) */
    boot_comm_t *boot; /* the bootstrap's world (boot/comm.h): exchanges at connect time */
    const struct topo *topo;
    struct mem_pool *pool; /* this rank's pool, mapped by its host peers */
    struct mem_dev *dev;   /* this rank's device and device pool (dev->device < 0: none) */
    double timeout_s;      /* HORA_TIMEOUT_S */
    double lost_grace_s;   /* elastic worlds: how long a transport that lost a peer waits for the launcher's
                            * verdict (tp_notice_lost) before failing on its own; 0: it does not wait */
    long spin_count;       /* resolved HORA_SPIN_COUNT */
    double yield_s;        /* resolved HORA_YIELD_US: after the spins, poll with sched_yield this long, then sleep */
    bool
        spin_auto; /* HORA_SPIN_COUNT is auto (-1): ucx never spins, the coordinator's channels only while waited for */
    bool disable[TP_KIND_COUNT]; /* HORA_DISABLE_<NAME> */
    /* Application threads blocked waiting for the coordinator. While none
     * is, the framework is computing on this rank's cores, and a channel
     * flagged spin_only_while_waited must not busy-wait for a slow peer. */
    _Atomic int app_waiters;
    /* Per channel: the world rank its last wait on a peer waited for, set
     * by every transport's wait as it starts (one plain store; a channel is
     * used by one thread at a time). The coordinator's flight recorder reads
     * it through coll_last_wait after a collective ends or fails. */
    int last_peer[TP_MAX_CHANNELS];
    struct tp_notice notice; /* tp_notice.c */
};

struct tp_ops {
    const char *name;
    unsigned caps;
    unsigned memory_kinds; /* bit (1 << hora_memory_t) for each kind it moves */
    bool (*can_connect)(const struct tp_env *env, int peer);
    /* tp->env, tp->channel and tp->spin_only_while_waited are set before. */
    hora_status_t (*connect)(struct tp *tp);
    void (*close)(struct tp *tp);
    /* message transports */
    hora_status_t (*isend)(struct tp *tp, int peer, const void *buf, size_t bytes, int tag, struct tp_req *req);
    hora_status_t (*irecv)(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req);
    hora_status_t (*wait)(struct tp *tp, int peer, struct tp_req *req);
    /* peer-memory transports */
    hora_status_t (*mem_publish)(struct tp *tp, const struct tp_mem_desc *desc);
    hora_status_t (*mem_desc)(struct tp *tp, int peer, struct tp_mem_desc *desc);
    hora_status_t (*mem_post)(struct tp *tp, uint64_t position);
    hora_status_t (*mem_wait)(struct tp *tp, int peer, uint64_t position);
    bool (*mem_local_offset)(struct tp *tp, const void *ptr, size_t bytes, uint64_t *offset);
    void *(*mem_peer_ptr)(struct tp *tp, int peer, uint64_t offset);
    /* The outcome of one operation (peer memory). mem_op_begin fails at once
     * when this process knows of an abort (the layer above remembers a failed
     * channel; a member that shut down or died is found by the waits).
     * mem_op_end(status):
     * status < 0 proposes this rank's failure (message: hora_last_error());
     * HORA_OK proposes success and may be passed only after this rank has
     * seen every member's last position of the operation (so every member's
     * data is complete). Returns the agreed outcome: HORA_OK, or the failure
     * every member returns, with a message naming the rank that failed. */
    hora_status_t (*mem_op_begin)(struct tp *tp, const struct tp_mem_op *op);
    hora_status_t (*mem_op_end)(struct tp *tp, hora_status_t status);
    /* During an operation: HORA_OK, or the failure it has been decided to
     * have (one load: for a rank about to write into its peers' buffers). */
    hora_status_t (*mem_op_check)(struct tp *tp);
    /* The latency path over peer memory: an operation of at most small_bytes
     * (0: the transport has none) in one flag round. mem_small_post copies
     * this rank's input (bytes) and desc into its slot of the operation
     * (desc->op_seq) and posts position, which is then this rank's last
     * position of the operation; mem_small_wait waits for the peer's
     * position in its slot of the operation, returns the peer's desc (its
     * op_seq, kind, dtype, op, root, count; offsets and chunk 0) and where
     * its input is. Both take the operation from mem_op_begin. That
     * input stays there until this rank has posted its next operation's last
     * position (slots alternate, and the peer cannot post its operation after
     * next before that), so it may be read straight from there. */
    size_t small_bytes;
    hora_status_t (*mem_small_post)(struct tp *tp, uint64_t position, const struct tp_mem_desc *desc, const void *data,
                                    size_t bytes);
    hora_status_t (*mem_small_wait)(struct tp *tp, int peer, uint64_t position, struct tp_mem_desc *desc,
                                    const void **data);
};

struct tp {
    const struct tp_ops *ops; /* NULL until connected */
    void *state;
    struct tp_env *env;
    int channel;                 /* 0 .. TP_MAX_CHANNELS-1 */
    bool spin_only_while_waited; /* see tp_env.app_waiters */
};

extern const struct tp_ops tp_shm_ops;
/* Connects nobody without device support (mem_dev_on). */
extern const struct tp_ops tp_cudaipc_ops;
/* Without UCX (meson -Ducx=disabled, or libucx-dev missing) this is a stand-in
 * that connects nobody, so the registry keeps its order. */
extern const struct tp_ops tp_ucx_ops;
extern const struct tp_ops tp_mpi_ops;

/* Ordered: the first transport that can connect every ring neighbour wins. */
extern const struct tp_ops *const tp_registry[TP_KIND_COUNT];

/* Positions compare modulo 2^64 (they only ever differ by a little). */
static inline bool tp_position_reached(uint64_t have, uint64_t want) { return (int64_t)(have - want) >= 0; }

/* Stand-ins for the slots a transport does not provide. */
hora_status_t tp_unsupported_isend(struct tp *, int, const void *, size_t, int, struct tp_req *);
hora_status_t tp_unsupported_irecv(struct tp *, int, void *, size_t, int, struct tp_req *);
hora_status_t tp_unsupported_wait(struct tp *, int, struct tp_req *);
hora_status_t tp_unsupported_mem_publish(struct tp *, const struct tp_mem_desc *);
hora_status_t tp_unsupported_mem_desc(struct tp *, int, struct tp_mem_desc *);
hora_status_t tp_unsupported_mem_post(struct tp *, uint64_t);
hora_status_t tp_unsupported_mem_wait(struct tp *, int, uint64_t);
bool tp_unsupported_mem_local_offset(struct tp *, const void *, size_t, uint64_t *);
void *tp_unsupported_mem_peer_ptr(struct tp *, int, uint64_t);
hora_status_t tp_unsupported_mem_op_begin(struct tp *, const struct tp_mem_op *);
hora_status_t tp_unsupported_mem_op_end(struct tp *, hora_status_t);
hora_status_t tp_unsupported_mem_op_check(struct tp *);
hora_status_t tp_unsupported_mem_small_post(struct tp *, uint64_t, const struct tp_mem_desc *, const void *, size_t);
hora_status_t tp_unsupported_mem_small_wait(struct tp *, int, uint64_t, struct tp_mem_desc *, const void **);
/* The slots of a transport without peer memory (ucx, mpi: messages only),
 * inside its struct tp_ops initializer. */
#define TP_OPS_NO_PEER_MEMORY                                                                                       \
    .mem_publish = tp_unsupported_mem_publish, .mem_desc = tp_unsupported_mem_desc,                                 \
    .mem_post = tp_unsupported_mem_post, .mem_wait = tp_unsupported_mem_wait,                                       \
    .mem_local_offset = tp_unsupported_mem_local_offset, .mem_peer_ptr = tp_unsupported_mem_peer_ptr,               \
    .mem_op_begin = tp_unsupported_mem_op_begin, .mem_op_end = tp_unsupported_mem_op_end,                           \
    .mem_op_check = tp_unsupported_mem_op_check, .small_bytes = 0, .mem_small_post = tp_unsupported_mem_small_post, \
    .mem_small_wait = tp_unsupported_mem_small_wait

/*
 * Notices (tp_notice.c). tp_notice_init is collective over env->world (after
 * the pool is mapped); tp_notice_close is local.
 * tp_notice_abort: this rank gives up. Records it here (every later wait of
 * every transport fails with status and "rank R aborted: reason"), in this
 * rank's shared-memory record (host peers see it in their waits and wake from
 * their futexes at once), and sends it to every other rank over MPI (their
 * coordinators and waits poll for it). Waits at most wait_s for the sends.
 * tp_notice_shutdown: this rank is in hora_shutdown; host peers blocked in a
 * direct collective that needs it fail with HORA_ERR_SHUTDOWN.
 * tp_notice_check: HORA_OK, or the known abort's status with its message set
 * (and, when members is given, HORA_ERR_SHUTDOWN for a member that shut
 * down). Cheap when nothing happened: one atomic load, and every 20 ms a look
 * at the host peers' records and the MPI receive.
 * tp_notice_host_alive: false when a host peer's process is gone.
 */
hora_status_t tp_notice_init(struct tp_env *env);
void tp_notice_close(struct tp_env *env);
void tp_notice_abort(struct tp_env *env, hora_status_t status, const char *reason, double wait_s);
void tp_notice_shutdown(struct tp_env *env);
hora_status_t tp_notice_check(struct tp_env *env, const int *members, int n);
/* The launcher (hora-run --elastic, through the store) says the world lost
 * a member: every wait of every transport of this process fails from now on
 * with HORA_ERR_PEER_LOST and reason; host peers asleep look again. */
void tp_notice_lost(struct tp_env *env, const char *reason);
/* A transport lost a peer (status: HORA_ERR_TRANSPORT or HORA_ERR_TIMEOUT):
 * in an elastic world, wait up to env->lost_grace_s for the launcher's
 * verdict and return it (HORA_ERR_PEER_LOST); else, or without one in time,
 * status unchanged. */
hora_status_t tp_notice_await_verdict(struct tp_env *env, hora_status_t status);
/* The cheap part alone: HORA_OK unless an abort is known to this process. */
hora_status_t tp_notice_known(const struct tp_env *env);
bool tp_notice_aborted(const struct tp_env *env);
bool tp_notice_host_alive(const struct tp_env *env, int *dead_rank);

#endif
