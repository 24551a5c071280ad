/* ring.c - ring all-reduce, reduce-scatter, allgather and broadcast.
 *
 * The vector is cut into n segments (coll_shard). Rank r's neighbours are
 * left = r-1 and right = r+1 (mod n).
 *
 * Reduce-scatter, n-1 steps. At step s rank r combines segment (r-s-2) mod n
 * of its own input with the same segment of its left neighbour, which that
 * neighbour finished at step s-1 (at step 0: the neighbour's untouched
 * input). After step n-2 rank r holds the complete reduction of segment r.
 *
 * Allgather, n-1 steps. At step s rank r takes segment (r-s-1) mod n, complete
 * on its left neighbour since the neighbour's step s-1 (step 0: the neighbour's
 * own segment), and stores it. After step n-2 every rank holds every segment.
 *
 * Every segment is processed in chunks of HORA_CHUNK_BYTES, so the ring is a
 * pipeline: while rank r reduces chunk k, its left neighbour already works on
 * chunk k+1 and its right neighbour consumes chunk k-1.
 *
 * Two flavours, by transport:
 *  - peer memory (shm): rank r reads its neighbour's buffer in place, one copy.
 *    A rank announces "chunk k of stage t done" by posting the position
 *    (op, t, k+1), and waits for a neighbour's position before touching data
 *    the neighbour produced. Two extra waits keep it safe: before allgather
 *    overwrites a segment of its buffer, rank r waits until its right
 *    neighbour has read the partial sum it left there during reduce-scatter;
 *    and no rank returns before its right neighbour is done reading from it,
 *    since the caller may reuse its buffers right away. Every rank then also
 *    waits for everyone's "done", so that the members can agree on the
 *    operation's outcome (tp_shm.c: success needs every member's last
 *    position); with two ranks that costs nothing extra.
 *  - messages (ucx, mpi): each chunk is sent to the right and received from
 *    the left into a double buffer, receiving chunk k+1 while reducing chunk k.
 *
 * Partial sums travel in the dtype itself: for f16/bf16 each step widens both
 * operands to fp32, combines them (and on the last step divides, for AVG)
 * and rounds once, so the result has been rounded n-1 times (hora.h states
 * the bound). Data moves and reductions go through the group's engine.
 */
#include <stdlib.h>

#include "base/status.h"
#include "coll/algo.h"

#define RING_MSG_MAX_BYTES ((size_t)1 << 30)

static int ring_mod(long v, int n) { return (int)(((v % n) + n) % n); }

static size_t ring_min(size_t a, size_t b) { return a < b ? a : b; }

/* dst = local op remote; on the last step of a reduction also divided (AVG),
 * in the same rounding (f16/bf16: one rounding for both). */
static hora_status_t ring_combine(const struct coll_group *g, void *dst, const void *local, const void *remote,
                                  size_t count, const struct group_reduction *red, int final)
{
    const void *srcs[2] = {local, remote};
    return g->engine->reduce(dst, srcs, 2, count, red->dtype, red->op, final ? red->divisor : 1);
}

/* ---------------------------------------------------------------- peer memory */

/* Publish this rank's descriptor, wait for the left neighbour's and check that
 * both ranks are in the same call. */
static hora_status_t ring_mem_begin(struct coll_group *g, const struct tp_mem_desc *mine, struct tp_mem_desc *left)
{
    const struct tp_ops *ops = g->tp->ops;
    uint64_t start = group_position(g->op_seq, 0, 1);

    HORA_CHECK(ops->mem_publish(g->tp, mine));
    HORA_CHECK(ops->mem_post(g->tp, start));
    HORA_CHECK(ops->mem_wait(g->tp, g->left, start));
    HORA_CHECK(ops->mem_desc(g->tp, g->left, left));
    return group_desc_check(g, mine, left, g->left);
}

/* Post "done" and wait until every member is done too: first the right
 * neighbour, the only reader of this rank's buffers (the caller may reuse
 * them once it is done), then the others, so that this rank has seen every
 * member's last position before the group agrees on the outcome (group_end;
 * with two ranks the right neighbour is everyone). */
