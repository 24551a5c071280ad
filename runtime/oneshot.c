/* oneshot.c - collectives in one shot over peer memory (the shm transport).
 *
 * Every rank maps every host peer's buffers, so the shard of rank r can be
 * finished by rank r alone: it reads shard r from all n inputs, reduces them,
 * and writes the result into shard r of all n outputs. Only rank r ever
 * touches shard r of any buffer during the operation, so nothing needs
 * ordering between ranks except "everyone's buffers are ready" (each rank's
 * start position) and "nobody touches my buffers any more" (each rank's done
 * position, awaited before returning, since the caller may reuse them).
 *
 * Memory traffic per rank for an allreduce of S bytes: reads S, writes S, and
 * the lines it writes into peers' buffers are the ones it has just read, so
 * no extra read-for-ownership. The ring (ring.c) moves about 1.5x that
 * (reduce-scatter reads 2 halves and writes one, allgather copies into
 * lines that are not in cache) and needs 2(n-1) dependent steps. HORA_ALGORITHM
 * chooses; auto picks this for peer-memory transports. */
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "rt.h"
#include "status.h"

static size_t oneshot_min(size_t a, size_t b) { return a < b ? a : b; }

/* Publish this rank's descriptor, wait for every peer's, check they agree. */
static hora_status_t oneshot_begin(struct ring *g, const struct tp_mem_desc *mine, struct tp_mem_desc *descs)
{
    const struct tp_ops *ops = g->tp->ops;
    const uint64_t start = ring_position(g->op_seq, 0, 1);

    HORA_CHECK(ops->mem_publish(g->tp, mine));
    HORA_CHECK(ops->mem_post(g->tp, start));
    descs[g->r] = *mine;
    for (int i = 1; i < g->n; i++) {
        int p = (g->r + i) % g->n, peer = ring_member(g, p);
        HORA_CHECK(ops->mem_wait(g->tp, peer, start));
        HORA_CHECK(ops->mem_desc(g->tp, peer, &descs[p]));
        HORA_CHECK(ring_desc_check(g, mine, &descs[p], peer));
    }
    return HORA_OK;
}

static hora_status_t oneshot_end(struct ring *g)
{
    const struct tp_ops *ops = g->tp->ops;
    const uint64_t done = ring_position(g->op_seq, 1, 0);

    HORA_CHECK(ops->mem_post(g->tp, done));
    for (int i = 1; i < g->n; i++) HORA_CHECK(ops->mem_wait(g->tp, ring_member(g, (g->r + i) % g->n), done));
    return HORA_OK;
}

static struct tp_mem_desc oneshot_desc(const struct ring *g, uint32_t kind, uint32_t dtype, uint32_t op, int root,
                                       size_t count, size_t chunk)
{
    struct tp_mem_desc d = {0};
    d.op_seq = g->op_seq;
    d.kind = kind;
    d.dtype = dtype;
    d.op = op;
    d.root = root;
    d.count = count;
    d.chunk_elems = chunk;
    return d;
}

