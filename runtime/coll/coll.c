/* coll.c - the collectives of a channel (user or coordinator): argument
 * checks, staging of buffers the peers cannot map, the choice of algorithm
 * (all-reduces of host memory up to HORA_LATENCY_BYTES: the latency path;
 * else one shot over peer memory unless HORA_ALGORITHM=ring, else the ring;
 * op Adasum: adasum.c, between two agreements), and the hierarchical
 * all-reduce. Callers issue them from one thread per
 * purpose, in the same order on every rank. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "coll/algo.h"
#include "coll/coll.h"
#include "mem/mem_dev.h"

static hora_status_t coll_check(const char *what, hora_dtype_t dtype)
{
    if ((unsigned)dtype >= HORA_DTYPE_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "%s: invalid dtype %d", what, (int)dtype);
    return HORA_OK;
}

static hora_status_t coll_reduction(const struct coll_ctx *ctx, const char *what, hora_op_t op, hora_dtype_t dtype,
                                    struct group_reduction *red)
{
    if (op == HORA_OP_ADASUM)
        return status_fail(HORA_ERR_INVALID_ARG, "%s: op adasum is an all-reduce only (hora_allreduce)", what);
    if ((unsigned)op >= HORA_OP_COUNT) return status_fail(HORA_ERR_INVALID_ARG, "%s: invalid op %d", what, (int)op);
    if (dtype == HORA_DTYPE_BOOL && op == HORA_OP_AVG)
        return status_fail(HORA_ERR_INVALID_ARG,
                           "%s: op avg is not defined for dtype bool (use sum or max for any, min or prod for all)",
                           what);
    red->dtype = dtype;
    red->op = op == HORA_OP_AVG ? HORA_OP_SUM : op;
    red->user_op = op;
    red->divisor = op == HORA_OP_AVG ? ctx->env.topo->size : 1;
    red->mode = 0;
    return HORA_OK;
}

/* Buffers must be identical (in place) or disjoint. */
static int coll_overlap(const void *a, size_t abytes, const void *b, size_t bbytes)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bbytes && y < x + abytes;
}

/* The transport and engine of a (purpose, scope) channel for memory;
 * HORA_ERR_UNSUPPORTED when none handles that memory kind. */
static hora_status_t coll_route(const struct coll_ctx *ctx, int purpose, int scope, hora_memory_t memory,
                                struct tp **tp, const struct coll_engine_ops **engine)
{
    if ((unsigned)memory >= HORA_MEMORY_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "invalid memory kind %d", (int)memory);
    *tp = ctx->channel_tp[coll_channel(purpose, scope)][memory];
    *engine = coll_engine_for(memory);
    if (!*tp || !*engine)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s memory: this build of hora has no %s for it",
                           memory == HORA_MEMORY_HOST ? "host" : "device (CUDA)",
                           *engine ? "transport" : "data engine");
    return HORA_OK;
}

/* From now on the channel fails every operation with this status and the
 * message of the failure (hora_last_error()). */
static void coll_channel_fail(struct coll_ctx *ctx, int channel, hora_status_t status)
{
    if (ctx->failed[channel] < 0) return;
    ctx->failed[channel] = status;
    snprintf(ctx->failed_msg[channel], sizeof(ctx->failed_msg[channel]),
             "this channel failed before and cannot run collectives any more (%s); shut down or hora_abort",
             hora_last_error());
}

static int coll_peer_memory(const struct tp *tp) { return (tp->ops->caps & TP_CAP_PEER_MEMORY) != 0; }

/* A message channel's outcome agreement buffers (outcome.c), made at its
 * first operation for groups up to the world's size. */
static hora_status_t coll_outcome_buffers(struct coll_ctx *ctx, int channel, struct group_outcome *out)
{
    if (!ctx->outcome_words[channel]) {
        const size_t n = (size_t)ctx->env.topo->size;
        struct group_word *words = calloc(n + 1, sizeof(*words));
        struct tp_req *reqs = calloc(2 * n, sizeof(*reqs));
        if (!words || !reqs) {
            free(words);
            free(reqs);
            return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the outcome agreement's buffers");
        }
        ctx->outcome_words[channel] = words;
        ctx->outcome_reqs[channel] = reqs;
    }
    out->words = ctx->outcome_words[channel];
    out->reqs = ctx->outcome_reqs[channel];
    return HORA_OK;
}

/* The group of a (purpose, scope) channel for one operation on memory,
 * numbered for this rank (the operation takes the channel's next number),
 * and opened (group_begin). Every caller then ends it with coll_group_close,
 * whatever happens in between: a local failure must reach the members. */
