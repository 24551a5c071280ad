/* coll_connect.c - coll_init / coll_close: the transports' environment, and
 * the choice of a transport per channel and memory kind.
 *
 * For every channel (purpose x scope) and memory kind, the first transport in
 * registry order that moves that memory kind and reaches both ring
 * neighbours of every rank wins; ranks agree by one bootstrap all-reduce
 * (MIN; boot/comm.h: MPI or the rendezvous store) per candidate, so all rings of a scope use the same kind. A transport
 * is connected once per channel and shared by the memory kinds it serves. Cross-node channels never take a host-local
 * transport (TP_CAP_HOST_LOCAL), even between virtual nodes of one host: that traffic is what they exist for. A memory
 * kind no transport moves leaves its slot NULL: device memory then crosses through host memory (coll.c), and host
 * memory always has a transport (mpi reaches everyone; under the store bootstrap, where there is no MPI, ucx does). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"
#include "coll/coll.h"
#include "coll/engine.h"

/* Busy-waiting only pays when every rank on the host has a core of its own;
 * oversubscribed, a spinning rank steals the time its peer needs. */
static long coll_resolve_spin(const struct config *cfg, const struct topo *topo)
{
    /* Count the machine's cores, not our affinity mask: mpirun may bind each
     * rank to a single core. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cfg->spin_count >= 0) return cfg->spin_count;
    return cpus > 0 && topo->host_size <= cpus ? 20000 : 0;
}

/* After the spins, yield before sleeping: when the local ranks outnumber the
 * cores, the peer a rank waits for is often runnable on its own core, and
 * sched_yield hands it the core at once, where a futex sleep and wake-up
 * cost 15-30 us per operation (2 cores, 3-4 ranks). */
static double coll_resolve_yield_s(const struct config *cfg, const struct topo *topo)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cfg->yield_us >= 0) return cfg->yield_us * 1e-6;
    return cpus > 0 && topo->host_size > cpus ? 1e-3 : 0;
}

/* This rank's neighbours in a ring given by its members (world ranks). */
static void coll_ring_neighbours(const struct coll_ctx *ctx, const int *members, int n, int *left, int *right)
{
    int me = 0;
    while (members[me] != ctx->env.topo->rank) me++;
    *left = members[(me + n - 1) % n];
    *right = members[(me + 1) % n];
}

static hora_status_t coll_connect_channel(struct coll_ctx *ctx, int channel, const int *members, int n, int cross,
                                          int spin_only_while_waited)
{
    int left, right;
    coll_ring_neighbours(ctx, members, n, &left, &right);
    for (int memory = 0; memory < HORA_MEMORY_COUNT; memory++) {
        for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
            const struct tp_ops *ops = tp_registry[kind];
            /* Capabilities are the same on every rank: skipping here is agreed. */
            if (!(ops->memory_kinds & (1u << memory)) || (cross && (ops->caps & TP_CAP_HOST_LOCAL))) continue;
            int ok = ops->can_connect(&ctx->env, left) && ops->can_connect(&ctx->env, right), all = 0;
            HORA_CHECK(boot_comm_allreduce_int(ctx->env.boot, &ok, &all, 1, BOOT_OP_MIN, "transport choice"));
            if (!all) continue;
            struct tp *tp = &ctx->transports[channel][kind];
            if (!tp->ops) {
                tp->env = &ctx->env;
                tp->channel = channel;
                tp->spin_only_while_waited = spin_only_while_waited;
                HORA_CHECK(ops->connect(tp));
                tp->ops = ops;
            }
            ctx->channel_tp[channel][memory] = tp;
            break;
        }
        if (memory == HORA_MEMORY_HOST && !ctx->channel_tp[channel][memory])
            return status_fail(HORA_ERR_TRANSPORT,
                               "no transport can connect the ring (shm needs all ranks on one host; check "
                               "HORA_DISABLE_SHM / HORA_DISABLE_UCX / HORA_DISABLE_MPI)");
    }
    return HORA_OK;
}

/* Adasum's pairwise exchanges (adasum.c) reach any rank: they go through
 * the mpi transport of the flat channel, connected here where the ring took
 * another one (one MPI_Comm_dup), unless HORA_DISABLE_MPI=1 on any rank. */
static hora_status_t coll_connect_adasum(struct coll_ctx *ctx, int channel)
{
    struct tp *tp = &ctx->transports[channel][TP_KIND_MPI];
    int ok = tp_mpi_ops.can_connect(&ctx->env, 0), all = 0;
    if (tp->ops || ctx->env.topo->size == 1) return HORA_OK;
    HORA_CHECK(boot_comm_allreduce_int(ctx->env.boot, &ok, &all, 1, BOOT_OP_MIN, "adasum transport"));
    if (!all) return HORA_OK;
    tp->env = &ctx->env;
    tp->channel = channel;
    HORA_CHECK(tp_mpi_ops.connect(tp));
    tp->ops = &tp_mpi_ops;
    return HORA_OK;
}