static hora_status_t ring_mem_end(struct coll_group *g, unsigned done_stage)
{
    uint64_t done = group_position(g->op_seq, done_stage, 0);
    HORA_CHECK(g->tp->ops->mem_post(g->tp, done));
    HORA_CHECK(g->tp->ops->mem_wait(g->tp, g->right, done));
    for (int i = 2; i < g->n; i++) HORA_CHECK(g->tp->ops->mem_wait(g->tp, group_member(g, (g->r + i) % g->n), done));
    return HORA_OK;
}

/* Reduce-scatter (out != NULL: the last step writes this rank's shard to out)
 * or allreduce (out == NULL: allgather follows). */
static hora_status_t ring_mem_reduce(struct coll_group *g, const uint8_t *send, uint8_t *work, uint8_t *out,
                                     size_t count, const struct group_reduction *red, uint32_t kind)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t esize = hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    const uint64_t op = g->op_seq;
    struct tp_mem_desc left;
    size_t max_seg, dummy, off, len;

    coll_shard(count, n, 0, &dummy, &max_seg);
    struct tp_mem_desc mine =
        group_desc(g, kind, red->dtype, red->user_op, -1, count, group_chunk_elems(g, max_seg, esize));
    HORA_CHECK(group_mem_offsets(g, send, work, count * esize, &mine.send_offset, &mine.work_offset));
    HORA_CHECK(ring_mem_begin(g, &mine, &left));
    const size_t chunk = mine.chunk_elems;
    const uint8_t *left_send = ops->mem_peer_ptr(g->tp, g->left, left.send_offset);
    const uint8_t *left_work = ops->mem_peer_ptr(g->tp, g->left, left.work_offset);

    group_phase(g, "REDUCE_SCATTER", 1);
    for (int s = 0; s < n - 1; s++) {
        const unsigned stage = 1 + (unsigned)s;
        const int last = s == n - 2;
        coll_shard(count, n, ring_mod(r - s - 2, n), &off, &len);
        const uint8_t *remote = (s == 0 ? left_send : left_work) + off * esize;
        const uint8_t *local = send + off * esize;
        uint8_t *dst = (out && last) ? out : work + off * esize;
        uint64_t k = 0;
        for (size_t e = 0; e < len; e += chunk, k++) {
            size_t m = ring_min(chunk, len - e);
            if (s > 0) HORA_CHECK(ops->mem_wait(g->tp, g->left, group_position(op, stage - 1, k + 1)));
            HORA_CHECK(ring_combine(g, dst + e * esize, local + e * esize, remote + e * esize, m, red, last));
            HORA_CHECK(ops->mem_post(g->tp, group_position(op, stage, k + 1)));
        }
    }
    group_phase(g, "REDUCE_SCATTER", 0);
    if (out) return ring_mem_end(g, (unsigned)n);

    group_phase(g, "ALLGATHER", 1);
    for (int s = 0; s < n - 1; s++) {
        const unsigned stage = (unsigned)n + (unsigned)s;
        coll_shard(count, n, ring_mod(r - s - 1, n), &off, &len);
        uint64_t k = 0;
        for (size_t e = 0; e < len; e += chunk, k++) {
            size_t m = ring_min(chunk, len - e);
            size_t at = (off + e) * esize;
            HORA_CHECK(ops->mem_wait(g->tp, g->left, group_position(op, stage - 1, k + 1)));
            /* The right neighbour reads this segment's partial sum at its
             * reduce-scatter step s; do not overwrite it before. */
            HORA_CHECK(ops->mem_wait(g->tp, g->right, group_position(op, 1 + (unsigned)s, k + 1)));
            HORA_CHECK(g->engine->copy(work + at, left_work + at, m * esize));
            HORA_CHECK(ops->mem_post(g->tp, group_position(op, stage, k + 1)));
        }
    }
    group_phase(g, "ALLGATHER", 0);
    return ring_mem_end(g, 2 * (unsigned)n - 1);
}

