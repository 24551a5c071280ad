/* coll.c - the public direct collectives: argument checks, staging of buffers
 * that are not in the shared pool, and dispatch to the flat ring. Callers
 * issue them from one thread at a time, in the same order on every rank. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hora.h"
#include "k_cpu.h"
#include "coll.h"
#include "ring.h"
#include "rt.h"
#include "status.h"

_Static_assert((int)HORA_DTYPE_F32 == (int)K_DTYPE_F32 && (int)HORA_DTYPE_F16 == (int)K_DTYPE_F16 &&
                   (int)HORA_DTYPE_BF16 == (int)K_DTYPE_BF16 && (int)HORA_DTYPE_F64 == (int)K_DTYPE_F64 &&
                   (int)HORA_DTYPE_I32 == (int)K_DTYPE_I32 && (int)HORA_DTYPE_I64 == (int)K_DTYPE_I64 &&
                   (int)HORA_DTYPE_U8 == (int)K_DTYPE_U8,
               "hora and kernel dtypes must agree");

void hora_shard(size_t count, int size, int rank, size_t *offset, size_t *shard_count)
{
    size_t base = size > 0 ? count / (size_t)size : 0, extra = size > 0 ? count % (size_t)size : 0;
    size_t r = (size_t)rank;
    *shard_count = base + (r < extra ? 1 : 0);
    *offset = r * base + (r < extra ? r : extra);
}

static hora_status_t coll_check(const char *what, hora_dtype_t dtype)
{
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "%s called before hora_init (or after hora_shutdown)", what);
    if ((unsigned)dtype >= HORA_DTYPE_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "%s: invalid dtype %d", what, (int)dtype);
    return HORA_OK;
}

static hora_status_t coll_reduction(const char *what, hora_dtype_t dtype, hora_op_t op, struct ring_reduction *red)
{
    static const k_op_t kops[HORA_OP_COUNT] = {
        [HORA_OP_SUM] = K_OP_SUM, [HORA_OP_AVG] = K_OP_SUM, [HORA_OP_MIN] = K_OP_MIN,
        [HORA_OP_MAX] = K_OP_MAX, [HORA_OP_PROD] = K_OP_PROD,
    };
    if ((unsigned)op >= HORA_OP_COUNT) return status_fail(HORA_ERR_INVALID_ARG, "%s: invalid op %d", what, (int)op);
    red->dtype = (k_dtype_t)dtype;
    red->op = kops[op];
    red->user_op = op;
    red->divisor = op == HORA_OP_AVG ? hora_rt.topo.size : 1;
    return HORA_OK;
}

/* Buffers must be identical (in place) or disjoint. */
static int coll_overlap(const void *a, size_t abytes, const void *b, size_t bbytes)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bbytes && y < x + abytes;
}

/* The ring of a (purpose, scope) channel, numbered for this rank. */
static struct ring coll_ring(int purpose, int scope, const struct coll_hooks *hooks)
{
    const struct topo *t = &hora_rt.topo;
    const int channel = rt_channel(purpose, scope);
    struct ring g = {0};
    g.tp = hora_rt.ring_tp[channel];
    switch (scope) {
    case RT_SCOPE_NODE:
        g.n = t->local_size, g.r = t->local_rank, g.members = t->node_members;
        break;
    case RT_SCOPE_CROSS:
        g.n = t->node_count, g.r = t->node_rank, g.members = t->cross_members;
        break;
    default: g.n = t->size, g.r = t->rank, g.members = NULL; break;
    }
    g.left = ring_member(&g, (g.r + g.n - 1) % g.n);
    g.right = ring_member(&g, (g.r + 1) % g.n);
    /* One shot needs peer memory; the ring works on any transport. */
    g.algorithm = (g.tp->ops->caps & TP_CAP_PEER_MEMORY) && hora_rt.cfg.algorithm != 1 ? RING_ALGORITHM_ONESHOT
                                                                                       : RING_ALGORITHM_RING;
    g.chunk_bytes = hooks && hooks->chunk_bytes ? hooks->chunk_bytes : hora_rt.cfg.chunk_bytes;
    g.op_seq = ++hora_rt.op_seq[channel];
    if (hooks) {
        g.on_phase = hooks->on_phase;
        g.phase_ctx = hooks->ctx;
    }
    return g;
}

static int coll_peer_memory(int purpose, int scope)
{
    return (hora_rt.ring_tp[rt_channel(purpose, scope)]->ops->caps & TP_CAP_PEER_MEMORY) != 0;
}

static int coll_shared(int purpose, int scope, const void *p, size_t bytes)
{
    struct tp *tp = hora_rt.ring_tp[rt_channel(purpose, scope)];
    uint64_t off;
    return tp->ops->mem_local_offset(tp, p, bytes, &off);
}

