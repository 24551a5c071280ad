/* api_elastic.c - the store bootstrap and elastic worlds (hora.h's
 * hora_bootstrap .. hora_elastic_reform; runtime/README.md "Bootstraps and
 * elastic worlds").
 *
 * Under hora-run (HORA_RDZV set, no MPI launcher) hora_init takes its world
 * from the rendezvous store instead of MPI: its rank, size and host from
 * hora-run's environment for the first generation, from hora-run's
 * assignment "gen<G>/assign/<worker id>" for a later one; the values the
 * layers exchange at init go through the store (boot/comm.h). What lives
 * across hora_init .. hora_shutdown pairs (the store connection, the
 * generation, whether it ended) is this file's, not hora_rt's, which
 * hora_init clears.
 *
 * A watcher thread per generation waits on the store for "gen<G>/failed",
 * which hora-run sets when a worker or a host of the generation is lost
 * (and hora_elastic_reform sets for newcomers); it turns it into a notice
 * (coll_notice_lost) that fails every wait of this process with
 * HORA_ERR_PEER_LOST. Transports that see a peer die first wait for that
 * verdict (tp_notice_await_verdict, HORA_ELASTIC_GRACE_S). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/log.h"
#include "base/status.h"
#include "boot/store.h"

/* How often the watcher's wait on the server ends to look at its stop flag. */
#define API_WATCH_SLICE_S 0.2

static struct {
    int open;         /* the link is connected */
    boot_link_t link; /* the bootstrap's connection (comm.h) */
    char host[256];   /* HORA_RDZV's host and port, HORA_JOB_ID */
    int port;
    char job_id[BOOT_STORE_JOB_ID_MAX + 1];
    int elastic;           /* HORA_ELASTIC=1: hora-run keeps workers across generations */
    char worker_id[64];    /* HORA_WORKER_ID */
    double join_timeout_s; /* HORA_JOIN_TIMEOUT_S: the longest wait for an assignment or a peer's value */
    double grace_s;        /* HORA_ELASTIC_GRACE_S */
    int generation;        /* the one joined last; -1 before the first */
    _Atomic int ended;     /* that generation ended (a loss, or hora_elastic_reform) */
    int hosts_waiting;     /* hora_elastic_check's last answer */
    /* The watcher of the running generation. */
    pthread_t watcher;
    int watching;
    _Atomic int watch_stop;
    boot_store_t *watch_store;
    struct coll_ctx *watch_coll;
} api_boot = {.generation = -1};

int api_boot_is_store(const struct config *cfg)
{
    if (cfg->bootstrap == 1) return 0;
    if (cfg->bootstrap == 2) return 1;
    /* auto: hora-run names a store, and no MPI launcher started us. */
    const char *launcher[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", NULL};
    const char *rdzv = getenv("HORA_RDZV");
    if (!rdzv || !*rdzv) return 0;
    for (int i = 0; launcher[i]; i++)
        if (getenv(launcher[i])) return 0;
    return 1;
}

/* An integer from hora-run's environment, or a clear refusal. */
static hora_status_t api_boot_env_int(const char *name, int lo, int *out)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return status_fail(HORA_ERR_CONFIG,
                           "hora_init: the store bootstrap needs %s, which hora-run sets for its workers: start the "
                           "program with hora-run (tools/hora_run), or under mpirun (HORA_BOOTSTRAP=mpi)",
                           name);
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > 1 << 24)
        return status_fail(HORA_ERR_CONFIG, "hora_init: bad value for %s: '%s' (an integer >= %d)", name, v, lo);
    *out = (int)x;
    return HORA_OK;
}

static hora_status_t api_boot_env_seconds(const char *name, double fallback, double *out)
{
    const char *v = getenv(name);
    char *end;
    *out = fallback;
    if (!v || !*v) return HORA_OK;
    double x = strtod(v, &end);
    if (*end || !(x >= 0) || x > 1e6)
        return status_fail(HORA_ERR_CONFIG, "hora_init: bad value for %s: '%s' (seconds)", name, v);
    *out = x;
    return HORA_OK;
}

