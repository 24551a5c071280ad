/* coord.c - the coordinator thread: its cycle, the response cache, start
 * and stop (coord_queue.c: the queue between it and the application).
 *
 * Each cycle (HORA_CYCLE_TIME_MS) every rank:
 *  1. takes the requests framework threads enqueued since the last cycle;
 *     a request the response cache knows (same name, same parameters) waits
 *     on the cache path under its cache id, any other goes to the slow path;
 *  2. joins ONE agreement on a bit vector (coord_agree.c: a bitwise-OR
 *     all-reduce on the coordinator's channel with the collectives' deadline,
 *     ANDs complemented; a process set's: a star of MPI messages): an AND part (bit i:
 *     "cache entry i is ready here, or I have joined"), an OR part (bit i:
 *     "some rank really requested i"), another OR part (bit i: "entry i is
 *     invalid: some rank submitted that name with other parameters, or waited
 *     on it too long") and flag words (AND: "I have nothing for the slow path";
 *     OR: "rank 0 has new autotune settings", "I am shutting down");
 *  3. runs, in cache-id order, the entries ready everywhere: no gather, no
 *     broadcast (the fast path);
 *  4. only when some rank has uncached requests: hands the request lists to
 *     rank 0, which merges them into its table, validates, orders and fuses
 *     what became ready everywhere and gives every rank the response list
 *     (the slow path, coord_negotiate.c; its exchange coord_slow.c, with the
 *     same deadline); every rank then runs it in the same order.
 * Everything a rank does to its cache depends only on the responses, which
 * are identical everywhere, so cache ids agree without ever being sent. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/coord_internal.h"
#include "coord/flight.h"
#include "coord/stack.h"
#include "coord/straggler.h"

#define COORD_FLAG_NOTHING_UNCACHED 1ull /* AND word */
#define COORD_FLAG_SETTINGS 1ull         /* OR word */
/* OR word: some rank called hora_shutdown. Every coordinator stops in that
 * cycle: a request that needs the stopping rank could never complete, and
 * waiting for every rank to agree kept a failed rank's peers waiting for
 * their gradients while it waited in hora_shutdown. */
#define COORD_FLAG_STOP 2ull

int64_t coord_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int coord_kind_cacheable(uint32_t kind)
{
    /* Not allgather and alltoall, whose counts differ between ranks, nor
     * barrier, which moves nothing. */
    return kind == COORD_KIND_ALLREDUCE || kind == COORD_KIND_BROADCAST || kind == COORD_KIND_REDUCESCATTER;
}

const char *coord_kind_name(uint32_t kind)
{
    switch (kind) {
    case COORD_KIND_ALLREDUCE: return "allreduce";
    case COORD_KIND_BROADCAST: return "broadcast";
    case COORD_KIND_ALLGATHER: return "allgather";
    case COORD_KIND_JOIN: return "join";
    case COORD_KIND_ERROR: return "error";
    case COORD_KIND_SHUTDOWN: return "shutdown";
    case COORD_KIND_BARRIER: return "barrier";
    case COORD_KIND_ALLTOALL: return "alltoall";
    case COORD_KIND_REDUCESCATTER: return "reducescatter";
    }
    return "unknown";
}

/* ------------------------------------------------------------ completion */

/* A request leaves the coordinator's tables and completes. */
void coord_finish_pending(struct coord *c, struct hora_request *req, hora_status_t status, const char *error)
{
    if (coord_map_get(&c->pending, req->name) == req) coord_map_remove(&c->pending, req->name);
    if (req->cache_id >= 0) {
        for (int i = 0; i < c->cached_count; i++)
            if (c->cached[i] == req) {
                c->cached[i] = c->cached[--c->cached_count];
                break;
            }
        req->cache_id = -1;
    }
    /* A cache waiter evicted when no slow path runs waits in the uncached
     * list for the next one; a refusal of its name (another rank's
     * submission, while a rank has joined) may end it first: it must not be
     * sent after that. */
    for (struct hora_request **link = &c->uncached, *prev = NULL; *link; prev = *link, link = &(*link)->next)
        if (*link == req) {
            *link = req->next;
            if (c->uncached_tail == req) c->uncached_tail = prev;
            req->next = NULL;
            break;
        }
    if (req == c->join_req) c->join_req = NULL;
    coord_complete(c, req, status, error);
}

