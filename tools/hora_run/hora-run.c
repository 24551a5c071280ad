/* hora-run - start a job's workers on this host without MPI (README.md).
 *
 *   hora-run --nproc-per-node K [--nnodes MIN:MAX] [--rdzv HOST:PORT]
 *            [--job-id ID] [--max-restarts R] [--join-timeout S] [--elastic]
 *            CMD ARGS...
 *
 * One hora-run per host. The first (or the one whose --rdzv address it can
 * bind) runs the rendezvous store (runtime/boot) on a thread; every hora-run
 * joins a generation through it (rdzv.c), starts K workers with their ranks
 * in the environment (workers.c) and supervises: a worker that fails, a peer
 * host whose heartbeat stops, or a signal ends the generation on every host;
 * the workers are stopped and, while restarts remain, the hosts still there
 * form the next generation. With --elastic the workers that still run are
 * kept across generations: they read their place in the next one from the
 * store ("gen<G>/assign/<worker id>", assignments_publish). Exit: 0 when
 * every worker of the job exited 0, 1 the job failed, 2 bad options, 3 the
 * rendezvous failed, 128 + N stopped by signal N. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/store.h"
#include "rdzv.h"
#include "workers.h"

#define EXIT_JOB_FAILED 1
#define EXIT_USAGE 2
#define EXIT_RDZV 3
#define TICK_S 0.1
#define HEARTBEAT_S 1.0 /* each host sets its beat this often */
#define PEER_LOOK_S 0.5 /* and reads its peers' this often */

typedef struct {
    int nproc;
    int min_nodes, max_nodes;
    char rdzv_host[256];
    int rdzv_port; /* 0: none given */
    const char *job_id;
    int max_restarts;
    double join_timeout_s, settle_s, heartbeat_timeout_s, stop_grace_s;
    int prefix_output;
    int elastic; /* --elastic: keep the live workers across generations */
    char **argv; /* the worker command */
} run_opts_t;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static const char usage_text[] =
    "usage: hora-run --nproc-per-node K [options] CMD [ARGS...]\n"
    "\n"
    "Starts K workers of CMD on this host, ranked across every host of the job that\n"
    "runs hora-run with the same rendezvous store and job id, and supervises them.\n"
    "Each worker gets HORA_RANK, HORA_SIZE, HORA_LOCAL_RANK, HORA_LOCAL_SIZE,\n"
    "HORA_NODE_RANK, HORA_NODE_COUNT, HORA_RDZV, HORA_JOB_ID, HORA_GENERATION,\n"
    "HORA_JOIN_TIMEOUT_S, and RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR, MASTER_PORT.\n"
    "\n"
    "options:\n"
    "  --nproc-per-node K     workers on this host (1-4096; required)\n"
    "  --nnodes MIN[:MAX]     hosts in the job: start once MIN joined, take up to MAX\n"
    "                         (default 1:1)\n"
    "  --rdzv HOST:PORT       the rendezvous store: run it here when this host can bind\n"
    "                         HOST:PORT, else connect to it (default: run it on\n"
    "                         127.0.0.1, port picked and printed)\n"
    "  --job-id ID            the job's id; the store refuses hosts of another job\n"
    "                         (default 'hora')\n"
    "  --max-restarts R       times the job's workers are restarted after a failure or\n"
    "                         a lost host, or with --elastic re-formed (default 0)\n"
    "  --join-timeout S       seconds to reach the store and for MIN hosts to join\n"
    "                         (default 60)\n"
    "  --settle-time S        seconds more hosts may join once MIN did (default 2)\n"
    "  --heartbeat-timeout S  a host silent this long is lost (default 3; one beat a second)\n"
    "  --stop-grace S         SIGTERM to SIGKILL when stopping workers (default 5)\n"
    "  --prefix-output        each line a worker writes, prefixed \"[rank R] \" (default:\n"
    "                         the workers write to hora-run's stdout and stderr directly)\n"
    "  --elastic              when a generation fails, keep the workers that still run:\n"
    "                         reap the dead ones (not restarted), form the next generation\n"
    "                         with the live ones and the hosts waiting to join, and publish\n"
    "                         each worker's new place in the store (gen<G>/assign/<worker\n"
    "                         id>) for libhora's hora_init; workers also get HORA_ELASTIC=1,\n"
    "                         HORA_WORKER_ID=H.S, HORA_ELASTIC_GRACE_S.\n"
    "                         A host left without live workers exits 1 (the one that runs\n"
    "                         the store keeps it for the others until the job ends, then\n"
    "                         exits 1). Each re-formed generation counts as a restart: give\n"
    "                         --max-restarts large.\n"
    "                         Give every host of the job --elastic.\n"
    "  -h, --help             this text\n"
    "\n"
    "exit status: 0 every worker exited 0; 1 the job failed (a worker, a lost host,\n"
    "no restarts left); 2 bad options; 3 the rendezvous failed (store unreachable,\n"
    "another job id, too few hosts); 128+N stopped by signal N.\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hora-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(hora-run --help for the options)\n", stderr);
    return EXIT_USAGE;
}