/* The process-wide settings and the connection, once. */
static hora_status_t api_boot_connect(void)
{
    if (api_boot.open) return HORA_OK;
    const char *rdzv = getenv("HORA_RDZV"), *job = getenv("HORA_JOB_ID"), *colon;
    if (!rdzv || !(colon = strrchr(rdzv, ':')) || colon == rdzv || (size_t)(colon - rdzv) >= sizeof(api_boot.host))
        return status_fail(HORA_ERR_CONFIG,
                           "hora_init: the store bootstrap needs HORA_RDZV=HOST:PORT (hora-run sets it), got '%s'",
                           rdzv ? rdzv : "");
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return status_fail(HORA_ERR_CONFIG, "hora_init: bad port in HORA_RDZV='%s'", rdzv);
    if (!job || !*job || strlen(job) > BOOT_STORE_JOB_ID_MAX)
        return status_fail(HORA_ERR_CONFIG,
                           "hora_init: the store bootstrap needs HORA_JOB_ID (1-%d bytes; hora-run "
                           "sets it)",
                           BOOT_STORE_JOB_ID_MAX);
    memcpy(api_boot.host, rdzv, (size_t)(colon - rdzv));
    api_boot.host[colon - rdzv] = '\0';
    api_boot.port = (int)port;
    snprintf(api_boot.job_id, sizeof(api_boot.job_id), "%s", job);
    HORA_CHECK(api_boot_env_seconds("HORA_JOIN_TIMEOUT_S", 60.0, &api_boot.join_timeout_s));
    HORA_CHECK(api_boot_env_seconds("HORA_ELASTIC_GRACE_S", 0.0, &api_boot.grace_s));
    const char *elastic = getenv("HORA_ELASTIC"), *id = getenv("HORA_WORKER_ID");
    api_boot.elastic = elastic && !strcmp(elastic, "1");
    if (api_boot.elastic && (!id || !*id || strlen(id) >= sizeof(api_boot.worker_id)))
        return status_fail(HORA_ERR_CONFIG, "hora_init: HORA_ELASTIC=1 needs HORA_WORKER_ID (hora-run --elastic sets "
                                            "both)");
    snprintf(api_boot.worker_id, sizeof(api_boot.worker_id), "%s", id ? id : "");
    if (api_boot.join_timeout_s < 1) api_boot.join_timeout_s = 1;
    HORA_CHECK(boot_store_connect(api_boot.host, api_boot.port, api_boot.job_id, api_boot.join_timeout_s,
                                  &api_boot.link.store));
    pthread_mutex_init(&api_boot.link.lock, NULL);
    api_boot.link.timeout_s = api_boot.join_timeout_s;
    api_boot.open = 1;
    return HORA_OK;
}

/* This worker's place in generation g: hora-run's assignment line. */
static hora_status_t api_boot_assignment(int g, int *rank, int *size, int *node)
{
    char key[BOOT_STORE_KEY_MAX];
    void *v = NULL;
    snprintf(key, sizeof(key), "gen%d/assign/%s", g, api_boot.worker_id);
    pthread_mutex_lock(&api_boot.link.lock);
    hora_status_t status = boot_store_get(api_boot.link.store, key, api_boot.join_timeout_s, &v, NULL);
    pthread_mutex_unlock(&api_boot.link.lock);
    if (status == HORA_ERR_TIMEOUT)
        return status_fail(HORA_ERR_TIMEOUT,
                           "hora_init: worker %s got no place in generation %d from hora-run within %.0f s "
                           "(HORA_JOIN_TIMEOUT_S): did the re-formed round close?",
                           api_boot.worker_id, g, api_boot.join_timeout_s);
    HORA_CHECK(status);
    int local_rank, local_size, node_count;
    int n = sscanf(v, "rank=%d size=%d local_rank=%d local_size=%d node_rank=%d node_count=%d", rank, size, &local_rank,
                   &local_size, node, &node_count);
    if (n != 6 || *size < 1 || *rank < 0 || *rank >= *size || *node < 0 || *node >= node_count)
        status =
            status_fail(HORA_ERR_CORRUPT, "hora_init: hora-run's assignment '%s' = '%s' is malformed", key, (char *)v);
    free(v);
    return status;
}