/* ------------------------------------------------------------------ cache */

static int coord_meta_equal(const struct coord_meta *a, const struct coord_meta *b)
{
    return !memcmp(a, b, sizeof(*a));
}

/* FIFO: the order requests were submitted becomes the order rank 0 sees
 * them, the response order, the cache-id order and the layout of a fused
 * buffer - which then matches a gradient arena filled in the same order, so
 * fusion runs without copies. */
static void coord_uncached_push(struct coord *c, struct hora_request *req)
{
    req->next = NULL;
    if (c->uncached_tail)
        c->uncached_tail->next = req;
    else
        c->uncached = req;
    c->uncached_tail = req;
}

/* Drop entry id; requests waiting on it go to the slow path instead. */
static void coord_cache_evict(struct coord *c, int id)
{
    struct coord_cache_entry *e = &c->cache[id];
    if (!e->valid) return;
    for (int i = 0; i < c->cached_count;) {
        struct hora_request *req = c->cached[i];
        if (req->cache_id == id) {
            req->cache_id = -1;
            c->cached[i] = c->cached[--c->cached_count];
            coord_uncached_push(c, req);
        } else {
            i++;
        }
    }
    coord_map_remove(&c->cache_index, e->name);
    free(e->name);
    memset(e, 0, sizeof(*e));
}

/* Called for every successful response from the slow path, on every rank in
 * the same order: the same entries get the same ids everywhere. */
void coord_cache_store(struct coord *c, const char *name, const struct coord_meta *meta)
{
    if (c->cache_capacity == 0) return;
    uintptr_t slot = (uintptr_t)coord_map_get(&c->cache_index, name);
    int id;
    if (slot) {
        id = (int)slot - 1;
    } else {
        /* Free slot, else the least recently used (lowest id on ties). */
        id = 0;
        for (int i = 0; i < c->cache_capacity; i++) {
            if (!c->cache[i].valid) {
                id = i;
                break;
            }
            if (c->cache[i].last_used < c->cache[id].last_used) id = i;
        }
        coord_cache_evict(c, id);
        c->cache[id].name = strdup(name);
        if (!c->cache[id].name || coord_map_put(&c->cache_index, name, (void *)(uintptr_t)(id + 1))) {
            free(c->cache[id].name);
            c->cache[id].name = NULL;
            return; /* out of memory: simply not cached, on this rank only -> see below */
        }
        c->cache[id].valid = 1;
    }
    c->cache[id].meta = *meta;
    c->cache[id].last_used = ++c->cache_tick;
}

/* ------------------------------------------------------------------ cycle */

static void coord_take_incoming(struct coord *c, int *stop)
{
    pthread_mutex_lock(&c->lock);
    struct hora_request *list = c->incoming;
    c->incoming = c->incoming_tail = NULL;
    *stop = c->stop_requested;
    pthread_mutex_unlock(&c->lock);

    for (struct hora_request *req = list, *next; req; req = next) {
        next = req->next;
        req->cache_id = -1;
        if (coord_map_put(&c->pending, req->name, req)) {
            coord_complete(c, req, HORA_ERR_NO_MEMORY, "out of memory in the coordinator");
            continue;
        }
        if (req->meta.kind == COORD_KIND_JOIN) {
            c->joined = 1;
            c->join_req = req;
            coord_uncached_push(c, req);
            continue;
        }
        uintptr_t slot = 0;
        if (c->cache_capacity > 0 && !req->group && coord_kind_cacheable(req->meta.kind))
            slot = (uintptr_t)coord_map_get(&c->cache_index, req->name);
        if (!slot) {
            coord_uncached_push(c, req);
            continue;
        }
        int id = (int)slot - 1;
        if (!coord_meta_equal(&c->cache[id].meta, &req->meta)) {
            /* Parameters changed: the entry is invalidated on every rank. */
            c->vec[2 * c->words + id / 64] |= 1ull << (id % 64);
            coord_uncached_push(c, req);
            continue;
        }
        if (c->cached_count == c->cached_cap) {
            int cap = c->cached_cap ? 2 * c->cached_cap : 64;
            struct hora_request **n = realloc(c->cached, (size_t)cap * sizeof(*n));
            if (!n) {
                coord_uncached_push(c, req);
                continue;
            }
            c->cached = n;
            c->cached_cap = cap;
        }
        req->cache_id = id;
        req->cached_since_us = coord_now_us();
        c->cached[c->cached_count++] = req;
    }
}