/* A whole number in [lo, hi], or -1. */
static long parse_int(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    return v;
}

static double parse_seconds(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || v > 1e6) return -1;
    return v;
}

/* Whether execvp would find cmd: a path with a '/' as it is, else on PATH. */
static int command_found(const char *cmd)
{
    if (strchr(cmd, '/')) return access(cmd, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char full[4096];
        if (snprintf(full, sizeof(full), "%.*s/%s", (int)len, len ? p : ".", cmd) < (int)sizeof(full) &&
            access(full, X_OK) == 0)
            return 1;
        if (!end) return 0;
        p = end;
    }
}

static int parse_options(int argc, char **argv, run_opts_t *o)
{
    *o = (run_opts_t){.nproc = 0,
                      .min_nodes = 1,
                      .max_nodes = 1,
                      .job_id = "hora",
                      .join_timeout_s = 60,
                      .settle_s = 2,
                      .heartbeat_timeout_s = 3,
                      .stop_grace_s = 5};
    enum { O_NPROC = 1000, O_NNODES, O_RDZV, O_JOB, O_RESTARTS, O_JOIN, O_SETTLE, O_HB, O_GRACE, O_PREFIX, O_ELASTIC };
    static const struct option longs[] = {{"nproc-per-node", required_argument, 0, O_NPROC},
                                          {"nnodes", required_argument, 0, O_NNODES},
                                          {"rdzv", required_argument, 0, O_RDZV},
                                          {"job-id", required_argument, 0, O_JOB},
                                          {"max-restarts", required_argument, 0, O_RESTARTS},
                                          {"join-timeout", required_argument, 0, O_JOIN},
                                          {"settle-time", required_argument, 0, O_SETTLE},
                                          {"heartbeat-timeout", required_argument, 0, O_HB},
                                          {"stop-grace", required_argument, 0, O_GRACE},
                                          {"prefix-output", no_argument, 0, O_PREFIX},
                                          {"elastic", no_argument, 0, O_ELASTIC},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    opterr = 0;
    int c;
    /* "+": options end at the command, whose own options are its own. */
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        const char *arg = optarg;
        char *colon;
        switch (c) {
        case 'h': fputs(usage_text, stdout); return -1;
        case O_PREFIX: o->prefix_output = 1; break;
        case O_ELASTIC: o->elastic = 1; break;
        case O_NPROC:
            if ((o->nproc = (int)parse_int(arg, 1, 4096)) < 0)
                return usage_error("--nproc-per-node '%s': a whole number from 1 to 4096 is needed", arg);
            break;
        case O_NNODES: {
            char text[64];
            snprintf(text, sizeof(text), "%s", arg);
            colon = strchr(text, ':');
            if (colon) *colon = '\0';
            long lo = parse_int(text, 1, 4096), hi = colon ? parse_int(colon + 1, 1, 4096) : lo;
            if (lo < 0 || hi < 0 || hi < lo)
                return usage_error("--nnodes '%s': MIN or MIN:MAX with 1 <= MIN <= MAX <= 4096 is needed", arg);
            o->min_nodes = (int)lo;
            o->max_nodes = (int)hi;
            break;
        }
        case O_RDZV: {
            colon = strrchr(arg, ':');
            long port = colon ? parse_int(colon + 1, 1, 65535) : -1;
            if (!colon || colon == arg || port < 0 || (size_t)(colon - arg) >= sizeof(o->rdzv_host))
                return usage_error("--rdzv '%s': HOST:PORT with a port from 1 to 65535 is needed", arg);
            snprintf(o->rdzv_host, sizeof(o->rdzv_host), "%.*s", (int)(colon - arg), arg);
            o->rdzv_port = (int)port;
            break;
        }
        case O_JOB:
            if (!arg[0] || strlen(arg) > BOOT_STORE_JOB_ID_MAX)
                return usage_error("--job-id '%s': 1 to %d characters are needed", arg, BOOT_STORE_JOB_ID_MAX);
            o->job_id = arg;
            break;
        case O_RESTARTS:
            if ((o->max_restarts = (int)parse_int(arg, 0, 1000000)) < 0)
                return usage_error("--max-restarts '%s': a whole number >= 0 is needed", arg);
            break;
        case O_JOIN:
        case O_SETTLE:
        case O_HB:
        case O_GRACE: {
            double v = parse_seconds(arg);
            const char *name = c == O_JOIN     ? "--join-timeout"
                               : c == O_SETTLE ? "--settle-time"
                               : c == O_HB     ? "--heartbeat-timeout"
                                               : "--stop-grace";
            if (v < 0 || ((c == O_JOIN || c == O_HB) && v <= 0))
                return usage_error("%s '%s': seconds%s are needed", name, arg,
                                   c == O_JOIN || c == O_HB ? " > 0" : " >= 0");
            if (c == O_JOIN)
                o->join_timeout_s = v;
            else if (c == O_SETTLE)
                o->settle_s = v;
            else if (c == O_HB)
                o->heartbeat_timeout_s = v;
            else
                o->stop_grace_s = v;
            break;
        }
        case '?':
        default:
            if (optopt) return usage_error("option '-%c' is not known", optopt);
            return usage_error("option '%s' is not known or lacks its value", argv[optind - 1]);
        }
    }
    if (!o->nproc) return usage_error("--nproc-per-node is required");
    if (optind < argc && strcmp(argv[optind], "--") == 0) optind++;
    if (optind >= argc) return usage_error("no command to run");
    o->argv = argv + optind;
    if (!command_found(o->argv[0])) return usage_error("command '%s' not found or not executable", o->argv[0]);
    return 0;
}

