/* coord.c - the coordinator's start, stop and abort: it allocates every
 * piece's state (struct coord, coord_core.h), starts the thread that turns
 * the cycle (coord_cycle.c) and frees them all when it has ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/autotune.h"
#include "coord/coord.h"
#include "coord/coord_agree.h"
#include "coord/coord_core.h"
#include "coord/coord_cycle.h"
#include "coord/flight.h"
#include "coord/stack.h"
#include "coord/straggler.h"
#include "coord/timeline.h"

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
    free(c->members);
    coord_map_free(&c->queue.inflight);
    coord_map_free(&c->pending);
    coord_cache_free(&c->cache);
    coord_table_free(&c->table);
    pthread_cond_destroy(&c->cycle_cond);
    pthread_mutex_destroy(&c->cycle_lock);
    pthread_cond_destroy(&c->queue.done_cond);
    pthread_cond_destroy(&c->queue.work_cond);
    pthread_mutex_destroy(&c->queue.lock);
    free(c);
}

hora_status_t coord_start(const struct coord_env *env, struct coord **out)
{
    const struct config *cfg = env->cfg;
    hora_status_t status;
    int err;

    struct coord *c = calloc(1, sizeof(*c));
    if (!c) return status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
    pthread_mutex_init(&c->queue.lock, NULL);
    pthread_cond_init(&c->queue.done_cond, NULL);
    pthread_cond_init(&c->queue.work_cond, NULL);
    pthread_mutex_init(&c->cycle_lock, NULL);
    pthread_cond_init(&c->cycle_cond, NULL);
    c->cfg = cfg;
    c->coll = env->coll;
    c->pool = env->pool;
    c->dev = env->dev;
    c->comm = MPI_COMM_NULL;
    if (env->world != MPI_COMM_NULL) {
        MPI_Comm_rank(env->world, &c->rank);
        MPI_Comm_size(env->world, &c->size);
    } else {
        c->rank = env->rank; /* store bootstrap: no MPI */
        c->size = env->size;
    }
    c->set_id = env->set_id;
    if (env->members) {
        c->members = malloc(sizeof(int) * (size_t)c->size);
        if (!c->members) {
            status = status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
            goto err_free;
        }
        memcpy(c->members, env->members, sizeof(int) * (size_t)c->size);
    }
    /* The cache's bits, and the straggler report's slots (straggler.h) past
     * them in each part: the parts are merged word by word, whatever they hold. */
    const int cache_words = (cfg->cache_capacity + 63) / 64;
    c->words = cache_words + (c->members ? 0 : straggler_words(cfg, c->size));
    c->settings.fusion_threshold = cfg->fusion_threshold;
    c->settings.cycle_time_ms = cfg->cycle_time_ms;
    c->settings.chunk_bytes = cfg->chunk_bytes;
    c->queue.defer_us = (int64_t)(cfg->defer_ms * 1000.0);
    c->queue.coll = env->coll;
    c->queue.dev = env->dev;
    c->queue.rank = c->rank;
    c->queue.set_id = c->set_id;
    c->demote_us = (int64_t)(cfg->stall_check_s * 0.5e6);
    if (c->demote_us > 5000000) c->demote_us = 5000000;
    if (!c->members && cfg->fault_stop[0]) {
        status = coord_fault_parse(c, cfg->fault_stop);
        if (status < 0) goto err_free;
    }
    if (!c->members) {
        status = flight_init(cfg, c->rank, c->size);
        if (status < 0) goto err_free;
    }
    c->queue.flight = flight_process();
    if (coord_map_init(&c->queue.inflight, 1024) || coord_map_init(&c->pending, 1024) ||
        coord_cache_init(&c->cache, cfg->cache_capacity) || coord_table_init(&c->table, c->size, c->members, cfg)) {
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
    if (!c->vec || (star && (!c->agree || !c->agree_reqs || !c->agree_silent))) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory starting the coordinator");
        goto err_free;
    }
    if (c->words > cache_words) {
        status = straggler_init(&c->straggler, cfg, c->rank, c->size, c->words + cache_words);
        if (status < 0) goto err_free;
    }
    if (env->world != MPI_COMM_NULL && (err = MPI_Comm_dup(env->world, &c->comm)) != MPI_SUCCESS) {
        c->comm = MPI_COMM_NULL;
        status = status_mpi(err, "MPI_Comm_dup(coordinator)");
        goto err_free;
    }
    for (int r = 0; star && r < (c->size > 2 ? c->size : 2); r++) c->agree_reqs[r] = MPI_REQUEST_NULL;
    /* Stall stacks travel over MPI: none under the store bootstrap. */
    if (!c->members && env->world != MPI_COMM_NULL) {
        /* A rank asked for its stack answers within a few inspection periods. */
        status = stack_channel_open(&c->stacks, cfg, env->world, 1.0 + 4e-6 * (double)coord_inspect_period_us(c));
        if (status < 0) goto err_free_comm;
    }
    if (env->timeline && env->timeline[0]) {
        status = coord_timeline_open(c, env->timeline, &c->tl);
        if (status < 0) goto err_free_comm;
    }
    c->mark_cycles = env->timeline_mark_cycles;
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
    c->table.tl = c->tl; /* rank 0's negotiation writes to the timeline and asks for stacks */
    c->table.stacks = c->stacks;
    if (pthread_create(&c->thread, NULL, coord_cycle_main, c)) {
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
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
err_free:
    coord_free_tables(c);
    return status;
}

