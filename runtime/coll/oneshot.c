/* oneshot.c - collectives in one shot over peer memory (the shm transport).
 *
 * Every rank maps every host peer's buffers, so the shard of rank r can be
 * finished by rank r alone: it reads shard r from all n inputs, reduces them,
 * and writes the result into shard r of all n outputs. Only rank r ever
 * touches shard r of any buffer during the operation, so nothing needs
 * ordering between ranks except "everyone's buffers are ready" (each rank's
 * start position) and "nobody touches my buffers any more" (each rank's done
 * position, awaited before returning, since the caller may reuse them). Every
 * rank awaits every done, which is also the full synchronisation the
 * members' agreement on the outcome needs (tp_shm.c); a rank checks that
 * outcome before each chunk it writes into its peers' buffers, so that one
 * resumed after they gave up stops within a chunk.
 *
 * Memory traffic per rank for an allreduce of S bytes: reads S, writes S, and
 * the lines it writes into peers' buffers are the ones it has just read, so
 * no extra read-for-ownership. The ring (ring.c) moves about 1.5x that
 * (reduce-scatter reads 2 halves and writes one, allgather copies into
 * lines that are not in cache) and needs 2(n-1) dependent steps. HORA_ALGORITHM
 * chooses; auto picks this for peer-memory transports.
 *
 * Every element is reduced from all n inputs at once, in rank order 0..n-1,
 * by the engine's n-way reduce: f16/bf16 accumulate in fp32 and round once,
 * and the result does not depend on which rank owns the shard. */
#include <stdlib.h>

#include "base/status.h"
#include "coll/algo.h"

/* Groups up to this size keep their per-call arrays on the stack. */
#define ONESHOT_STACK_MEMBERS 16

static size_t oneshot_min(size_t a, size_t b) { return a < b ? a : b; }

/* Publish this rank's descriptor, wait for every peer's, check they agree. */
static hora_status_t oneshot_begin(struct coll_group *g, const struct tp_mem_desc *mine, struct tp_mem_desc *descs)
{
    const struct tp_ops *ops = g->tp->ops;
    const uint64_t start = group_position(g->op_seq, 0, 1);

    HORA_CHECK(ops->mem_publish(g->tp, mine));
    HORA_CHECK(ops->mem_post(g->tp, start));
    descs[g->r] = *mine;
    for (int i = 1; i < g->n; i++) {
        int p = (g->r + i) % g->n, peer = group_member(g, p);
        HORA_CHECK(ops->mem_wait(g->tp, peer, start));
        HORA_CHECK(ops->mem_desc(g->tp, peer, &descs[p]));
        HORA_CHECK(group_desc_check(g, mine, &descs[p], peer));
    }
    return HORA_OK;
}

static hora_status_t oneshot_end(struct coll_group *g)
{
    const struct tp_ops *ops = g->tp->ops;
    const uint64_t done = group_position(g->op_seq, 1, 0);

    HORA_CHECK(ops->mem_post(g->tp, done));
    for (int i = 1; i < g->n; i++) HORA_CHECK(ops->mem_wait(g->tp, group_member(g, (g->r + i) % g->n), done));
    return HORA_OK;
}