static hora_status_t coll_group(struct coll_ctx *ctx, int purpose, int scope, hora_memory_t memory, const char *what,
                                const struct coll_hooks *hooks, struct coll_group *out)
{
    const struct topo *t = ctx->env.topo;
    const int channel = coll_channel(purpose, scope);
    struct coll_group g = {0};
    if (ctx->failed[channel] < 0) return status_set(ctx->failed[channel], "%s: %s", what, ctx->failed_msg[channel]);
    HORA_CHECK(coll_route(ctx, purpose, scope, memory, &g.tp, &g.engine));
    switch (scope) {
    case COLL_SCOPE_NODE: g.n = t->local_size, g.r = t->local_rank, g.members = t->node_members; break;
    case COLL_SCOPE_CROSS: g.n = t->node_count, g.r = t->node_rank, g.members = t->cross_members; break;
    default: g.n = t->size, g.r = t->rank, g.members = NULL; break;
    }
    g.left = group_member(&g, (g.r + g.n - 1) % g.n);
    g.right = group_member(&g, (g.r + 1) % g.n);
    /* One shot needs peer memory; the ring works on any transport. */
    g.algorithm =
        (g.tp->ops->caps & TP_CAP_PEER_MEMORY) && ctx->algorithm != 1 ? GROUP_ALGORITHM_ONESHOT : GROUP_ALGORITHM_RING;
    g.chunk_bytes = hooks && hooks->chunk_bytes ? hooks->chunk_bytes : ctx->chunk_bytes;
    /* Device data moves in one piece per step: chunks pay off in a CPU's
     * cache, but on a device every engine op costs a stream
     * synchronisation (and processes sharing a GPU take turns anyway). */
    if (memory == HORA_MEMORY_CUDA) g.chunk_bytes = (size_t)1 << 62;
    if (!coll_peer_memory(g.tp) && g.n > 1) HORA_CHECK(coll_outcome_buffers(ctx, channel, &g.outcome));
    g.op_seq = ++ctx->op_seq[channel];
    g.what = what;
    g.direct = purpose == COLL_PURPOSE_USER;
    if (hooks) {
        g.on_phase = hooks->on_phase;
        g.phase_ctx = hooks->ctx;
    }
    *out = g;
    hora_status_t status = group_begin(out);
    if (status < 0) {
        status = group_end(out, status);
        coll_channel_fail(ctx, channel, status);
    }
    return status;
}

/* The outcome of the operation (group_end), remembered when it failed. */
static hora_status_t coll_group_close(struct coll_ctx *ctx, struct coll_group *g, int purpose, int scope,
                                      hora_status_t status)
{
    status = group_end(g, status);
    if (status < 0) coll_channel_fail(ctx, coll_channel(purpose, scope), status);
    return status;
}

/* Peers can map [p, p + bytes) where it is (the transport says so). */
static int coll_mapped(struct tp *tp, const void *p, size_t bytes)
{
    uint64_t off;
    return tp->ops->mem_local_offset(tp, p, bytes, &off);
}

/* Staging for buffers the peers cannot map: in the pool of their memory
 * kind, grown on demand, kept until shutdown. */
static hora_status_t coll_scratch(struct coll_ctx *ctx, int purpose, hora_memory_t memory, size_t bytes, void **ptr)
{
    void **have = &ctx->scratch[purpose][memory];
    size_t *have_bytes = &ctx->scratch_bytes[purpose][memory];
    if (*have_bytes < bytes) {
        void *p;
        if (*have) {
            if (memory == HORA_MEMORY_HOST)
                HORA_CHECK(mem_pool_release(ctx->env.pool, *have));
            else
                mem_dev_release(ctx->env.dev, *have);
            *have = NULL;
            *have_bytes = 0;
        }
        if (memory == HORA_MEMORY_HOST)
            HORA_CHECK(mem_pool_alloc(ctx->env.pool, bytes,
                                      "staging a buffer not from hora_mem_alloc for a collective over shared memory",
                                      &p));
        else
            HORA_CHECK(mem_dev_alloc(ctx->env.dev, bytes,
                                     "staging a device buffer not from hora_mem_alloc_device for cudaipc", &p));
        *have = p;
        *have_bytes = bytes;
    }
    *ptr = *have;
    return HORA_OK;
}

/* ---------------------------------------------- device data, host transport */

/* Device data on a channel without a device transport goes through host
 * memory: is that the case for this (purpose, scope)? */
static int coll_bounced(const struct coll_ctx *ctx, int purpose, int scope, hora_memory_t memory)
{
    return memory == HORA_MEMORY_CUDA && !ctx->channel_tp[coll_channel(purpose, scope)][HORA_MEMORY_CUDA];
}

/* Pinned host memory in the pool (the host transports share it without a
 * further copy), grown on demand. */
static hora_status_t coll_bounce_buffer(struct coll_ctx *ctx, int purpose, size_t bytes, uint8_t **ptr)
{
    if (ctx->bounce_bytes[purpose] < bytes) {
        void *p;
        if (ctx->bounce[purpose]) {
            mem_dev_unpin(ctx->env.dev, ctx->bounce[purpose]);
            HORA_CHECK(mem_pool_release(ctx->env.pool, ctx->bounce[purpose]));
            ctx->bounce[purpose] = NULL;
            ctx->bounce_bytes[purpose] = 0;
        }
        HORA_CHECK(mem_pool_alloc(ctx->env.pool, bytes,
                                  "staging device data for a host transport (HORA_CUDA_STAGE_BYTES)", &p));
        hora_status_t status = mem_dev_pin(ctx->env.dev, p, bytes);
        if (status < 0) {
            mem_pool_release(ctx->env.pool, p);
            return status;
        }
        ctx->bounce[purpose] = p;
        ctx->bounce_bytes[purpose] = bytes;
    }
    *ptr = ctx->bounce[purpose];
    return HORA_OK;
}

