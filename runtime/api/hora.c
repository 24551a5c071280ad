/* hora.c - runtime lifetime: hora_init / hora_shutdown build the layers
 * bottom up (settings, the bootstrap: MPI or hora-run's rendezvous store
 * (api_elastic.c), topology, /dev/shm space, pool, collectives with their
 * transports, coordinator) and tear them down top down; hora_abort,
 * the error exit that does not wait for the peers; topology queries,
 * hora_mem_alloc and the settings printout. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/log.h"
#include "base/status.h"
#include "coord/stack.h"
#include "hora.h"

/* Not after hora_abort: MPI_Finalize waits for peers that may be gone or
 * blocked, and mpirun is to notice a process that exits without it. */
static void hora_finalize_mpi_at_exit(void)
{
    int finalized = 0;
    if (hora_rt.aborted) return;
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

/* /dev/shm must hold what the runtime itself commits in each rank's pool:
 * its control blocks and the coordinator's fusion buffer (every fused
 * response that is not zero-copy goes through it), never more than the pool.
 * Checked here, on every host for all its ranks, instead of failing at the
 * first large operation. (Blocks of hora_mem_alloc and the staging of other
 * buffers come on top; their failures name /dev/shm too.) */
static hora_status_t hora_check_shm_space(void)
{
    const struct config *cfg = &hora_rt.cfg;
    size_t need = MEM_POOL_CTRL_BYTES + cfg->fusion_threshold;
    if (need > cfg->shm_pool_bytes) need = cfg->shm_pool_bytes;
    char why[512], fusion[32], pool[32], ctrl[32];
    snprintf(why, sizeof(why),
             "%s of control blocks and up to HORA_FUSION_THRESHOLD=%s for the coordinator's fusion buffer, at "
             "most HORA_SHM_POOL_BYTES=%s, plus the blocks of hora_mem_alloc",
             mem_format_bytes(MEM_POOL_CTRL_BYTES, ctrl, sizeof(ctrl)),
             mem_format_bytes(cfg->fusion_threshold, fusion, sizeof(fusion)),
             mem_format_bytes(cfg->shm_pool_bytes, pool, sizeof(pool)));
    return mem_pool_check_space(&hora_rt.topo, &hora_rt.boot_world, need, why);
}

/* The world through MPI: this process's rank and the bootstrap's world. */
static hora_status_t hora_start_world_mpi(int *host_color)
{
    HORA_CHECK(hora_start_mpi());
    int err = MPI_Comm_dup(MPI_COMM_WORLD, &hora_rt.world);
    if (err != MPI_SUCCESS) {
        hora_rt.world = MPI_COMM_NULL;
        return status_mpi(err, "MPI_Comm_dup(MPI_COMM_WORLD)");
    }
    MPI_Comm_set_errhandler(hora_rt.world, MPI_ERRORS_RETURN);
    boot_comm_from_mpi(&hora_rt.boot_world, hora_rt.world);
    *host_color = -1; /* hosts: MPI's shared-memory split */
    return HORA_OK;
}

static void hora_free_world(void)
{
    boot_comm_free(&hora_rt.boot_world);
    if (hora_rt.world != MPI_COMM_NULL) MPI_Comm_free(&hora_rt.world);
}

hora_status_t hora_init(void)
{
    hora_status_t status;
    int host_color = -1;

    status_clear();
    if (hora_rt.initialized) return status_set(HORA_ERR_ALREADY_INITIALIZED, "hora_init: already initialized");
    /* An elastic world that lost a member re-forms in the same process. */
    if (hora_rt.aborted && !api_boot_can_reinit())
        return status_set(HORA_ERR_SHUTDOWN,
                          "hora_init: the runtime ended in an abort in this process (hora_abort, or a peer's); exit "
                          "instead");
    int mpi_owned = hora_rt.mpi_owned;
    memset(&hora_rt, 0, sizeof(hora_rt));
    hora_rt.mpi_owned = mpi_owned;
    hora_rt.world = MPI_COMM_NULL;
    pthread_mutex_init(&hora_rt.sets_lock, NULL);
    pthread_mutex_init(&hora_rt.timeline_lock, NULL);

    /* Settings first: a bad value must fail before anything is created. */
    status = config_load(&hora_rt.cfg);
    if (status < 0) return status;
    HORA_CHECK(api_preempt_check_config(&hora_rt.cfg));
    log_set_level(hora_rt.cfg.log_level);
    hora_rt.store = api_boot_is_store(&hora_rt.cfg);
    if (hora_rt.store && hora_rt.cfg.process_sets[0])
        return status_fail(HORA_ERR_CONFIG, "HORA_PROCESS_SETS: process sets run over MPI, which a job started by "
                                            "hora-run does not have (start it with mpirun)");
    status = hora_rt.store ? api_boot_open(&hora_rt.boot_world, &host_color) : hora_start_world_mpi(&host_color);
    if (status < 0) goto err_free_world;
    log_set_rank(hora_rt.boot_world.rank);

    status = topo_init(&hora_rt.topo, &hora_rt.boot_world, host_color, hora_rt.cfg.fake_nodes);
    if (status < 0) goto err_free_world;
    status = hora_check_shm_space();
    if (status < 0) goto err_free_topo;
    status = mem_pool_init(&hora_rt.pool, &hora_rt.topo, hora_rt.cfg.shm_pool_bytes, !hora_rt.cfg.disable_shm);
    if (status < 0) goto err_free_topo;
    /* Device support: every rank with a GPU, or none (mem_dev.h). */
    status = mem_dev_init(&hora_rt.dev, &hora_rt.topo, &hora_rt.boot_world, hora_rt.cfg.cuda_pool_bytes,
                          hora_rt.cfg.cuda, hora_rt.cfg.cuda_device);
    if (status < 0) goto err_free_pool;
    status = coll_init(&hora_rt.coll, &hora_rt.cfg, &hora_rt.boot_world, &hora_rt.topo, &hora_rt.pool, &hora_rt.dev);
    if (status < 0) goto err_free_dev;
    if (hora_rt.store) {
        hora_rt.coll.env.lost_grace_s = api_boot_grace_s();
        status = api_boot_watch_start(&hora_rt.coll);
        if (status < 0) goto err_close;
    }
    /* Nobody may run a collective before every rank's control block is ready. */
    status = boot_comm_barrier(&hora_rt.boot_world, "init");
    if (status < 0) goto err_close;
    snprintf(hora_rt.timeline, sizeof(hora_rt.timeline), "%s", hora_rt.cfg.timeline);
    const struct coord_env coord_env = {.world = hora_rt.world,
                                        .rank = hora_rt.topo.rank,
                                        .size = hora_rt.topo.size,
                                        .cfg = &hora_rt.cfg,
                                        .coll = &hora_rt.coll,
                                        .pool = &hora_rt.pool,
                                        .dev = &hora_rt.dev,
                                        .timeline = hora_rt.timeline};
    status = coord_start(&coord_env, &hora_rt.coord);
    if (status < 0) goto err_close;
    stack_capture_note_init(); /* a stall's stack shows this thread until one submits */
    hora_rt.initialized = 1;
    if (hora_rt.cfg.process_sets[0]) {
        status = api_sets_create_static(hora_rt.cfg.process_sets);
        if (status < 0) {
            /* Every rank fails alike (creation agrees across ranks). */
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", hora_last_error());
            hora_shutdown();
            return status_set(status, "hora_init: %s", msg);
        }
    }
    log_info("initialized: rank %d of %d, node %d of %d, local rank %d of %d, transport %s, bootstrap %s%s",
             hora_rt.topo.rank, hora_rt.topo.size, hora_rt.topo.node_rank, hora_rt.topo.node_count,
             hora_rt.topo.local_rank, hora_rt.topo.local_size, hora_transport_name(), hora_bootstrap(),
             hora_elastic() ? " (elastic)" : "");
    return HORA_OK;

err_close:
    api_boot_watch_stop();
    coll_close(&hora_rt.coll);
err_free_dev:
    mem_dev_free(&hora_rt.dev);
err_free_pool:
    mem_pool_free(&hora_rt.pool);
err_free_topo:
    topo_free(&hora_rt.topo);
err_free_world:
    hora_free_world();
    return status;
}

/* The shutdown barrier's check while it waits: peers may still read our
 * pool until every rank is here, but a rank that aborted (or a host peer
 * that died) ends the wait instead of leaving this rank in it for good. */
static hora_status_t hora_shutdown_check(void *arg)
{
    int dead = -1;
    (void)arg;
    HORA_CHECK(coll_check_abort(&hora_rt.coll));
    if (!coll_host_peers_alive(&hora_rt.coll, &dead))
        return status_set(HORA_ERR_TRANSPORT, "hora_shutdown: rank %d died before it shut down", dead);
    return HORA_OK;
}

hora_status_t hora_shutdown(void)
{
    hora_status_t status = HORA_OK;
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_shutdown: the runtime is not initialized");
    /* Host peers still blocked in a direct collective that needs this rank
     * fail now (HORA_ERR_SHUTDOWN) instead of timing out; the coordinators'
     * operations do not look at it. */
    coll_notice_shutdown(&hora_rt.coll);
    /* The first rank's stop stops every coordinator in the same cycle (or
     * this one has stopped already: an error, an abort): the process sets'
     * first, in id order, then the world's. */
    api_sets_stop_all();
    coord_stop(hora_rt.coord);
    hora_rt.coord = NULL;
    /* After an abort (here or on a peer) nobody is coming: no barrier. */
    status = coll_check_abort(&hora_rt.coll);
    if (status == HORA_OK) status = boot_comm_barrier_until(&hora_rt.boot_world, "shutdown", hora_shutdown_check, NULL);
    if (status < 0) {
        /* A rank that called hora_abort has said why already (once, there);
         * a lost member of an elastic world is the caller's to report. */
        if (!hora_rt.aborted && status != HORA_ERR_PEER_LOST)
            log_warn("hora_shutdown without the peers: %s", hora_last_error());
        hora_rt.aborted = 1; /* MPI_Finalize would wait for them */
    }
    if (hora_rt.store) {
        api_boot_watch_stop();
        api_boot_note_shutdown(status);
    }
    coll_close(&hora_rt.coll);
    mem_dev_free(&hora_rt.dev);
    mem_pool_free(&hora_rt.pool);
    topo_free(&hora_rt.topo);
    if (status == HORA_OK)
        hora_free_world();
    else
        boot_comm_free(&hora_rt.boot_world); /* the MPI communicator stays: freeing it may wait for the dead */
    hora_rt.initialized = 0;
    return status;
}

hora_status_t hora_abort(hora_status_t status, const char *message)
{
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_abort called outside hora_init .. hora_shutdown");
    if (status >= 0) status = HORA_ERR_SHUTDOWN;
    if (!message || !*message) message = hora_status_string(status);
    if (hora_rt.aborted) return status;
    hora_rt.aborted = 1;
    /* The caller prints the error (once); this only traces the abort. */
    log_debug("hora_abort: %s (%s): telling the peers and stopping", message, hora_status_string(status));
    /* Peers first (they wait for us; the notice also fails this process's
     * own waits), then our coordinator, which the notice unblocks. */
    coll_abort(&hora_rt.coll, status, message);
    api_sets_abort_all(1.0);
    coord_abort(hora_rt.coord, 2.0);
    /* Nothing of ours is left in /dev/shm: every pool was unlinked once its
     * host peers had mapped it (mem_pool.c); the mappings go with the process. */
    return status;
}

int hora_initialized(void) { return hora_rt.initialized; }

#define HORA_TOPO_GETTER(name, field) \
    int hora_##name(void) { return hora_rt.initialized ? hora_rt.topo.field : -1; }
HORA_TOPO_GETTER(rank, rank)
HORA_TOPO_GETTER(size, size)
HORA_TOPO_GETTER(local_rank, local_rank)
HORA_TOPO_GETTER(local_size, local_size)
HORA_TOPO_GETTER(node_rank, node_rank)
HORA_TOPO_GETTER(node_count, node_count)

const char *hora_transport_name(void) { return hora_rt.initialized ? coll_transport_name(&hora_rt.coll) : "none"; }

#ifdef HORA_HAVE_UCX
#define API_BUILT_UCX "1"
#else
#define API_BUILT_UCX "0"
#endif
#ifdef HORA_HAVE_CUDA
#define API_BUILT_CUDA "1"
#else
#define API_BUILT_CUDA "0"
#endif
const char *hora_build_info(void)
{
    return "version=" HORA_VERSION " shm=1 ucx=" API_BUILT_UCX " mpi=1 cudaipc=" API_BUILT_CUDA " cuda=" API_BUILT_CUDA;
}

hora_status_t hora_straggler(int *rank, double *last_fraction, double *lag_ms, long long *cycles)
{
    HORA_CHECK(api_check_initialized("hora_straggler"));
    int r;
    double fraction, lag;
    int64_t n;
    coord_straggler(hora_rt.coord, &r, &fraction, &lag, &n);
    if (rank) *rank = r;
    if (last_fraction) *last_fraction = fraction;
    if (lag_ms) *lag_ms = lag;
    if (cycles) *cycles = (long long)n;
    return HORA_OK;
}

hora_status_t hora_set_stack_provider(hora_stack_provider_t provider, void *arg)
{
    stack_capture_set_provider(provider, arg);
    return HORA_OK;
}

hora_status_t hora_mem_alloc(size_t bytes, void **ptr)
{
    if (!hora_rt.initialized) return status_set(HORA_ERR_NOT_INITIALIZED, "hora_mem_alloc called before hora_init");
    if (!ptr) return status_fail(HORA_ERR_INVALID_ARG, "hora_mem_alloc: ptr is NULL");
    char what[64];
    snprintf(what, sizeof(what), "hora_mem_alloc(%zu)", bytes);
    return mem_pool_alloc(&hora_rt.pool, bytes, what, ptr);
}

hora_status_t hora_mem_alloc_device(size_t bytes, void **ptr)
{
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_mem_alloc_device called before hora_init");
    if (!ptr) return status_fail(HORA_ERR_INVALID_ARG, "hora_mem_alloc_device: ptr is NULL");
    char what[64];
    snprintf(what, sizeof(what), "hora_mem_alloc_device(%zu)", bytes);
    return mem_dev_alloc(&hora_rt.dev, bytes, what, ptr);
}

hora_status_t hora_mem_free(void *ptr)
{
    uint64_t off;
    if (!ptr) return HORA_OK;
    if (!hora_rt.initialized)
        return status_set(HORA_ERR_NOT_INITIALIZED, "hora_mem_free called outside hora_init .. hora_shutdown");
    if (mem_dev_offset(&hora_rt.dev, ptr, 1, &off)) {
        if (mem_dev_release(&hora_rt.dev, ptr) == HORA_OK) return HORA_OK;
        return status_fail(HORA_ERR_INVALID_ARG, "hora_mem_free(%p): not a block from hora_mem_alloc_device", ptr);
    }
    return mem_pool_release(&hora_rt.pool, ptr);
}

int hora_mem_is_shared(const void *ptr)
{
    uint64_t off;
    return hora_rt.initialized &&
           (mem_pool_offset(&hora_rt.pool, ptr, 1, &off) || mem_dev_offset(&hora_rt.dev, ptr, 1, &off));
}

int hora_cuda_device(void) { return hora_rt.initialized ? hora_rt.dev.device : -1; }

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
