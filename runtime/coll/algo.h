/* algo.h - the collective algorithms on one group of ranks over one
 * transport: the ring (ring.c explains its steps) and the one-shot
 * algorithms over peer memory (oneshot.c), with the pieces both use
 * (group.c: progress positions, chunking, descriptor checks), and the
 * latency path of small all-reduces (latency.c), and Adasum (adasum.c).
 * coll.c picks an algorithm per call; ring.c, oneshot.c, latency.c and
 * adasum.c never call each other. */
#ifndef HORA_COLL_ALGO_H
#define HORA_COLL_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "coll/engine.h"
#include "hora.h"
#include "tp/tp.h"

/* What a collective is (tp_mem_desc.kind; checked between neighbours). */
enum group_kind {
    GROUP_KIND_ALLREDUCE = 1,
    GROUP_KIND_REDUCE_SCATTER = 2,
    GROUP_KIND_ALLGATHER = 3,
    GROUP_KIND_BROADCAST = 4,
};

enum group_algorithm {
    GROUP_ALGORITHM_RING = 0,    /* reduce-scatter + allgather, n-1 pipelined steps each */
    GROUP_ALGORITHM_ONESHOT = 1, /* peer memory only: each rank reduces its shard from every
                                  * peer's buffer and writes the result into all of them */
};

/* One outcome over messages (outcome.c): the status word a member sends the
 * decider, and the verdict it sends back. Sent only up to the end of what
 * the body holds: nothing, a failure's message, or the latency path's data. */
#define GROUP_OUTCOME_BODY_BYTES 2048
struct group_word {
    uint64_t op_seq;
    int32_t status;  /* hora_status_t */
    int32_t rank;    /* world rank that failed (status < 0) */
    int32_t culprit; /* failure: the rank it is put down to (status_culprit), -1 none */
    int32_t pad;
    char body[GROUP_OUTCOME_BODY_BYTES]; /* failure: its message; success: the small all-reduce's input or result */
};

/* A message channel's agreement buffers, kept in struct coll_ctx for the
 * channel's life (a receive left pending by a failure may still be written):
 * world size + 1 words and 2 x world size requests; NULL on peer memory. */
struct group_outcome {
    struct group_word *words;
    struct tp_req *reqs;
};

/* The ranks of one operation: a flat ring over the world, a node, or the
 * ranks of one local rank across nodes. */
struct coll_group {
    struct tp *tp;
    const struct coll_engine_ops *engine; /* of the buffers' memory kind */
    enum group_algorithm algorithm;
    int n, r;                     /* group size and this rank's place in it */
    const int *members;           /* world rank of each place (NULL: place i is rank i) */
    int left, right;              /* ring neighbours (world ranks) */
    size_t chunk_bytes;           /* pipeline chunk */
    uint64_t op_seq;              /* operation number, identical on every member */
    const char *what;             /* "allreduce", ...: for messages */
    int direct;                   /* the application's direct collective (not the coordinator's) */
    int open;                     /* between group_begin and group_end */
    struct group_outcome outcome; /* message transports: the channel's agreement buffers */
    void (*on_phase)(void *ctx, const char *phase, int begin); /* optional (timeline) */
    void *phase_ctx;
};

/* Reduction: elementwise op, then (divisor > 1) a division of the result (AVG). */
struct group_reduction {
    hora_dtype_t dtype;
    hora_op_t op;      /* SUM, MIN, MAX or PROD (AVG arrives as SUM with a divisor) */
    hora_op_t user_op; /* for messages and descriptor checks */
    int64_t divisor;
    /* HORA_REPRODUCIBLE (all-reduce only): 0 off; 1 every element summed in
     * rank order 0..n-1 by one n-way reduce (the one-shot algorithm over peer
     * memory, ordered.c over messages); 2 the same, summed exactly and
     * rounded once (engine reduce_exact). */
    int mode;
};

static inline int group_member(const struct coll_group *g, int i) { return g->members ? g->members[i] : i; }

/* Rank r's shard of count elements split n ways (hora_shard's rule; group.c,
 * declared in coll.h too for the layers above). */
void coll_shard(size_t count, int n, int r, size_t *offset, size_t *shard_count);

/* One outcome per operation. group_begin before the group's first step
 * (fails at once when an abort is known; coll.c fails a channel that failed
 * before);
 * group_end(status) after its last, also after a failure, with this rank's
 * status: over peer memory the members agree there (tp_mem_op_end) and every
 * member returns the same status; the algorithms end with the full
 * synchronisation that agreement needs (every member's last position seen).
 * A group of one rank does nothing; over messages group_begin fails at once
 * when an abort is known (tp_notice.c) and group_end runs outcome.c's
 * agreement (group_agree: a star around place 0), so that there too every
 * member returns the same status. */