/* The device engine, or HORA_ERR_UNSUPPORTED saying why there is none. */
static hora_status_t coll_device_engine(const struct coll_ctx *ctx, const char *what,
                                        const struct coll_engine_ops **engine)
{
    *engine = coll_engine_for(HORA_MEMORY_CUDA);
    if (!*engine)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s: device (CUDA) memory is not supported here: %s", what,
                           ctx->env.dev->why_none);
    return HORA_OK;
}

/* What runs on each chunk in host memory. */
typedef hora_status_t (*coll_bounce_fn)(struct coll_ctx *ctx, int purpose, void *host, size_t count, void *arg);

/*
 * An elementwise collective of device data through host memory, chunk by
 * chunk (stage_bytes each), overlapped: while fn runs on chunk k in one half
 * of the bounce buffer, the device stream copies chunk k+1 into the other
 * half, after copying chunk k-1's result out of it (one stream: in that
 * order). Every rank runs the same chunks, so fn's collectives pair up.
 */
static hora_status_t coll_bounce_chunks(struct coll_ctx *ctx, int purpose, const void *send, void *recv, size_t count,
                                        size_t esize, coll_bounce_fn fn, void *arg)
{
    const struct coll_engine_ops *e = coll_engine_for(HORA_MEMORY_CUDA);
    const uint8_t *src = send;
    uint8_t *dst = recv, *buf;
    size_t chunk = ctx->stage_bytes / esize;
    if (chunk == 0) chunk = 1;
    if (chunk > count) chunk = count;
    const size_t chunks = (count + chunk - 1) / chunk, half = chunk * esize;
    HORA_CHECK(coll_bounce_buffer(ctx, purpose, chunks > 1 ? 2 * half : half, &buf));
    uint8_t *halves[2] = {buf, buf + half};
    hora_status_t status = e->copy(halves[0], src, half);
    for (size_t k = 0; k < chunks && status == HORA_OK; k++) {
        const size_t at = k * chunk, n = count - at < chunk ? count - at : chunk;
        e->batch_begin();
        if (k > 0) status = e->copy(dst + (at - chunk) * esize, halves[(k - 1) % 2], half);
        if (status == HORA_OK && k + 1 < chunks) {
            const size_t next = count - at - n < chunk ? count - at - n : chunk;
            status = e->copy(halves[(k + 1) % 2], src + (at + n) * esize, next * esize);
        }
        hora_status_t ran = status == HORA_OK ? fn(ctx, purpose, halves[k % 2], n, arg) : status;
        hora_status_t copied = e->batch_end();
        status = ran < 0 ? ran : copied;
        if (status == HORA_OK && k + 1 == chunks) status = e->copy(dst + at * esize, halves[k % 2], n * esize);
    }
    return status;
}

struct coll_bounce_allreduce {
    hora_dtype_t dtype;
    hora_op_t op;
    const struct group_reduction *red; /* the cross ring's (hierarchical), else NULL */
    const struct coll_hooks *hooks;
};

/* A chunk of a flat allreduce: the host collective does it all. */
static hora_status_t coll_bounce_allreduce_flat(struct coll_ctx *ctx, int purpose, void *host, size_t count, void *arg)
{
    const struct coll_bounce_allreduce *a = arg;
    return coll_allreduce(ctx, purpose, HORA_MEMORY_HOST, host, host, count, a->dtype, a->op, a->hooks);
}

/* A group of one: its result is its input, copied; bool's is normalised
 * (every output byte 0 or 1, as from any other group size). */
static hora_status_t coll_group_single(struct coll_group *g, const void *send, void *out, size_t count,
                                       const struct group_reduction *red)
{
    const void *srcs[1] = {send};
    if (red->dtype == HORA_DTYPE_BOOL) return g->engine->reduce(out, srcs, 1, count, red->dtype, red->op, 1);
    /* Exact: one input rounded as n would be (NaNs made the default one). */
    if (red->mode == 2) return group_reduce(g, out, srcs, 1, count, red);
    return g->engine->copy(out, send, count * hora_dtype_size(red->dtype));
}

static hora_status_t coll_group_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype);

/* Reproducible (red->mode > 0) over messages: ordered.c's reduce-scatter
 * (every shard reduced from all n inputs in rank order, as one shot does),
 * then the shards gathered unchanged. */
static hora_status_t coll_group_allreduce_ordered(struct coll_group *g, const void *send, void *work, size_t count,
                                                  const struct group_reduction *red)
{
    size_t *counts = malloc(sizeof(size_t) * (size_t)g->n), dummy;
    if (!counts) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a reproducible all-reduce");
    for (int p = 0; p < g->n; p++) coll_shard(count, g->n, p, &dummy, &counts[p]);
    hora_status_t status = ordered_reduce_msg(g, send, work, count, red);
    if (status == HORA_OK) status = coll_group_allgatherv(g, work, counts, red->dtype);
    free(counts);
    return status;
}

/* The algorithm of the group's transport (a group of one copies). The
 * reproducible modes reduce every element from all n inputs in rank order
 * whatever HORA_ALGORITHM says: one shot over peer memory, ordered.c over
 * messages. */