static void coll_phase(const struct coll_hooks *hooks, const char *phase, int begin)
{
    if (hooks && hooks->on_phase) hooks->on_phase(hooks->ctx, phase, begin);
}

/*
 * Hierarchical allreduce of work (in place): the node's ranks reduce-scatter
 * the vector (shard i to local rank i), every local rank i runs one ring
 * across the nodes over shard i only, and the node allgathers the shards.
 * Only 1/local_size of the data crosses the slower inter-node links from each
 * rank, and all local ranks use them at once. A division for AVG happens once,
 * after the cross-node ring, by the world size.
 */
static hora_status_t coll_allreduce_hierarchical(int purpose, void *work, size_t count,
                                                 const struct ring_reduction *red, const struct coll_hooks *hooks)
{
    const struct topo *t = &hora_rt.topo;
    const size_t es = hora_dtype_size((hora_dtype_t)red->dtype);
    struct ring_reduction sum = *red, cross = *red;
    size_t off, len;
    size_t *counts = malloc(sizeof(size_t) * (size_t)t->local_size);

    if (!counts) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a hierarchical allreduce");
    for (int i = 0; i < t->local_size; i++) hora_shard(count, t->local_size, i, &off, &counts[i]);
    hora_shard(count, t->local_size, t->local_rank, &off, &len);
    sum.divisor = 1;
    cross.divisor = red->divisor;
    uint8_t *shard = (uint8_t *)work + off * es;

    struct ring node = coll_ring(purpose, RT_SCOPE_NODE, hooks);
    hora_status_t status = ring_reduce_scatter(&node, work, work, shard, count, &sum);
    if (status == HORA_OK) {
        struct ring across = coll_ring(purpose, RT_SCOPE_CROSS, NULL);
        coll_phase(hooks, "ALLREDUCE_CROSS", 1);
        if (len) status = ring_allreduce(&across, shard, shard, len, &cross); /* same len on the whole ring */
        coll_phase(hooks, "ALLREDUCE_CROSS", 0);
    }
    if (status == HORA_OK) {
        struct ring node2 = coll_ring(purpose, RT_SCOPE_NODE, hooks);
        status = ring_allgatherv(&node2, work, counts, red->dtype);
    }
    free(counts);
    return status;
}

hora_status_t coll_allreduce(int purpose, const void *send, void *recv, size_t count, hora_dtype_t dtype,
                             hora_op_t op, const struct coll_hooks *hooks)
{
    struct ring_reduction red;
    HORA_CHECK(coll_check("hora_allreduce", dtype));
    HORA_CHECK(coll_reduction("hora_allreduce", dtype, op, &red));
    if (count == 0) return HORA_OK;
    const size_t bytes = count * hora_dtype_size(dtype);
    if (!send || !recv) return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: NULL buffer with count %zu", count);
    if (send != recv && coll_overlap(send, bytes, recv, bytes))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: send and recv overlap without being equal");

    const int hier = hora_rt.hierarchical && hora_rt.topo.size > 1;
    const int scope = hier ? RT_SCOPE_NODE : RT_SCOPE_FLAT; /* whose memory rules apply */
    void *work = recv;
    if (coll_peer_memory(purpose, scope) && hora_rt.topo.size > 1 && !coll_shared(purpose, scope, recv, bytes)) {
        /* Peers read our buffers where they are: stage what is not shared. */
        HORA_CHECK(rt_scratch(purpose, bytes, &work));
        memcpy(work, send, bytes);
        send = work;
    } else if (coll_peer_memory(purpose, scope) && send != recv && !coll_shared(purpose, scope, send, bytes)) {
        memcpy(recv, send, bytes);
        send = recv;
    }
    if (hier) {
        if (send != work) memcpy(work, send, bytes);
        HORA_CHECK(coll_allreduce_hierarchical(purpose, work, count, &red, hooks));
    } else {
        struct ring g = coll_ring(purpose, RT_SCOPE_FLAT, hooks);
        HORA_CHECK(ring_allreduce(&g, send, work, count, &red));
    }
    if (work != recv) memcpy(recv, work, bytes);
    return HORA_OK;
}

hora_status_t hora_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    return coll_allreduce(RT_PURPOSE_USER, send, recv, count, dtype, op, NULL);
}