static void coord_fail_everything(struct coord *c, hora_status_t status, const char *why)
{
    pthread_mutex_lock(&c->lock);
    c->stopped = 1;
    c->stop_status = status;
    snprintf(c->stop_reason, sizeof(c->stop_reason), "%s", why);
    struct hora_request *list = c->incoming;
    c->incoming = c->incoming_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    for (struct hora_request *req = list, *next; req; req = next) {
        next = req->next;
        coord_complete(c, req, status, why);
    }
    /* Everything still pending here, whichever path it waited on. */
    for (size_t b = 0; b < c->pending.bucket_count; b++)
        for (struct coord_map_node *n = c->pending.buckets[b]; n; n = n->next)
            coord_complete(c, n->value, status, why);
    c->cached_count = 0;
    c->uncached = c->uncached_tail = NULL;
    c->join_req = NULL;
    coord_flight_fail(c, status);
}

static void coord_apply_settings(struct coord *c, const struct coord_settings *s)
{
    c->settings = *s;
    log_info("coordinator settings: fusion threshold %zu B, cycle %.3g ms, chunk %zu B", s->fusion_threshold,
             s->cycle_time_ms, s->chunk_bytes);
}


/* One cycle. Returns 0 to go on, 1 when the coordinator must stop. */
static int coord_cycle(struct coord *c)
{
    const int W = c->words;
    int stop = 0;
    int64_t start_us = coord_now_us();
    struct coord_responses list = {0};
    hora_status_t status = HORA_OK;

    memset(c->vec, 0, (size_t)(3 * W + 2) * sizeof(uint64_t));
    coord_take_incoming(c, &stop);
    stack_channel_poll(c->stacks, start_us);
    /* A rank aborted (this one, or a peer whose notice has come): stop now,
     * without the others. */
    status = coll_check_abort(c->coll);
    if (status < 0) {
        coord_flight_dump(c, "abort");
        coord_fail_everything(c, status, hora_last_error());
        return 1;
    }
    /* A request waiting on the cache path too long is demoted to the slow path
     * (via invalidation) so rank 0's stall inspector can see who is missing. */
    for (int i = 0; i < c->cached_count; i++) {
        struct hora_request *req = c->cached[i];
        if (start_us - req->cached_since_us > c->demote_us) c->vec[2 * W + req->cache_id / 64] |= 1ull << (req->cache_id % 64);
    }
    for (int i = 0; i < c->cached_count; i++) {
        int id = c->cached[i]->cache_id;
        c->vec[id / 64] |= 1ull << (id % 64);
        c->vec[W + id / 64] |= 1ull << (id % 64);
    }
    /* A joined rank is ready for every cached allreduce (it contributes
     * zeros). Nothing else runs while a rank has joined: it evicts the other
     * entries, so their requests go to rank 0, which refuses them. */
    if (c->joined)
        for (int id = 0; id < c->cache_capacity; id++)
            if (c->cache[id].valid) {
                int word = (c->cache[id].meta.kind == COORD_KIND_ALLREDUCE ? 0 : 2 * W) + id / 64;
                c->vec[word] |= 1ull << (id % 64);
            }
    int slow = c->uncached != NULL;
    /* Rank 0 sees stalls only in the slow path: while names wait in its table,
     * force one now and then even when nobody has anything new. */
    if (c->rank == 0 && c->order_head) {
        if (start_us - c->last_inspect_us >= coord_inspect_period_us(c)) {
            slow = 1;
            c->last_inspect_us = start_us;
        }
    }
    c->vec[3 * W] = slow ? 0 : COORD_FLAG_NOTHING_UNCACHED;
    c->vec[3 * W + 1] = (c->settings_changed ? COORD_FLAG_SETTINGS : 0) | (stop ? COORD_FLAG_STOP : 0);

    straggler_fill(c->straggler, c->vec, c->sync_us);

    status = coord_allreduce_bits(c);
    if (status < 0) {
        coord_fail_everything(c, status, hora_last_error());
        return 1;
    }
    c->sync_us = coord_now_us();
    straggler_collect(c->straggler, c->vec, c->sync_us, c->tl);
    if (c->vec[3 * W + 1] & COORD_FLAG_STOP) {
        coord_fail_everything(c, HORA_ERR_SHUTDOWN,
                              stop ? "hora_shutdown was called"
                                   : "another rank called hora_shutdown before this request ran on every rank");
        return 1;
    }
    /* Invalidations first: their waiters move to the slow path (next cycle). */
    for (int id = 0; id < c->cache_capacity; id++)
        if (c->vec[2 * W + id / 64] >> (id % 64) & 1) coord_cache_evict(c, id);
    /* Fast path: entries ready on every rank and really requested by one. */
    for (int id = 0; id < c->cache_capacity; id++) {
        uint64_t bit = 1ull << (id % 64);
        if (!(c->vec[id / 64] & c->vec[W + id / 64] & bit) || !c->cache[id].valid) continue;
        struct coord_response *r = coord_responses_add(&list);
        if (!r || !(r->names = calloc(1, sizeof(char *))) || !(r->metas = calloc(1, sizeof(struct coord_meta))) ||
            !(r->names[0] = strdup(c->cache[id].name))) {
            coord_responses_clear(&list);
            coord_fail_everything(c, HORA_ERR_NO_MEMORY, "coordinator: out of memory");
            return 1;
        }
        r->kind = c->cache[id].meta.kind;
        r->ntensors = 1;
        r->metas[0] = c->cache[id].meta;
        r->cache_id = id;
    }
    coord_fuse(c, &list);
    if (!(c->vec[3 * W] & COORD_FLAG_NOTHING_UNCACHED)) {
        struct coord_responses slow = {0};
        status = coord_slow_path(c, &slow);
        if (status < 0) {
            coord_responses_clear(&list);
            coord_responses_clear(&slow);
            coord_fail_everything(c, status, hora_last_error());
            return 1;
        }
        for (int i = 0; i < slow.count; i++) {
            struct coord_response *r = coord_responses_add(&list);
            if (!r) {
                coord_responses_clear(&slow);
                coord_responses_clear(&list);
                coord_fail_everything(c, HORA_ERR_NO_MEMORY, "coordinator: out of memory");
                return 1;
            }
            *r = slow.items[i];
        }
        free(slow.items);
    }
    if (c->vec[3 * W + 1] & COORD_FLAG_SETTINGS) {
        /* Every rank must fuse and chunk alike from here on: a rank that
         * missed the new settings cannot go on. */
        struct coord_settings s = c->next_settings;
        status = coord_slow_settings(c, &s);
        c->settings_changed = 0;
        if (status < 0) {
            coord_responses_clear(&list);
            coord_fail_everything(c, status, hora_last_error());
            return 1;
        }
        coord_apply_settings(c, &s);
    }

    c->cycle_bytes = 0;
    int finished = 0;
    coord_flight_negotiated(c, &list);
    for (int i = 0; i < list.count && !finished; i++) {
        if (list.items[i].kind == COORD_KIND_SHUTDOWN) {
            coord_flight_dump(c, "shutdown");
            coord_fail_everything(c, HORA_ERR_SHUTDOWN, list.items[i].error ? list.items[i].error : "shut down");
            finished = 1;
            break;
        }
        status = coord_execute(c, &list.items[i]);
        if (status < 0) {
            coord_fail_everything(c, status, hora_last_error());
            finished = 1;
        }
    }
    coord_responses_clear(&list);
    if (finished) return 1;

    int64_t end_us = coord_now_us();
    if (c->at && c->cycle_bytes && !c->settings_changed) {
        struct autotune_params next;
        if (autotune_record(c->at, c->cycle_bytes, (double)(end_us - start_us) * 1e-6, &next)) {
            c->next_settings.fusion_threshold = next.fusion_threshold;
            c->next_settings.cycle_time_ms = next.cycle_time_ms;
            c->next_settings.chunk_bytes = next.chunk_bytes;
            c->settings_changed = 1;
        }
    }
    coord_nap(c, start_us, coord_inspect_period_us(c));
    return 0;
}