static hora_status_t coll_group_allreduce(struct coll_group *g, const void *send, void *work, size_t count,
                                          const struct group_reduction *red)
{
    if (g->n == 1) return coll_group_single(g, send, work, count, red);
    if (red->mode && !coll_peer_memory(g->tp)) return coll_group_allreduce_ordered(g, send, work, count, red);
    if (g->algorithm == GROUP_ALGORITHM_ONESHOT || red->mode) return oneshot_reduce(g, send, work, NULL, count, red);
    return ring_allreduce(g, send, work, count, red);
}

static hora_status_t coll_group_reduce_scatter(struct coll_group *g, const void *send, void *work, void *out,
                                               size_t count, const struct group_reduction *red)
{
    if (g->n == 1) return coll_group_single(g, send, out, count, red);
    if (g->algorithm == GROUP_ALGORITHM_ONESHOT) return oneshot_reduce(g, send, work, out, count, red);
    return ring_reduce_scatter(g, send, work, out, count, red);
}

static hora_status_t coll_group_allgatherv(struct coll_group *g, void *recv, const size_t *counts, hora_dtype_t dtype)
{
    size_t total = 0;
    for (int i = 0; i < g->n; i++) total += counts[i];
    if (g->n == 1 || total == 0) return HORA_OK;
    if (g->algorithm == GROUP_ALGORITHM_ONESHOT) return oneshot_allgatherv(g, recv, counts, dtype, total);
    return ring_allgatherv(g, recv, counts, dtype, total);
}

static hora_status_t coll_group_broadcast(struct coll_group *g, void *buf, size_t count, hora_dtype_t dtype, int root)
{
    if (g->n == 1 || count == 0) return HORA_OK;
    if (g->algorithm == GROUP_ALGORITHM_ONESHOT) return oneshot_broadcast(g, buf, count, dtype, root);
    return ring_broadcast(g, buf, count, dtype, root);
}

/* Does an all-reduce of bytes over tp take the latency path (latency.c)?
 * Host memory up to HORA_LATENCY_BYTES, and over peer memory what fits the
 * transport's slots; HORA_ALGORITHM=ring or oneshot forces that algorithm at
 * every size. A reproducible all-reduce (mode > 0) takes it over peer memory
 * only (every member reduces all n inputs in rank order: the one-shot
 * result), not over messages (recursive doubling pairs partial sums). The
 * same answer on every rank of the group. */
static int coll_latency(const struct coll_ctx *ctx, const struct tp *tp, hora_memory_t memory, size_t bytes, int mode)
{
    if (memory != HORA_MEMORY_HOST || bytes > ctx->latency_bytes || ctx->algorithm != 0) return 0;
    if (mode) return coll_peer_memory(tp) && bytes <= tp->ops->small_bytes;
    return !coll_peer_memory(tp) || bytes <= tp->ops->small_bytes;
}

static hora_status_t coll_group_allreduce_latency(struct coll_group *g, const void *send, void *recv, size_t count,
                                                  const struct group_reduction *red)
{
    if (g->n == 1) return coll_group_single(g, send, recv, count, red);
    if (coll_peer_memory(g->tp)) return latency_allreduce_mem(g, send, recv, count, red);
    /* Over messages the star of the outcome agreement carries the data when
     * it fits (outcome.c), else recursive doubling and then the agreement. */
    if (g->open && count * hora_dtype_size(red->dtype) <= GROUP_OUTCOME_BODY_BYTES)
        return group_agree_allreduce(g, send, recv, count, red);
    return latency_allreduce_msg(g, send, recv, count, red);
}

/* Hierarchical and small: the node all-reduces (latency path, no division),
 * then every local rank all-reduces the node's sum with its peers of the
 * same local rank on the other nodes (recursive doubling; AVG divides by
 * the world there). Two latency-bound steps instead of the three of the
 * hierarchical algorithm, and no node allgather: every local rank crosses
 * with the whole (small) vector. */
static hora_status_t coll_allreduce_hierarchical_latency(struct coll_ctx *ctx, int purpose, const void *send,
                                                         void *recv, size_t count, const struct group_reduction *red,
                                                         const struct coll_hooks *hooks)
{
    struct group_reduction sum = *red;
    struct coll_group node, across;
    sum.divisor = 1;
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_NODE, HORA_MEMORY_HOST, "allreduce (node)", hooks, &node));
    hora_status_t status = coll_group_allreduce_latency(&node, send, recv, count, &sum);
    HORA_CHECK(coll_group_close(ctx, &node, purpose, COLL_SCOPE_NODE, status));
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_CROSS, HORA_MEMORY_HOST, "allreduce (cross-node)", hooks, &across));
    status = coll_group_allreduce_latency(&across, recv, recv, count, red);
    return coll_group_close(ctx, &across, purpose, COLL_SCOPE_CROSS, status);
}

static void coll_phase(const struct coll_hooks *hooks, const char *phase, int begin)
{
    if (hooks && hooks->on_phase) hooks->on_phase(hooks->ctx, phase, begin);
}

/* Peers read an allreduce's buffers where they are (peer-memory transports):
 * what is not shared goes through the staging buffer. On return the
 * algorithm runs from *send into *work (recv, or the staging buffer, copied
 * to recv afterwards). */