static hora_status_t ring_mem_allgatherv(struct coll_group *g, uint8_t *recv, const size_t *counts, hora_dtype_t dtype,
                                         size_t total)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t esize = hora_dtype_size(dtype);
    const int n = g->n, r = g->r;
    const uint64_t op = g->op_seq;
    struct tp_mem_desc left;
    size_t max_block = 0;

    for (int i = 0; i < n; i++)
        if (counts[i] > max_block) max_block = counts[i];
    struct tp_mem_desc mine =
        group_desc(g, GROUP_KIND_ALLGATHER, dtype, HORA_OP_SUM, -1, total, group_chunk_elems(g, max_block, esize));
    HORA_CHECK(group_mem_offsets(g, recv, recv, total * esize, &mine.send_offset, &mine.work_offset));
    HORA_CHECK(ring_mem_begin(g, &mine, &left));
    const size_t chunk = mine.chunk_elems;
    const uint8_t *left_recv = ops->mem_peer_ptr(g->tp, g->left, left.work_offset);

    for (int s = 0; s < n - 1; s++) {
        const unsigned stage = 1 + (unsigned)s;
        const int block = ring_mod(r - s - 1, n);
        size_t off = 0;
        for (int i = 0; i < block; i++) off += counts[i];
        uint64_t k = 0;
        for (size_t e = 0; e < counts[block]; e += chunk, k++) {
            size_t m = ring_min(chunk, counts[block] - e);
            size_t at = (off + e) * esize;
            if (s > 0) HORA_CHECK(ops->mem_wait(g->tp, g->left, group_position(op, stage - 1, k + 1)));
            HORA_CHECK(g->engine->copy(recv + at, left_recv + at, m * esize));
            HORA_CHECK(ops->mem_post(g->tp, group_position(op, stage, k + 1)));
        }
    }
    return ring_mem_end(g, (unsigned)n);
}

/* Pipelined chain root -> root+1 -> ... -> root-1. */
static hora_status_t ring_mem_broadcast(struct coll_group *g, uint8_t *buf, size_t count, hora_dtype_t dtype, int root)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t esize = hora_dtype_size(dtype);
    const uint64_t op = g->op_seq;
    struct tp_mem_desc left;
    struct tp_mem_desc mine =
        group_desc(g, GROUP_KIND_BROADCAST, dtype, HORA_OP_SUM, root, count, group_chunk_elems(g, count, esize));
    HORA_CHECK(group_mem_offsets(g, buf, buf, count * esize, &mine.send_offset, &mine.work_offset));
    HORA_CHECK(ring_mem_begin(g, &mine, &left));
    if (g->r != root) {
        const size_t chunk = mine.chunk_elems;
        const uint8_t *left_buf = ops->mem_peer_ptr(g->tp, g->left, left.work_offset);
        const int left_is_root = (g->r + g->n - 1) % g->n == root;
        uint64_t k = 0;
        for (size_t e = 0; e < count; e += chunk, k++) {
            size_t m = ring_min(chunk, count - e);
            if (!left_is_root) HORA_CHECK(ops->mem_wait(g->tp, g->left, group_position(op, 1, k + 1)));
            HORA_CHECK(g->engine->copy(buf + e * esize, left_buf + e * esize, m * esize));
            HORA_CHECK(ops->mem_post(g->tp, group_position(op, 1, k + 1)));
        }
    }
    return ring_mem_end(g, 2);
}

/* ------------------------------------------------------------------ messages */

struct ring_reqs {
    struct tp_req *req;
    size_t count, cap;
};

static hora_status_t ring_reqs_add(struct ring_reqs *q, struct tp_req **slot)
{
    if (q->count == q->cap) {
        size_t ncap = q->cap ? 2 * q->cap : 16;
        struct tp_req *n = realloc(q->req, ncap * sizeof(*n));
        if (!n) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for ring requests");
        q->req = n;
        q->cap = ncap;
    }
    *slot = &q->req[q->count++];
    return HORA_OK;
}

static hora_status_t ring_reqs_wait(struct coll_group *g, struct ring_reqs *q, int peer)
{
    hora_status_t status = HORA_OK;
    for (size_t i = 0; i < q->count && status == HORA_OK; i++) status = g->tp->ops->wait(g->tp, peer, &q->req[i]);
    q->count = 0;
    return status;
}

/* Post bytes in pieces of at most max_piece bytes: sent to the right from
 * send, or (send NULL) received from the left into recv. */
static hora_status_t ring_msg_post(struct coll_group *g, const uint8_t *send, uint8_t *recv, size_t bytes,
                                   size_t max_piece, int tag, struct ring_reqs *q)
{
    for (size_t at = 0; at < bytes; at += max_piece) {
        struct tp_req *req = NULL;
        const size_t piece = ring_min(max_piece, bytes - at);
        HORA_CHECK(ring_reqs_add(q, &req));
        HORA_CHECK(send ? g->tp->ops->isend(g->tp, g->right, send + at, piece, tag, req)
                        : g->tp->ops->irecv(g->tp, g->left, recv + at, piece, tag, req));
    }
    return HORA_OK;
}

