/* coll.h - the collectives layer: channels (a transport per purpose, scope
 * and memory kind, chosen at init by coll_connect.c), and the collectives
 * the public direct API and the coordinator's data path both call (coll.c):
 * argument checks, staging of buffers peers cannot map, the choice between
 * the ring and the one-shot algorithms, and the hierarchical all-reduce.
 *
 * All state is in struct coll_ctx, which the caller (api/) owns and passes
 * down; nothing here reads a global.
 *
 * May include: base/, mem/, tp/, kernels (through engine_host.c and
 * engine_cuda.c only).
 * Nothing above (coord/, api/). */
#ifndef HORA_COLL_H
#define HORA_COLL_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "hora.h"
#include "mem/mem_pool.h"
#include "mem/topo.h"
#include "tp/tp.h"

/* Who runs a collective: the user's thread (direct collectives) or the
 * coordinator thread. Each purpose has its own connections, so the two never
 * interleave on the wire. */
enum coll_purpose { COLL_PURPOSE_USER = 0, COLL_PURPOSE_COORD = 1, COLL_PURPOSE_COUNT = 2 };
/* Which ring: all ranks, the ranks of this node, or one rank per node. */
enum coll_scope { COLL_SCOPE_FLAT = 0, COLL_SCOPE_NODE = 1, COLL_SCOPE_CROSS = 2, COLL_SCOPE_COUNT = 3 };
/* A channel = (purpose, scope): its own transport instances, control blocks,
 * communicators and operation counter. */
#define COLL_CHANNEL_COUNT (COLL_PURPOSE_COUNT * COLL_SCOPE_COUNT)
_Static_assert(COLL_CHANNEL_COUNT <= TP_MAX_CHANNELS, "the transports number fewer channels");
static inline int coll_channel(int purpose, int scope) { return purpose * COLL_SCOPE_COUNT + scope; }

struct group_word;

struct coll_ctx {
    struct tp_env env;    /* what the transports read, coll's topology and pool too; lives as long as they do */
    size_t chunk_bytes;   /* HORA_CHUNK_BYTES (a call may override it) */
    int algorithm;        /* HORA_ALGORITHM: 0 auto, 1 ring, 2 oneshot */
    int hierarchical;     /* allreduce = node reduce-scatter + cross ring + node allgather */
    int reproducible;     /* HORA_REPRODUCIBLE: 0 off, 1 rank order, 2 exact (a call's hooks may ask for more) */
    size_t latency_bytes; /* HORA_LATENCY_BYTES: host all-reduces up to this size take the latency path */
    /* Connected transports have ops != NULL; channel_tp[channel][memory] is
     * the one that channel uses for that memory kind, NULL for a scope this
     * job does not use (node rings with one rank per node, ...) or a memory
     * kind no transport moves. */
    struct tp transports[COLL_CHANNEL_COUNT][TP_KIND_COUNT];
    struct tp *channel_tp[COLL_CHANNEL_COUNT][HORA_MEMORY_COUNT];
    uint64_t op_seq[COLL_CHANNEL_COUNT]; /* collectives issued per channel (same on every rank) */
    /* A failed operation makes its channel fail every later one at once, with
     * the same status and message: the members' positions (and, over
     * messages, stray messages of the failed operation) no longer line up.
     * Over shm the members agree on that failure (tp_shm.c); here it is
     * remembered for every transport. */
    hora_status_t failed[COLL_CHANNEL_COUNT];
    char failed_msg[COLL_CHANNEL_COUNT][512];
    /* Per message channel: the buffers of the outcome agreement (coll/outcome.c),
     * allocated at its first operation, freed after the transports close. */
    struct group_word *outcome_words[COLL_CHANNEL_COUNT]; /* world size + 1 */
    struct tp_req *outcome_reqs[COLL_CHANNEL_COUNT];      /* 2 x world size */
    /* Staging for buffers the peers cannot map, per memory kind: host
     * memory in the pool, device memory in the device pool. */
    void *scratch[COLL_PURPOSE_COUNT][HORA_MEMORY_COUNT];
    size_t scratch_bytes[COLL_PURPOSE_COUNT][HORA_MEMORY_COUNT];
    /* Device data on a channel whose transport moves host memory only (ucx
     * and mpi between hosts; shm when cudaipc cannot connect) crosses
     * through these: host memory in the pool, pinned, two halves of
     * stage_bytes each (copying one chunk overlaps the collective on the
     * other). */
    void *bounce[COLL_PURPOSE_COUNT];
    size_t bounce_bytes[COLL_PURPOSE_COUNT];
    size_t stage_bytes; /* HORA_CUDA_STAGE_BYTES */
};

/* Collective over world: connects every channel (coll_connect.c). On
 * failure nothing stays connected. */
hora_status_t coll_init(struct coll_ctx *ctx, const struct config *cfg, boot_comm_t *world, const struct topo *topo,
                        struct mem_pool *pool, struct mem_dev *dev);
/* Collective (after a barrier: peers may be reading this rank's pool). */
void coll_close(struct coll_ctx *ctx);