static hora_status_t coll_allreduce_stage(struct coll_ctx *ctx, int purpose, hora_memory_t memory, struct tp *tp,
                                          const struct coll_engine_ops *engine, const void **send, void *recv,
                                          void **work, size_t bytes)
{
    *work = recv;
    if (coll_peer_memory(tp) && ctx->env.topo->size > 1 && !coll_mapped(tp, recv, bytes)) {
        HORA_CHECK(coll_scratch(ctx, purpose, memory, bytes, work));
        HORA_CHECK(engine->copy(*work, *send, bytes));
        *send = *work;
    } else if (coll_peer_memory(tp) && *send != recv && !coll_mapped(tp, *send, bytes)) {
        HORA_CHECK(engine->copy(recv, *send, bytes));
        *send = recv;
    }
    return HORA_OK;
}

/* A chunk of the hierarchical allreduce's cross-node ring on the host. */
static hora_status_t coll_bounce_allreduce_cross(struct coll_ctx *ctx, int purpose, void *host, size_t count, void *arg)
{
    const struct coll_bounce_allreduce *a = arg;
    struct coll_group across;
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_CROSS, HORA_MEMORY_HOST, "allreduce (cross-node)", NULL, &across));
    hora_status_t status = coll_group_allreduce(&across, host, host, count, a->red);
    return coll_group_close(ctx, &across, purpose, COLL_SCOPE_CROSS, status);
}

/*
 * Hierarchical allreduce (in place in work, staged like the flat one): the
 * node's ranks reduce-scatter the vector (shard i to local rank i), every
 * local rank i runs one ring across the nodes over shard i only, and the node
 * allgathers the shards. Only 1/local_size of the data crosses the slower
 * inter-node links from each rank, and all local ranks use them at once. A
 * division for AVG happens once, after the cross-node ring, by the world size.
 */
static hora_status_t coll_allreduce_hierarchical(struct coll_ctx *ctx, int purpose, hora_memory_t memory, struct tp *tp,
                                                 const struct coll_engine_ops *engine, const void *send, void *recv,
                                                 size_t count, const struct group_reduction *red,
                                                 const struct coll_hooks *hooks)
{
    const struct topo *t = ctx->env.topo;
    const size_t es = hora_dtype_size(red->dtype), bytes = count * es;
    struct group_reduction sum = *red, cross = *red;
    struct coll_group node, across;
    size_t off, len;
    size_t *counts = malloc(sizeof(size_t) * (size_t)t->local_size);
    uint8_t *work = recv, *shard = NULL;

    if (!counts) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a hierarchical allreduce");
    for (int i = 0; i < t->local_size; i++) coll_shard(count, t->local_size, i, &off, &counts[i]);
    coll_shard(count, t->local_size, t->local_rank, &off, &len);
    sum.divisor = 1;
    cross.divisor = red->divisor;

    hora_status_t status =
        coll_group(ctx, purpose, COLL_SCOPE_NODE, memory, "allreduce (node reduce-scatter)", hooks, &node);
    if (status == HORA_OK) {
        void *w = NULL;
        status = coll_allreduce_stage(ctx, purpose, memory, tp, engine, &send, recv, &w, bytes);
        if (status == HORA_OK) {
            work = w;
            shard = work + off * es;
            if (send != work) status = engine->copy(work, send, bytes);
        }
        if (status == HORA_OK) status = coll_group_reduce_scatter(&node, work, work, shard, count, &sum);
        status = coll_group_close(ctx, &node, purpose, COLL_SCOPE_NODE, status);
    }
    if (status == HORA_OK && coll_bounced(ctx, purpose, COLL_SCOPE_CROSS, memory)) {
        /* Device shards cross the nodes through host memory; the ring of
         * one local rank has the same len on every node, so all its members
         * skip it together when it is empty. */
        struct coll_bounce_allreduce a = {.dtype = red->dtype, .op = red->user_op, .red = &cross, .hooks = NULL};
        coll_phase(hooks, "ALLREDUCE_CROSS", 1);
        if (len) status = coll_bounce_chunks(ctx, purpose, shard, shard, len, es, coll_bounce_allreduce_cross, &a);
        coll_phase(hooks, "ALLREDUCE_CROSS", 0);
    } else if (status == HORA_OK) {
        status = coll_group(ctx, purpose, COLL_SCOPE_CROSS, memory, "allreduce (cross-node)", NULL, &across);
    }
    if (status == HORA_OK && !coll_bounced(ctx, purpose, COLL_SCOPE_CROSS, memory)) {
        coll_phase(hooks, "ALLREDUCE_CROSS", 1);
        if (len) status = coll_group_allreduce(&across, shard, shard, len, &cross); /* same len on the whole ring */
        coll_phase(hooks, "ALLREDUCE_CROSS", 0);
        status = coll_group_close(ctx, &across, purpose, COLL_SCOPE_CROSS, status);
    }
    if (status == HORA_OK)
        status = coll_group(ctx, purpose, COLL_SCOPE_NODE, memory, "allreduce (node allgather)", hooks, &node);
    if (status == HORA_OK) {
        status = coll_group_allgatherv(&node, work, counts, red->dtype);
        status = coll_group_close(ctx, &node, purpose, COLL_SCOPE_NODE, status);
    }
    if (status == HORA_OK && work != (uint8_t *)recv) status = engine->copy(recv, work, bytes);
    free(counts);
    return status;
}