/* Send [buf, buf+bytes) to the right. */
static hora_status_t ring_msg_send(struct coll_group *g, const uint8_t *buf, size_t bytes, size_t max_piece, int tag,
                                   struct ring_reqs *q)
{
    return ring_msg_post(g, buf, NULL, bytes, max_piece, tag, q);
}

/* Receive a block from the left into place (no reduction). */
static hora_status_t ring_msg_recv(struct coll_group *g, uint8_t *buf, size_t bytes, size_t max_piece, int tag,
                                   struct ring_reqs *q)
{
    return ring_msg_post(g, NULL, buf, bytes, max_piece, tag, q);
}

static hora_status_t ring_msg_reduce(struct coll_group *g, const uint8_t *send, uint8_t *work, uint8_t *out,
                                     size_t count, const struct group_reduction *red)
{
    const size_t esize = hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    size_t max_seg, dummy, soff, slen, roff, rlen;
    struct ring_reqs sends = {0}, recvs = {0};
    hora_status_t status = HORA_OK;
    uint8_t *tmp = NULL;

    coll_shard(count, n, 0, &dummy, &max_seg);
    const size_t chunk = group_chunk_elems(g, max_seg, esize);
    tmp = malloc(2 * chunk * esize);
    if (!tmp) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the ring's receive buffers");
    group_phase(g, "REDUCE_SCATTER", 1);

    for (int s = 0; s < n - 1 && status == HORA_OK; s++) {
        const int last = s == n - 2;
        coll_shard(count, n, ring_mod(r - s - 1, n), &soff, &slen);
        coll_shard(count, n, ring_mod(r - s - 2, n), &roff, &rlen);
        const uint8_t *src = (s == 0 ? send : work) + soff * esize;
        uint8_t *dst = (out && last) ? out : work + roff * esize;
        const uint8_t *local = send + roff * esize;
        status = ring_msg_send(g, src, slen * esize, chunk * esize, s, &sends);
        size_t chunks = (rlen + chunk - 1) / chunk;
        for (size_t k = 0; k < chunks && status == HORA_OK; k++) {
            struct tp_req *req = NULL;
            if (k == 0) {
                status = ring_reqs_add(&recvs, &req);
                if (status == HORA_OK)
                    status = g->tp->ops->irecv(g->tp, g->left, tmp, ring_min(chunk, rlen) * esize, s, req);
            }
            /* Receive chunk k+1 while reducing chunk k. */
            if (k + 1 < chunks && status == HORA_OK) {
                status = ring_reqs_add(&recvs, &req);
                if (status == HORA_OK)
                    status = g->tp->ops->irecv(g->tp, g->left, tmp + ((k + 1) & 1) * chunk * esize,
                                               ring_min(chunk, rlen - (k + 1) * chunk) * esize, s, req);
            }
            if (status == HORA_OK) status = g->tp->ops->wait(g->tp, g->left, &recvs.req[k]);
            if (status == HORA_OK) {
                size_t m = ring_min(chunk, rlen - k * chunk);
                status = ring_combine(g, dst + k * chunk * esize, local + k * chunk * esize,
                                      tmp + (k & 1) * chunk * esize, m, red, last);
            }
        }
        recvs.count = 0;
        if (status == HORA_OK) status = ring_reqs_wait(g, &sends, g->right);
    }
    group_phase(g, "REDUCE_SCATTER", 0);
    if (out || status < 0) goto out;

    group_phase(g, "ALLGATHER", 1);
    for (int s = 0; s < n - 1 && status == HORA_OK; s++) {
        coll_shard(count, n, ring_mod(r - s, n), &soff, &slen);
        coll_shard(count, n, ring_mod(r - s - 1, n), &roff, &rlen);
        int tag = n + s;
        status = ring_msg_recv(g, work + roff * esize, rlen * esize, RING_MSG_MAX_BYTES, tag, &recvs);
        if (status == HORA_OK)
            status = ring_msg_send(g, work + soff * esize, slen * esize, RING_MSG_MAX_BYTES, tag, &sends);
        if (status == HORA_OK) status = ring_reqs_wait(g, &recvs, g->left);
        if (status == HORA_OK) status = ring_reqs_wait(g, &sends, g->right);
    }
    group_phase(g, "ALLGATHER", 0);
out:
    free(tmp);
    free(sends.req);
    free(recvs.req);
    return status;
}