hora_status_t oneshot_reduce(struct coll_group *g, const void *send, void *work, void *out, size_t count,
                             const struct group_reduction *red)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    size_t off, len, max_seg, dummy;
    hora_status_t status;

    coll_shard(count, n, 0, &dummy, &max_seg);
    const size_t chunk = group_chunk_elems(g, max_seg, es);
    struct tp_mem_desc mine = group_desc(g, out ? GROUP_KIND_REDUCE_SCATTER : GROUP_KIND_ALLREDUCE, red->dtype,
                                         red->user_op, -1, count, chunk);
    /* Reduce-scatter writes only its own output: the work offset is unused. */
    HORA_CHECK(group_mem_offsets(g, send, out ? send : work, count * es, &mine.send_offset, &mine.work_offset));
    /* Up to ONESHOT_STACK_MEMBERS members from the stack (a microsecond
     * call paid three callocs before). */
    struct tp_mem_desc stack_descs[ONESHOT_STACK_MEMBERS];
    const void *stack_src_at[ONESHOT_STACK_MEMBERS];
    uint8_t *stack_dst[ONESHOT_STACK_MEMBERS];
    const int heap = n > ONESHOT_STACK_MEMBERS;
    struct tp_mem_desc *descs = heap ? calloc((size_t)n, sizeof(*descs)) : stack_descs;
    const void **src_at =
        heap ? calloc((size_t)n, sizeof(*src_at)) : stack_src_at; /* each peer's input at the chunk in hand */
    uint8_t **dst = heap ? calloc((size_t)n, sizeof(*dst)) : stack_dst;
    if (!descs || !src_at || !dst) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot collective");
        goto out;
    }
    status = oneshot_begin(g, &mine, descs);
    if (status < 0) goto out;
    coll_shard(count, n, r, &off, &len);
    for (int p = 0; p < n; p++) {
        const uint8_t *src = p == r ? send : ops->mem_peer_ptr(g->tp, group_member(g, p), descs[p].send_offset);
        src_at[p] = src + off * es;
        dst[p] = p == r ? work : ops->mem_peer_ptr(g->tp, group_member(g, p), descs[p].work_offset);
    }
    group_phase(g, "REDUCE_SCATTER", 1);
    for (size_t e = 0; e < len && status == HORA_OK; e += chunk) {
        const size_t m = oneshot_min(chunk, len - e), at = (off + e) * es;
        /* A rank resumed after its peers gave up (tp_shm.c) must stop writing
         * into their buffers: at most one chunk more. */
        status = ops->mem_op_check(g->tp);
        if (status < 0) break;
        /* Reduce into this rank's own output (its work buffer's shard, which
         * only this rank touches; in place when send == work), then fan the
         * result out while it is still in cache. */
        uint8_t *acc = out ? (uint8_t *)out + e * es : dst[r] + at;
        status = group_reduce(g, acc, src_at, n, m, red);
        for (int p = 0; p < n; p++) src_at[p] = (const uint8_t *)src_at[p] + m * es;
        for (int i = 1; i < n && status == HORA_OK && !out; i++)
            status = g->engine->copy(dst[(r + i) % n] + at, acc, m * es);
    }
    group_phase(g, "REDUCE_SCATTER", 0);
    if (status == HORA_OK) status = oneshot_end(g);
out:
    if (heap) {
        free(descs);
        free(src_at);
        free(dst);
    }
    return status;
}

hora_status_t oneshot_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype,
                                 size_t total)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = hora_dtype_size(dtype);
    hora_status_t status;
    struct tp_mem_desc mine = group_desc(g, GROUP_KIND_ALLGATHER, dtype, HORA_OP_SUM, -1, total, 0);
    HORA_CHECK(group_mem_offsets(g, recv, recv, total * es, &mine.send_offset, &mine.work_offset));
    struct tp_mem_desc *descs = calloc((size_t)g->n, sizeof(*descs));
    if (!descs) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot allgather");
    status = oneshot_begin(g, &mine, descs);
    if (status == HORA_OK) {
        group_phase(g, "ALLGATHER", 1);
        size_t displ = 0;
        for (int p = 0; p < g->n; p++) {
            /* Every peer's own block sits in its recv since its start. */
            if (p != g->r && counts[p]) {
                const uint8_t *peer = ops->mem_peer_ptr(g->tp, group_member(g, p), descs[p].work_offset);
                status = g->engine->copy((uint8_t *)recv + displ * es, peer + displ * es, counts[p] * es);
                if (status < 0) break;
            }
            displ += counts[p];
        }
        group_phase(g, "ALLGATHER", 0);
        /* After a failed copy "done" is never posted: the peers time out
         * instead of returning data this rank did not take. */
        if (status == HORA_OK) status = oneshot_end(g);
    }
    free(descs);
    return status;
}

hora_status_t oneshot_broadcast(struct coll_group *g, void *buf, size_t count, hora_dtype_t dtype, int root)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t es = hora_dtype_size(dtype);
    hora_status_t status;
    struct tp_mem_desc mine = group_desc(g, GROUP_KIND_BROADCAST, dtype, HORA_OP_SUM, root, count, 0);
    HORA_CHECK(group_mem_offsets(g, buf, buf, count * es, &mine.send_offset, &mine.work_offset));
    struct tp_mem_desc *descs = calloc((size_t)g->n, sizeof(*descs));
    if (!descs) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a one-shot broadcast");
    status = oneshot_begin(g, &mine, descs);
    if (status == HORA_OK) {
        if (g->r != root)
            status = g->engine->copy(buf, ops->mem_peer_ptr(g->tp, group_member(g, root), descs[root].work_offset),
                                     count * es);
        if (status == HORA_OK) status = oneshot_end(g);
    }
    free(descs);
    return status;
}