/* coll_allreduce after its checks of dtype and op (red: the reduction),
 * and coll_allreduce_bits; what names the operation in messages. */
static hora_status_t coll_allreduce_red(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const char *what,
                                        const void *send, void *recv, size_t count, struct group_reduction red,
                                        const struct coll_hooks *hooks)
{
    const hora_dtype_t dtype = red.dtype;
    const hora_op_t op = red.user_op;
    if (count == 0) return HORA_OK;
    const size_t bytes = count * hora_dtype_size(dtype);
    if (!send || !recv) return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: NULL buffer with count %zu", count);
    if (send != recv && coll_overlap(send, bytes, recv, bytes))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: send and recv overlap without being equal");

    /* Reproducible: the flat group, whose every element one n-way reduce
     * sums in rank order (the hierarchical sum's order depends on the
     * nodes). */
    const int hier = ctx->hierarchical && ctx->env.topo->size > 1 && !red.mode;
    struct tp *tp = NULL; /* whose memory rules apply: the node ring's when hierarchical */
    const struct coll_engine_ops *engine = NULL;
    if (memory == HORA_MEMORY_CUDA) {
        HORA_CHECK(coll_device_engine(ctx, "hora_allreduce", &engine));
        if (coll_bounced(ctx, purpose, hier ? COLL_SCOPE_NODE : COLL_SCOPE_FLAT, memory)) {
            struct coll_bounce_allreduce a = {.dtype = dtype, .op = op, .red = NULL, .hooks = hooks};
            return coll_bounce_chunks(ctx, purpose, send, recv, count, hora_dtype_size(dtype),
                                      coll_bounce_allreduce_flat, &a);
        }
    }
    if (memory == HORA_MEMORY_CUDA && red.mode == 2)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_allreduce: HORA_REPRODUCIBLE=exact (or the request's HORA_REPRODUCIBLE_EXACT) has no "
                           "device kernel yet: all-reduce device buffers with mode 1 (fixed world size), or copy them "
                           "to host memory");
    HORA_CHECK(coll_route(ctx, purpose, hier ? COLL_SCOPE_NODE : COLL_SCOPE_FLAT, memory, &tp, &engine));
    const int latency = coll_latency(ctx, tp, memory, bytes, red.mode);
    if (hier && latency) return coll_allreduce_hierarchical_latency(ctx, purpose, send, recv, count, &red, hooks);
    if (hier) return coll_allreduce_hierarchical(ctx, purpose, memory, tp, engine, send, recv, count, &red, hooks);

    struct coll_group g;
    void *work = recv;
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_FLAT, memory, what, hooks, &g));
    if (latency) {
        hora_status_t status = coll_group_allreduce_latency(&g, send, recv, count, &red);
        return coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status);
    }
    /* Staging comes after the group is open: a failure there reaches the
     * members at once instead of leaving them to time out. */
    hora_status_t status = coll_allreduce_stage(ctx, purpose, memory, tp, engine, &send, recv, &work, bytes);
    if (status == HORA_OK) status = coll_group_allreduce(&g, send, work, count, &red);
    HORA_CHECK(coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status));
    if (work != recv) HORA_CHECK(engine->copy(recv, work, bytes));
    return HORA_OK;
}

/* Adasum (adasum.c), bracketed by two ORs on the flat channel. The first
 * (five words) says whether any rank could not prepare (out of memory) and
 * checks the arguments: count and dtype travel with their complements, and
 * both ORs equal a rank's own values only when every rank's are the same.
 * Then the exchanges, through the flat channel's mpi transport (whose waits
 * end on an abort notice or after HORA_TIMEOUT_S), and the second OR: any
 * rank's failure fails the operation on every rank, and the channel (a
 * failed exchange may leave messages that would match the next one's
 * receives). */