static hora_status_t ring_msg_allgatherv(struct coll_group *g, uint8_t *recv, const size_t *counts, hora_dtype_t dtype)
{
    const size_t esize = hora_dtype_size(dtype);
    const int n = g->n, r = g->r;
    struct ring_reqs sends = {0}, recvs = {0};
    hora_status_t status = HORA_OK;
    size_t *displ = malloc((size_t)n * sizeof(*displ));

    if (!displ) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in allgather");
    for (int i = 0; i < n; i++) displ[i] = i ? displ[i - 1] + counts[i - 1] : 0;
    for (int s = 0; s < n - 1 && status == HORA_OK; s++) {
        int sb = ring_mod(r - s, n), rb = ring_mod(r - s - 1, n);
        status = ring_msg_recv(g, recv + displ[rb] * esize, counts[rb] * esize, RING_MSG_MAX_BYTES, s, &recvs);
        if (status == HORA_OK)
            status = ring_msg_send(g, recv + displ[sb] * esize, counts[sb] * esize, RING_MSG_MAX_BYTES, s, &sends);
        if (status == HORA_OK) status = ring_reqs_wait(g, &recvs, g->left);
        if (status == HORA_OK) status = ring_reqs_wait(g, &sends, g->right);
    }
    free(displ);
    free(sends.req);
    free(recvs.req);
    return status;
}

static hora_status_t ring_msg_broadcast(struct coll_group *g, uint8_t *buf, size_t count, hora_dtype_t dtype, int root)
{
    const size_t esize = hora_dtype_size(dtype);
    const size_t chunk = group_chunk_elems(g, count, esize);
    const int d = ring_mod(g->r - root, g->n);
    struct ring_reqs sends = {0}, recvs = {0};
    hora_status_t status = HORA_OK;
    size_t chunks = (count + chunk - 1) / chunk;

    /* Post every receive up front (disjoint pieces of buf), then forward each
     * chunk as soon as it arrives. */
    if (d > 0) status = ring_msg_recv(g, buf, count * esize, chunk * esize, 0, &recvs);
    for (size_t k = 0; k < chunks && status == HORA_OK; k++) {
        size_t m = ring_min(chunk, count - k * chunk);
        if (d > 0) status = g->tp->ops->wait(g->tp, g->left, &recvs.req[k]);
        if (status == HORA_OK && d < g->n - 1)
            status = ring_msg_send(g, buf + k * chunk * esize, m * esize, chunk * esize, 0, &sends);
    }
    if (status == HORA_OK) status = ring_reqs_wait(g, &sends, g->right);
    free(sends.req);
    free(recvs.req);
    return status;
}

/* ------------------------------------------------------------------- public */

/* Callers (coll.c) handle a group of one rank and count 0. */
static int ring_peer_memory(const struct coll_group *g) { return (g->tp->ops->caps & TP_CAP_PEER_MEMORY) != 0; }

hora_status_t ring_allreduce(struct coll_group *g, const void *send, void *work, size_t count,
                             const struct group_reduction *red)
{
    if (ring_peer_memory(g)) return ring_mem_reduce(g, send, work, NULL, count, red, GROUP_KIND_ALLREDUCE);
    return ring_msg_reduce(g, send, work, NULL, count, red);
}

hora_status_t ring_reduce_scatter(struct coll_group *g, const void *send, void *work, void *out, size_t count,
                                  const struct group_reduction *red)
{
    if (ring_peer_memory(g)) return ring_mem_reduce(g, send, work, out, count, red, GROUP_KIND_REDUCE_SCATTER);
    return ring_msg_reduce(g, send, work, out, count, red);
}

hora_status_t ring_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype, size_t total)
{
    if (ring_peer_memory(g)) return ring_mem_allgatherv(g, recv, counts, dtype, total);
    return ring_msg_allgatherv(g, recv, counts, dtype);
}

hora_status_t ring_broadcast(struct coll_group *g, void *buf, size_t count, hora_dtype_t dtype, int root)
{
    if (ring_peer_memory(g)) return ring_mem_broadcast(g, buf, count, dtype, root);
    return ring_msg_broadcast(g, buf, count, dtype, root);
}