static hora_status_t coll_connect_all(struct coll_ctx *ctx, const struct config *cfg)
{
    const struct topo *t = ctx->env.topo;
    int *world = malloc(sizeof(int) * (size_t)t->size), max_local = 0;
    if (!world) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting transports");
    for (int r = 0; r < t->size; r++) world[r] = r;
    hora_status_t local =
        boot_comm_allreduce_int(ctx->env.boot, &t->local_size, &max_local, 1, BOOT_OP_MAX, "local sizes");
    if (local != HORA_OK) {
        free(world);
        return local;
    }
    /* Node and cross rings exist only where a hierarchy does. */
    const int node_rings = max_local > 1 && t->node_count > 1, cross_rings = node_rings && t->homogeneous;
    /* HORA_SPIN_COUNT auto: the coordinator's channels spin only while an
     * application thread waits for them (tp_env.app_waiters). */
    hora_status_t status = HORA_OK;
    for (int purpose = 0; purpose < COLL_PURPOSE_COUNT && status == HORA_OK; purpose++) {
        const int waited = ctx->env.spin_auto && purpose == COLL_PURPOSE_COORD;
        status = coll_connect_channel(ctx, coll_channel(purpose, COLL_SCOPE_FLAT), world, t->size, 0, waited);
        if (status == HORA_OK && node_rings)
            status = coll_connect_channel(ctx, coll_channel(purpose, COLL_SCOPE_NODE), t->node_members, t->local_size,
                                          0, waited);
        if (status == HORA_OK && cross_rings)
            status = coll_connect_channel(ctx, coll_channel(purpose, COLL_SCOPE_CROSS), t->cross_members, t->node_count,
                                          1, waited);
    }
    free(world);
    if (status < 0) return status;
    for (int purpose = 0; purpose < COLL_PURPOSE_COUNT && status == HORA_OK; purpose++)
        status = coll_connect_adasum(ctx, coll_channel(purpose, COLL_SCOPE_FLAT));
    if (status < 0) return status;

    /* HORA_HIERARCHICAL: auto = more than one node and more than one rank per node. */
    int want = cfg->hierarchical == 0 ? node_rings : cfg->hierarchical == 2;
    ctx->hierarchical = want && cross_rings;
    if (want && !cross_rings && t->rank == 0)
        log_warn("hierarchical all-reduce needs the same number of ranks on every node and more than one node; "
                 "using the flat ring");
    const int user = COLL_PURPOSE_USER;
    char dbuf[64];
    log_info("flat ring: %s (device memory: %s); hierarchical: %s (node ring %s, cross-node ring %s)",
             ctx->channel_tp[coll_channel(user, COLL_SCOPE_FLAT)][HORA_MEMORY_HOST]->ops->name,
             coll_device_transport_name(ctx, dbuf, sizeof(dbuf)), ctx->hierarchical ? "on" : "off",
             node_rings ? ctx->channel_tp[coll_channel(user, COLL_SCOPE_NODE)][HORA_MEMORY_HOST]->ops->name : "-",
             cross_rings ? ctx->channel_tp[coll_channel(user, COLL_SCOPE_CROSS)][HORA_MEMORY_HOST]->ops->name : "-");
    return HORA_OK;
}

static void coll_close_transports(struct coll_ctx *ctx)
{
    for (int channel = 0; channel < COLL_CHANNEL_COUNT; channel++) {
        for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
            struct tp *tp = &ctx->transports[channel][kind];
            if (tp->ops) tp->ops->close(tp);
            memset(tp, 0, sizeof(*tp));
        }
        for (int memory = 0; memory < HORA_MEMORY_COUNT; memory++) ctx->channel_tp[channel][memory] = NULL;
    }
}

hora_status_t coll_init(struct coll_ctx *ctx, const struct config *cfg, boot_comm_t *world, const struct topo *topo,
                        struct mem_pool *pool, struct mem_dev *dev)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->chunk_bytes = cfg->chunk_bytes;
    ctx->algorithm = cfg->algorithm;
    ctx->reproducible = cfg->reproducible;
    ctx->env.boot = world;
    ctx->env.world = boot_comm_mpi(world);
    ctx->env.topo = topo;
    ctx->env.pool = pool;
    ctx->env.timeout_s = cfg->timeout_s;
    ctx->env.spin_count = coll_resolve_spin(cfg, topo);
    ctx->env.spin_auto = cfg->spin_count < 0;
    ctx->env.yield_s = coll_resolve_yield_s(cfg, topo);
    ctx->latency_bytes = cfg->latency_bytes;
    ctx->env.disable[TP_KIND_SHM] = cfg->disable_shm;
    ctx->env.disable[TP_KIND_UCX] = cfg->disable_ucx;
    ctx->env.disable[TP_KIND_MPI] = cfg->disable_mpi || ctx->env.world == MPI_COMM_NULL; /* no MPI: store bootstrap */
    ctx->env.disable[TP_KIND_CUDAIPC] = cfg->disable_cudaipc;
    ctx->env.dev = dev;
    ctx->stage_bytes = cfg->cuda_stage_bytes;
    atomic_init(&ctx->env.app_waiters, 0);
    hora_status_t status = tp_notice_init(&ctx->env);
    if (status == HORA_OK) status = coll_engine_cuda_start(dev);
    if (status == HORA_OK) status = coll_connect_all(ctx, cfg);
    if (status < 0) {
        coll_close_transports(ctx);
        coll_engine_cuda_stop();
        tp_notice_close(&ctx->env);
    }
    return status;
}