static hora_status_t coll_allreduce_adasum(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send,
                                           void *recv, size_t count, hora_dtype_t dtype)
{
    const struct topo *t = ctx->env.topo;
    const int channel = coll_channel(purpose, COLL_SCOPE_FLAT);
    const struct coll_engine_ops *e = coll_engine_host();
    HORA_CHECK(coll_adasum_check("hora_allreduce", t->size, dtype, memory));
    const size_t es = hora_dtype_size(dtype), bytes = count * es;
    if (count && (!send || !recv))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: NULL buffer with count %zu", count);
    if (send != recv && coll_overlap(send, bytes, recv, bytes))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce: send and recv partly overlap");
    if (ctx->failed[channel] < 0)
        return status_set(ctx->failed[channel], "allreduce(adasum): %s", ctx->failed_msg[channel]);
    if (t->size == 1) return send != recv && bytes ? e->copy(recv, send, bytes) : HORA_OK;
    struct tp *tp = &ctx->transports[channel][TP_KIND_MPI];
    if (!tp->ops)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_allreduce: op adasum exchanges through the mpi transport, which %s",
                           ctx->env.world == MPI_COMM_NULL ? "a job started by hora-run (no MPI) does not have"
                                                           : "HORA_DISABLE_MPI=1 turned off");

    const int f64 = dtype == HORA_DTYPE_F64, wide = dtype == HORA_DTYPE_F16 || dtype == HORA_DTYPE_BF16;
    const size_t wes = f64 ? sizeof(double) : sizeof(float);
    void *tmp = malloc((count / 2 + 1) * wes), *work = wide ? malloc(count * wes + 1) : recv;
    uint64_t words[5] = {!tmp || !work, count, ~(uint64_t)count, (uint64_t)dtype, ~(uint64_t)dtype};
    hora_status_t status = coll_allreduce_bits(ctx, purpose, "allreduce(adasum) start", words, 5);
    if (status == HORA_OK && words[0])
        status = status_fail(HORA_ERR_NO_MEMORY, "allreduce(adasum): a rank is out of memory for %zu elements", count);
    else if (status == HORA_OK && (words[1] != count || words[2] != ~(uint64_t)count || words[3] != (uint64_t)dtype ||
                                   words[4] != ~(uint64_t)dtype))
        status = status_fail(HORA_ERR_MISMATCH,
                             "allreduce(adasum): ranks called it with different counts or dtypes (this rank: %zu %s)",
                             count, hora_dtype_name(dtype));
    if (status < 0) goto out;

    if (wide)
        status = e->cast(work, HORA_DTYPE_F32, send, dtype, count);
    else if (send != recv && bytes)
        status = e->copy(recv, send, bytes);
    if (status == HORA_OK) status = adasum_run(tp, t->rank, t->size, work, count, f64, tmp);
    if (status == HORA_OK && wide) status = e->cast(recv, dtype, work, HORA_DTYPE_F32, count);
    /* The outcome. A local failure's message outlives the agreement. */
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", status < 0 ? hora_last_error() : "");
    uint64_t failed = status < 0;
    hora_status_t agreed = coll_allreduce_bits(ctx, purpose, "allreduce(adasum) end", &failed, 1);
    if (status < 0)
        status = status_set(status, "%s", msg);
    else if (agreed < 0)
        status = agreed;
    else if (failed)
        status = status_fail(HORA_ERR_TRANSPORT, "allreduce(adasum): another rank's exchanges failed");
    if (status < 0) coll_channel_fail(ctx, channel, status);
out:
    free(tmp);
    if (work != recv) free(work);
    return status;
}

hora_status_t coll_allreduce(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                             size_t count, hora_dtype_t dtype, hora_op_t op, const struct coll_hooks *hooks)
{
    struct group_reduction red;
    HORA_CHECK(coll_check("hora_allreduce", dtype));
    if (op == HORA_OP_ADASUM) return coll_allreduce_adasum(ctx, purpose, memory, send, recv, count, dtype);
    HORA_CHECK(coll_reduction(ctx, "hora_allreduce", op, dtype, &red));
    red.mode = hooks && hooks->reproducible ? hooks->reproducible : ctx->reproducible;
    return coll_allreduce_red(ctx, purpose, memory, "allreduce", send, recv, count, red, hooks);
}

hora_status_t coll_allreduce_bits(struct coll_ctx *ctx, int purpose, const char *what, uint64_t *words, size_t count)
{
    const struct group_reduction red = {
        .dtype = HORA_DTYPE_I64, .op = COLL_OP_BOR, .user_op = COLL_OP_BOR, .divisor = 1, .mode = 0};
    return coll_allreduce_red(ctx, purpose, HORA_MEMORY_HOST, what, words, words, count, red, NULL);
}

hora_status_t coll_reduce_scatter(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                                  size_t count, hora_dtype_t dtype, hora_op_t op)
{
    struct group_reduction red;
    struct coll_group g;
    size_t offset, shard;
    void *work = NULL;
    HORA_CHECK(coll_check("hora_reduce_scatter", dtype));
    HORA_CHECK(coll_reduction(ctx, "hora_reduce_scatter", op, dtype, &red));
    if (count == 0) return HORA_OK;
    const size_t esize = hora_dtype_size(dtype), bytes = count * esize;
    coll_shard(count, ctx->env.topo->size, ctx->env.topo->rank, &offset, &shard);
    if (!send || (!recv && shard))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reduce_scatter: NULL buffer with count %zu", count);
    if (shard && coll_overlap(send, bytes, recv, shard * esize))
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reduce_scatter: recv must not overlap send");
    if (memory == HORA_MEMORY_CUDA) {
        const struct coll_engine_ops *e;
        uint8_t *b;
        HORA_CHECK(coll_device_engine(ctx, "hora_reduce_scatter", &e));
        if (coll_bounced(ctx, purpose, COLL_SCOPE_FLAT, memory)) {
            /* Whole, through host memory: the vector, then this rank's shard after it. */
            HORA_CHECK(coll_bounce_buffer(ctx, purpose, bytes + shard * esize, &b));
            HORA_CHECK(e->copy(b, send, bytes));
            HORA_CHECK(coll_reduce_scatter(ctx, purpose, HORA_MEMORY_HOST, b, b + bytes, count, dtype, op));
            return e->copy(recv, b + bytes, shard * esize);
        }
    }
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_FLAT, memory, "reduce_scatter", NULL, &g));
    hora_status_t status = HORA_OK;
    if (g.n == 1) {
        status = coll_group_reduce_scatter(&g, send, NULL, recv, count, &red);
        return coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status);
    }
    /* Partial sums need a whole vector of room; peers read it in the pool. */
    status = coll_scratch(ctx, purpose, memory, bytes, &work);
    if (status == HORA_OK && coll_peer_memory(g.tp) && !coll_mapped(g.tp, send, bytes)) {
        status = g.engine->copy(work, send, bytes);
        send = work;
    }
    if (status == HORA_OK) status = coll_group_reduce_scatter(&g, send, work, recv, count, &red);
    return coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status);
}

