/* hora.c - runtime lifetime: hora_init / hora_shutdown, topology queries,
 * hora_mem_alloc, and the choice of transport for the flat ring. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord.h"
#include "hora.h"
#include "log.h"
#include "rt.h"
#include "status.h"

struct hora_rt hora_rt;

static void hora_finalize_mpi_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

static hora_status_t hora_start_mpi(void)
{
    int initialized = 0, provided = 0, err;

    MPI_Initialized(&initialized);
    if (!initialized) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized) return status_fail(HORA_ERR_MPI, "hora_init: MPI was already finalized in this process");
        /* The coordinator thread and the caller's thread may both call MPI. */
        err = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Init_thread");
        if (!hora_rt.mpi_owned) atexit(hora_finalize_mpi_at_exit);
        hora_rt.mpi_owned = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        return status_fail(HORA_ERR_MPI,
                           "hora_init: MPI provides thread level %d; hora's coordinator thread needs "
                           "MPI_THREAD_MULTIPLE (initialise MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE) or let "
                           "hora_init do it)",
                           provided);
    return HORA_OK;
}

/* Busy-waiting only pays when every rank on the host has a core of its own;
 * oversubscribed, a spinning rank steals the time its peer needs. */
static long hora_resolve_spin(const struct config *cfg, const struct topo *topo)
{
    /* Count the machine's cores, not our affinity mask: mpirun may bind each
     * rank to a single core. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cfg->spin_count >= 0) return cfg->spin_count;
    return cpus > 0 && topo->host_size <= cpus ? 20000 : 0;
}

/* This rank's neighbours in a ring given by its members (world ranks). */
static void hora_ring_neighbours(const int *members, int n, int *left, int *right)
{
    int me = 0;
    while (members[me] != hora_rt.topo.rank) me++;
    *left = members[(me + n - 1) % n];
    *right = members[(me + 1) % n];
}

/* Connect one channel: the first transport in registry order that reaches
 * both ring neighbours of every rank wins (agreed over all ranks, so all
 * rings of a scope use the same kind). Cross-node rings never use shm, even
 * between virtual nodes of one host: that traffic is what they exist for. */
static hora_status_t hora_connect_channel(int channel, const int *members, int n, int cross)
{
    int left, right;
    hora_ring_neighbours(members, n, &left, &right);
    for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
        const struct tp_ops *ops = tp_registry[kind];
        int ok = !(cross && kind == TP_KIND_SHM) && ops->can_connect(&hora_rt, left) &&
                 ops->can_connect(&hora_rt, right),
            all = 0;
        int err = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, hora_rt.world);
        if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Allreduce(transport choice)");
        if (!all) continue;
        struct tp *tp = &hora_rt.transports[channel][kind];
        tp->rt = &hora_rt;
        tp->channel = channel;
        HORA_CHECK(ops->connect(tp, &hora_rt));
        tp->ops = ops;
        hora_rt.ring_tp[channel] = tp;
        return HORA_OK;
    }
    return status_fail(HORA_ERR_TRANSPORT,
                       "no transport can connect the ring (shm needs all ranks on one host; check "
                       "HORA_DISABLE_SHM / HORA_DISABLE_UCX / HORA_DISABLE_MPI)");
}