static void *coord_main(void *arg)
{
    struct coord *c = arg;
    while (!coord_cycle(c)) {}
    return NULL;
}

/* ------------------------------------------------------------ start, stop */

/* The buffers of agreements abandoned after a failure: kept to the end of
 * the process (MPI may progress their requests from any later call, and
 * write into them), reachable so that LeakSanitizer does not count them. */
struct coord_abandoned {
    struct coord_abandoned *next;
    void *buf;
};
static struct coord_abandoned *coord_abandoned_list;
static pthread_mutex_t coord_abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

static void coord_abandon(void *buf)
{
    struct coord_abandoned *a = buf ? malloc(sizeof(*a)) : NULL;
    if (!a) return; /* then it leaks unreachable, which is still safe */
    a->buf = buf;
    pthread_mutex_lock(&coord_abandoned_lock);
    a->next = coord_abandoned_list;
    coord_abandoned_list = a;
    pthread_mutex_unlock(&coord_abandoned_lock);
}

void coord_keep_in_flight(struct coord *c, void *buf)
{
    c->agree_in_flight = 1; /* the communicator stays too */
    coord_abandon(buf);
}

/* What coord_start allocates before anything that needs MPI, and c itself. */
static void coord_free_tables(struct coord *c)
{
    if (!c->members) flight_free();
    straggler_free(c->straggler);
    if (c->agree_in_flight) {
        coord_abandon(c->vec);
        coord_abandon(c->agree);
        coord_abandon(c->agree_reqs);
    } else {
        free(c->vec);
        free(c->agree);
        free(c->agree_reqs);
    }
    free(c->agree_silent);
    free(c->cache);
    free(c->cached);
    free(c->joined_ranks);
    free(c->members);
    coord_map_free(&c->inflight);
    coord_map_free(&c->pending);
    coord_map_free(&c->cache_index);
    coord_map_free(&c->table);
    pthread_cond_destroy(&c->done_cond);
    pthread_cond_destroy(&c->work_cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

hora_status_t coord_start(const struct coord_env *env, struct coord **out)
{
    const struct config *cfg = env->cfg;
    hora_status_t status;
    int err;

    struct coord *c = calloc(1, sizeof(*c));
    if (!c) return status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->done_cond, NULL);
    pthread_cond_init(&c->work_cond, NULL);
    c->cfg = cfg;
    c->coll = env->coll;
    c->pool = env->pool;
    c->dev = env->dev;
    MPI_Comm_rank(env->world, &c->rank);
    MPI_Comm_size(env->world, &c->size);
    c->set_id = env->set_id;
    if (env->members) {
        c->members = malloc(sizeof(int) * (size_t)c->size);
        if (!c->members) {
            status = status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
            goto err_free;
        }
        memcpy(c->members, env->members, sizeof(int) * (size_t)c->size);
    }
    c->cache_capacity = cfg->cache_capacity;
    /* The cache's bits, and the straggler report's slots (straggler.h) past
     * them in each part: the parts are merged word by word, whatever they hold. */
    const int cache_words = (c->cache_capacity + 63) / 64;
    c->words = cache_words + (c->members ? 0 : straggler_words(cfg, c->size));
    c->settings.fusion_threshold = cfg->fusion_threshold;
    c->settings.cycle_time_ms = cfg->cycle_time_ms;
    c->settings.chunk_bytes = cfg->chunk_bytes;
    c->defer_us = (int64_t)(cfg->defer_ms * 1000.0);
    c->demote_us = (int64_t)(cfg->stall_check_s * 0.5e6);
    if (c->demote_us > 5000000) c->demote_us = 5000000;
    c->last_joined = -1;
    if (!c->members && cfg->fault_stop[0]) {
        status = coord_fault_parse(c, cfg->fault_stop);
        if (status < 0) goto err_free;
    }
    if (!c->members) {
        status = flight_init(cfg, c->rank, c->size);
        if (status < 0) goto err_free;
    }
    c->flight = flight_process();
    if (coord_map_init(&c->inflight, 1024) || coord_map_init(&c->pending, 1024) ||
        coord_map_init(&c->cache_index, 1024) || coord_map_init(&c->table, 1024)) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
        goto err_free;
    }
    c->vec = calloc((size_t)(3 * c->words + 2), sizeof(uint64_t));
    /* A process set's star (the world's agreement and slow path are
     * collectives on its channel, which need none of these): rank 0 receives
     * every member's vector and sends one reply (vector + verdict), the
     * others receive the reply; a request per member. */
    const int star = c->members != NULL;
    if (star) {
        c->agree = calloc((size_t)(c->rank == 0 ? c->size + 1 : 1) * (size_t)(3 * c->words + 3), sizeof(uint64_t));
        c->agree_reqs = malloc((size_t)(c->size > 2 ? c->size : 2) * sizeof(MPI_Request));
        c->agree_silent = calloc((size_t)c->size, sizeof(int));
    }
    c->cache = calloc((size_t)(c->cache_capacity ? c->cache_capacity : 1), sizeof(*c->cache));
    c->joined_ranks = calloc((size_t)c->size, 1);
    if (!c->vec || (star && (!c->agree || !c->agree_reqs || !c->agree_silent)) || !c->cache || !c->joined_ranks) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
        goto err_free;
    }
    if (c->words > cache_words) {
        status = straggler_init(&c->straggler, cfg, c->rank, c->size, c->words + cache_words);
        if (status < 0) goto err_free;
    }
    err = MPI_Comm_dup(env->world, &c->comm);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, "MPI_Comm_dup(coordinator)");
        goto err_free;
    }
    for (int r = 0; star && r < (c->size > 2 ? c->size : 2); r++) c->agree_reqs[r] = MPI_REQUEST_NULL;
    if (!c->members) {
        /* A rank asked for its stack answers within a few inspection periods. */
        status = stack_channel_open(&c->stacks, cfg, env->world, 1.0 + 4e-6 * (double)coord_inspect_period_us(c));
        if (status < 0) goto err_free_comm;
    }
    if (c->rank == 0 && cfg->timeline[0]) {
        /* A process set's timeline beside the world's. */
        char path[sizeof(cfg->timeline) + 16];
        snprintf(path, sizeof(path), c->members ? "%s.set%d" : "%s", cfg->timeline, c->set_id);
        status = timeline_open(&c->tl, path, (size_t)cfg->timeline_max_mb << 20);
        if (status < 0) goto err_free_comm;
    }
    /* Autotune tunes the world's data path (coll's channels); a set's MPI
     * path keeps the settings. */
    if (c->rank == 0 && cfg->autotune && !c->members) {
        struct autotune_config ac = {
            .initial = {c->settings.fusion_threshold, c->settings.cycle_time_ms, c->settings.chunk_bytes},
            .fixed = (config_is_set("HORA_FUSION_THRESHOLD") ? AUTOTUNE_FIX_FUSION : 0) |
                     (config_is_set("HORA_CYCLE_TIME_MS") ? AUTOTUNE_FIX_CYCLE : 0) |
                     (config_is_set("HORA_CHUNK_BYTES") ? AUTOTUNE_FIX_CHUNK : 0),
            .log_path = cfg->autotune_log[0] ? cfg->autotune_log : NULL,
        };
        status = autotune_init(&c->at, &ac);
        if (status < 0) goto err_free_timeline;
    }
    if (pthread_create(&c->thread, NULL, coord_main, c)) {
        status = status_fail(HORA_ERR_SYSTEM, "cannot start the coordinator thread: %s", strerror(errno));
        goto err_free_autotune;
    }
    *out = c;
    return HORA_OK;