hora_status_t coll_allgatherv(struct coll_ctx *ctx, int purpose, hora_memory_t memory, const void *send, void *recv,
                              const size_t *counts, hora_dtype_t dtype)
{
    struct coll_group g;
    HORA_CHECK(coll_check("hora_allgatherv", dtype));
    if (!counts) return status_fail(HORA_ERR_INVALID_ARG, "hora_allgatherv: counts is NULL");
    const int n = ctx->env.topo->size, r = ctx->env.topo->rank;
    const size_t esize = hora_dtype_size(dtype);
    size_t total = 0, displ = 0;
    for (int i = 0; i < n; i++) {
        if (i == r) displ = total;
        total += counts[i];
    }
    if (total == 0) return HORA_OK;
    if (!recv || (!send && counts[r])) return status_fail(HORA_ERR_INVALID_ARG, "hora_allgatherv: NULL buffer");
    const size_t bytes = total * esize, mine = counts[r] * esize;
    uint8_t *own = (uint8_t *)recv + displ * esize;
    if (mine && send != own && coll_overlap(send, mine, recv, bytes))
        return status_fail(HORA_ERR_INVALID_ARG,
                           "hora_allgatherv: send overlaps recv without being this rank's block of it");
    if (memory == HORA_MEMORY_CUDA) {
        const struct coll_engine_ops *e;
        uint8_t *b;
        HORA_CHECK(coll_device_engine(ctx, "hora_allgatherv", &e));
        if (coll_bounced(ctx, purpose, COLL_SCOPE_FLAT, memory)) {
            HORA_CHECK(coll_bounce_buffer(ctx, purpose, bytes, &b));
            HORA_CHECK(e->copy(b + displ * esize, send, mine));
            HORA_CHECK(coll_allgatherv(ctx, purpose, HORA_MEMORY_HOST, b + displ * esize, b, counts, dtype));
            return e->copy(recv, b, bytes);
        }
    }
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_FLAT, memory, "allgather", NULL, &g));

    hora_status_t status = HORA_OK;
    uint8_t *dst = recv;
    if (coll_peer_memory(g.tp) && n > 1 && !coll_mapped(g.tp, recv, bytes)) {
        void *stage = NULL;
        status = coll_scratch(ctx, purpose, memory, bytes, &stage);
        dst = stage;
    }
    if (status == HORA_OK && mine && send != dst + displ * esize)
        status = g.engine->copy(dst + displ * esize, send, mine);
    if (status == HORA_OK) status = coll_group_allgatherv(&g, dst, counts, dtype);
    HORA_CHECK(coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status));
    if (dst != (uint8_t *)recv) HORA_CHECK(g.engine->copy(recv, dst, bytes));
    return HORA_OK;
}

hora_status_t coll_broadcast(struct coll_ctx *ctx, int purpose, hora_memory_t memory, void *buf, size_t count,
                             hora_dtype_t dtype, int root)
{
    struct coll_group g;
    HORA_CHECK(coll_check("hora_broadcast", dtype));
    const int n = ctx->env.topo->size, r = ctx->env.topo->rank;
    if (root < 0 || root >= n)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast: root %d is not a rank (0..%d)", root, n - 1);
    if (count == 0) return HORA_OK;
    if (!buf) return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast: NULL buffer with count %zu", count);
    const size_t bytes = count * hora_dtype_size(dtype);
    if (memory == HORA_MEMORY_CUDA) {
        const struct coll_engine_ops *e;
        uint8_t *b;
        HORA_CHECK(coll_device_engine(ctx, "hora_broadcast", &e));
        if (coll_bounced(ctx, purpose, COLL_SCOPE_FLAT, memory)) {
            HORA_CHECK(coll_bounce_buffer(ctx, purpose, bytes, &b));
            if (r == root) HORA_CHECK(e->copy(b, buf, bytes));
            HORA_CHECK(coll_broadcast(ctx, purpose, HORA_MEMORY_HOST, b, count, dtype, root));
            return r == root ? HORA_OK : e->copy(buf, b, bytes);
        }
    }
    HORA_CHECK(coll_group(ctx, purpose, COLL_SCOPE_FLAT, memory, "broadcast", NULL, &g));

    hora_status_t status = HORA_OK;
    if (!coll_peer_memory(g.tp) || n == 1 || coll_mapped(g.tp, buf, bytes)) {
        status = coll_group_broadcast(&g, buf, count, dtype, root);
        return coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status);
    }
    void *stage = NULL;
    status = coll_scratch(ctx, purpose, memory, bytes, &stage);
    if (status == HORA_OK && r == root) status = g.engine->copy(stage, buf, bytes);
    if (status == HORA_OK) status = coll_group_broadcast(&g, stage, count, dtype, root);
    HORA_CHECK(coll_group_close(ctx, &g, purpose, COLL_SCOPE_FLAT, status));
    if (r != root) HORA_CHECK(g.engine->copy(buf, stage, bytes));
    return HORA_OK;
}