/* The store this host runs, if it does. */
typedef struct {
    boot_store_server_t *server;
    pthread_t thread;
} own_store_t;

static void *store_main(void *arg)
{
    if (boot_store_server_run(arg) != HORA_OK) fprintf(stderr, "hora-run: rendezvous store: %s\n", status_message());
    return NULL;
}

/* Run the store here when --rdzv is absent or names an address this host
 * can bind; 1 when it does, 0 when the store is elsewhere. */
static int store_start(run_opts_t *o, own_store_t *own)
{
    const char *host = o->rdzv_port ? o->rdzv_host : "127.0.0.1";
    char literal[INET_ADDRSTRLEN];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0) return 0; /* the client says why */
    inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, literal, sizeof(literal));
    freeaddrinfo(ai);
    if (boot_store_server_open(literal, o->rdzv_port, o->job_id, &own->server) != HORA_OK) return 0;
    if (!o->rdzv_port) {
        snprintf(o->rdzv_host, sizeof(o->rdzv_host), "%s", literal);
        o->rdzv_port = boot_store_server_port(own->server);
    }
    pthread_create(&own->thread, NULL, store_main, own->server);
    fprintf(stderr, "hora-run: rendezvous store for job '%s' at %s:%d\n", o->job_id, o->rdzv_host, o->rdzv_port);
    return 1;
}

static void store_stop(own_store_t *own)
{
    if (!own->server) return;
    boot_store_server_stop(own->server);
    pthread_join(own->thread, NULL);
    boot_store_server_close(own->server);
    own->server = NULL;
}