hora_status_t api_boot_open(boot_comm_t *world, int *host_color)
{
    int g = 0, rank = 0, size = 0, node = 0;
    HORA_CHECK(api_boot_connect());
    if (api_boot.generation < 0) {
        HORA_CHECK(api_boot_env_int("HORA_GENERATION", 0, &g));
        HORA_CHECK(api_boot_env_int("HORA_RANK", 0, &rank));
        HORA_CHECK(api_boot_env_int("HORA_SIZE", 1, &size));
        HORA_CHECK(api_boot_env_int("HORA_NODE_RANK", 0, &node));
        if (rank >= size)
            return status_fail(HORA_ERR_CONFIG, "hora_init: HORA_RANK=%d is not below HORA_SIZE=%d", rank, size);
    } else {
        if (!api_boot.elastic)
            return status_fail(HORA_ERR_UNSUPPORTED,
                               "hora_init: this world cannot re-form: hora-run started it without --elastic (its "
                               "workers run once per generation)");
        if (!atomic_load(&api_boot.ended))
            return status_fail(HORA_ERR_UNSUPPORTED,
                               "hora_init: generation %d has not ended: under hora-run --elastic a world re-forms "
                               "after a lost peer (HORA_ERR_PEER_LOST) or hora_elastic_reform, not after a plain "
                               "hora_shutdown",
                               api_boot.generation);
        g = api_boot.generation + 1;
        HORA_CHECK(api_boot_assignment(g, &rank, &size, &node));
    }
    /* hora-run's word that this generation lost a member ends the
     * bootstrap's waits too (a worker that dies while the world forms). */
    snprintf(api_boot.link.abort_key, sizeof(api_boot.link.abort_key), "gen%d/failed", g);
    snprintf(api_boot.link.abort_what, sizeof(api_boot.link.abort_what), "generation %d: ", g);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "gen%d/boot", g);
    HORA_CHECK(boot_comm_from_store(world, &api_boot.link, prefix, rank, size));
    api_boot.generation = g;
    atomic_store(&api_boot.ended, 0);
    api_boot.hosts_waiting = 0;
    *host_color = node;
    return HORA_OK;
}

double api_boot_grace_s(void) { return api_boot.grace_s; }

int api_boot_can_reinit(void) { return api_boot.open && api_boot.elastic && atomic_load(&api_boot.ended); }

/* ---------------------------------------------------------------- watcher */

static void *api_boot_watch(void *arg)
{
    (void)arg;
    char key[64];
    snprintf(key, sizeof(key), "gen%d/failed", api_boot.generation);
    while (!atomic_load(&api_boot.watch_stop)) {
        void *v = NULL;
        hora_status_t status = boot_store_get(api_boot.watch_store, key, API_WATCH_SLICE_S, &v, NULL);
        if (status == HORA_ERR_TIMEOUT) continue;
        char reason[512];
        if (status == HORA_OK)
            snprintf(reason, sizeof(reason), "generation %d: %s", api_boot.generation, (char *)v);
        else
            snprintf(reason, sizeof(reason), "generation %d: %s", api_boot.generation, status_message());
        free(v);
        atomic_store(&api_boot.ended, 1);
        log_debug("the world lost a member: %s", reason);
        coll_notice_lost(api_boot.watch_coll, reason);
        break;
    }
    return NULL;
}

hora_status_t api_boot_watch_start(struct coll_ctx *coll)
{
    HORA_CHECK(boot_store_connect(api_boot.host, api_boot.port, api_boot.job_id, api_boot.join_timeout_s,
                                  &api_boot.watch_store));
    api_boot.watch_coll = coll;
    atomic_store(&api_boot.watch_stop, 0);
    if (pthread_create(&api_boot.watcher, NULL, api_boot_watch, NULL) != 0) {
        boot_store_close(api_boot.watch_store);
        api_boot.watch_store = NULL;
        return status_fail(HORA_ERR_SYSTEM, "hora_init: cannot start the rendezvous store's watcher thread");
    }
    api_boot.watching = 1;
    return HORA_OK;
}

void api_boot_watch_stop(void)
{
    if (!api_boot.watching) return;
    atomic_store(&api_boot.watch_stop, 1);
    pthread_join(api_boot.watcher, NULL);
    boot_store_close(api_boot.watch_store);
    api_boot.watch_store = NULL;
    api_boot.watching = 0;
}

/* A shutdown (or a hora_init) that found the world broken (a loss) ends
 * the generation. */
void api_boot_note_shutdown(hora_status_t status)
{
    if (status == HORA_ERR_PEER_LOST) atomic_store(&api_boot.ended, 1);
}

/* ---------------------------------------------------------------- public */

const char *hora_bootstrap(void)
{
    if (!hora_rt.initialized) return "none";
    return hora_rt.store ? "store" : "mpi";
}