err_free_autotune:
    autotune_free(c->at);
err_free_timeline:
    timeline_close(c->tl);
err_free_comm:
    stack_channel_close(c->stacks);
    MPI_Comm_free(&c->comm);
err_free:
    coord_free_tables(c);
    return status;
}

void coord_abort(struct coord *c, double wait_s)
{
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    const int ended = c->thread_joined || c->abandoned;
    c->abort_requested = 1;
    pthread_cond_signal(&c->work_cond);
    pthread_mutex_unlock(&c->lock);
    if (ended) return;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    int64_t ns = (int64_t)deadline.tv_nsec + (int64_t)(wait_s * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    if (pthread_timedjoin_np(c->thread, NULL, &deadline) == 0) {
        c->thread_joined = 1;
        return;
    }
    /* Stuck in a call that does not look at notices: leave it running, and
     * fail what the application waits for from here. */
    log_error("hora_abort: the coordinator thread did not stop within %.1f s; leaving it", wait_s);
    pthread_mutex_lock(&c->lock);
    c->abandoned = 1;
    c->stopped = 1;
    c->stop_status = HORA_ERR_SHUTDOWN;
    snprintf(c->stop_reason, sizeof(c->stop_reason), "hora_abort was called on this rank");
    size_t n = 0;
    struct hora_request **list = malloc((c->inflight.count ? c->inflight.count : 1) * sizeof(*list));
    for (size_t b = 0; list && b < c->inflight.bucket_count; b++)
        for (struct coord_map_node *m = c->inflight.buckets[b]; m; m = m->next) list[n++] = m->value;
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < n; i++) coord_complete(c, list[i], HORA_ERR_SHUTDOWN, "hora_abort was called on this rank");
    free(list);
}