typedef enum { GEN_DONE, GEN_FAILED, GEN_SIGNAL, GEN_STORE_LOST } gen_outcome_t;

/* Post generation g's failure (the first message posted wins) and read
 * back the one that won into failure. The first poster also tells the next
 * generation how many hosts to expect ("expect"): this one's N less the
 * hosts that leave with this failure, plus those already waiting there, so
 * that the re-formed round closes as soon as they are all in instead of at
 * the settle time, and (--elastic) how many of its hosts come back
 * ("expect_back"): the round waits for those whatever newcomers came. */
static hora_status_t post_failure(boot_store_t *store, const rdzv_world_t *w, int leaving, const char *message,
                                  char *failure, size_t bytes)
{
    char key[64];
    int64_t first;
    int g = w->generation;
    rdzv_key(key, sizeof(key), g, "fail");
    HORA_CHECK(boot_store_add(store, key, 1, &first));
    if (first == 1) {
        int64_t waiting;
        char text[32];
        rdzv_key(key, sizeof(key), g + 1, "join");
        HORA_CHECK(boot_store_add(store, key, 0, &waiting));
        int len = snprintf(text, sizeof(text), "%" PRId64, w->node_count - leaving + waiting);
        rdzv_key(key, sizeof(key), g + 1, "expect");
        HORA_CHECK(boot_store_set(store, key, text, (size_t)len));
        len = snprintf(text, sizeof(text), "%d", w->node_count - leaving);
        rdzv_key(key, sizeof(key), g + 1, "expect_back"); /* --elastic (rdzv.c) */
        HORA_CHECK(boot_store_set(store, key, text, (size_t)len));
        rdzv_key(key, sizeof(key), g, "over");
        HORA_CHECK(boot_store_set(store, key, "failed", 6));
        rdzv_key(key, sizeof(key), g, "failed");
        HORA_CHECK(boot_store_set(store, key, message, strlen(message)));
    }
    rdzv_key(key, sizeof(key), g, "failed");
    void *v = NULL;
    HORA_CHECK(boot_store_get(store, key, 5.0, &v, NULL));
    snprintf(failure, bytes, "%s", (char *)v);
    free(v);
    return HORA_OK;
}

/* The peers' heartbeats as this host saw them: the last counter value of
 * each and when it changed (this host's clock). */
typedef struct {
    int64_t *seen;
    double *changed_at;
    int lost; /* the peer found silent */
} peers_t;

static void peers_free(peers_t *p)
{
    free(p->seen);
    free(p->changed_at);
}

/* Read every peer's heartbeat; *lost 1 (p->lost the peer) when one has not
 * changed for the heartbeat timeout, counted once in "gen<G>/lost" (for
 * leave()). Looking every PEER_LOOK_S, a peer is found between the timeout
 * less a beat and the timeout plus PEER_LOOK_S after it died. */
static hora_status_t peers_look(boot_store_t *store, const run_opts_t *o, const rdzv_world_t *w, double t, peers_t *p,
                                int *lost)
{
    char key[96];
    for (int i = 0; i < w->node_count; i++) {
        if (i == w->node_rank) continue;
        int found;
        void *v = NULL;
        snprintf(key, sizeof(key), "gen%d/beat/%d", w->generation, i);
        HORA_CHECK(boot_store_try_get(store, key, &found, &v, NULL));
        int64_t b = found ? strtoll(v, NULL, 10) : -1;
        free(v);
        if (b != p->seen[i]) {
            p->seen[i] = b;
            p->changed_at[i] = t;
            continue;
        }
        if (t - p->changed_at[i] <= o->heartbeat_timeout_s) continue;
        int64_t first;
        snprintf(key, sizeof(key), "gen%d/lost/%d", w->generation, i);
        HORA_CHECK(boot_store_add(store, key, 1, &first));
        snprintf(key, sizeof(key), "gen%d/lost", w->generation);
        if (first == 1) HORA_CHECK(boot_store_add(store, key, 1, NULL));
        p->lost = i;
        *lost = 1;
        return HORA_OK;
    }
    return HORA_OK;
}