static hora_status_t hora_connect_transports(void)
{
    const struct topo *t = &hora_rt.topo;
    int *world = malloc(sizeof(int) * (size_t)t->size), max_local = 0, err;
    if (!world) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting transports");
    for (int r = 0; r < t->size; r++) world[r] = r;
    err = MPI_Allreduce(&t->local_size, &max_local, 1, MPI_INT, MPI_MAX, hora_rt.world);
    if (err != MPI_SUCCESS) {
        free(world);
        return status_mpi(err, "MPI_Allreduce(local sizes)");
    }
    /* Node and cross rings exist only where a hierarchy does. */
    const int node_rings = max_local > 1 && t->node_count > 1, cross_rings = node_rings && t->homogeneous;
    hora_status_t status = HORA_OK;
    for (int purpose = 0; purpose < RT_PURPOSE_COUNT && status == HORA_OK; purpose++) {
        status = hora_connect_channel(rt_channel(purpose, RT_SCOPE_FLAT), world, t->size, 0);
        if (status == HORA_OK && node_rings)
            status = hora_connect_channel(rt_channel(purpose, RT_SCOPE_NODE), t->node_members, t->local_size, 0);
        if (status == HORA_OK && cross_rings)
            status = hora_connect_channel(rt_channel(purpose, RT_SCOPE_CROSS), t->cross_members, t->node_count, 1);
    }
    free(world);
    if (status < 0) return status;

    /* HORA_HIERARCHICAL: auto = more than one node and more than one rank per node. */
    int want = hora_rt.cfg.hierarchical == 0 ? node_rings : hora_rt.cfg.hierarchical == 2;
    hora_rt.hierarchical = want && cross_rings;
    if (want && !cross_rings && t->rank == 0)
        log_warn("hierarchical all-reduce needs the same number of ranks on every node and more than one node; "
                 "using the flat ring");
    log_info("flat ring: %s; hierarchical: %s (node ring %s, cross-node ring %s)",
             hora_rt.ring_tp[rt_channel(RT_PURPOSE_USER, RT_SCOPE_FLAT)]->ops->name, hora_rt.hierarchical ? "on" : "off",
             node_rings ? hora_rt.ring_tp[rt_channel(RT_PURPOSE_USER, RT_SCOPE_NODE)]->ops->name : "-",
             cross_rings ? hora_rt.ring_tp[rt_channel(RT_PURPOSE_USER, RT_SCOPE_CROSS)]->ops->name : "-");
    return HORA_OK;
}

static void hora_close_transports(void)
{
    for (int channel = 0; channel < RT_CHANNEL_COUNT; channel++) {
        for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
            struct tp *tp = &hora_rt.transports[channel][kind];
            if (tp->ops) tp->ops->close(tp);
            memset(tp, 0, sizeof(*tp));
        }
        hora_rt.ring_tp[channel] = NULL;
    }
}

hora_status_t hora_init(void)
{
    hora_status_t status;
    int err;

    status_clear();
    if (hora_rt.initialized) return status_set(HORA_ERR_ALREADY_INITIALIZED, "hora_init: already initialized");
    int mpi_owned = hora_rt.mpi_owned;
    memset(&hora_rt, 0, sizeof(hora_rt));
    hora_rt.mpi_owned = mpi_owned;
    hora_rt.world = MPI_COMM_NULL;

    /* Settings first: a bad value must fail before anything is created. */
    status = config_load(&hora_rt.cfg);
    if (status < 0) return status;
    log_set_level(hora_rt.cfg.log_level);
    HORA_CHECK(hora_start_mpi());

    err = MPI_Comm_dup(MPI_COMM_WORLD, &hora_rt.world);
    if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Comm_dup(MPI_COMM_WORLD)");
    MPI_Comm_set_errhandler(hora_rt.world, MPI_ERRORS_RETURN);
    int rank;
    MPI_Comm_rank(hora_rt.world, &rank);
    log_set_rank(rank);

    status = topo_init(&hora_rt.topo, hora_rt.world, hora_rt.cfg.fake_nodes);
    if (status < 0) goto err_free_world;
    hora_rt.spin_count = hora_resolve_spin(&hora_rt.cfg, &hora_rt.topo);
    hora_rt.spin_auto = hora_rt.cfg.spin_count < 0;
    status = mem_pool_init(&hora_rt.pool, &hora_rt.topo, hora_rt.cfg.shm_pool_bytes, !hora_rt.cfg.disable_shm);
    if (status < 0) goto err_free_topo;
    status = hora_connect_transports();
    if (status < 0) goto err_free_pool;
    /* Nobody may run a collective before every rank's control block is ready. */
    err = MPI_Barrier(hora_rt.world);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, "MPI_Barrier(init)");
        goto err_close;
    }
    hora_rt.initialized = 1;
    status = coord_start();
    if (status < 0) {
        hora_rt.initialized = 0;
        goto err_close;
    }
    log_info("initialized: rank %d of %d, node %d of %d, local rank %d of %d, transport %s", hora_rt.topo.rank,
             hora_rt.topo.size, hora_rt.topo.node_rank, hora_rt.topo.node_count, hora_rt.topo.local_rank,
             hora_rt.topo.local_size, hora_transport_name());
    return HORA_OK;