int hora_generation(void)
{
    if (!hora_rt.initialized) return -1;
    return hora_rt.store ? api_boot.generation : 0;
}

int hora_elastic(void) { return hora_rt.initialized && hora_rt.store && api_boot.elastic; }

hora_status_t hora_elastic_check(int *hosts_waiting)
{
    HORA_CHECK(api_check_initialized("hora_elastic_check"));
    if (!hosts_waiting) return status_fail(HORA_ERR_INVALID_ARG, "hora_elastic_check: hosts_waiting is NULL");
    *hosts_waiting = 0;
    if (!hora_elastic()) return HORA_OK;
    /* Rank 0 reads the count of hosts waiting for the next round; one
     * all-reduce (MAX) of {count, rank 0 failed} gives every rank its answer,
     * or fails on every rank. */
    int32_t v[2] = {0, 0};
    if (hora_rt.topo.rank == 0) {
        char key[64];
        int64_t n = 0;
        snprintf(key, sizeof(key), "gen%d/join", api_boot.generation + 1);
        pthread_mutex_lock(&api_boot.link.lock);
        hora_status_t status = boot_store_add(api_boot.link.store, key, 0, &n);
        pthread_mutex_unlock(&api_boot.link.lock);
        if (status == HORA_OK)
            v[0] = (int32_t)(n < INT32_MAX ? n : INT32_MAX);
        else
            v[1] = 1;
    }
    HORA_CHECK(hora_allreduce(v, v, 2, HORA_DTYPE_I32, HORA_OP_MAX));
    if (v[1]) return status_set(HORA_ERR_TRANSPORT, "hora_elastic_check: rank 0 could not read the rendezvous store");
    const int waiting = v[0];
    *hosts_waiting = api_boot.hosts_waiting = waiting;
    return HORA_OK;
}

/* Rank 0 of the generation that ends: the keys hora-run's own failures
 * use (tools/hora_run/README.md), so that every hora-run forms the next
 * generation with the hosts that wait. The first failure posted wins. */
static hora_status_t api_boot_post_reform(int g, int hosts, const char *message)
{
    char key[64], text[32];
    int64_t first = 0, waiting = 0;
    boot_store_t *s = api_boot.link.store;
    hora_status_t status;
    pthread_mutex_lock(&api_boot.link.lock);
    snprintf(key, sizeof(key), "gen%d/fail", g);
    status = boot_store_add(s, key, 1, &first);
    if (status == HORA_OK && first == 1) {
        snprintf(key, sizeof(key), "gen%d/join", g + 1);
        status = boot_store_add(s, key, 0, &waiting);
        int len = snprintf(text, sizeof(text), "%" PRId64, hosts + waiting);
        snprintf(key, sizeof(key), "gen%d/expect", g + 1);
        if (status == HORA_OK) status = boot_store_set(s, key, text, (size_t)len);
        snprintf(key, sizeof(key), "gen%d/over", g);
        if (status == HORA_OK) status = boot_store_set(s, key, "failed", 6);
        snprintf(key, sizeof(key), "gen%d/failed", g);
        if (status == HORA_OK) status = boot_store_set(s, key, message, strlen(message));
    }
    pthread_mutex_unlock(&api_boot.link.lock);
    return status;
}

hora_status_t hora_elastic_reform(void)
{
    HORA_CHECK(api_check_initialized("hora_elastic_reform"));
    if (!hora_elastic())
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_elastic_reform: this world cannot re-form (%s): start the job with hora-run --elastic",
                           hora_rt.store ? "hora-run without --elastic" : "started by mpirun");
    const int rank = hora_rt.topo.rank, hosts = hora_rt.topo.host_count, g = api_boot.generation;
    char message[128];
    if (api_boot.hosts_waiting > 0)
        snprintf(message, sizeof(message), "hosts updated: %d host(s) waiting to join", api_boot.hosts_waiting);
    else
        snprintf(message, sizeof(message), "the workers re-form the world (hora_elastic_reform, no host waiting)");
    hora_status_t status = hora_shutdown();
    /* A loss during the shutdown ended the generation already (hora-run
     * posted it): the next hora_init joins the re-formed world all the same. */
    if (status != HORA_OK) return status == HORA_ERR_PEER_LOST ? HORA_OK : status;
    if (rank == 0) HORA_CHECK(api_boot_post_reform(g, hosts, message));
    atomic_store(&api_boot.ended, 1);
    return HORA_OK;
}
