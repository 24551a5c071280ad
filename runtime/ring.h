/* ring.h - ring collectives over one transport (ring.c explains the steps). */
#ifndef HORA_RING_H
#define HORA_RING_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "k_cpu.h"
#include "tp.h"

enum ring_kind {
    RING_KIND_ALLREDUCE = 1,
    RING_KIND_REDUCE_SCATTER = 2,
    RING_KIND_ALLGATHER = 3,
    RING_KIND_BROADCAST = 4,
};

enum ring_algorithm {
    RING_ALGORITHM_RING = 0,    /* reduce-scatter + allgather, n-1 pipelined steps each */
    RING_ALGORITHM_ONESHOT = 1, /* peer memory only: each rank reduces its shard from every
                                 * peer's buffer and writes the result into all of them */
};

struct ring {
    struct tp *tp;
    enum ring_algorithm algorithm;
    int n, r;           /* ring size and this rank's place in it */
    const int *members; /* world rank of each place (NULL: place i is rank i) */
    int left, right;    /* peers (world ranks) */
    size_t chunk_bytes; /* pipeline chunk */
    uint64_t op_seq;    /* operation number, identical on every member */
    void (*on_phase)(void *ctx, const char *phase, int begin); /* optional (timeline) */
    void *phase_ctx;
};

/* Reduction: elementwise op, then (divisor > 1) a division of the result (AVG). */
struct ring_reduction {
    k_dtype_t dtype;
    k_op_t op;
    hora_op_t user_op; /* for messages */
    int64_t divisor;
};

/*
 * Allreduce count elements: work[i] = reduction over ranks of send[i]. send
 * may be work (in place). Peer-memory transports need both buffers in the
 * pool (mem_local_offset). Reduce-scatter leaves this rank's shard
 * (hora_shard) in out and uses work (count elements) for partial sums.
 */
hora_status_t ring_allreduce(struct ring *g, const void *send, void *work, size_t count,
                             const struct ring_reduction *red);
hora_status_t ring_reduce_scatter(struct ring *g, const void *send, void *work, void *out, size_t count,
                                  const struct ring_reduction *red);
/* recv holds every block (counts[], in rank order), this rank's already in place. */
hora_status_t ring_allgatherv(struct ring *g, void *recv, const size_t *counts, k_dtype_t dtype);
hora_status_t ring_broadcast(struct ring *g, void *buf, size_t count, k_dtype_t dtype, int root);

static inline int ring_member(const struct ring *g, int i) { return g->members ? g->members[i] : i; }

/* Shared with oneshot.c. */
uint64_t ring_position(uint64_t op, unsigned stage, uint64_t chunks_done);
size_t ring_chunk_elems(const struct ring *g, size_t max_segment, size_t esize);
hora_status_t ring_desc_check(const struct ring *g, const struct tp_mem_desc *mine, const struct tp_mem_desc *other,
                              int peer);
hora_status_t ring_mem_offsets(struct ring *g, const void *a, const void *b, size_t bytes, uint64_t *oa,
                               uint64_t *ob);
void ring_phase(const struct ring *g, const char *phase, int begin);

/* oneshot.c: the same collectives in one shot over peer memory. */
hora_status_t oneshot_reduce(struct ring *g, const void *send, void *work, void *out, size_t count,
                             const struct ring_reduction *red);
hora_status_t oneshot_allgatherv(struct ring *g, void *recv, const size_t *counts, k_dtype_t dtype, size_t total);
hora_status_t oneshot_broadcast(struct ring *g, void *buf, size_t count, k_dtype_t dtype, int root);

#endif