void coll_close(struct coll_ctx *ctx)
{
    coll_close_transports(ctx);
    /* After the transports: they cancelled what was left pending into these. */
    for (int channel = 0; channel < COLL_CHANNEL_COUNT; channel++) {
        free(ctx->outcome_words[channel]);
        free(ctx->outcome_reqs[channel]);
        ctx->outcome_words[channel] = NULL;
        ctx->outcome_reqs[channel] = NULL;
    }
    coll_engine_cuda_stop();
    tp_notice_close(&ctx->env);
    /* The staging buffers lived in the pools, which the caller frees next;
     * the bounce buffers are unpinned first. */
    for (int p = 0; p < COLL_PURPOSE_COUNT; p++)
        if (ctx->bounce[p]) mem_dev_unpin(ctx->env.dev, ctx->bounce[p]);
    memset(ctx->scratch, 0, sizeof(ctx->scratch));
    memset(ctx->scratch_bytes, 0, sizeof(ctx->scratch_bytes));
    memset(ctx->bounce, 0, sizeof(ctx->bounce));
    memset(ctx->bounce_bytes, 0, sizeof(ctx->bounce_bytes));
}

void coll_wait_forget(struct coll_ctx *ctx, int purpose)
{
    for (int scope = 0; scope < COLL_SCOPE_COUNT; scope++) ctx->env.last_peer[coll_channel(purpose, scope)] = -1;
}

int coll_last_wait(const struct coll_ctx *ctx, int purpose, hora_memory_t memory, const char **transport)
{
    static const int order[COLL_SCOPE_COUNT] = {COLL_SCOPE_CROSS, COLL_SCOPE_NODE, COLL_SCOPE_FLAT};
    *transport = "none";
    for (int i = 0; i < COLL_SCOPE_COUNT; i++) {
        const int ch = coll_channel(purpose, order[i]);
        if (ctx->env.last_peer[ch] < 0) continue;
        const struct tp *tp = (unsigned)memory < HORA_MEMORY_COUNT ? ctx->channel_tp[ch][memory] : NULL;
        if (tp && tp->ops) *transport = tp->ops->name;
        return ctx->env.last_peer[ch];
    }
    const struct tp *tp =
        (unsigned)memory < HORA_MEMORY_COUNT ? ctx->channel_tp[coll_channel(purpose, COLL_SCOPE_FLAT)][memory] : NULL;
    if (tp && tp->ops) *transport = tp->ops->name;
    return -1;
}

const char *coll_transport_name(const struct coll_ctx *ctx)
{
    const struct tp *tp = ctx->channel_tp[coll_channel(COLL_PURPOSE_USER, COLL_SCOPE_FLAT)][HORA_MEMORY_HOST];
    return tp ? tp->ops->name : "none";
}

const char *coll_device_transport_name(const struct coll_ctx *ctx, char *buf, size_t len)
{
    const int flat = coll_channel(COLL_PURPOSE_USER, COLL_SCOPE_FLAT);
    const struct tp *tp = ctx->channel_tp[flat][HORA_MEMORY_CUDA];
    if (!mem_dev_on(ctx->env.dev)) return "none";
    if (tp) return tp->ops->name;
    snprintf(buf, len, "host staging + %s", coll_transport_name(ctx));
    return buf;
}

void coll_app_waiting(struct coll_ctx *ctx, int delta) { atomic_fetch_add(&ctx->env.app_waiters, delta); }

int coll_app_waits(struct coll_ctx *ctx) { return atomic_load_explicit(&ctx->env.app_waiters, memory_order_relaxed); }

void coll_abort(struct coll_ctx *ctx, hora_status_t status, const char *reason)
{
    tp_notice_abort(&ctx->env, status, reason, 2.0);
}

void coll_notice_shutdown(struct coll_ctx *ctx) { tp_notice_shutdown(&ctx->env); }
void coll_notice_lost(struct coll_ctx *ctx, const char *reason) { tp_notice_lost(&ctx->env, reason); }

hora_status_t coll_check_abort(struct coll_ctx *ctx) { return tp_notice_check(&ctx->env, NULL, 0); }

bool coll_host_peers_alive(const struct coll_ctx *ctx, int *dead_rank)
{
    return tp_notice_host_alive(&ctx->env, dead_rank);
}