hora_status_t hora_reduce_scatter(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    struct ring_reduction red;
    size_t offset, shard;
    void *work;
    HORA_CHECK(coll_check("hora_reduce_scatter", dtype));
    HORA_CHECK(coll_reduction("hora_reduce_scatter", dtype, op, &red));
    if (count == 0) return HORA_OK;
    const size_t esize = hora_dtype_size(dtype), bytes = count * esize;
    hora_shard(count, hora_rt.topo.size, hora_rt.topo.rank, &offset, &shard);
    if (!send || (!recv && shard))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reduce_scatter: NULL buffer with count %zu", count);
    if (shard && coll_overlap(send, bytes, recv, shard * esize))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reduce_scatter: recv must not overlap send");
    struct ring g = coll_ring(RT_PURPOSE_USER, RT_SCOPE_FLAT, NULL);
    if (hora_rt.topo.size == 1) return ring_reduce_scatter(&g, send, NULL, recv, count, &red);

    /* Partial sums need a whole vector of room; peers read it in the pool. */
    HORA_CHECK(rt_scratch(RT_PURPOSE_USER, bytes, &work));
    if (coll_peer_memory(RT_PURPOSE_USER, RT_SCOPE_FLAT) && !coll_shared(RT_PURPOSE_USER, RT_SCOPE_FLAT, send, bytes)) {
        memcpy(work, send, bytes);
        send = work;
    }
    return ring_reduce_scatter(&g, send, work, recv, count, &red);
}

hora_status_t coll_allgatherv(int purpose, const void *send, void *recv, const size_t *counts, hora_dtype_t dtype)
{
    HORA_CHECK(coll_check("hora_allgatherv", dtype));
    if (!counts) return status_fail(HORA_ERR_INVALID_ARG, "hora_allgatherv: counts is NULL");
    const int n = hora_rt.topo.size, r = hora_rt.topo.rank;
    const size_t esize = hora_dtype_size(dtype);
    size_t total = 0, displ = 0;
    for (int i = 0; i < n; i++) {
        if (i == r) displ = total;
        total += counts[i];
    }
    if (total == 0) return HORA_OK;
    if (!recv || (!send && counts[r]))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allgatherv: NULL buffer");
    const size_t bytes = total * esize, mine = counts[r] * esize;
    uint8_t *own = (uint8_t *)recv + displ * esize;
    if (mine && send != own && coll_overlap(send, mine, recv, bytes))
        return status_fail(HORA_ERR_INVALID_ARG,
                           "hora_allgatherv: send overlaps recv without being this rank's block of it");
    struct ring g = coll_ring(purpose, RT_SCOPE_FLAT, NULL);

    uint8_t *dst = recv;
    if (coll_peer_memory(purpose, RT_SCOPE_FLAT) && n > 1 && !coll_shared(purpose, RT_SCOPE_FLAT, recv, bytes)) {
        void *stage;
        HORA_CHECK(rt_scratch(purpose, bytes, &stage));
        dst = stage;
    }
    if (mine && send != dst + displ * esize) memcpy(dst + displ * esize, send, mine);
    HORA_CHECK(ring_allgatherv(&g, dst, counts, (k_dtype_t)dtype));
    if (dst != (uint8_t *)recv) memcpy(recv, dst, bytes);
    return HORA_OK;
}

hora_status_t hora_allgatherv(const void *send, void *recv, const size_t *counts, hora_dtype_t dtype)
{
    return coll_allgatherv(RT_PURPOSE_USER, send, recv, counts, dtype);
}

hora_status_t coll_broadcast(int purpose, void *buf, size_t count, hora_dtype_t dtype, int root)
{
    HORA_CHECK(coll_check("hora_broadcast", dtype));
    const int n = hora_rt.topo.size, r = hora_rt.topo.rank;
    if (root < 0 || root >= n)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast: root %d is not a rank (0..%d)", root, n - 1);
    if (count == 0) return HORA_OK;
    if (!buf) return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast: NULL buffer with count %zu", count);
    const size_t bytes = count * hora_dtype_size(dtype);
    struct ring g = coll_ring(purpose, RT_SCOPE_FLAT, NULL);

    if (!coll_peer_memory(purpose, RT_SCOPE_FLAT) || n == 1 || coll_shared(purpose, RT_SCOPE_FLAT, buf, bytes))
        return ring_broadcast(&g, buf, count, (k_dtype_t)dtype, root);
    void *stage;
    HORA_CHECK(rt_scratch(purpose, bytes, &stage));
    if (r == root) memcpy(stage, buf, bytes);
    HORA_CHECK(ring_broadcast(&g, stage, count, (k_dtype_t)dtype, root));
    if (r != root) memcpy(buf, stage, bytes);
    return HORA_OK;
}

hora_status_t hora_broadcast(void *buf, size_t count, hora_dtype_t dtype, int root)
{
    return coll_broadcast(RT_PURPOSE_USER, buf, count, dtype, root);
}