/* Watch one generation until it ends: every local worker exited 0 on every
 * host (DONE), a failure anywhere (FAILED, failure says what), a signal,
 * or the store gone (failure says what). */
static gen_outcome_t supervise(boot_store_t *store, const run_opts_t *o, const rdzv_world_t *w, workers_t *ws,
                               char *failure, size_t failure_bytes)
{
    int g = w->generation, n = w->node_count, me = w->node_rank;
    char key[96], failed_key[64], done_key[64], done_mark[96];
    rdzv_key(failed_key, sizeof(failed_key), g, "failed");
    rdzv_key(done_key, sizeof(done_key), g, "done");
    snprintf(done_mark, sizeof(done_mark), "%s#%d", done_key, n);
    peers_t peers = {.seen = calloc((size_t)n, sizeof(int64_t)), .changed_at = calloc((size_t)n, sizeof(double))};
    if (!peers.seen || !peers.changed_at) {
        peers_free(&peers);
        snprintf(failure, failure_bytes, "host %d: hora-run: out of memory", me);
        return GEN_STORE_LOST;
    }
    double start = boot_now_s(), next_beat = start, next_look = start;
    for (int i = 0; i < n; i++) peers.changed_at[i] = start, peers.seen[i] = -1;
    int64_t beats = 0;
    int counted_done = 0;
    gen_outcome_t outcome;
    char local_failure[512];
    hora_status_t status;
    for (;;) {
        if (stop_signal) {
            char text[256];
            snprintf(text, sizeof(text), "host %d: hora-run was stopped by signal %d (%s)", me, (int)stop_signal,
                     strsignal(stop_signal));
            /* Best effort: the peers learn it here or from the heartbeat. */
            if (post_failure(store, w, 1, text, failure, failure_bytes) != HORA_OK)
                snprintf(failure, failure_bytes, "%s", text);
            outcome = GEN_SIGNAL;
            break;
        }
        int running = workers_poll(ws, me, local_failure, sizeof(local_failure));
        if (local_failure[0]) {
            /* --elastic: a host whose last worker failed leaves with it. */
            status = post_failure(store, w, o->elastic && running == 0, local_failure, failure, failure_bytes);
            if (status != HORA_OK) goto store_lost;
            outcome = GEN_FAILED;
            break;
        }
        if (running == 0 && !counted_done) {
            if ((status = boot_store_count(store, done_key, NULL)) != HORA_OK) goto store_lost;
            counted_done = 1;
        }
        int found;
        void *v = NULL;
        if ((status = boot_store_try_get(store, failed_key, &found, &v, NULL)) != HORA_OK) goto store_lost;
        if (found) {
            snprintf(failure, failure_bytes, "%s", (char *)v);
            free(v);
            outcome = GEN_FAILED;
            break;
        }
        if ((status = boot_store_try_get(store, done_mark, &found, &v, NULL)) != HORA_OK) goto store_lost;
        free(v);
        if (found) {
            /* Hosts that came late learn the job is over (rdzv.c). */
            snprintf(key, sizeof(key), "gen%d/over", g);
            if ((status = boot_store_set(store, key, "done", 4)) != HORA_OK) goto store_lost;
            outcome = GEN_DONE;
            break;
        }
        double t = boot_now_s();
        if (t >= next_beat) {
            next_beat = t + HEARTBEAT_S;
            char text[32];
            snprintf(key, sizeof(key), "gen%d/beat/%d", g, me);
            int len = snprintf(text, sizeof(text), "%" PRId64, ++beats);
            if ((status = boot_store_set(store, key, text, (size_t)len)) != HORA_OK) goto store_lost;
        }
        if (t >= next_look) {
            next_look = t + PEER_LOOK_S;
            int lost = 0;
            if ((status = peers_look(store, o, w, t, &peers, &lost)) != HORA_OK) goto store_lost;
            if (lost) {
                char text[256];
                snprintf(text, sizeof(text), "host %d lost: no heartbeat for %.1f s (--heartbeat-timeout %g)",
                         peers.lost, t - peers.changed_at[peers.lost], o->heartbeat_timeout_s);
                if ((status = post_failure(store, w, 1, text, failure, failure_bytes)) != HORA_OK) goto store_lost;
                outcome = GEN_FAILED;
                break;
            }
        }
        workers_pump(ws, TICK_S);
    }
    peers_free(&peers);
    return outcome;
store_lost:
    snprintf(failure, failure_bytes, "%s", status_message());
    peers_free(&peers);
    return GEN_STORE_LOST;
}