void coord_straggler(struct coord *c, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles)
{
    straggler_get(c ? c->straggler : NULL, rank, last_fraction, lag_ms, cycles);
}

void coord_stop(struct coord *c)
{
    if (!c) return;
    if (c->abandoned) return; /* its thread may still use c */
    pthread_mutex_lock(&c->lock);
    c->stop_requested = 1;
    pthread_cond_signal(&c->work_cond);
    pthread_mutex_unlock(&c->lock);
    if (!c->thread_joined) pthread_join(c->thread, NULL);
    /* The thread failed every request before it ended; let the threads that
     * were waiting for one leave coord_wait before c goes away. */
    pthread_mutex_lock(&c->lock);
    while (c->waiting_threads) pthread_cond_wait(&c->done_cond, &c->lock);
    pthread_mutex_unlock(&c->lock);

    for (int id = 0; id < c->cache_capacity; id++) free(c->cache[id].name);
    coord_negotiate_free(c);
    timeline_close(c->tl);
    autotune_free(c->at);
    stack_channel_close(c->stacks);
    if (!c->agree_in_flight) MPI_Comm_free(&c->comm); /* else an abandoned request still uses it */
    for (int m = 0; m < HORA_MEMORY_COUNT; m++) {
        void *bufs[3] = {c->fusion_buf[m], c->zeros[m], c->gap_zeros[m]};
        for (int i = 0; i < 3; i++) {
            if (!bufs[i]) continue;
            if (m == HORA_MEMORY_HOST)
                mem_pool_release(c->pool, bufs[i]);
            else
                mem_dev_release(c->dev, bufs[i]);
        }
    }
    coord_free_tables(c);
}