/* Notices (tp_notice_*): this rank aborts (every wait of this process and,
 * through shared memory and MPI, of every peer fails with status and
 * "rank R aborted: reason"); this rank shuts down (host peers blocked in a
 * direct collective that needs it fail with HORA_ERR_SHUTDOWN); has a rank
 * aborted (HORA_OK, or its status with the message set)? */
void coll_abort(struct coll_ctx *ctx, hora_status_t status, const char *reason);
void coll_notice_shutdown(struct coll_ctx *ctx);
hora_status_t coll_check_abort(struct coll_ctx *ctx);
/* The launcher says this world lost a member (elastic, api_elastic.c):
 * every wait fails from now on with HORA_ERR_PEER_LOST and reason. */
void coll_notice_lost(struct coll_ctx *ctx, const char *reason);
/* false (and *dead_rank) when a host peer's process is gone. */
bool coll_host_peers_alive(const struct coll_ctx *ctx, int *dead_rank);

/* Name of the transport the user's flat ring uses for host memory. */
const char *coll_transport_name(const struct coll_ctx *ctx);
/* And for device memory: "cudaipc", or "host staging + <host transport>",
 * or "none" without device support. */
const char *coll_device_transport_name(const struct coll_ctx *ctx, char *buf, size_t len);

/* The peer a purpose's channels last waited on (tp_env.last_peer):
 * coll_wait_forget before a collective, coll_last_wait after it ends or
 * fails returns that peer's world rank (-1: no wait) and the transport's
 * name in *transport. With several scopes in one collective (hierarchical)
 * the cross-node ring's wait wins, then the node's, then the flat ring's.
 * Only from the thread that runs the purpose's collectives. */
void coll_wait_forget(struct coll_ctx *ctx, int purpose);
int coll_last_wait(const struct coll_ctx *ctx, int purpose, hora_memory_t memory, const char **transport);

/* An application thread starts (delta 1) or stops (-1) blocking on the
 * coordinator: the coordinator's channels may spin only meanwhile. */
void coll_app_waiting(struct coll_ctx *ctx, int delta);
/* How many application threads block on the coordinator now. */
int coll_app_waits(struct coll_ctx *ctx);

/* Optional extras for one call. */
struct coll_hooks {
    size_t chunk_bytes; /* 0: HORA_CHUNK_BYTES */
    /* 0: HORA_REPRODUCIBLE (ctx->reproducible); 1 or 2: that mode for this
     * all-reduce (hora_reproducible_t): every element summed by one n-way
     * reduce in rank order (2: exactly, rounded once), whatever the
     * algorithm, transport and hierarchy. */
    int reproducible;
    /* Called when a phase ("REDUCE_SCATTER", "ALLREDUCE_CROSS", "ALLGATHER") begins (begin=1) and ends. */
    void (*on_phase)(void *ctx, const char *phase, int begin);
    void *ctx;
};

/*
 * The collectives (hora.h documents them as hora_allreduce & co.). Every rank
 * calls them in the same order per purpose. memory: where the buffers live
 * (HORA_ERR_UNSUPPORTED when no engine or transport handles it). Device
 * buffers go straight through cudaipc where it connects the channel's ring,
 * else through pinned host memory and the host transport (in chunks of
 * stage_bytes for allreduce, whole for the others). Statuses:
 * HORA_OK, HORA_ERR_INVALID_ARG, HORA_ERR_NO_MEMORY, HORA_ERR_UNSUPPORTED,
 * HORA_ERR_MISMATCH and the transports' errors (HORA_ERR_TRANSPORT,
 * HORA_ERR_TIMEOUT, HORA_ERR_MPI), and the status of a rank that aborted
 * (its hora_abort) or HORA_ERR_SHUTDOWN (a member shut down). Over shm every
 * member returns the same status for an operation; after a failure every
 * later operation of the channel fails at once with it (ctx->failed).
 */
hora_status_t coll_allreduce(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                             size_t count, hora_dtype_t dtype, hora_op_t op, const struct coll_hooks *hooks);
/* The bitwise OR of count 64-bit words over every rank, in place, on the
 * host: the coordinator's agreement on its bit vectors (an AND travels as
 * the OR of complements). what names it in messages ("negotiation"). Runs
 * like a host allreduce of that size (latency path, ring, hierarchical) with
 * its deadline (HORA_TIMEOUT_S) and its one outcome. */
hora_status_t coll_allreduce_bits(struct coll_ctx *ctx, int purpose, const char *what, uint64_t *words, size_t count);
hora_status_t coll_reduce_scatter(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                                  size_t count, hora_dtype_t dtype, hora_op_t op);
hora_status_t coll_allgatherv(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                              const size_t *counts, hora_dtype_t dtype);
hora_status_t coll_broadcast(struct coll_ctx *ctx, int purpose, hora_memory_t memory, void *buf, size_t count,
                             hora_dtype_t dtype, int root);

/* HORA_OK where op adasum (adasum.c, run by coll_allreduce) can run on size
 * ranks for dtype and memory, else the refusal hora.h documents: it depends on
 * the arguments only, so every rank refuses alike. what names the call. */
hora_status_t coll_adasum_check(const char *what, int size, hora_dtype_t dtype, hora_memory_t memory);

/* Rank r's shard of count elements over n ranks (hora_shard). */
void coll_shard(size_t count, int n, int r, size_t *offset, size_t *shard_count);

#endif