/* Count this host out of generation g; the host that runs the store waits
 * (up to a few seconds) for every host still there to have done so before
 * the store goes away. */
static void leave(boot_store_t *store, const rdzv_world_t *w, int owns_store)
{
    char key[64];
    rdzv_key(key, sizeof(key), w->generation, "exit");
    if (boot_store_count(store, key, NULL) != HORA_OK || !owns_store) return;
    int64_t lost = 0;
    char lost_key[64];
    rdzv_key(lost_key, sizeof(lost_key), w->generation, "lost");
    boot_store_add(store, lost_key, 0, &lost);
    boot_store_wait_count(store, key, w->node_count - lost, 5.0);
}

/* --elastic: this host has no worker left but runs the store, which the
 * hosts still in the job need. Keep it for them, from generation g on,
 * watching each generation as its members do (heartbeats: a generation
 * whose hosts all died is ended here, no one else would), until one ends
 * the job ("over" = "done"; then the hosts' exits are awaited, as leave()
 * does), no generation forms within the join and settle time (no host is
 * left to form it), or a signal comes. */
static void store_keep(boot_store_t *store, const run_opts_t *o, int g)
{
    for (;; g++) {
        char key[64];
        int64_t n;
        void *v = NULL;
        rdzv_key(key, sizeof(key), g, "closed");
        if (rdzv_get(store, key, o->join_timeout_s + o->settle_s + 1, &stop_signal, &v) != HORA_OK) return;
        n = strtoll(v, NULL, 10);
        free(v);
        rdzv_world_t w = {.generation = g, .node_rank = -1, .node_count = (int)n};
        peers_t peers = {.seen = calloc((size_t)n, sizeof(int64_t)), .changed_at = calloc((size_t)n, sizeof(double))};
        if (!peers.seen || !peers.changed_at) {
            peers_free(&peers);
            return;
        }
        double next_look = boot_now_s();
        for (int i = 0; i < (int)n; i++) peers.changed_at[i] = next_look, peers.seen[i] = -1;
        int over = 0; /* 1 failed, 2 done */
        rdzv_key(key, sizeof(key), g, "over");
        while (!stop_signal) {
            v = NULL;
            hora_status_t status = rdzv_get(store, key, TICK_S, &stop_signal, &v);
            if (status == HORA_OK) {
                over = strcmp(v, "done") == 0 ? 2 : 1;
                free(v);
                break;
            }
            if (status != HORA_ERR_TIMEOUT) break;
            double t = boot_now_s();
            if (t < next_look) continue;
            next_look = t + PEER_LOOK_S;
            int lost = 0;
            char failure[512];
            if (peers_look(store, o, &w, t, &peers, &lost) != HORA_OK) break;
            if (lost) {
                char text[256];
                snprintf(text, sizeof(text), "host %d lost: no heartbeat for %.1f s (--heartbeat-timeout %g)",
                         peers.lost, t - peers.changed_at[peers.lost], o->heartbeat_timeout_s);
                if (post_failure(store, &w, 1, text, failure, sizeof(failure)) != HORA_OK) break;
            }
        }
        peers_free(&peers);
        if (over != 1) {
            if (over == 2) {
                int64_t lost = 0;
                rdzv_key(key, sizeof(key), g, "lost");
                boot_store_add(store, key, 0, &lost);
                rdzv_key(key, sizeof(key), g, "exit");
                boot_store_wait_count(store, key, n - lost, 5.0);
                fprintf(stderr, "hora-run: generation %d finished the job; the rendezvous store goes away\n", g);
            }
            return;
        }
    }
}