hora_status_t coord_timeline_open(const struct coord *c, const char *path, struct timeline **tl)
{
    *tl = NULL;
    if (c->rank != 0) return HORA_OK;
    /* A process set's timeline beside the world's. */
    char *set_path = NULL;
    if (c->members && asprintf(&set_path, "%s.set%d", path, c->set_id) < 0)
        return status_fail(HORA_ERR_NO_MEMORY, "out of memory opening the timeline %s", path);
    hora_status_t status = timeline_open(tl, set_path ? set_path : path, (size_t)c->cfg->timeline_max_mb << 20);
    free(set_path);
    return status;
}

/* cycle_lock for a swap: a mutex is not fair, and a busy coordinator, whose
 * nap is short, would take it again before us for many cycles; the count
 * makes its next cycle wait for one swap to be done (coord_cycle_main), so
 * a swap waits a cycle or so, and swaps in a loop cannot stop the cycles. */
static void coord_swap_lock(struct coord *c)
{
    atomic_fetch_add(&c->swaps_waiting, 1);
    pthread_mutex_lock(&c->cycle_lock);
}

static void coord_swap_unlock(struct coord *c)
{
    c->swaps_done++;
    atomic_fetch_sub(&c->swaps_waiting, 1);
    pthread_cond_broadcast(&c->cycle_cond);
    pthread_mutex_unlock(&c->cycle_lock);
}

void coord_timeline_swap(struct coord *c, struct timeline *tl)
{
    coord_swap_lock(c);
    struct timeline *old = c->tl;
    c->tl = tl;
    c->table.tl = tl;
    coord_swap_unlock(c);
    timeline_close(old);
}

void coord_timeline_discard(struct timeline *tl) { timeline_close(tl); }

void coord_timeline_mark_cycles(struct coord *c, int on)
{
    coord_swap_lock(c);
    c->mark_cycles = on;
    coord_swap_unlock(c);
}

void coord_abort(struct coord *c, double wait_s)
{
    if (!c) return;
    pthread_mutex_lock(&c->queue.lock);
    const int ended = c->queue.thread_joined || c->queue.abandoned;
    c->queue.abort_requested = 1;
    pthread_cond_signal(&c->queue.work_cond);
    pthread_mutex_unlock(&c->queue.lock);
    if (ended) return;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    int64_t ns = (int64_t)deadline.tv_nsec + (int64_t)(wait_s * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    if (pthread_timedjoin_np(c->thread, NULL, &deadline) == 0) {
        c->queue.thread_joined = 1;
        return;
    }
    /* Stuck in a call that does not look at notices: leave it running, and
     * fail what the application waits for from here. */
    log_error("hora_abort: the coordinator thread did not stop within %.1f s; leaving it", wait_s);
    pthread_mutex_lock(&c->queue.lock);
    c->queue.abandoned = 1;
    c->queue.stopped = 1;
    c->queue.stop_status = HORA_ERR_SHUTDOWN;
    snprintf(c->queue.stop_reason, sizeof(c->queue.stop_reason), "hora_abort was called on this rank");
    size_t n = 0;
    struct hora_request **list = malloc((c->queue.inflight.count ? c->queue.inflight.count : 1) * sizeof(*list));
    for (size_t b = 0; list && b < c->queue.inflight.bucket_count; b++)
        for (struct coord_map_node *m = c->queue.inflight.buckets[b]; m; m = m->next) list[n++] = m->value;
    pthread_mutex_unlock(&c->queue.lock);
    for (size_t i = 0; i < n; i++)
        coord_queue_complete(&c->queue, list[i], HORA_ERR_SHUTDOWN, "hora_abort was called on this rank");
    free(list);
}

hora_status_t coord_submit(struct coord *c, struct hora_request **reqs, int n)
{
    return coord_queue_submit(&c->queue, reqs, n);
}

hora_status_t coord_wait(struct coord *c, struct hora_request *req) { return coord_queue_wait(&c->queue, req); }

int coord_is_done(struct coord *c, struct hora_request *req, hora_status_t *status)
{
    return coord_queue_is_done(&c->queue, req, status);
}

void coord_straggler(struct coord *c, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles)
{
    straggler_get(c ? c->straggler : NULL, rank, last_fraction, lag_ms, cycles);
}

void coord_stop(struct coord *c)
{
    if (!c) return;
    if (c->queue.abandoned) return; /* its thread may still use c */
    pthread_mutex_lock(&c->queue.lock);
    c->queue.stop_requested = 1;
    pthread_cond_signal(&c->queue.work_cond);
    pthread_mutex_unlock(&c->queue.lock);
    if (!c->queue.thread_joined) pthread_join(c->thread, NULL);
    /* The thread failed every request before it ended; let the threads that
     * were waiting for one leave coord_wait before c goes away. */
    pthread_mutex_lock(&c->queue.lock);
    while (c->queue.waiting_threads) pthread_cond_wait(&c->queue.done_cond, &c->queue.lock);
    pthread_mutex_unlock(&c->queue.lock);

    timeline_close(c->tl); /* the thread has ended: no lock needed */
    autotune_free(c->at);
    stack_channel_close(c->stacks);
    /* Not while an abandoned request still uses it. */
    if (!c->agree_in_flight && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
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