err_close:
    hora_close_transports();
err_free_pool:
    mem_pool_free(&hora_rt.pool);
err_free_topo:
    topo_free(&hora_rt.topo);
err_free_world:
    MPI_Comm_free(&hora_rt.world);
    return status;
}

hora_status_t hora_shutdown(void)
{
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_shutdown: the runtime is not initialized");
    /* Every rank's coordinator stops in the same cycle; then peers may still be
     * reading our pool until everyone is here. */
    coord_stop();
    MPI_Barrier(hora_rt.world);
    hora_close_transports();
    mem_pool_free(&hora_rt.pool);
    topo_free(&hora_rt.topo);
    MPI_Comm_free(&hora_rt.world);
    hora_rt.initialized = 0;
    memset(hora_rt.scratch, 0, sizeof(hora_rt.scratch));
    memset(hora_rt.scratch_bytes, 0, sizeof(hora_rt.scratch_bytes));
    return HORA_OK;
}

int hora_initialized(void) { return hora_rt.initialized; }

#define HORA_TOPO_GETTER(name, field)                                                                    \
    int hora_##name(void) { return hora_rt.initialized ? hora_rt.topo.field : -1; }
HORA_TOPO_GETTER(rank, rank)
HORA_TOPO_GETTER(size, size)
HORA_TOPO_GETTER(local_rank, local_rank)
HORA_TOPO_GETTER(local_size, local_size)
HORA_TOPO_GETTER(node_rank, node_rank)
HORA_TOPO_GETTER(node_count, node_count)

const char *hora_transport_name(void)
{
    const struct tp *tp = hora_rt.ring_tp[rt_channel(RT_PURPOSE_USER, RT_SCOPE_FLAT)];
    return hora_rt.initialized && tp ? tp->ops->name : "none";
}

hora_status_t hora_mem_alloc(size_t bytes, void **ptr)
{
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_mem_alloc called before hora_init");
    if (!ptr) return status_fail(HORA_ERR_INVALID_ARG, "hora_mem_alloc: ptr is NULL");
    return mem_pool_alloc(&hora_rt.pool, bytes, ptr);
}

hora_status_t hora_mem_free(void *ptr)
{
    if (!ptr) return HORA_OK;
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_mem_free called outside hora_init .. hora_shutdown");
    return mem_pool_release(&hora_rt.pool, ptr);
}

int hora_mem_is_shared(const void *ptr)
{
    uint64_t off;
    return hora_rt.initialized && mem_pool_offset(&hora_rt.pool, ptr, 1, &off);
}

hora_status_t rt_scratch(int purpose, size_t bytes, void **ptr)
{
    if (hora_rt.scratch_bytes[purpose] < bytes) {
        void *p;
        if (hora_rt.scratch[purpose]) {
            HORA_CHECK(mem_pool_release(&hora_rt.pool, hora_rt.scratch[purpose]));
            hora_rt.scratch[purpose] = NULL;
            hora_rt.scratch_bytes[purpose] = 0;
        }
        HORA_CHECK(mem_pool_alloc(&hora_rt.pool, bytes, &p));
        hora_rt.scratch[purpose] = p;
        hora_rt.scratch_bytes[purpose] = bytes;
    }
    *ptr = hora_rt.scratch[purpose];
    return HORA_OK;
}

void hora_config_print(FILE *out)
{
    struct config cfg;
    if (hora_rt.initialized) {
        config_print(&hora_rt.cfg, out);
        return;
    }
    if (config_load(&cfg) < 0) {
        fprintf(out, "# %s\n", hora_last_error());
        /* Still show the table with defaults. */
        memset(&cfg, 0, sizeof(cfg));
        for (const struct config_entry *e = config_table; e->name; e++) config_parse(e, e->default_value, &cfg);
    }
    config_print(&cfg, out);
}