/* --elastic: "gen<G>/assign/<H>.<S>" = "rank=R size=N local_rank=L
 * local_size=K node_rank=n node_count=c" for each of this host's K workers
 * in generation G (host H, slot S): the running ones as workers_renumber
 * numbered them (ws), or slots 0..K-1 about to start (ws NULL; the same as
 * their environment). A worker kept from generation G - 1 waits for its key
 * in hora_init. */
static hora_status_t assignments_publish(boot_store_t *store, const rdzv_world_t *w, int host_id, const workers_t *ws,
                                         int k)
{
    for (int slot = 0; slot < (ws ? ws->count : k); slot++) {
        const worker_t *wk = ws ? &ws->w[slot] : NULL;
        if (wk && wk->pid <= 0) continue;
        char key[96], text[160];
        snprintf(key, sizeof(key), "gen%d/assign/%d.%d", w->generation, host_id, slot);
        int len = snprintf(text, sizeof(text), "rank=%d size=%d local_rank=%d local_size=%d node_rank=%d node_count=%d",
                           wk ? wk->rank : w->rank_base + slot, w->world_size, wk ? wk->local_rank : slot, k,
                           w->node_rank, w->node_count);
        HORA_CHECK(boot_store_set(store, key, text, (size_t)len));
    }
    return HORA_OK;
}