hora_status_t group_begin(struct coll_group *g);
hora_status_t group_end(struct coll_group *g, hora_status_t status);
hora_status_t group_agree(struct coll_group *g, hora_status_t status);
/* The latency path over messages when its bytes fit a word's body: the same
 * star, with the data riding in it (every member's input to place 0, which
 * reduces all n in place order, as the one-shot algorithm does, and sends the
 * result with the verdict). It is the operation's agreement: group_end then
 * only returns the status. */
hora_status_t group_agree_allreduce(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red);

/* Adasum (adasum.c; coll_adasum_check in coll.h). adasum_run: the reduction
 * of work (count elements, fp32 or, f64 != 0, fp64) in place over the n
 * ranks (a power of two) through tp, a message transport reaching every
 * rank; tmp holds count / 2 + 1 elements. No agreement of its own: coll.c
 * brackets it. */
hora_status_t adasum_run(struct tp *tp, int rank, int n, void *work, size_t count, int f64, void *tmp);

/* The n-way reduce of an element's inputs in place order 0..n-1: the
 * engine's reduce, or for red->mode 2 and SUM its reduce_exact. Inline, like
 * group_phase, so that outcome.c, which group_end calls, calls nothing of
 * group.c back. */
static inline hora_status_t group_reduce(const struct coll_group *g, void *dst, const void *const *srcs, int n,
                                         size_t count, const struct group_reduction *red)
{
    if (red->mode == 2 && red->op == HORA_OP_SUM)
        return g->engine->reduce_exact(dst, srcs, n, count, red->dtype, red->divisor);
    return g->engine->reduce(dst, srcs, n, count, red->dtype, red->op, red->divisor);
}

/* Tell the timeline (if any) that a phase of the operation begins or ends. */
static inline void group_phase(const struct coll_group *g, const char *phase, int begin)
{
    if (g->on_phase) g->on_phase(g->phase_ctx, phase, begin);
}

/* group.c: shared by ring.c and oneshot.c. */
uint64_t group_position(uint64_t op, unsigned stage, uint64_t chunks_done);
size_t group_chunk_elems(const struct coll_group *g, size_t max_segment, size_t esize);
struct tp_mem_desc group_desc(const struct coll_group *g, uint32_t kind, hora_dtype_t dtype, hora_op_t op, int root,
                              size_t count, size_t chunk_elems);
hora_status_t group_desc_check(const struct coll_group *g, const struct tp_mem_desc *mine,
                               const struct tp_mem_desc *other, int peer);
hora_status_t group_mem_offsets(struct coll_group *g, const void *a, const void *b, size_t bytes, uint64_t *oa,
                                uint64_t *ob);

/*
 * Ring (ring.c), any transport. Allreduce count elements: work[i] =
 * reduction over ranks of send[i]; send may be work (in place). Peer-memory
 * transports need both buffers in the pool (mem_local_offset).
 * Reduce-scatter leaves this rank's shard (coll_shard) in out and uses work
 * (count elements) for partial sums. Allgather: recv holds every block
 * (counts[], in rank order), this rank's already in place.
 */
hora_status_t ring_allreduce(struct coll_group *g, const void *send, void *work, size_t count,
                             const struct group_reduction *red);
hora_status_t ring_reduce_scatter(struct coll_group *g, const void *send, void *work, void *out, size_t count,
                                  const struct group_reduction *red);
hora_status_t ring_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype, size_t total);
hora_status_t ring_broadcast(struct coll_group *g, void *buf, size_t count, hora_dtype_t dtype, int root);

/* One shot (oneshot.c), peer-memory transports only; the same contracts.
 * out == NULL: allreduce into work; else reduce-scatter into out. */
hora_status_t oneshot_reduce(struct coll_group *g, const void *send, void *work, void *out, size_t count,
                             const struct group_reduction *red);
hora_status_t oneshot_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype,
                                 size_t total);
hora_status_t oneshot_broadcast(struct coll_group *g, void *buf, size_t count, hora_dtype_t dtype, int root);

/* The reduce-scatter of the reproducible all-reduce over messages
 * (ordered.c; red->mode > 0): every rank receives its shard (coll_shard) of
 * every member's send and reduces the n of them in place order with
 * group_reduce into its shard of work (send may be work); an allgather of
 * the shards finishes the all-reduce. */
hora_status_t ordered_reduce_msg(struct coll_group *g, const void *send, void *work, size_t count,
                                 const struct group_reduction *red);

/* The latency path of small all-reduces (latency.c): send -> recv (may be
 * equal; neither needs to be in the pool). Over peer memory one flag round
 * through the transport's small slots (count * dtype size at most
 * tp_ops.small_bytes); over messages recursive doubling (coll.c sends what
 * fits GROUP_OUTCOME_BODY_BYTES through group_agree_allreduce instead). */
hora_status_t latency_allreduce_mem(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red);
hora_status_t latency_allreduce_msg(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red);

#endif