hora_status_t oneshot_reduce(struct ring *g, const void *send, void *work, void *out, size_t count,
                             const struct ring_reduction *red)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = k_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    size_t off, len, max_seg, dummy;
    hora_status_t status;

    hora_shard(count, n, 0, &dummy, &max_seg);
    const size_t chunk = ring_chunk_elems(g, max_seg, es);
    struct tp_mem_desc mine = oneshot_desc(g, out ? RING_KIND_REDUCE_SCATTER : RING_KIND_ALLREDUCE, red->dtype, red->user_op, -1, count, chunk);
    /* Reduce-scatter writes only its own output: the work offset is unused. */
    HORA_CHECK(ring_mem_offsets(g, send, out ? send : work, count * es, &mine.send_offset, &mine.work_offset));
    struct tp_mem_desc *descs = calloc((size_t)n, sizeof(*descs));
    const uint8_t **src = calloc((size_t)n, sizeof(*src));
    uint8_t **dst = calloc((size_t)n, sizeof(*dst));
    if (!descs || !src || !dst) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot collective");
        goto out;
    }
    status = oneshot_begin(g, &mine, descs);
    if (status < 0) goto out;
    for (int p = 0; p < n; p++) {
        src[p] = p == r ? send : ops->mem_peer_ptr(g->tp, ring_member(g, p), descs[p].send_offset);
        dst[p] = p == r ? work : ops->mem_peer_ptr(g->tp, ring_member(g, p), descs[p].work_offset);
    }
    hora_shard(count, n, r, &off, &len);
    ring_phase(g, "REDUCE_SCATTER", 1);
    for (size_t e = 0; e < len; e += chunk) {
        const size_t m = oneshot_min(chunk, len - e), at = (off + e) * es;
        /* Accumulate into this rank's own output, which stays in cache while
         * the other n-2 inputs stream through, then fan the result out. */
        uint8_t *acc = out ? (uint8_t *)out + e * es : dst[r] + at;
        k_reduce(acc, src[r] + at, src[(r + 1) % n] + at, m, red->dtype, red->op);
        for (int i = 2; i < n; i++) k_reduce(acc, acc, src[(r + i) % n] + at, m, red->dtype, red->op);
        if (red->divisor > 1) k_div(acc, acc, m, red->dtype, red->divisor);
        if (out) continue;
        for (int i = 1; i < n; i++) memcpy(dst[(r + i) % n] + at, acc, m * es);
    }
    ring_phase(g, "REDUCE_SCATTER", 0);
    status = oneshot_end(g);
out:
    free(descs);
    free(src);
    free(dst);
    return status;
}

hora_status_t oneshot_allgatherv(struct ring *g, void *recv, const size_t *counts, k_dtype_t dtype, size_t total)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = k_dtype_size(dtype);
    hora_status_t status;
    struct tp_mem_desc mine = oneshot_desc(g, RING_KIND_ALLGATHER, dtype, 0, -1, total, 0);
    HORA_CHECK(ring_mem_offsets(g, recv, recv, total * es, &mine.send_offset, &mine.work_offset));
    struct tp_mem_desc *descs = calloc((size_t)g->n, sizeof(*descs));
    if (!descs) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot allgather");
    status = oneshot_begin(g, &mine, descs);
    if (status == HORA_OK) {
        ring_phase(g, "ALLGATHER", 1);
        size_t displ = 0;
        for (int p = 0; p < g->n; p++) {
            /* Every peer's own block sits in its recv since its start. */
            if (p != g->r && counts[p]) {
                const uint8_t *peer = ops->mem_peer_ptr(g->tp, ring_member(g, p), descs[p].work_offset);
                memcpy((uint8_t *)recv + displ * es, peer + displ * es, counts[p] * es);
            }
            displ += counts[p];
        }
        ring_phase(g, "ALLGATHER", 0);
        status = oneshot_end(g);
    }
    free(descs);
    return status;
}

hora_status_t oneshot_broadcast(struct ring *g, void *buf, size_t count, k_dtype_t dtype, int root)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = k_dtype_size(dtype);
    hora_status_t status;
    struct tp_mem_desc mine = oneshot_desc(g, RING_KIND_BROADCAST, dtype, 0, root, count, 0);
    HORA_CHECK(ring_mem_offsets(g, buf, buf, count * es, &mine.send_offset, &mine.work_offset));
    struct tp_mem_desc *descs = calloc((size_t)g->n, sizeof(*descs));
    if (!descs) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot broadcast");
    status = oneshot_begin(g, &mine, descs);
    if (status == HORA_OK) {
        if (g->r != root)
            memcpy(buf, ops->mem_peer_ptr(g->tp, ring_member(g, root), descs[root].work_offset), count * es);
        status = oneshot_end(g);
    }
    free(descs);
    return status;
}