int main(int argc, char **argv)
{
    run_opts_t o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    own_store_t own = {0};
    int owns_store = store_start(&o, &own);
    boot_store_t *store = NULL;
    if (boot_store_connect_cancel(o.rdzv_host, o.rdzv_port, o.job_id, o.join_timeout_s, &stop_signal, &store) !=
        HORA_OK) {
        store_stop(&own);
        if (stop_signal) return 128 + stop_signal;
        fprintf(stderr, "hora-run: %s\n", status_message());
        return EXIT_RDZV;
    }
    rdzv_opts_t ro = {.min_nodes = o.min_nodes,
                      .max_nodes = o.max_nodes,
                      .nproc = o.nproc,
                      .join_timeout_s = o.join_timeout_s,
                      .settle_s = o.settle_s,
                      .order_key = -1,
                      .stop = &stop_signal};
    int g, restarts = 0, host_id = 0;
    workers_t ws = {0};
    int started = 0; /* ws holds workers (--elastic: kept across generations) */
    rc = EXIT_JOB_FAILED;
    if (rdzv_first_generation(store, &g) != HORA_OK) {
        fprintf(stderr, "hora-run: %s\n", status_message());
        rc = EXIT_RDZV;
        goto out;
    }
    if (o.elastic) {
        /* This host's number in the job, for its workers' ids (H.S). */
        int64_t hosts;
        if (boot_store_add(store, "hosts", 1, &hosts) != HORA_OK) {
            fprintf(stderr, "hora-run: %s\n", status_message());
            goto out;
        }
        host_id = (int)hosts - 1;
        ro.order_key = host_id; /* the hosts already there keep the low ranks */
        fprintf(stderr, "hora-run: --elastic: this is host %d of the job (worker ids %d.0-%d.%d)\n", host_id, host_id,
                host_id, o.nproc - 1);
    }
    for (;;) {
        rdzv_world_t w;
        ro.nproc = started ? ws.running : o.nproc; /* --elastic: the live workers */
        ro.returning = started;
        hora_status_t status = rdzv_join(store, &ro, g, &w);
        if (status != HORA_OK) {
            if (stop_signal) {
                rc = 128 + stop_signal;
            } else {
                fprintf(stderr, "%s%s\n", strncmp(status_message(), "hora-run:", 9) ? "hora-run: " : "",
                        status_message());
                rc = EXIT_RDZV;
            }
            break;
        }
        fprintf(stderr, "hora-run: generation %d: host %d of %d, ranks %d-%d of %d\n", w.generation, w.node_rank,
                w.node_count, w.rank_base, w.rank_base + ro.nproc - 1, w.world_size);
        workers_env_t env = {.rank_base = w.rank_base,
                             .world_size = w.world_size,
                             .local_size = ro.nproc,
                             .node_rank = w.node_rank,
                             .node_count = w.node_count,
                             .generation = w.generation,
                             .rdzv_host = o.rdzv_host,
                             .rdzv_port = o.rdzv_port,
                             .job_id = o.job_id,
                             .prefix_output = o.prefix_output,
                             .elastic = o.elastic,
                             .host_id = host_id,
                             .join_timeout_s = o.join_timeout_s,
                             .elastic_grace_s = o.heartbeat_timeout_s + 2};
        char failure[1024] = "";
        gen_outcome_t outcome;
        if (started) workers_renumber(&ws, w.rank_base);
        /* --elastic: the places, before a worker that starts may look. */
        if (o.elastic && assignments_publish(store, &w, host_id, started ? &ws : NULL, ro.nproc) != HORA_OK) {
            snprintf(failure, sizeof(failure), "%s", status_message());
            outcome = GEN_STORE_LOST;
        } else {
            hora_status_t start_status = HORA_OK;
            if (!started) {
                start_status = workers_start(&ws, &env, o.argv);
                started = 1; /* ws to free, also when the start failed */
            }
            if (start_status != HORA_OK) {
                char text[STATUS_MESSAGE_BYTES + 32];
                snprintf(text, sizeof(text), "host %d: %s", w.node_rank, status_message());
                outcome =
                    post_failure(store, &w, 0, text, failure, sizeof(failure)) == HORA_OK ? GEN_FAILED : GEN_STORE_LOST;
            } else {
                outcome = supervise(store, &o, &w, &ws, failure, sizeof(failure));
            }
        }
        if (o.elastic && outcome == GEN_FAILED && restarts < o.max_restarts) {
            /* Keep the workers that run, reap those that ended (the failure
             * names the first); they form the next generation. */
            int live = workers_poll(&ws, w.node_rank, NULL, 0);
            if (live == 0) {
                fprintf(stderr,
                        "hora-run: generation %d failed: %s; host %d: every worker exited or failed, this host "
                        "leaves the job%s\n",
                        w.generation, failure, host_id,
                        owns_store ? " (it keeps the rendezvous store for the others until the job ends)" : "");
                leave(store, &w, 0);
                if (owns_store) store_keep(store, &o, w.generation + 1);
                rc = EXIT_JOB_FAILED;
                break;
            }
            restarts++;
            fprintf(stderr,
                    "hora-run: generation %d failed: %s; re-forming with the %d live worker%s of this host (restart "
                    "%d of %d)\n",
                    w.generation, failure, live, live == 1 ? "" : "s", restarts, o.max_restarts);
            g = w.generation + 1;
            continue;
        }
        workers_stop(&ws, o.stop_grace_s);
        workers_free(&ws);
        started = 0;
        if (outcome == GEN_DONE) {
            fprintf(stderr, "hora-run: every worker of generation %d exited 0\n", w.generation);
            leave(store, &w, owns_store);
            rc = 0;
            break;
        }
        if (outcome == GEN_SIGNAL) {
            fprintf(stderr, "hora-run: stopped by signal %d; workers stopped\n", (int)stop_signal);
            leave(store, &w, owns_store);
            rc = 128 + stop_signal;
            break;
        }
        if (outcome == GEN_STORE_LOST) {
            fprintf(stderr, "hora-run: generation %d: %s; workers stopped\n", w.generation, failure);
            rc = EXIT_JOB_FAILED;
            break;
        }
        if (restarts >= o.max_restarts) {
            fprintf(stderr, "hora-run: generation %d failed: %s; no restarts left (--max-restarts %d)\n", w.generation,
                    failure, o.max_restarts);
            leave(store, &w, owns_store);
            rc = EXIT_JOB_FAILED;
            break;
        }
        restarts++;
        fprintf(stderr, "hora-run: generation %d failed: %s; restarting (restart %d of %d)\n", w.generation, failure,
                restarts, o.max_restarts);
        g = w.generation + 1;
    }
out:
    if (started) {
        /* --elastic: the rendezvous of the next generation failed (or a
         * signal came) with workers still running. */
        workers_stop(&ws, o.stop_grace_s);
        workers_free(&ws);
    }
    boot_store_close(store);
    store_stop(&own);
    return rc;
}
