/* ordered.c - the reproducible all-reduce over messages (ucx, mpi), for
 * HORA_REPRODUCIBLE.
 *
 * The ring's reduce-scatter adds partial sums in ring order, starting at a
 * different rank for every shard, and recursive doubling pairs ranks by
 * distance: either way an element's fp32 sum depends on which rank owns it
 * and on the algorithm. Here each element is reduced by one n-way reduce
 * over all n inputs in rank order, exactly as the one-shot algorithm does
 * over peer memory, so both give the same bits:
 *
 *  1. exchange: rank r receives its shard (coll_shard) of every peer's send
 *     and sends every peer its shard of this rank's send. All receives are
 *     posted first, then all sends (nonblocking, one message per peer and
 *     piece, on a tag of its own), so the order in which peers arrive does
 *     not matter. Step k sends to r + k and receives from r - k: at every
 *     moment the sends spread over distinct peers.
 *  2. reduce: group_reduce of the n inputs of the shard, in place order
 *     0..n-1 (reduce_exact for HORA_REPRODUCIBLE=exact).
 *  3. allgather (coll.c, the ring's): the reduced shards travel unchanged.
 *
 * Traffic per rank: (n-1)/n of the vector out and in per phase, as the
 * ring; the receive room is (n-1) shards, allocated per call. */
#include <stdlib.h>

#include "base/status.h"
#include "coll/algo.h"

/* Above the ring's tags (0 .. 2n-2) and the latency path's (1 << 24 ...). */
#define ORDERED_TAG (1 << 25)
/* Largest message: transports take an int count of bytes. */
#define ORDERED_PIECE_BYTES ((size_t)1 << 30)

static size_t ordered_pieces(size_t bytes) { return (bytes + ORDERED_PIECE_BYTES - 1) / ORDERED_PIECE_BYTES; }

hora_status_t ordered_reduce_msg(struct coll_group *g, const void *send, void *work, size_t count,
                                 const struct group_reduction *red)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    size_t off, len, max_len, dummy, nreq = 0;
    coll_shard(count, n, r, &off, &len);
    coll_shard(count, n, 0, &dummy, &max_len);
    const size_t pieces = ordered_pieces(max_len * es);
    uint8_t *room = len ? malloc((size_t)(n - 1) * len * es) : NULL;
    const void **srcs = calloc((size_t)n, sizeof(*srcs));
    struct tp_req *reqs = calloc(2 * (size_t)(n - 1) * (pieces ? pieces : 1), sizeof(*reqs));
    int *req_peer = calloc(2 * (size_t)(n - 1) * (pieces ? pieces : 1), sizeof(*req_peer));
    hora_status_t status = HORA_OK;
    if ((len && !room) || !srcs || !reqs || !req_peer) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory for a reproducible all-reduce's receive buffers");
        goto out;
    }

    group_phase(g, "REDUCE_SCATTER", 1);
    /* Receives first: place p's part of this rank's shard lands in its slot. */
    for (int k = 1; k < n && status == HORA_OK; k++) {
        const int p = (r - k + n) % n, peer = group_member(g, p);
        uint8_t *slot = room + (size_t)(k - 1) * len * es;
        srcs[p] = slot;
        for (size_t at = 0; at < len * es && status == HORA_OK; at += ORDERED_PIECE_BYTES) {
            const size_t bytes = len * es - at < ORDERED_PIECE_BYTES ? len * es - at : ORDERED_PIECE_BYTES;
            req_peer[nreq] = peer;
            status = ops->irecv(g->tp, peer, slot + at, bytes, ORDERED_TAG, &reqs[nreq++]);
        }
    }
    const size_t nrecv = nreq;
    for (int k = 1; k < n && status == HORA_OK; k++) {
        const int p = (r + k) % n, peer = group_member(g, p);
        size_t poff, plen;
        coll_shard(count, n, p, &poff, &plen);
        const uint8_t *part = (const uint8_t *)send + poff * es;
        for (size_t at = 0; at < plen * es && status == HORA_OK; at += ORDERED_PIECE_BYTES) {
            const size_t bytes = plen * es - at < ORDERED_PIECE_BYTES ? plen * es - at : ORDERED_PIECE_BYTES;
            req_peer[nreq] = peer;
            status = ops->isend(g->tp, peer, part + at, bytes, ORDERED_TAG, &reqs[nreq++]);
        }
    }
    for (size_t i = 0; i < nrecv && status == HORA_OK; i++) status = ops->wait(g->tp, req_peer[i], &reqs[i]);
    srcs[r] = (const uint8_t *)send + off * es;
    /* In place (send == work) the reduce reads every input of an element
     * before it writes it; the peers' parts of send are only read by the
     * sends, awaited before the allgather overwrites them. */
    if (status == HORA_OK && len) status = group_reduce(g, (uint8_t *)work + off * es, srcs, n, len, red);
    for (size_t i = nrecv; i < nreq && status == HORA_OK; i++) status = ops->wait(g->tp, req_peer[i], &reqs[i]);
    group_phase(g, "REDUCE_SCATTER", 0);
    if (status < 0) {
        /* Requests may still be pending: their buffers stay (the channel
         * fails every later operation, so this happens once). */
        free(srcs);
        return status;
    }
out:
    free(room);
    free(srcs);
    free(reqs);
    free(req_peer);
    return status;
}
